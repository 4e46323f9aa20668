//! The built `ccp-agent` against a hostile datapath and a careless operator.
//!
//! Checked: a long seeded stream of arbitrary datagrams (random bytes of 0..=4096 bytes;
//! headers of every type 0..=300 with right and wrong lengths; near-valid READY, CREATE and
//! MEASURE) neither stops nor wedges the agent, a new flow is then served normally, and the
//! guard's totals (logged at SIGTERM) count every datagram an independent oracle says must be
//! dropped, per reason; a CREATE with an MSS that is no TCP MSS leaves its flow on the
//! datapath's fallback while other flows stay under the agent; `--name` must be a single safe
//! file name; a running agent's socket is not taken over, a stale one is replaced, a file in
//! its place is refused.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::collections::BTreeMap;
use std::net::Ipv4Addr;
use std::os::unix::net::UnixDatagram;
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

mod common;

use ccp_algorithms::api::SplitMix64;
use ccp_datapath::runtime::{Control, FlowInfo, Primitives};
use common::runtime::{DATAPATH_IW, MSS, assert_controlled, datapath, open_flow};
use common::{Agent, fields};

/// portus's receive buffer: a datagram this long or longer may have been cut.
const PORTUS_RECV_BUF: usize = 1024;

/// A fresh folder with an empty `agent.toml` (every default).
fn config(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccp-agent-hostile-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = dir.join("agent.toml");
    std::fs::write(&path, "").unwrap();
    path
}

fn remove_config(config: &Path) {
    std::fs::remove_dir_all(config.parent().unwrap()).unwrap();
}

/// The suite's seeded generator, with the draws this test makes.
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

/// `size` bytes starting with a header of `typ` claiming `len`; the rest random.
fn with_header(rng: &mut Rng, typ: u16, len: usize, size: usize) -> Vec<u8> {
    let mut d = rng.bytes(size.max(8));
    d[0..2].copy_from_slice(&typ.to_le_bytes());
    d[2..4].copy_from_slice(&(len as u16).to_le_bytes());
    d.truncate(size);
    d
}

fn put_u32(d: &mut [u8], at: usize, v: u32) {
    d[at..at + 4].copy_from_slice(&v.to_le_bytes());
}

/// A CREATE (sid `90_000 + i`, out of the datapath's range) with `mss` and a 64-byte name field.
fn create(i: u32, mss: u32, name: &[u8; 64]) -> Vec<u8> {
    let mut d = vec![0u8; 96];
    d[0..2].copy_from_slice(&0u16.to_le_bytes());
    d[2..4].copy_from_slice(&96u16.to_le_bytes());
    put_u32(&mut d, 4, 90_000 + i);
    put_u32(&mut d, 8, 10 * 1448);
    put_u32(&mut d, 12, mss);
    d[32..].copy_from_slice(name);
    d
}

/// A MEASURE with `fields` fields whose `num_fields` says `num_fields`.
fn measure(rng: &mut Rng, num_fields: u32, fields: usize) -> Vec<u8> {
    let n = 16 + 8 * fields;
    let mut d = with_header(rng, 1, n, n);
    put_u32(&mut d, 12, num_fields);
    d
}

