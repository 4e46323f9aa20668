//! The BPF congestion control `ccp` on real kernel TCP over loopback.
//!
//! Each test loads `ccp` (`struct_ops` link), opens a TCP connection in this process, selects
//! `ccp` with `setsockopt(TCP_CONGESTION)` and sends for a second or two. The first test
//! checks records, a cwnd written through the map (seen in `TCP_INFO`), and the in-BPF
//! fallback when user space goes silent; the second drives the flow with the AIMD portus agent
//! through our runtime and [`KernelBridge`]. The `sockops_*` tests attach [`SockOps`] to a
//! cgroup v2 of their own, move this process into it only while creating sockets, and check the
//! CCA (`TCP_CONGESTION`) and initial window (`tcpi_snd_cwnd` before any data) that the policy
//! and IW table give each new connection, stale-cgroup cleanup, and the per-connection cost.
//! Without root or BPF `struct_ops` / cgroup v2 support, each test prints one line saying why and
//! returns (a verifier rejection fails instead).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::sync::Arc;
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

#[path = "support/aimd.rs"]
mod aimd;

use aimd::Aimd;
use ccp_datapath::agent::{self, demo_config};
use ccp_datapath::kernel::{
    CCA_NAME, KernelBridge, KernelDatapath, Record, RecordKind, SockOps, sockops, tcp,
};
use ccp_datapath::runtime::{ChannelTransport, Datapath, MonotonicClock};

/// Only one `ccp` can be registered at a time: the tests take turns.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

fn load_or_skip(test: &str) -> Option<KernelDatapath> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIP {test}: not root, cannot load BPF struct_ops");
        return None;
    }
    match KernelDatapath::load() {
        Ok(k) => Some(k),
        Err(e) if e.is_unavailable() => {
            println!("SKIP {test}: BPF struct_ops congestion control unavailable here: {e}");
            None
        }
        Err(e) => panic!("loading ccp failed: {e}"),
    }
}

/// A loopback connection using `ccp`, a receiver that discards, and a sender that writes
/// until stopped.
struct Transfer {
    probe: TcpStream,
    local_port: u16,
    stop: Arc<AtomicBool>,
    sent: Arc<AtomicU64>,
    sender: Option<JoinHandle<()>>,
    receiver: Option<JoinHandle<()>>,
}

impl Transfer {
    fn start() -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        let addr = listener.local_addr().unwrap();
        let receiver = std::thread::spawn(move || {
            let (mut s, _) = listener.accept().unwrap();
            let mut buf = vec![0u8; 1 << 16];
            while let Ok(n) = s.read(&mut buf) {
                if n == 0 {
                    break;
                }
            }
        });
        let stream = TcpStream::connect(addr).unwrap();
        set_cca(&stream, CCA_NAME);
        let local_port = stream.local_addr().unwrap().port();
        let probe = stream.try_clone().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let sent = Arc::new(AtomicU64::new(0));
        let sender = {
            let (stop, sent) = (Arc::clone(&stop), Arc::clone(&sent));
            let mut stream = stream;
            std::thread::spawn(move || {
                let chunk = vec![0x5au8; 1 << 16];
                while !stop.load(Ordering::Relaxed) {
                    match stream.write(&chunk) {
                        Ok(n) => sent.fetch_add(n as u64, Ordering::Relaxed),
                        Err(_) => break,
                    };
                }
                let _ = stream.shutdown(std::net::Shutdown::Both);
            })
        };
        Self {
            probe,
            local_port,
            stop,
            sent,
            sender: Some(sender),
            receiver: Some(receiver),
        }
    }

    fn info(&self) -> libc::tcp_info {
        tcp::info(&self.probe).expect("TCP_INFO")
    }

    fn stop(mut self) {
        self.stop.store(true, Ordering::Relaxed);
        let _ = self.probe.shutdown(std::net::Shutdown::Both);
        self.sender.take().unwrap().join().unwrap();
        self.receiver.take().unwrap().join().unwrap();
    }
}

