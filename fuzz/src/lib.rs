//! The bodies of the suite's fuzz targets: one function per class of untrusted input, each
//! taking arbitrary bytes and returning normally whatever they are.
//!
//! A panic in any of them is a bug: every parser and decoder here promises a typed error for bad
//! input. The same functions run in two places:
//! - `fuzz/fuzz/fuzz_targets/*.rs`: the cargo-fuzz targets (libFuzzer, nightly Rust), one per
//!   entry of [`TARGETS`];
//! - `fuzz/tests/corpus.rs`: a plain `#[test]` that feeds every file of every committed corpus
//!   (`fuzz/fuzz/corpus/<target>/`) to the same function on stable Rust, so `cargo test` replays
//!   what fuzzing found.
//!
//! Besides "no panic", some targets check a property that must hold for every input (named in
//! each function's doc).
//!
//! `seeds` builds the starting corpora from real messages and files (see [`seeds`]).

// A target panics exactly when a property it states fails: that is what the fuzzer looks for.
#![allow(clippy::missing_panics_doc)]

pub mod seeds;

use std::net::Ipv4Addr;
use std::path::Path;

use ccp_datapath::runtime::wire::{self, AgentMsg, DecodeLimits};
use ccp_datapath::runtime::{Datapath, DatapathConfig, FlowInfo, ManualClock, NoAgent, Primitives};

/// A target's body.
pub type Body = fn(&[u8]);

/// Every target: its name (the cargo-fuzz target and the corpus folder) and its body.
pub const TARGETS: &[(&str, Body)] = &[
    ("wire", wire),
    ("datapath", datapath),
    ("agent_guard", agent_guard),
    ("scenario", scenario),
    ("agent_config", agent_config),
    ("trace", trace),
    ("iw_table", iw_table),
    ("model", model),
];

/// The CCP wire decoder of the datapath runtime (agent to datapath: INSTALL, UPDATE_FIELD,
/// CHANGE_PROG, and any other type): messages are decoded one after another as the runtime
/// does, skipping a bad one when its header's length is usable.
///
/// Checked: a decoded message used at least a header and at most the buffer; its counts stay
/// within the decoder's limits.
pub fn wire(data: &[u8]) {
    let limits = DecodeLimits::default();
    let mut buf = data;
    while buf.len() >= wire::HEADER_LEN {
        match wire::decode_agent_msg(buf, &limits) {
            Ok((msg, used)) => {
                assert!(
                    (wire::HEADER_LEN..=buf.len()).contains(&used),
                    "used {used}"
                );
                match &msg {
                    AgentMsg::Install { events, instrs, .. } => {
                        assert!(events.len() <= limits.max_events);
                        assert!(instrs.len() <= limits.max_instrs);
                    }
                    AgentMsg::UpdateField { updates, .. }
                    | AgentMsg::ChangeProg { updates, .. } => {
                        assert!(updates.len() <= limits.max_updates);
                    }
                }
                buf = &buf[used..];
            }
            Err(_) => match wire::decode_header(buf) {
                Ok(h) if h.len >= wire::HEADER_LEN && h.len <= buf.len() => buf = &buf[h.len..],
                _ => return,
            },
        }
    }
}

/// Bytes of one fuzzed [`Primitives`] in the `datapath` target's input.
pub const PRIMS_LEN: usize = 48;

fn u32_at(b: &[u8], at: usize) -> u32 {
    let mut w = [0u8; 4];
    w.copy_from_slice(&b[at..at + 4]);
    u32::from_le_bytes(w)
}

fn u64_at(b: &[u8], at: usize) -> u64 {
    let mut w = [0u8; 8];
    w.copy_from_slice(&b[at..at + 8]);
    u64::from_le_bytes(w)
}

/// A measurement from [`PRIMS_LEN`] fuzzed bytes.
fn prims(b: &[u8]) -> Primitives {
    Primitives {
        bytes_acked: u32_at(b, 0),
        packets_acked: u32_at(b, 4) & 0xffff,
        bytes_misordered: u32_at(b, 8) & 0xffff,
        packets_misordered: u32::from(b[12]),
        ecn_bytes: u32::from(b[13]) * 1448,
        ecn_packets: u32::from(b[13]),
        lost_pkts_sample: u32::from(b[14]),
        was_timeout: b[15] & 1 == 1,
        rtt_sample_us: u64::from(u32_at(b, 16)),
        rate_outgoing: u64_at(b, 20),
        rate_incoming: u64_at(b, 28),
        bytes_in_flight: u32_at(b, 36),
        packets_in_flight: u32_at(b, 36) / 1448,
        snd_cwnd: u32_at(b, 40),
        snd_rate: u64::from(u32_at(b, 44)),
        bytes_pending: u32_at(b, 44),
    }
}

