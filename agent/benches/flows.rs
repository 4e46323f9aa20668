//! One `ccp-agent` for many flows: memory per flow, reports absorbed and answer latency with
//! 10,000 flows open, and a million flows created and closed.
//!
//! The built `ccp-agent` (`--alg selector`, the Rein policy over the nine candidates) runs in
//! its own process; this process is the load generator: our datapath runtime over unix
//! sockets, with `FLOWS` flows. Phases:
//! 1. **open**: flows are created in windows of at most `WINDOW` unanswered CREATEs (the
//!    agent's socket queue, `net.unix.max_dgram_qlen`, is 10 here); a flow counts as open once
//!    the agent's program runs it. The agent's RSS (`/proc/<pid>/status`, `VmRSS`) before and
//!    after gives the memory per flow.
//! 2. **absorb**: one ACK at a time round-robin over every open flow, each reporting (the
//!    suite's program reports on every ACK with a 1 µs RTT), at most `WINDOW` reports
//!    unanswered; answers per second and the time from a report to its answer (answers come
//!    back in order: one agent thread, one socket), p50 and p99.
//! 3. **churn**: every flow closed, then `CHURN` more created and closed in windows, the
//!    agent's RSS sampled every tenth of the way: it must stay flat, and the datapath's table
//!    must end empty.
//!
//! `FLOWS_IPC=shm` runs the same phases over the shared-memory transport (`ccp-agent --ipc shm`,
//! the runtime's `ShmTransport`; the window stays `WINDOW` so the two compare).
//!
//! Not criterion: the quantities are memory and rates over long closed loops. Run:
//! `cargo bench -p ccp-agent --bench flows` (under `cargo test --benches` a small smoke version
//! runs: 200 flows, 2,000 churned).

use std::collections::VecDeque;
use std::time::{Duration, Instant};

mod common;

use ccp_datapath::runtime::{
    Control, Datapath, DatapathConfig, FlowInfo, MonotonicClock, Primitives, ShmTransport,
    Transport, UnixTransport,
};
use ccp_datapath::stats::percentile;
use common::{BoxResult, Proc};

type Dp<T> = Datapath<T, MonotonicClock>;

const MSS: u32 = 1448;
const WINDOW: usize = 8;
const STALL: Duration = Duration::from_millis(20);

/// The agent's resident memory, bytes.
fn rss_bytes(pid: u32) -> BoxResult<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status"))?;
    let kb = status
        .lines()
        .find_map(|l| l.strip_prefix("VmRSS:"))
        .and_then(|v| v.split_whitespace().next())
        .and_then(|v| v.parse::<u64>().ok())
        .ok_or("no VmRSS")?;
    Ok(kb * 1024)
}

fn info(i: u64) -> FlowInfo {
    FlowInfo {
        init_cwnd_bytes: 10 * MSS,
        mss_bytes: MSS,
        src_ip: 0x0a00_0000 | (i as u32 >> 16),
        src_port: 1024 + (i % 60_000) as u32,
        dst_port: 443,
        ..FlowInfo::default()
    }
}

fn idle(cwnd: u32) -> Primitives {
    Primitives {
        rtt_sample_us: 1_000_000,
        snd_cwnd: cwnd,
        ..Primitives::default()
    }
}

fn ack(cwnd: u32) -> Primitives {
    Primitives {
        bytes_acked: MSS,
        packets_acked: 1,
        rtt_sample_us: 1,
        bytes_in_flight: cwnd,
        packets_in_flight: cwnd / MSS,
        snd_cwnd: cwnd,
        ..Primitives::default()
    }
}