fn set_cca(stream: &TcpStream, name: &str) {
    tcp::set_congestion_control(stream, name)
        .unwrap_or_else(|e| panic!("setsockopt(TCP_CONGESTION, {name}): {e}"));
}

/// Polls records for `dur`, keeping those of the flow on `port` (and learning its id).
fn collect(
    k: &mut KernelDatapath,
    dur: Duration,
    port: u16,
    flow_id: &mut Option<u32>,
    mut each: impl FnMut(&mut KernelDatapath, &Record),
) -> Vec<Record> {
    let mut out = Vec::new();
    let deadline = Instant::now() + dur;
    let mut batch = Vec::new();
    while Instant::now() < deadline {
        k.wait_records(Duration::from_millis(5), |r| batch.push(r))
            .unwrap();
        for r in batch.drain(..) {
            if flow_id.is_none() && r.src_port == port {
                *flow_id = Some(r.flow_id);
            }
            if Some(r.flow_id) == *flow_id {
                each(k, &r);
                out.push(r);
            }
        }
    }
    out
}

#[test]
fn records_control_and_fallback() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(mut k) = load_or_skip("records_control_and_fallback") else {
        return;
    };
    let t = Transfer::start();
    let mut flow = None;

    // 1. Records arrive for the flow, under the fallback rule (nobody wrote a control yet).
    let recs = collect(
        &mut k,
        Duration::from_millis(300),
        t.local_port,
        &mut flow,
        |_, _| {},
    );
    let flow_id = flow.expect("no record for our flow");
    let acks: Vec<_> = recs.iter().filter(|r| r.kind == RecordKind::Ack).collect();
    let acked: u64 = acks.iter().map(|r| u64::from(r.bytes_acked)).sum();
    let mss = acks.last().map_or(0, |r| r.mss_bytes);
    println!(
        "flow {flow_id}: {} ACK records in 300 ms, {acked} bytes acked, mss {mss}, rtt sample \
         {} us",
        acks.len(),
        acks.iter()
            .rev()
            .find(|r| r.rtt_us > 0)
            .map_or(0, |r| r.rtt_us)
    );
    assert!(acks.len() > 10, "too few ACK records: {}", acks.len());
    assert!(acked > 0);
    assert!(mss > 0);
    assert!(acks.iter().all(|r| r.in_fallback()));

    // 2. User space writes cwnd = 10 packets: the next ACK applies it.
    let cwnd = 10 * mss;
    k.set_control(flow_id, cwnd, 0).unwrap();
    let recs = collect(
        &mut k,
        Duration::from_millis(400),
        t.local_port,
        &mut flow,
        |k, _| k.set_control(flow_id, cwnd, 0).unwrap(),
    );
    let controlled = recs
        .iter()
        .filter(|r| r.kind == RecordKind::Ack && !r.in_fallback())
        .count();
    assert!(controlled > 0, "no ACK applied the user-space window");
    let samples: Vec<u32> = (0..5)
        .map(|_| {
            collect(
                &mut k,
                Duration::from_millis(5),
                t.local_port,
                &mut flow,
                |k, _| k.set_control(flow_id, cwnd, 0).unwrap(),
            );
            t.info().tcpi_snd_cwnd
        })
        .collect();
    println!("controlled: {controlled} ACKs; tcpi_snd_cwnd samples {samples:?}");
    assert!(
        samples.iter().all(|&c| c == 10),
        "cwnd from the map not applied: {samples:?}"
    );

    // 3. User space goes silent: after the timeout the in-BPF Reno takes over.
    let before = t.info().tcpi_bytes_acked;
    let recs = collect(
        &mut k,
        Duration::from_millis(900),
        t.local_port,
        &mut flow,
        |_, _| {},
    );
    let info = t.info();
    let fallback: Vec<_> = recs
        .iter()
        .filter(|r| r.kind == RecordKind::Ack && r.in_fallback())
        .collect();
    let cwnds: Vec<u32> = fallback.iter().map(|r| r.cwnd_bytes / mss).collect();
    println!(
        "silent: {} fallback ACKs, cwnd {:?} .. {:?} pkts, {} bytes acked, tcpi_snd_cwnd {}, \
         stats {:?}",
        fallback.len(),
        cwnds.first(),
        cwnds.last(),
        info.tcpi_bytes_acked - before,
        info.tcpi_snd_cwnd,
        k.stats().unwrap()
    );
    // The flow keeps moving on the in-BPF rule. Whether its window also grows depends on the
    // flow being window-limited (Reno grows only then, as Linux does), which a loopback receiver
    // on a loaded machine does not guarantee; the window range is printed above, not asserted.
    let moved = info.tcpi_bytes_acked - before;
    assert!(
        fallback.len() >= 100,
        "{} ACKs under the fallback rule",
        fallback.len()
    );
    assert!(
        moved > 10_000_000,
        "the flow barely moved on the fallback rule: {moved} bytes"
    );
    assert!(t.sent.load(Ordering::Relaxed) > 0);
    t.stop();
    k.unregister();
}