/// The hostile stream for `seed`, shuffled.
fn hostile_stream(seed: u64) -> Vec<Vec<u8>> {
    let mut rng = Rng(SplitMix64::new(seed));
    let mut out = Vec::new();
    for _ in 0..2_500 {
        let n = rng.below(4_097);
        out.push(rng.bytes(n));
    }
    for typ in 0..=300u16 {
        for size in [
            0, 3, 7, 8, 12, 16, 24, 32, 96, 104, 512, 1_023, 1_024, 2_000,
        ] {
            out.push(with_header(&mut rng, typ, size, size));
            let wrong = [size.wrapping_sub(1), size + 1, 8, rng.below(70_000)];
            let len = wrong[rng.below(4)];
            out.push(with_header(&mut rng, typ, len, size));
        }
        // A message followed by more bytes: portus would parse them as a second message.
        let mut two = with_header(&mut rng, typ, 12, 12);
        two.extend(with_header(&mut rng, 2, 24, 24));
        out.push(two);
    }
    let mut name = [0u8; 64];
    name[..5].copy_from_slice(b"cubic");
    for (i, mss) in [0, 1, 536, 1448, 65_535, 65_536, 1 << 31, u32::MAX]
        .into_iter()
        .enumerate()
    {
        out.push(create(i as u32, mss, &name));
    }
    out.push(create(20, 1448, &[b'a'; 64]));
    let mut bad_utf8 = [0u8; 64];
    bad_utf8[..3].copy_from_slice(&[0xc3, 0x28, 0xff]);
    out.push(create(21, 1448, &bad_utf8));
    out.push(create(22, 1448, &[0u8; 64]));
    for (num_fields, fields) in [
        (0, 0),
        (0, 1),
        (1, 0),
        (2, 3),
        (257, 1),
        (110, 110),
        (111, 111),
        (u32::MAX, 2),
    ] {
        out.push(measure(&mut rng, num_fields, fields));
    }
    for i in (1..out.len()).rev() {
        out.swap(i, rng.below(i + 1));
    }
    out
}

/// An oracle, written apart from the guard: `None` when the datagram is one well-formed
/// READY, CREATE or MEASURE, else the reason the guard must count it under.
fn expected_reason(d: &[u8]) -> Option<&'static str> {
    if d.len() < 8 {
        return Some("short");
    }
    if d.len() >= PORTUS_RECV_BUF {
        return Some("truncated");
    }
    let typ = u16::from_le_bytes([d[0], d[1]]);
    let len = usize::from(u16::from_le_bytes([d[2], d[3]]));
    let word = |at: usize| u32::from_le_bytes(d[at..at + 4].try_into().unwrap());
    if len != d.len() {
        return Some("length_mismatch");
    }
    match (typ, len) {
        (5, 12) => None,
        (0, 96) => {
            let mss = word(12);
            if mss == 0 || mss > 65_535 {
                return Some("bad_mss");
            }
            let name = &d[32..];
            let nul = name.iter().position(|&b| b == 0);
            match nul.map(|end| std::str::from_utf8(&name[..end])) {
                Some(Ok(_)) => None,
                _ => Some("bad_name"),
            }
        }
        (1, n) if n >= 16 && (n - 16) % 8 == 0 => {
            let fields = (n - 16) / 8;
            (word(12) as usize != fields || fields > 110).then_some("bad_fields")
        }
        (0 | 1 | 5, _) => Some("bad_length"),
        _ => Some("unexpected_type"),
    }
}