/// Creates `n` flows, at most `WINDOW` not yet under the agent at a time; returns their ids.
fn open<T: Transport>(dp: &mut Dp<T>, n: u64, first: u64) -> BoxResult<Vec<u32>> {
    let mut open = Vec::with_capacity(n as usize);
    let mut waiting: VecDeque<(u32, Instant)> = VecDeque::new();
    let mut next = 0u64;
    while open.len() < n as usize {
        while waiting.len() < WINDOW && next < n {
            waiting.push_back((dp.create_flow(info(first + next))?, Instant::now()));
            next += 1;
        }
        dp.poll();
        let mut still = VecDeque::with_capacity(waiting.len());
        for (sid, since) in waiting.drain(..) {
            if dp.invoke(sid, &idle(10 * MSS))?.control == Control::Agent {
                open.push(sid);
            } else if since.elapsed() > Duration::from_secs(10) {
                return Err(format!("the agent never took flow {sid}").into());
            } else {
                still.push_back((sid, since));
            }
        }
        waiting = still;
    }
    Ok(open)
}

struct Absorbed {
    per_sec: f64,
    p50_us: f64,
    p99_us: f64,
    written_off: u64,
}

/// Round-robin ACKs over `flows` for `span`, at most `WINDOW` reports unanswered.
fn absorb<T: Transport>(dp: &mut Dp<T>, flows: &[u32], span: Duration) -> BoxResult<Absorbed> {
    let mut cwnd = vec![10 * MSS; flows.len()];
    let mut sent: VecDeque<Instant> = VecDeque::new();
    let mut latencies_ns: Vec<u64> = Vec::new();
    let mut written_off = 0u64;
    let mut received = dp.stats().msgs_received;
    let mut last_progress = Instant::now();
    let base = dp.stats();
    let start = Instant::now();
    let mut next = 0usize;
    while start.elapsed() < span {
        if sent.len() < WINDOW {
            let reports = dp.stats().reports_sent;
            let a = dp.invoke(flows[next], &ack(cwnd[next]))?;
            if let Some(c) = a.cwnd_bytes {
                cwnd[next] = c;
            }
            if dp.stats().reports_sent > reports {
                sent.push_back(Instant::now());
            }
            next = (next + 1) % flows.len();
        } else {
            dp.poll();
        }
        let now_received = dp.stats().msgs_received;
        let now = Instant::now();
        for _ in received..now_received {
            if let Some(t) = sent.pop_front() {
                latencies_ns.push((now - t).as_nanos() as u64);
            }
        }
        if now_received != received {
            received = now_received;
            last_progress = now;
        } else if now - last_progress > STALL && !sent.is_empty() {
            written_off += sent.len() as u64;
            sent.clear();
            last_progress = now;
        }
    }
    let secs = start.elapsed().as_secs_f64();
    let s = dp.stats();
    if s.fallback_entries > base.fallback_entries {
        return Err("the datapath fell back during the run".into());
    }
    latencies_ns.sort_unstable();
    let p = |pm| percentile(&latencies_ns, pm).unwrap_or_default() as f64 / 1e3;
    Ok(Absorbed {
        per_sec: (s.msgs_received - base.msgs_received) as f64 / secs,
        p50_us: p(500),
        p99_us: p(990),
        written_off,
    })
}

fn main() -> BoxResult<()> {
    let full = std::env::args().any(|a| a == "--bench");
    let shm = std::env::var("FLOWS_IPC").is_ok_and(|v| v == "shm");
    let (flows, churn, span) = if full {
        (10_000u64, 1_000_000u64, Duration::from_secs(5))
    } else {
        (200, 2_000, Duration::from_millis(300))
    };
    let dir = std::env::temp_dir().join(format!("ccp-agent-flows-{}", std::process::id()));
    std::fs::create_dir_all(&dir)?;
    let config = dir.join("agent.toml");
    std::fs::write(&config, "[selector]\npolicy = \"rein\"\n")?;
    let pid = std::process::id();
    let agent_name = format!("bench-flows-agent-{pid}");
    let agent = Proc::spawn(
        env!("CARGO_BIN_EXE_ccp-agent"),
        &[
            "--ipc",
            if shm { "shm" } else { "unix" },
            "--alg",
            "selector",
            "--name",
            &agent_name,
            "--config",
            &config.to_string_lossy(),
        ],
        &agent_name,
        "warn",
    )?;
    println!("ipc: {}", if shm { "shm" } else { "unix" });
    let cfg = DatapathConfig {
        max_connections: flows.max(1_000) as usize + WINDOW,
        agent_timeout_ns: 2_000_000_000,
        ..DatapathConfig::default()
    };
    if shm {
        let transport = ShmTransport::connect(&agent_name)?;
        run(
            Datapath::new(cfg, transport, MonotonicClock::new()),
            agent,
            flows,
            churn,
            span,
        )?;
    } else {
        let transport = UnixTransport::bind(&format!("bench-flows-dp-{pid}"), &agent_name)?;
        run(
            Datapath::new(cfg, transport, MonotonicClock::new()),
            agent,
            flows,
            churn,
            span,
        )?;
    }
    let _ = std::fs::remove_dir_all(&dir);
    Ok(())
}