#[test]
fn a_second_load_says_another_process_holds_ccp() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(first) = load_or_skip("a_second_load_says_another_process_holds_ccp") else {
        return;
    };
    let e = KernelDatapath::load().expect_err("`ccp` is registered once");
    assert!(
        matches!(e, ccp_datapath::kernel::KernelError::InUse) && !e.is_unavailable(),
        "{e}"
    );
    assert!(e.to_string().contains("another process"), "{e}");
    drop(first);
    // Unregistered on drop: it loads again.
    drop(KernelDatapath::load().expect("`ccp` loads again once unregistered"));
}

#[test]
fn aimd_agent_drives_a_kernel_flow() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(k) = load_or_skip("aimd_agent_drives_a_kernel_flow") else {
        return;
    };
    let (transport, agent_end) = ChannelTransport::pair(None);
    let alg = Aimd::default();
    let counters = alg.counters.clone();
    let handle = agent::spawn_channel_agent(alg, agent_end).expect("agent");
    let runtime = Datapath::new(demo_config(), transport, MonotonicClock::new());
    let mut bridge = KernelBridge::new(k, runtime, Some(aimd::AIMD_NAME.to_owned()));

    let t = Transfer::start();
    // Run until the agent has sent a few windows, then a little more.
    let deadline = Instant::now() + Duration::from_secs(5);
    while Instant::now() < deadline && counters.updates.load(Ordering::Relaxed) < 20 {
        bridge.step(Duration::from_millis(2)).unwrap();
    }
    bridge
        .run_until(Instant::now() + Duration::from_millis(500))
        .unwrap();

    // Compare the agent's latest window with the kernel's, while the bridge keeps running.
    let mut seen = Vec::new();
    for _ in 0..10 {
        bridge
            .run_until(Instant::now() + Duration::from_millis(20))
            .unwrap();
        let agent_bytes = counters.last_cwnd.load(Ordering::Relaxed);
        let info = t.info();
        seen.push((
            agent_bytes / u64::from(info.tcpi_snd_mss),
            info.tcpi_snd_cwnd,
        ));
    }
    let stats = bridge.stats();
    let kstats = bridge.kernel.stats().unwrap();
    // The agent's window grows every RTT (tens of µs here), so the kernel may be a few updates
    // behind when sampled, more so on a loaded machine (seen: 374 vs 345 packets): allow a 10 %
    // lag. The in-kernel fallback's window would be unrelated to the agent's.
    let close = seen
        .iter()
        .filter(|&&(a, k)| a.abs_diff(u64::from(k)) <= (a / 10).max(4))
        .count();
    let per_ack_ns = stats.busy_ns / stats.acks.max(1);
    println!(
        "agent: {} reports, {} window updates; bridge {stats:?}; kernel {kstats:?}; (agent \
         cwnd, tcpi_snd_cwnd) pkts: {seen:?}; user-space cost {per_ack_ns} ns per ACK",
        counters.reports.load(Ordering::Relaxed),
        counters.updates.load(Ordering::Relaxed),
    );
    assert!(counters.reports.load(Ordering::Relaxed) >= 20);
    assert_eq!(
        stats.flows_created, 1,
        "one connection must be one flow (the SYN-ACK's ACK comes before `init`)"
    );
    assert!(stats.control_writes > 0, "the bridge never wrote a window");
    assert!(
        kstats.user_acks > 0,
        "no ACK applied a window from user space"
    );
    assert!(
        close >= 8,
        "the agent's window does not show in tcpi_snd_cwnd: {seen:?}"
    );
    assert!(!bridge.runtime.in_fallback());

    t.stop();
    handle.kill();
    handle.wait().expect("agent stops");
}

