//! Reports per second one `ccp-agent` process absorbs over unix sockets while answering each.
//!
//! The built `ccp-agent` binary runs in its own process (`--alg selector` with the Rein
//! policy, then `--alg cubic` for comparison); this process runs our datapath runtime with
//! `FLOWS` flows whose program (the suite's per-RTT program, RTT sample 1 µs) reports on every
//! ACK. The bench keeps at most `WINDOW` reports unanswered (the agent's socket queue,
//! `net.unix.max_dgram_qlen`, is 10 here), feeds one ACK to the next flow whenever the window
//! allows and polls for answers otherwise. Absorbed = answers received per second (every report
//! of a loss-free flow in slow start changes the window, so the agent answers each with an
//! UPDATE_FIELD). A report left unanswered for 5 ms is counted and its slot given back.
//!
//! Not criterion: the quantity is a rate over a long closed loop, not the time of a batched
//! iteration. Run: `cargo bench -p ccp-agent --bench absorb` (under `cargo test --benches` it
//! runs a short smoke version).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

mod common;

use ccp_datapath::runtime::{
    Control, Datapath, DatapathConfig, FlowInfo, MonotonicClock, Primitives, Stats, UnixTransport,
};
use ccp_datapath::stats::percentile;
use common::{BoxResult, Proc};

type Dp = Datapath<UnixTransport, MonotonicClock>;

const MSS: u32 = 1448;
const FLOWS: u32 = 8;
const WINDOW: u64 = 8;
const STALL: Duration = Duration::from_millis(5);

struct Run {
    answers_per_sec: f64,
    reports_sent: u64,
    unanswered: u64,
    sends_full: u64,
    dropped: u64,
}

fn ack(snd_cwnd: u32) -> Primitives {
    Primitives {
        bytes_acked: MSS,
        packets_acked: 1,
        rtt_sample_us: 1,
        bytes_in_flight: snd_cwnd,
        packets_in_flight: snd_cwnd / MSS,
        snd_cwnd,
        ..Primitives::default()
    }
}

/// Opens the flows and waits until the agent controls every one.
fn open_flows(dp: &mut Dp) -> BoxResult<Vec<(u32, u32)>> {
    let mut flows = Vec::new();
    for i in 0..FLOWS {
        let sid = dp.create_flow(FlowInfo {
            init_cwnd_bytes: 10 * MSS,
            mss_bytes: MSS,
            src_port: 40_000 + i,
            dst_port: 443,
            ..FlowInfo::default()
        })?;
        flows.push((sid, 10 * MSS));
    }
    let start = Instant::now();
    for (sid, cwnd) in &mut flows {
        loop {
            dp.poll();
            let idle = Primitives {
                rtt_sample_us: 1_000_000,
                snd_cwnd: *cwnd,
                ..Primitives::default()
            };
            if dp.invoke(*sid, &idle)?.control == Control::Agent {
                break;
            }
            if start.elapsed() > Duration::from_secs(10) {
                return Err("agent never took the flows".into());
            }
            std::thread::sleep(Duration::from_micros(100));
        }
    }
    Ok(flows)
}

