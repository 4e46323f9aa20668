//! Chaos: the built `ccp-agent` is killed (SIGKILL) and restarted while the datapath runtime (over
//! unix sockets, real time) plays many flows, and its socket is flooded with garbage.
//!
//! Checked, over four agent lifetimes (three ended by SIGKILL in the middle of a garbage
//! flood, the last by SIGTERM):
//! - no flow stalls: every flow's window changes at least once in every stretch of
//!   [`STALL_LIMIT`] (the datapath's agent timeout plus one sweep over the flows and
//!   scheduling slack): while the agent is dead its flows go to the datapath's fallback
//!   within the timeout, and come back under the new agent;
//! - every flow is under each new agent again after its restart;
//! - no panic in any agent lifetime, and no error from the datapath;
//! - the guard counts every garbage datagram of a counted burst: each lifetime gets exactly
//!   512 datagrams of each of the eight reasons (an independent generator per reason), read
//!   before the next step (a flow created after the burst is answered); the killed lifetimes
//!   must have logged the 512th drop of every reason (the guard logs each reason's counts at
//!   powers of two) and not a 1024th; the last one's totals at SIGTERM must equal them exactly.

#![allow(clippy::expect_used, clippy::unwrap_used, clippy::too_many_lines)]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::time::{Duration, Instant};

mod common;

use ccp_algorithms::api::SplitMix64;
use ccp_datapath::agent::demo_config;
use ccp_datapath::runtime::{
    Control, Datapath, FlowInfo, MonotonicClock, Primitives, UnixTransport,
};
use common::Agent;

const MSS: u32 = 1448;
/// Flows the datapath plays.
const FLOWS: u32 = 48;
/// Datagrams of each reason in one counted burst (a power of two: the guard logs there).
const BURST: u64 = 512;
/// Agent lifetimes; all but the last end with SIGKILL.
const LIFETIMES: usize = 4;
/// Longest a flow's window may stay unchanged: the agent timeout of the datapath
/// (`demo_config`, 100 ms) plus 150 ms for one sweep over the flows on a loaded machine.
const STALL_LIMIT: Duration = Duration::from_millis(250);

/// The eight reasons of the guard, in its order.
const REASONS: [&str; 8] = [
    "short",
    "truncated",
    "length_mismatch",
    "unexpected_type",
    "bad_length",
    "bad_mss",
    "bad_name",
    "bad_fields",
];

struct Rng(SplitMix64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0.next_u64()
    }

    fn below(&mut self, n: usize) -> usize {
        (self.next() % n as u64) as usize
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next() as u8).collect()
    }
}

/// A datagram of `size` bytes with header (`typ`, `len`) and random content after it.
fn framed(rng: &mut Rng, typ: u16, len: usize, size: usize) -> Vec<u8> {
    let mut d = rng.bytes(size.max(8));
    d[0..2].copy_from_slice(&typ.to_le_bytes());
    d[2..4].copy_from_slice(&(len as u16).to_le_bytes());
    d.truncate(size);
    d
}

fn put_u32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// One datagram the guard must drop for `reason` (the rules of `ccp_agent::guard`), built
/// directly from the rule, not through the guard's code.
fn garbage(rng: &mut Rng, reason: &str) -> Vec<u8> {
    match reason {
        "short" => {
            let n = rng.below(8);
            rng.bytes(n)
        }
        // portus's receive buffer is 1024 bytes: a datagram that fills it may have been cut.
        "truncated" => {
            let n = 1024 + rng.below(3000);
            framed(rng, 1, n, n)
        }
        "length_mismatch" => {
            let n = 8 + rng.below(500);
            let len = n + 1 + rng.below(100);
            framed(rng, 1, len, n)
        }
        "unexpected_type" => {
            let n = 8 + rng.below(500);
            let typ = [2u16, 3, 4, 6, 255, 258, 1000][rng.below(7)];
            framed(rng, typ, n, n)
        }
        "bad_length" => {
            // READY of 20 bytes, CREATE of 95, MEASURE of 17.
            let (typ, n) = [(5u16, 20usize), (0, 95), (1, 17)][rng.below(3)];
            framed(rng, typ, n, n)
        }
        "bad_mss" => {
            let mut d = framed(rng, 0, 96, 96);
            put_u32(&mut d, 12, [0, 65_536, u32::MAX][rng.below(3)]);
            d[32..].fill(b'x');
            d[32] = 0;
            d
        }
        "bad_name" => {
            let mut d = framed(rng, 0, 96, 96);
            put_u32(&mut d, 12, 1448);
            d[32..].fill(b'a'); // no NUL
            d
        }
        "bad_fields" => {
            let fields = rng.below(6);
            let n = 16 + 8 * fields;
            let mut d = framed(rng, 1, n, n);
            put_u32(&mut d, 12, (fields + 1 + rng.below(50)) as u32);
            d
        }
        other => panic!("no generator for {other}"),
    }
}