// ---- sockops: per-connection congestion control and initial window ----

/// The cgroup the sockops tests create (and a crashed run may leave behind).
const TEST_CGROUP: &str = "ccp-datapath-sockops-test";

fn sockops_or_skip(test: &str) -> Option<SockOps> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIP {test}: not root, cannot attach sockops to a cgroup");
        return None;
    }
    match SockOps::attach(TEST_CGROUP) {
        Ok(s) => Some(s),
        Err(e) if e.is_unavailable() && !e.is_verifier_rejection() => {
            println!("SKIP {test}: sockops on a cgroup v2 unavailable here: {e}");
            None
        }
        Err(e) => panic!("attaching sockops failed: {e}"),
    }
}

/// Runs `f` with this process in the sockops cgroup, then moves it back. Sockets keep the
/// cgroup of the process that created them (accepted ones their listener's), so whatever `f`
/// creates stays under the program after the process leaves.
fn in_cgroup<T>(so: &SockOps, f: impl FnOnce() -> T) -> T {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let rel = own
        .lines()
        .find_map(|l| l.strip_prefix("0::"))
        .expect("no cgroup v2 line in /proc/self/cgroup")
        .trim_start_matches('/')
        .to_owned();
    let back = sockops::cgroup2_mount()
        .unwrap()
        .join(rel)
        .join("cgroup.procs");
    so.add_process(std::process::id()).unwrap();
    let out = f();
    std::fs::write(&back, std::process::id().to_string()).unwrap();
    out
}

fn tcp_info_of(s: &TcpStream) -> libc::tcp_info {
    tcp::info(s).expect("TCP_INFO")
}

fn cca_of(s: &TcpStream) -> String {
    tcp::congestion_control(s).expect("TCP_CONGESTION")
}

/// One connection to `listener`: (client side, accepted side), before any data.
fn connect_pair(listener: &TcpListener, to: std::net::SocketAddr) -> (TcpStream, TcpStream) {
    let client = TcpStream::connect(to).unwrap();
    let (server, _) = listener.accept().unwrap();
    (client, server)
}

/// What a fresh connection looks like: CCA and `tcpi_snd_cwnd` of both sides.
#[derive(Debug, PartialEq, Eq)]
struct Seen {
    client_cca: String,
    server_cca: String,
    client_cwnd: u32,
    server_cwnd: u32,
}

fn seen(pair: &(TcpStream, TcpStream)) -> Seen {
    Seen {
        client_cca: cca_of(&pair.0),
        server_cca: cca_of(&pair.1),
        client_cwnd: tcp_info_of(&pair.0).tcpi_snd_cwnd,
        server_cwnd: tcp_info_of(&pair.1).tcpi_snd_cwnd,
    }
}

fn ip(a: [u8; 4]) -> u32 {
    u32::from(std::net::Ipv4Addr::from(a))
}