fn measure(
    alg: &str,
    config: &Path,
    tag: &str,
    warmup: Duration,
    span: Duration,
) -> BoxResult<Run> {
    let pid = std::process::id();
    let agent_name = format!("bench-absorb-agent-{pid}-{tag}");
    let config = config.to_string_lossy();
    let _agent = Proc::spawn(
        env!("CARGO_BIN_EXE_ccp-agent"),
        &[
            "--ipc",
            "unix",
            "--alg",
            alg,
            "--name",
            &agent_name,
            "--config",
            &config,
        ],
        &agent_name,
        "warn",
    )?;
    let transport = UnixTransport::bind(&format!("bench-absorb-dp-{pid}-{tag}"), &agent_name)?;
    let cfg = DatapathConfig {
        agent_timeout_ns: 1_000_000_000,
        ..DatapathConfig::default()
    };
    let mut dp = Datapath::new(cfg, transport, MonotonicClock::new());
    let mut flows = open_flows(&mut dp)?;

    let base = dp.stats();
    // Reports given up on (their answer never came), so the window is not held forever.
    let mut written_off = 0u64;
    let mut next = 0usize;
    let mut last_progress = Instant::now();
    let mut last_received = base.msgs_received;
    let start = Instant::now();
    let mut mark: Option<(Instant, Stats)> = None;
    loop {
        let now = Instant::now();
        let elapsed = now - start;
        if mark.is_none() && elapsed >= warmup {
            mark = Some((now, dp.stats()));
        }
        if elapsed >= warmup + span {
            break;
        }
        let s = dp.stats();
        let outstanding = (s.reports_sent - base.reports_sent)
            .saturating_sub(s.msgs_received - base.msgs_received)
            .saturating_sub(written_off);
        if outstanding < WINDOW {
            let n = flows.len();
            let (sid, cwnd) = &mut flows[next];
            next = (next + 1) % n;
            let a = dp.invoke(*sid, &ack(*cwnd))?;
            if let Some(c) = a.cwnd_bytes {
                *cwnd = c;
            }
        } else {
            dp.poll();
        }
        let received = dp.stats().msgs_received;
        if received != last_received {
            last_received = received;
            last_progress = now;
        } else if now - last_progress > STALL {
            written_off += outstanding;
            last_progress = now;
        }
    }
    let (t0, s0) = mark.ok_or("span ended before warm-up")?;
    let s1 = dp.stats();
    let secs = t0.elapsed().as_secs_f64();
    if s1.fallback_entries > s0.fallback_entries {
        return Err("the datapath fell back during the run".into());
    }
    Ok(Run {
        answers_per_sec: (s1.msgs_received - s0.msgs_received) as f64 / secs,
        reports_sent: s1.reports_sent - s0.reports_sent,
        unanswered: written_off,
        sends_full: s1.sends_full - s0.sends_full,
        dropped: s1.msgs_dropped - s0.msgs_dropped,
    })
}

fn write_config(dir: &Path) -> BoxResult<PathBuf> {
    std::fs::create_dir_all(dir)?;
    let path = dir.join("agent.toml");
    std::fs::write(&path, "[selector]\npolicy = \"rein\"\n")?;
    Ok(path)
}

fn main() -> BoxResult<()> {
    // `cargo bench` passes `--bench`; `cargo test --benches` does not: a short smoke run then.
    let full = std::env::args().any(|a| a == "--bench");
    let (runs, warmup, span) = if full {
        (3, Duration::from_millis(500), Duration::from_secs(3))
    } else {
        (1, Duration::from_millis(50), Duration::from_millis(200))
    };
    let dir = std::env::temp_dir().join(format!("ccp-agent-bench-{}", std::process::id()));
    let config = write_config(&dir)?;
    println!(
        "ccp-agent absorb: {FLOWS} flows, window {WINDOW}, every ACK reports, {runs} run(s) of \
         {span:?} after {warmup:?} warm-up"
    );
    for alg in ["selector", "cubic"] {
        let mut rates = Vec::new();
        for i in 0..runs {
            let r = measure(alg, &config, &format!("{alg}-{i}"), warmup, span)?;
            println!(
                "  --alg {alg:8} run {i}: {:>9.0} answered reports/s ({} reports sent, {} \
                 unanswered, {} sends found the queue full, {} dropped)",
                r.answers_per_sec, r.reports_sent, r.unanswered, r.sends_full, r.dropped
            );
            rates.push(r.answers_per_sec);
        }
        rates.sort_by(f64::total_cmp);
        println!(
            "  --alg {alg:8} median: {:.0} reports/s",
            percentile(&rates, 500).unwrap_or(0.0)
        );
    }
    std::fs::remove_dir_all(&dir)?;
    Ok(())
}