/// `key=value` integer fields of a log line (string values may be quoted).
fn fields(line: &str) -> BTreeMap<String, String> {
    line.split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k.to_string(), v.trim_matches('"').to_string()))
        })
        .collect()
}

/// The largest drop count the agent logged for `reason` (0 when none).
fn logged_count(log: &str, reason: &str) -> u64 {
    log.lines()
        .filter(|l| {
            if reason == "bad_mss" {
                l.contains("CREATE with an MSS")
            } else {
                fields(l).get("reason").is_some_and(|r| r == reason)
            }
        })
        .filter_map(|l| fields(l).get("count")?.parse().ok())
        .max()
        .unwrap_or(0)
}

/// The datapath and its flows, played round-robin in real time.
struct Flows {
    dp: Datapath<UnixTransport, MonotonicClock>,
    sids: Vec<u32>,
    cwnd: Vec<u32>,
    last_change: Vec<Instant>,
    acks: Vec<u64>,
    /// Longest time a flow's window stayed unchanged, and which flow.
    worst_stall: (Duration, u32),
    fallback_acks: u64,
    agent_acks: u64,
}

impl Flows {
    fn new(dp_name: &str, agent_name: &str) -> Self {
        let transport = UnixTransport::bind(dp_name, agent_name).unwrap();
        let mut dp = Datapath::new(demo_config(), transport, MonotonicClock::new());
        let mut sids = Vec::new();
        for i in 0..FLOWS {
            let alg = ["reno", "cubic", "vegas"][i as usize % 3];
            sids.push(
                dp.create_flow(FlowInfo {
                    init_cwnd_bytes: 10 * MSS,
                    mss_bytes: MSS,
                    src_ip: u32::from(Ipv4Addr::new(192, 0, 2, 1)),
                    src_port: 40_000 + i,
                    dst_ip: u32::from(Ipv4Addr::new(10, 0, 0, 2)),
                    dst_port: 443,
                    alg: Some(alg.to_string()),
                })
                .unwrap(),
            );
        }
        let now = Instant::now();
        Self {
            dp,
            cwnd: vec![10 * MSS; sids.len()],
            last_change: vec![now; sids.len()],
            acks: vec![0; sids.len()],
            sids,
            worst_stall: (Duration::ZERO, 0),
            fallback_acks: 0,
            agent_acks: 0,
        }
    }

    /// One ACK on every flow (every 64th ACK of a flow reports a loss, so windows stay
    /// bounded and keep moving); returns how many were under the agent.
    fn sweep(&mut self) -> usize {
        let mut under_agent = 0;
        for (i, &sid) in self.sids.iter().enumerate() {
            self.acks[i] += 1;
            let prims = Primitives {
                bytes_acked: MSS,
                packets_acked: 1,
                lost_pkts_sample: u32::from(self.acks[i].is_multiple_of(64)),
                rtt_sample_us: 2_000 + 10 * u64::from(sid),
                bytes_in_flight: self.cwnd[i],
                packets_in_flight: self.cwnd[i] / MSS,
                snd_cwnd: self.cwnd[i],
                ..Primitives::default()
            };
            let a = self.dp.invoke(sid, &prims).unwrap();
            let now = Instant::now();
            if let Some(c) = a.cwnd_bytes
                && c != self.cwnd[i]
            {
                self.cwnd[i] = c;
                self.last_change[i] = now;
            }
            let stalled = now - self.last_change[i];
            if stalled > self.worst_stall.0 {
                self.worst_stall = (stalled, sid);
            }
            match a.control {
                Control::Agent => {
                    self.agent_acks += 1;
                    under_agent += 1;
                }
                Control::Fallback => self.fallback_acks += 1,
            }
            self.dp.poll();
        }
        std::thread::sleep(Duration::from_micros(300));
        under_agent
    }