/// The IW check: `tcpi_snd_cwnd` read right after `connect` / `accept`, before either side
/// writes. The kernel accepts `TCP_BPF_IW` only before the first data segment and sends the
/// first flight with `snd_cwnd` packets, so this value *is* the first flight's window; it is
/// exact and independent of timing, unlike counting bytes in the first RTT on loopback
/// (RTT ~10 µs, ACKs processed inside the sending syscall).
#[test]
fn sockops_sets_cca_and_initial_window() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(mut so) = sockops_or_skip("sockops_sets_cca_and_initial_window") else {
        return;
    };
    let cgroup = so.cgroup_path().to_path_buf();
    assert!(cgroup.is_dir());

    // Outside the cgroup: the system's default CCA and IW.
    let plain = TcpListener::bind("127.0.0.1:0").unwrap();
    let baseline = seen(&connect_pair(&plain, plain.local_addr().unwrap()));
    println!("outside the cgroup: {baseline:?}");

    // Listeners created inside the cgroup: their accepted sockets are in it too.
    let (a, b, c) = in_cgroup(&so, || {
        (
            TcpListener::bind("127.0.0.1:0").unwrap(),
            TcpListener::bind("127.0.0.1:0").unwrap(),
            TcpListener::bind("127.0.0.2:0").unwrap(),
        )
    });
    let (a_addr, b_addr, c_addr) = (
        a.local_addr().unwrap(),
        b.local_addr().unwrap(),
        c.local_addr().unwrap(),
    );
    // Port A -> cubic; every other port -> reno (neither is the default here, or both differ).
    so.set_cca_policy(a_addr.port(), "cubic").unwrap();
    so.set_cca_policy(0, "reno").unwrap();
    // 127.0.0.0/8 -> IW 4; 127.0.0.2 alone -> IW 7 (longest prefix wins).
    let n = so
        .publish_iw(&[
            (ip([127, 0, 0, 0]), ip([127, 255, 255, 255]), 4),
            (ip([127, 0, 0, 2]), ip([127, 0, 0, 2]), 7),
        ])
        .unwrap();
    assert_eq!(n, 2);

    let pairs = in_cgroup(&so, || {
        [
            connect_pair(&a, a_addr),
            connect_pair(&b, b_addr),
            connect_pair(&c, c_addr),
        ]
    });
    let got: Vec<Seen> = pairs.iter().map(seen).collect();
    println!("policy cubic@A reno@*, IW 127/8=4 127.0.0.2=7: {got:?}");
    let want = |cca: &str, client_cwnd, server_cwnd| Seen {
        client_cca: cca.into(),
        server_cca: cca.into(),
        client_cwnd,
        server_cwnd,
    };
    // C: the client's peer is 127.0.0.2 (IW 7); the server's peer is the client's source
    // address, 127.0.0.1 (IW 4).
    assert_eq!(
        got,
        [want("cubic", 4, 4), want("reno", 4, 4), want("reno", 7, 4)]
    );

    // A new table replaces the old one: 127/8 -> 40, the /32 gone.
    so.publish_iw(&[(ip([127, 0, 0, 0]), ip([127, 255, 255, 255]), 40)])
        .unwrap();
    assert_eq!(so.iw_table().unwrap(), [(ip([127, 0, 0, 0]), 8, 40)]);
    let pairs = in_cgroup(&so, || [connect_pair(&a, a_addr), connect_pair(&c, c_addr)]);
    let got: Vec<Seen> = pairs.iter().map(seen).collect();
    println!("IW 127/8=40: {got:?}");
    assert_eq!(got, [want("cubic", 40, 40), want("reno", 40, 40)]);

    // The first flight: with IW 40 the client's first write goes out as 40 segments at most
    // before an ACK; segs_out right after connect is the handshake only.
    assert!(tcp_info_of(&pairs[0].0).tcpi_data_segs_out == 0);

    // Empty table and no policy: the kernel defaults, as outside the cgroup.
    so.publish_iw(&[]).unwrap();
    so.clear_cca_policy(0).unwrap();
    so.clear_cca_policy(a_addr.port()).unwrap();
    let pair = in_cgroup(&so, || connect_pair(&b, b_addr));
    let got = seen(&pair);
    println!("no table, no policy: {got:?}");
    assert_eq!(got, baseline);

    // A policy naming a CCA the kernel lacks leaves the default and is counted.
    so.set_cca_policy(0, "no-such-cca").unwrap();
    let before = so.stats().unwrap();
    let pair = in_cgroup(&so, || connect_pair(&b, b_addr));
    assert_eq!(seen(&pair), baseline);
    let stats = so.stats().unwrap();
    println!("stats {stats:?}");
    assert_eq!(stats.cca_failed - before.cca_failed, 2);
    assert!(stats.connections >= 14 && stats.iw_set >= 10 && stats.cca_set >= 10);

    // IW clamped to [1, MAX_IW_PKTS]; an empty range refused.
    so.publish_iw(&[(1, 1, 0), (2, 2, u32::MAX)]).unwrap();
    assert_eq!(
        so.iw_table().unwrap(),
        [(1, 32, 1), (2, 32, sockops::MAX_IW_PKTS)]
    );
    assert!(so.publish_iw(&[(5, 4, 10)]).is_err());
    assert!(so.set_cca_policy(1, "a-name-longer-than-15").is_err());
    // The root cannot be owned (created, emptied, removed), nor a path outside the hierarchy.
    let root = sockops::cgroup2_mount().unwrap();
    assert!(SockOps::attach(&root).is_err());
    assert!(SockOps::attach("/tmp/not-a-cgroup").is_err());
    assert!(SockOps::attach("../escape").is_err());

    // Drop detaches and removes the cgroup.
    drop(so);
    assert!(!cgroup.exists(), "{} left behind", cgroup.display());
}