#[test]
fn a_hostile_datagram_stream_is_dropped_counted_and_the_agent_keeps_serving() {
    let pid = std::process::id();
    let (agent_name, dp_name) = (
        format!("agent-hostile-{pid}-a"),
        format!("dp-hostile-{pid}-a"),
    );
    let config = config("stream");
    let mut agent = Agent::spawn("cubic", &config, &agent_name);
    agent.wait_bound();
    let mut dp = datapath(&dp_name, &agent_name);
    let (mut before, _) = open_flow(&mut dp, Ipv4Addr::new(10, 0, 0, 2), None);
    assert_controlled(&mut dp, &mut before, 100);

    // The attacker: a bound socket (portus ignores unnamed senders), drained so the agent's
    // answers to its valid READY/CREATEs never fill its queue.
    let attacker_path = Path::new("/tmp/ccp").join(format!("attacker-hostile-{pid}"));
    let _ = std::fs::remove_file(&attacker_path);
    let attacker = UnixDatagram::bind(&attacker_path).unwrap();
    let drain = attacker.try_clone().unwrap();
    drain
        .set_read_timeout(Some(Duration::from_millis(50)))
        .unwrap();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let drainer = std::thread::spawn(move || {
        let mut buf = [0u8; 4096];
        while !stop2.load(Ordering::Relaxed) {
            let _ = drain.recv(&mut buf);
        }
    });

    let stream = hostile_stream(0x5EED_0005);
    let mut expected: BTreeMap<String, u64> = BTreeMap::new();
    let mut valid = 0u64;
    let agent_path = Path::new("/tmp/ccp").join(&agent_name);
    for (i, d) in stream.iter().enumerate() {
        match expected_reason(d) {
            Some(r) => *expected.entry(r.to_string()).or_default() += 1,
            None => valid += 1,
        }
        if let Err(e) = attacker.send_to(d, &agent_path) {
            let status = agent.child.try_wait().unwrap();
            panic!(
                "datagram {i} ({} bytes, starts {:02x?}): agent unreachable ({e}); exit {status:?}",
                d.len(),
                &d[..d.len().min(8)]
            );
        }
    }
    let rejected: u64 = expected.values().sum();
    assert!(
        rejected > 6_000 && valid > 5,
        "{rejected} rejected, {valid} valid"
    );
    for reason in [
        "short",
        "truncated",
        "length_mismatch",
        "unexpected_type",
        "bad_length",
        "bad_mss",
        "bad_name",
        "bad_fields",
    ] {
        assert!(expected.get(reason).copied().unwrap_or(0) > 0, "{reason}");
    }

    // The running flow and a new one are served (the new CREATE is queued behind the stream,
    // so the agent has read every hostile datagram once it answers).
    let (mut after, iw) = open_flow(&mut dp, Ipv4Addr::new(10, 0, 0, 3), Some("reno"));
    assert_eq!(iw, DATAPATH_IW * MSS, "no IW table: the datapath's own");
    assert_controlled(&mut dp, &mut after, 200);
    assert_controlled(&mut dp, &mut before, 100);
    assert!(agent.child.try_wait().unwrap().is_none(), "agent exited");
    stop.store(true, Ordering::Relaxed);
    drainer.join().unwrap();

    agent.signal(libc::SIGTERM);
    let totals = fields(&agent.wait_for_line("ipc guard totals", 1).unwrap());
    for (reason, n) in &expected {
        assert_eq!(totals.get(reason), Some(n), "{reason}: {totals:?}");
    }
    assert_eq!(totals["rejected"], rejected, "{totals:?}");
    assert!(totals["accepted"] >= valid, "{totals:?}");
    let warned = agent.log();
    assert!(warned.contains("malformed or unexpected datagram dropped"));
    assert_eq!(agent.child.wait().unwrap().code(), Some(0));
    let _ = std::fs::remove_file(&attacker_path);
    remove_config(&config);
}