fn run<T: Transport>(
    mut dp: Dp<T>,
    agent: Proc,
    flows: u64,
    churn: u64,
    span: Duration,
) -> BoxResult<()> {
    let agent_pid = agent.pid();
    // One flow first, so the agent's start-up allocations (programs, models) are not counted
    // per flow.
    let first = open(&mut dp, 1, 0)?;
    dp.close_flow(first[0])?;
    std::thread::sleep(Duration::from_millis(100));
    let rss0 = rss_bytes(agent_pid)?;
    let t = Instant::now();
    let ids = open(&mut dp, flows, 1)?;
    let open_s = t.elapsed().as_secs_f64();
    std::thread::sleep(Duration::from_millis(100));
    let rss1 = rss_bytes(agent_pid)?;
    println!(
        "open: {flows} flows in {open_s:.1} s ({:.0}/s); agent RSS {:.1} -> {:.1} MB: {:.0} bytes \
         per flow",
        flows as f64 / open_s,
        rss0 as f64 / 1e6,
        rss1 as f64 / 1e6,
        (rss1.saturating_sub(rss0)) as f64 / flows as f64
    );
    let a = absorb(&mut dp, &ids, span)?;
    println!(
        "absorb over {flows} flows: {:.0} answers/s, report-to-answer p50 {:.1} us, p99 {:.1} \
         us ({} reports written off)",
        a.per_sec, a.p50_us, a.p99_us, a.written_off
    );
    let full_before = dp.stats().sends_full;
    for sid in ids {
        dp.close_flow(sid)?;
        // Closes are not answered: pace them so the agent's queue never overflows.
        std::thread::sleep(Duration::from_micros(20));
    }
    let mut samples = vec![rss_bytes(agent_pid)?];
    let batch = 1_000u64.min(churn);
    let t = Instant::now();
    let mut done = 0u64;
    while done < churn {
        let ids = open(&mut dp, batch, flows + 1 + done)?;
        for sid in ids {
            dp.close_flow(sid)?;
            std::thread::sleep(Duration::from_micros(20));
        }
        done += batch;
        if done.is_multiple_of((churn / 10).max(batch)) {
            samples.push(rss_bytes(agent_pid)?);
        }
    }
    let churn_s = t.elapsed().as_secs_f64();
    let (lo, hi) = (
        *samples.iter().min().unwrap_or(&0),
        *samples.iter().max().unwrap_or(&0),
    );
    println!(
        "churn: {churn} flows created and closed in {churn_s:.1} s ({:.0}/s); agent RSS \
         {:.1}..{:.1} MB over {} samples ({:+.1} % from first to last); datapath flows open at \
         the end: {}; CLOSEs lost to a full socket: {}",
        churn as f64 / churn_s,
        lo as f64 / 1e6,
        hi as f64 / 1e6,
        samples.len(),
        (*samples.last().unwrap_or(&0) as f64 / samples[0].max(1) as f64 - 1.0) * 100.0,
        dp.connection_count(),
        dp.stats().sends_full - full_before
    );
    if dp.connection_count() != 0 {
        return Err("flows left open in the datapath".into());
    }
    agent.terminate()
}