/// The policy selects `ccp` (registered by [`KernelDatapath`]) for a port, and `ccp`'s INIT
/// record carries the IW set just before.
#[test]
fn sockops_selects_ccp() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let Some(mut so) = sockops_or_skip("sockops_selects_ccp") else {
        return;
    };
    let Some(mut k) = load_or_skip("sockops_selects_ccp") else {
        return;
    };
    let l = in_cgroup(&so, || TcpListener::bind("127.0.0.1:0").unwrap());
    let addr = l.local_addr().unwrap();
    so.set_cca_policy(addr.port(), CCA_NAME).unwrap();
    so.publish_iw(&[(ip([127, 0, 0, 1]), ip([127, 0, 0, 1]), 16)])
        .unwrap();
    let pair = in_cgroup(&so, || connect_pair(&l, addr));
    let got = seen(&pair);
    println!("policy ccp, IW 16: {got:?}");
    assert_eq!(got.client_cca, CCA_NAME);
    assert_eq!(got.server_cca, CCA_NAME);
    assert_eq!((got.client_cwnd, got.server_cwnd), (16, 16));

    let port = pair.0.local_addr().unwrap().port();
    let mut inits = Vec::new();
    let deadline = Instant::now() + Duration::from_millis(300);
    while Instant::now() < deadline {
        k.wait_records(Duration::from_millis(5), |r| {
            if r.kind == RecordKind::Init && (r.src_port == port || r.dst_port == port) {
                inits.push(r);
            }
        })
        .unwrap();
    }
    println!("ccp INIT records: {inits:?}");
    assert_eq!(inits.len(), 2, "one INIT per side");
    assert!(
        inits
            .iter()
            .all(|r| r.cwnd_bytes / r.mss_bytes.max(1) == 16)
    );
    drop(pair);
    k.unregister();
}