#[test]
fn a_create_with_an_absurd_mss_stays_on_the_fallback() {
    let pid = std::process::id();
    let (agent_name, dp_name) = (
        format!("agent-hostile-{pid}-m"),
        format!("dp-hostile-{pid}-m"),
    );
    let config = config("mss");
    let mut agent = Agent::spawn("cubic", &config, &agent_name);
    agent.wait_bound();
    let mut dp = datapath(&dp_name, &agent_name);
    let (mut good, _) = open_flow(&mut dp, Ipv4Addr::new(10, 0, 0, 2), None);
    assert_controlled(&mut dp, &mut good, 50);

    let mut absurd = Vec::new();
    for mss in [0, 65_536, 1 << 31, u32::MAX] {
        let sid = dp
            .create_flow(FlowInfo {
                init_cwnd_bytes: 10 * 1448,
                mss_bytes: mss,
                dst_port: 443,
                alg: Some("copa".to_string()),
                ..FlowInfo::default()
            })
            .unwrap();
        absurd.push(sid);
    }
    let ack = Primitives {
        bytes_acked: 1448,
        packets_acked: 1,
        rtt_sample_us: 300,
        snd_cwnd: 10 * 1448,
        ..Primitives::default()
    };
    // A second's worth of ACKs: the good flow stays under the agent, the others never join.
    for _ in 0..10 {
        assert_controlled(&mut dp, &mut good, 50);
        for &sid in &absurd {
            let a = dp.invoke(sid, &ack).unwrap();
            assert_eq!(a.control, Control::Fallback, "flow {sid}");
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    agent.wait_for_line("not a TCP MSS", 1).unwrap();
    let sid = format!("sid={}", absurd[0]);
    assert!(
        agent
            .log()
            .lines()
            .any(|l| l.contains("not a TCP MSS") && l.contains(&sid) && l.contains("mss=0")),
        "{}",
        agent.log()
    );
    agent.signal(libc::SIGTERM);
    let totals = fields(&agent.wait_for_line("ipc guard totals", 1).unwrap());
    assert!(totals["bad_mss"] >= 4, "{totals:?}");
    assert_eq!(totals["rejected"], totals["bad_mss"], "{totals:?}");
    remove_config(&config);
}

/// Runs `ccp-agent --ipc unix --name <name>`, which must refuse to start (exit 2) within 10 s;
/// one that starts instead is killed.
fn agent_refusing(name: &str, config: &Path) -> Output {
    let mut child = Command::new(env!("CARGO_BIN_EXE_ccp-agent"))
        .args([
            "--ipc", "unix", "--alg", "cubic", "--name", name, "--config",
        ])
        .arg(config)
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let start = Instant::now();
    while child.try_wait().unwrap().is_none() && start.elapsed() < Duration::from_secs(10) {
        std::thread::sleep(Duration::from_millis(20));
    }
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    assert_eq!(
        out.status.code(),
        Some(2),
        "{name}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

#[test]
fn socket_names_must_be_one_safe_file_name() {
    let pid = std::process::id();
    let config = config("names");
    let escape = format!("ccp-escape-{pid}");
    for name in [
        format!("../{escape}"),
        format!("../../tmp/{escape}"),
        "..".to_string(),
        String::new(),
        "a/b".to_string(),
        "x".repeat(65),
    ] {
        let out = agent_refusing(&name, &config);
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(err.contains("--name"), "{name}: {err}");
    }
    assert!(!Path::new("/tmp").join(&escape).exists());
    remove_config(&config);
}

#[test]
fn a_running_agents_socket_is_not_taken_over() {
    let pid = std::process::id();
    let (agent_name, dp_name) = (
        format!("agent-hostile-{pid}-l"),
        format!("dp-hostile-{pid}-l"),
    );
    let config = config("live");
    let mut first = Agent::spawn("cubic", &config, &agent_name);
    first.wait_bound();
    let mut dp = datapath(&dp_name, &agent_name);
    let (mut flow, _) = open_flow(&mut dp, Ipv4Addr::new(10, 0, 0, 2), None);
    assert_controlled(&mut dp, &mut flow, 50);

    // A second agent with the same name refuses, naming the path; the first keeps serving.
    let out = agent_refusing(&agent_name, &config);
    let err = String::from_utf8_lossy(&out.stderr);
    let path = format!("/tmp/ccp/{agent_name}");
    assert!(err.contains(&path) && err.contains("bound"), "{err}");
    assert_controlled(&mut dp, &mut flow, 100);
    let (mut second, _) = open_flow(&mut dp, Ipv4Addr::new(10, 0, 0, 3), None);
    assert_controlled(&mut dp, &mut second, 100);
    assert!(first.child.try_wait().unwrap().is_none());
    drop(first);

    // A stale socket (nobody bound) is replaced.
    let stale = UnixDatagram::bind(&path).unwrap();
    drop(stale);
    assert!(Path::new(&path).exists());
    let mut again = Agent::spawn("cubic", &config, &agent_name);
    assert!(
        again.wait_for_line("starting CCP", 1).is_ok(),
        "{}",
        again.log()
    );
    let mut dp2 = datapath(&format!("{dp_name}-2"), &agent_name);
    let (mut flow, _) = open_flow(&mut dp2, Ipv4Addr::new(10, 0, 0, 2), None);
    assert_controlled(&mut dp2, &mut flow, 50);
    drop(again);

    // Anything but a socket is refused and left alone.
    std::fs::write(&path, "not a socket").unwrap();
    let out = agent_refusing(&agent_name, &config);
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains(&path) && err.contains("not a socket"), "{err}");
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
    std::fs::remove_file(&path).unwrap();
    remove_config(&config);
}