    /// Sweeps for `d`.
    fn run_for(&mut self, d: Duration) {
        let start = Instant::now();
        while start.elapsed() < d {
            self.sweep();
        }
    }

    /// Sweeps until every flow is under the agent in one sweep; panics after 10 s.
    fn until_all_under_agent(&mut self) {
        let start = Instant::now();
        while self.sweep() < self.sids.len() {
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "flows never all came back under the agent"
            );
        }
    }

    /// A new flow, played until the agent answers it (it was created after everything sent
    /// to the agent before, so the agent has read all of that); then closed.
    fn barrier(&mut self) {
        let sid = self
            .dp
            .create_flow(FlowInfo {
                init_cwnd_bytes: 4 * MSS,
                mss_bytes: MSS,
                dst_port: 443,
                alg: Some("reno".to_string()),
                ..FlowInfo::default()
            })
            .unwrap();
        let idle = Primitives {
            rtt_sample_us: 2_000,
            snd_cwnd: 4 * MSS,
            ..Primitives::default()
        };
        let start = Instant::now();
        loop {
            self.sweep();
            if self.dp.invoke(sid, &idle).unwrap().control == Control::Agent {
                break;
            }
            assert!(
                start.elapsed() < Duration::from_secs(10),
                "the agent never answered a flow created after the burst"
            );
        }
        self.dp.close_flow(sid).unwrap();
    }
}

/// A bound sender (portus answers only named peers; its answers to garbage are drained).
fn attacker(path: &Path) -> (UnixDatagram, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
    let _ = std::fs::remove_file(path);
    let sock = UnixDatagram::bind(path).unwrap();
    sock.set_nonblocking(true).unwrap();
    let drain = sock.try_clone().unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let t = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while !stop2.load(Ordering::Relaxed) {
            if drain.recv(&mut buf).is_err() {
                std::thread::sleep(Duration::from_micros(500));
            }
        }
    });
    (sock, stop, t)
}

fn config(dir: &Path) -> PathBuf {
    std::fs::create_dir_all(dir).unwrap();
    let path = dir.join("agent.toml");
    std::fs::write(&path, "").unwrap();
    path
}