/// A cgroup left by a crashed run (still holding a process) is emptied and replaced at attach;
/// then the per-connection cost of the program: the kernel's run-time statistics (switched on
/// for the measurement and restored) and connect+accept time with and without the program.
#[test]
fn sockops_cleans_stale_cgroup_and_cost() {
    const N: u32 = 300;
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIP sockops_cleans_stale_cgroup_and_cost: not root");
        return;
    }
    let Ok(root) = sockops::cgroup2_mount() else {
        println!("SKIP sockops_cleans_stale_cgroup_and_cost: no cgroup v2");
        return;
    };
    // The crashed run's leftovers: the directory and a process in it.
    let stale = root.join(TEST_CGROUP);
    if !stale.exists() {
        std::fs::create_dir(&stale).unwrap();
    }
    let mut child = std::process::Command::new("sleep")
        .arg("30")
        .spawn()
        .unwrap();
    std::fs::write(stale.join("cgroup.procs"), child.id().to_string()).unwrap();
    let attached = sockops_or_skip("sockops_cleans_stale_cgroup_and_cost");
    let moved = std::fs::read_to_string(format!("/proc/{}/cgroup", child.id())).unwrap();
    let _ = child.kill();
    let _ = child.wait();
    let Some(mut so) = attached else {
        let _ = std::fs::remove_dir(&stale);
        return;
    };
    assert!(
        !moved.contains(TEST_CGROUP),
        "stale member not moved out: {moved}"
    );
    let members = std::fs::read_to_string(so.cgroup_path().join("cgroup.procs")).unwrap();
    assert!(
        members.trim().is_empty(),
        "fresh cgroup has members: {members}"
    );

    // Cost.
    so.set_cca_policy(0, "reno").unwrap();
    so.publish_iw(&[(ip([127, 0, 0, 0]), ip([127, 255, 255, 255]), 10)])
        .unwrap();
    let time_conns = |l: &TcpListener| {
        let addr = l.local_addr().unwrap();
        let t0 = Instant::now();
        for _ in 0..N {
            drop(connect_pair(l, addr));
        }
        t0.elapsed() / N
    };
    let stats_path = "/proc/sys/kernel/bpf_stats_enabled";
    let old = std::fs::read_to_string(stats_path).unwrap_or_default();
    let stats_on = std::fs::write(stats_path, "1").is_ok();
    let (runs0, ns0) = so.run_stats();
    // Both ends in the cgroup: the program runs for the client and the accepted socket.
    let inside = in_cgroup(&so, || {
        time_conns(&TcpListener::bind("127.0.0.1:0").unwrap())
    });
    let (runs1, ns1) = so.run_stats();
    if stats_on {
        let _ = std::fs::write(stats_path, old.trim());
    }
    let plain = TcpListener::bind("127.0.0.1:0").unwrap();
    let outside = time_conns(&plain);
    let inside_again = in_cgroup(&so, || {
        time_conns(&TcpListener::bind("127.0.0.1:0").unwrap())
    });
    let runs = runs1 - runs0;
    println!(
        "sockops cost: {runs} program runs for {N} connections (both ends), {} ns per run, {} ns \
         per connection (kernel stats {}); connect+accept {inside:?} (stats on) / {inside_again:?} (stats off) in the cgroup vs \
         {outside:?} outside; {:?}",
        (ns1 - ns0) / runs.max(1),
        (ns1 - ns0) / u64::from(N),
        if stats_on { "on" } else { "unavailable" },
        so.stats().unwrap()
    );
    if stats_on {
        // Every callback runs it (the program returns early for the ops it ignores): at least
        // the two ESTABLISHED ones per connection.
        assert!(runs >= u64::from(2 * N), "{runs} runs");
    }
    let path = so.cgroup_path().to_path_buf();
    drop(so);
    assert!(!path.exists());

    // An existing cgroup is attached to and left in place.
    let existing = root.join(format!("{TEST_CGROUP}-existing"));
    if !existing.exists() {
        std::fs::create_dir(&existing).unwrap();
    }
    let so = SockOps::attach_existing(&existing).unwrap();
    assert_eq!(so.cgroup_path(), existing);
    drop(so);
    assert!(existing.is_dir());
    std::fs::remove_dir(&existing).unwrap();
}