/// Program installation and the VM: a datapath with three flows takes the input's first part
/// as agent messages (INSTALL, CHANGE_PROG, UPDATE_FIELD, anything), then every flow runs on
/// measurements cut from the rest, with the clock moving between ACKs.
///
/// Input: a `u16` length `n`, `n` bytes of messages, then measurements of [`PRIMS_LEN`] bytes.
/// Checked: every invocation returns (an error is fine) and never hands the flow a window of 0
/// (a 64-bit `Cwnd` of 2^32 did, as in libccp: `fuzz/fuzz/corpus/datapath/cwnd-2-32`).
pub fn datapath(data: &[u8]) {
    if data.len() < 2 {
        return;
    }
    let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
    let (msgs, rest) = data[2..].split_at(n);
    let clock = ManualClock::new(1_000_000_000);
    let cfg = DatapathConfig {
        agent_timeout_ns: u64::MAX / 4,
        ..DatapathConfig::default()
    };
    let mut dp = Datapath::new(cfg, NoAgent, clock.clone());
    let mut sids = Vec::new();
    for i in 0..3 {
        let info = FlowInfo {
            init_cwnd_bytes: 10 * 1448,
            mss_bytes: 1448,
            src_ip: 0x0a00_0001,
            src_port: 40_000 + i,
            dst_ip: 0x0a00_0002,
            dst_port: 443,
            alg: None,
        };
        if let Ok(sid) = dp.create_flow(info) {
            sids.push(sid);
        }
    }
    dp.recv_msgs(msgs);
    for (k, chunk) in rest.chunks_exact(PRIMS_LEN).take(256).enumerate() {
        let p = prims(chunk);
        clock.advance_ns(u64::from(chunk[47]) * 100_000 + 1);
        let sid = sids[k % sids.len()];
        if let Ok(a) = dp.invoke(sid, &p) {
            assert_ne!(a.cwnd_bytes, Some(0), "the datapath applied a window of 0");
        }
        dp.poll();
    }
    for sid in sids {
        let _ = dp.close_flow(sid);
    }
}

/// The agent's IPC guard and, behind it, portus's decoder: `ccp_agent::guard::check` on the
/// datagram.
///
/// Checked: whatever the guard lets through, portus decodes without error or panic (the
/// guard's promise; portus itself panics or stops on much of what the guard drops).
pub fn agent_guard(data: &[u8]) {
    if ccp_agent::guard::check(data).is_ok() {
        let decoded = portus::serialize::Msg::from_buf(data);
        assert!(
            decoded.is_ok(),
            "guard passed what portus rejects: {data:?}"
        );
    }
}

/// A `ccp-eval` scenario file (TOML), validated as `ccp-eval run` does (relative trace paths
/// resolve against a folder that does not exist, so a trace reference is an I/O error).
pub fn scenario(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let base = Path::new("/nonexistent-ccp-fuzz");
    let _ = ccp_eval::scenario::Scenario::parse("fuzz.toml", text, Some(base));
}

/// The agent's `agent.toml`, validated as `ccp-agent --config` does.
pub fn agent_config(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let _ = ccp_agent::Config::parse(
        text,
        Path::new("/nonexistent-ccp-fuzz"),
        Path::new("agent.toml"),
    );
}

/// A mahimahi packet-delivery trace (`ccp_datapath::netem::Trace::parse`).
///
/// Checked: a parsed trace has an opportunity and a period; the next opportunity is never
/// before the time asked about; counting opportunities between times (what the link model
/// does every step) works for times from 0 to `u64::MAX`.
pub fn trace(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    if let Ok(t) = ccp_datapath::netem::Trace::parse("fuzz.trace", text) {
        assert!(!t.opportunities_ns.is_empty() && t.period_ns > 0);
        let p = t.period_ns;
        let times = [
            0,
            1,
            p - 1,
            p,
            p.saturating_add(1),
            p.saturating_mul(10).saturating_add(12_345),
            u64::MAX / 2,
            u64::MAX - 1,
            u64::MAX,
        ];
        for &a in &times {
            let next = t.next_opportunity(a);
            assert!(next >= a, "next opportunity {next} before {a}");
            for &b in &times {
                let _ = t.opportunities_between(a, b);
                let _ = t.capacity_bits_between(a, b);
            }
        }
        let _ = t.mean_bps();
    }
}

/// The IW table file (`start,end,iw` lines) the agent reads for `iw.table`, built into an
/// `iw_controller::IwTable`.
///
/// Checked: every lookup returns an IW in `1..=max_iw`.
pub fn iw_table(data: &[u8]) {
    let Ok(text) = std::str::from_utf8(data) else {
        return;
    };
    let max_iw = 100;
    if let Ok(table) = ccp_agent::config::parse_table(text, Path::new("iw.csv"), 10, max_iw) {
        for ip in [0u32, 1, 0x0a00_0001, 0x7fff_ffff, 0xc0a8_0101, u32::MAX] {
            let iw = table.lookup(Ipv4Addr::from(ip));
            assert!((1..=max_iw).contains(&iw), "iw {iw}");
        }
        for (s, _, _) in table.ranges() {
            let iw = table.lookup(s);
            assert!((1..=max_iw).contains(&iw), "iw {iw}");
        }
    }
}

/// The learned selector's model set (`ccp_selector::antelope::ModelSet::load`: a manifest and
/// GBDT boosters as JSON), then a prediction of every candidate under every mode.
///
/// Input: a `u16` length `n`, `n` bytes of `manifest.json`, the rest is `m.json` (the booster
/// file the seeds' manifests name). The files are written to a fresh folder of the temp dir,
/// removed afterwards.
pub fn model(data: &[u8]) {
    use ccp_selector::antelope::{Mode, ModelSet};
    if data.len() < 2 {
        return;
    }
    let n = usize::from(u16::from_le_bytes([data[0], data[1]])).min(data.len() - 2);
    let (manifest, booster) = data[2..].split_at(n);
    // A folder of this input's own, removed when it drops.
    let Ok(scratch) = tempfile::Builder::new().prefix("ccp-fuzz-model-").tempdir() else {
        return;
    };
    let dir = scratch.path();
    if std::fs::write(dir.join("manifest.json"), manifest).is_err()
        || std::fs::write(dir.join("m.json"), booster).is_err()
    {
        return;
    }
    if let Ok(set) = ModelSet::load(dir) {
        let mut out = Vec::new();
        for mode in Mode::ALL {
            let names = set.candidates(mode);
            set.predict(
                mode,
                &names,
                &[1.0, 0.5, 20.0, 1.2, 0.0, 3.0, 0.9],
                &mut out,
            );
            assert_eq!(out.len(), names.len());
        }
    }
}