#[test]
fn killed_restarted_and_flooded_agent_never_stalls_a_flow_and_counts_every_drop() {
    let pid = std::process::id();
    let agent_name = format!("agent-chaos-{pid}");
    let dp_name = format!("dp-chaos-{pid}");
    let agent_path = Path::new("/tmp/ccp").join(&agent_name);
    let dir = std::env::temp_dir().join(format!("ccp-agent-chaos-{pid}"));
    let config = config(&dir);
    let mut rng = Rng(SplitMix64::new(0xC4A0_5EED));

    let mut agent = Agent::spawn("reno", &config, &agent_name);
    agent.wait_bound();
    let mut flows = Flows::new(&dp_name, &agent_name);
    flows.until_all_under_agent();
    flows.run_for(Duration::from_millis(300));

    let (sock, drain_stop, drainer) =
        attacker(&Path::new("/tmp/ccp").join(format!("attacker-chaos-{pid}")));
    let mut unaccounted_flood = 0u64;
    for life in 0..LIFETIMES {
        // A counted burst: BURST of each reason, shuffled, sent while the flows run.
        let mut burst: Vec<(usize, Vec<u8>)> = Vec::new();
        for (r, reason) in REASONS.iter().enumerate() {
            for _ in 0..BURST {
                burst.push((r, garbage(&mut rng, reason)));
            }
        }
        for i in (1..burst.len()).rev() {
            burst.swap(i, rng.below(i + 1));
        }
        // Non-blocking: when the agent's queue is full, the flows run (the agent may itself
        // be waiting for the datapath to read) and the datagram is sent again.
        for (i, (_, d)) in burst.iter().enumerate() {
            loop {
                match sock.send_to(d, &agent_path) {
                    Ok(_) => break,
                    Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                        flows.sweep();
                    }
                    Err(e) => panic!("lifetime {life}: agent unreachable: {e}"),
                }
            }
            if i % 128 == 0 {
                flows.sweep();
            }
        }
        flows.barrier();
        let log = agent.log();
        for reason in REASONS {
            let n = logged_count(&log, reason);
            assert_eq!(n, BURST, "lifetime {life}: {reason} drops logged up to {n}");
        }
        assert!(
            !log.contains("panicked"),
            "lifetime {life}: agent panicked:\n{log}"
        );
        assert!(
            agent.child.try_wait().unwrap().is_none(),
            "lifetime {life}: agent exited"
        );
        flows.until_all_under_agent();

        if life + 1 == LIFETIMES {
            break;
        }
        // An uncounted flood, and the kill in the middle of it.
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let flooder = {
            let (stop, sent) = (stop.clone(), sent.clone());
            let sock = sock.try_clone().unwrap();
            let path = agent_path.clone();
            let mut rng = Rng(SplitMix64::new(0xF100D + life as u64));
            std::thread::spawn(move || {
                while !stop.load(Ordering::Relaxed) {
                    let reason = REASONS[rng.below(REASONS.len())];
                    if sock.send_to(&garbage(&mut rng, reason), &path).is_ok() {
                        sent.fetch_add(1, Ordering::Relaxed);
                    } else {
                        std::thread::sleep(Duration::from_micros(200));
                    }
                }
            })
        };
        flows.run_for(Duration::from_millis(200));
        agent.signal(libc::SIGKILL);
        let status = agent.child.wait().unwrap();
        assert_eq!(
            std::os::unix::process::ExitStatusExt::signal(&status),
            Some(libc::SIGKILL),
            "lifetime {life}: {status:?}"
        );
        // The datapath runs on without an agent, past its timeout: the fallback takes over.
        flows.run_for(Duration::from_millis(400));
        assert!(
            flows.dp.in_fallback(),
            "lifetime {life}: no fallback with the agent dead"
        );
        stop.store(true, Ordering::Relaxed);
        flooder.join().unwrap();
        unaccounted_flood += sent.load(Ordering::Relaxed);
        assert!(
            !agent.log().contains("panicked"),
            "lifetime {life}: agent panicked"
        );
        drop(agent);
        agent = Agent::spawn("reno", &config, &agent_name);
        agent.wait_bound();
        flows.until_all_under_agent();
        flows.run_for(Duration::from_millis(200));
    }
    drain_stop.store(true, Ordering::Relaxed);
    drainer.join().unwrap();

    agent.signal(libc::SIGTERM);
    let totals = fields(&agent.wait_for_line("ipc guard totals", 1).unwrap());
    for reason in REASONS {
        assert_eq!(totals[reason], BURST.to_string(), "{reason}: {totals:?}");
    }
    assert_eq!(
        totals["rejected"],
        (BURST * REASONS.len() as u64).to_string(),
        "{totals:?}"
    );
    assert_eq!(agent.child.wait().unwrap().code(), Some(0));
    assert!(!agent.log().contains("panicked"));

    let (stall, sid) = flows.worst_stall;
    eprintln!(
        "chaos: {FLOWS} flows, {} agent ACKs, {} fallback ACKs, {unaccounted_flood} garbage \
         datagrams in the floods that ended in SIGKILL, longest unchanged window {stall:?} (flow {sid})",
        flows.agent_acks, flows.fallback_acks
    );
    assert!(unaccounted_flood > 0, "the floods reached no agent");
    assert!(flows.fallback_acks > 0 && flows.agent_acks > 0);
    assert!(
        stall <= STALL_LIMIT,
        "flow {sid} kept its window for {stall:?} (limit {STALL_LIMIT:?})"
    );
    let _ = std::fs::remove_file(Path::new("/tmp/ccp").join(format!("attacker-chaos-{pid}")));
    let _ = std::fs::remove_dir_all(&dir);
}
