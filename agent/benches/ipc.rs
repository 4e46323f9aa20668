//! Shared memory against unix sockets, side by side in one run: the control-loop round trip
//! and the reports one `ccp-agent` absorbs, through the release `ccp-agent --alg cubic` in its
//! own process and our datapath runtime in this one.
//!
//! Variants, each with a fresh agent process, alternated round by round:
//! - `unix`: `--ipc unix` (the agent sleeps in `recv` between datagrams);
//! - `unix-spin`: `--ipc unix --spin-us 1000000` (the agent busy-polls its socket);
//! - `shm`: `--ipc shm` (the agent spins 50 µs after the last record, then sleeps on the
//!   eventfd doorbells: in a closed loop it never sleeps).
//!
//! **Round trip**: one flow whose program (the suite's per-RTT program, RTT sample 1 µs)
//! reports on every ACK; timed with `Instant` from just before `invoke` (which sends the
//! MEASURE) until the datapath, busy-polling, has taken in the agent's UPDATE_FIELD; 2,000
//! warm-up and 20,000 timed round trips per round. **Absorbed**: `FLOWS` flows round robin, at
//! most `window` reports unanswered, answers received per second over 3 s (as
//! `benches/absorb.rs`); unix with window 8 (the agent's socket queue,
//! `net.unix.max_dgram_qlen`, is 10 here), shm with 8 and with 256 (the ring holds thousands).
//!
//! Not criterion: percentiles of single round trips and rates over a closed loop.
//! Run: `cargo bench -p ccp-agent --bench ipc` (`cargo test --benches`: a short smoke run).

use std::time::{Duration, Instant};

mod common;

use ccp_datapath::runtime::{
    Control, Datapath, DatapathConfig, FlowInfo, MonotonicClock, Primitives, ShmTransport,
    Transport, UnixTransport,
};
use ccp_datapath::stats::percentile;
use common::{BoxResult, Proc};

const MSS: u32 = 1448;
const FLOWS: u32 = 8;
const STALL: Duration = Duration::from_millis(5);

#[derive(Clone, Copy, PartialEq)]
enum Variant {
    Unix,
    UnixSpin,
    Shm,
}

impl Variant {
    fn name(self) -> &'static str {
        match self {
            Self::Unix => "unix",
            Self::UnixSpin => "unix-spin",
            Self::Shm => "shm",
        }
    }
}

struct Settings {
    warmup_rt: usize,
    timed_rt: usize,
    absorb_warmup: Duration,
    absorb_span: Duration,
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

/// Opens `n` flows and waits until the agent controls every one.
fn open_flows<T: Transport>(
    dp: &mut Datapath<T, MonotonicClock>,
    n: u32,
    port: u32,
) -> BoxResult<Vec<(u32, u32)>> {
    let mut flows = Vec::new();
    for i in 0..n {
        let sid = dp.create_flow(FlowInfo {
            init_cwnd_bytes: 10 * MSS,
            mss_bytes: MSS,
            src_port: port + i,
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

/// Round trips in µs (sorted), and how many answers never came (50 ms).
fn round_trips<T: Transport>(
    dp: &mut Datapath<T, MonotonicClock>,
    s: &Settings,
) -> BoxResult<(Vec<f64>, u64)> {
    let (sid, mut cwnd) = open_flows(dp, 1, 30_000)?[0];
    let mut samples = Vec::with_capacity(s.timed_rt);
    let mut lost = 0u64;
    let mut done = 0usize;
    while done < s.warmup_rt + s.timed_rt {
        let before = dp.stats().msgs_received;
        let t0 = Instant::now();
        let a = dp.invoke(sid, &ack(cwnd))?;
        if let Some(c) = a.cwnd_bytes {
            cwnd = c;
        }
        if !a.reported || a.control != Control::Agent {
            dp.poll();
            continue;
        }
        loop {
            dp.poll();
            if dp.stats().msgs_received > before {
                break;
            }
            if t0.elapsed() > Duration::from_millis(50) {
                lost += 1;
                break;
            }
        }
        let dt = t0.elapsed();
        if done >= s.warmup_rt {
            samples.push(dt.as_secs_f64() * 1e6);
        }
        done += 1;
        // Take the answer in (it changes the window on the next invoke).
        dp.poll();
    }
    if dp.stats().msgs_rejected > 0 {
        return Err("the datapath rejected an agent message".into());
    }
    samples.sort_by(f64::total_cmp);
    Ok((samples, lost))
}

/// Answers per second with at most `window` unanswered, and the agent's CPU time per answer
/// over the span (µs: what one answer costs the agent, whatever share of a core it got).
fn absorb<T: Transport>(
    dp: &mut Datapath<T, MonotonicClock>,
    window: u64,
    s: &Settings,
    agent: &Proc,
) -> BoxResult<(f64, f64)> {
    let mut flows = open_flows(dp, FLOWS, 40_000 + window as u32 * 16)?;
    let base = dp.stats();
    let mut written_off = 0u64;
    let mut next = 0usize;
    let mut last_progress = Instant::now();
    let mut last_received = base.msgs_received;
    let start = Instant::now();
    let mut mark = None;
    loop {
        let now = Instant::now();
        let elapsed = now - start;
        if mark.is_none() && elapsed >= s.absorb_warmup {
            mark = Some((now, dp.stats(), agent.cpu_s()));
        }
        if elapsed >= s.absorb_warmup + s.absorb_span {
            break;
        }
        let st = dp.stats();
        let outstanding = (st.reports_sent - base.reports_sent)
            .saturating_sub(st.msgs_received - base.msgs_received)
            .saturating_sub(written_off);
        if outstanding < window {
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
    let (t0, s0, cpu0) = mark.ok_or("span ended before warm-up")?;
    let s1 = dp.stats();
    let cpu = agent.cpu_s() - cpu0;
    if s1.fallback_entries > s0.fallback_entries {
        return Err("the datapath fell back during the run".into());
    }
    let answers = (s1.msgs_received - s0.msgs_received) as f64;
    Ok((
        answers / t0.elapsed().as_secs_f64(),
        cpu * 1e6 / answers.max(1.0),
    ))
}

fn config() -> DatapathConfig {
    DatapathConfig {
        agent_timeout_ns: 1_000_000_000,
        max_connections: 64,
        ..DatapathConfig::default()
    }
}

fn spawn(v: Variant, agent: &str) -> BoxResult<Proc> {
    let mut args = vec!["--alg", "cubic", "--name", agent];
    match v {
        Variant::Unix => args.extend(["--ipc", "unix"]),
        Variant::UnixSpin => args.extend(["--ipc", "unix", "--spin-us", "1000000"]),
        Variant::Shm => args.extend(["--ipc", "shm"]),
    }
    Proc::spawn(env!("CARGO_BIN_EXE_ccp-agent"), &args, agent, "warn")
}

/// One measurement (round trips, or absorbed at `window`) with a fresh agent.
fn measure(
    v: Variant,
    window: Option<u64>,
    tag: &str,
    s: &Settings,
) -> BoxResult<(Vec<f64>, u64, (f64, f64))> {
    let pid = std::process::id();
    let agent = format!("bench-ipc-agent-{pid}-{tag}");
    let proc = spawn(v, &agent)?;
    macro_rules! go {
        ($dp:expr) => {{
            let mut dp = $dp;
            match window {
                None => {
                    let (rt, lost) = round_trips(&mut dp, s)?;
                    (rt, lost, (0.0, 0.0))
                }
                Some(w) => (Vec::new(), 0, absorb(&mut dp, w, s, &proc)?),
            }
        }};
    }
    Ok(match v {
        Variant::Shm => go!(Datapath::new(
            config(),
            ShmTransport::connect(&agent)?,
            MonotonicClock::new()
        )),
        Variant::Unix | Variant::UnixSpin => go!(Datapath::new(
            config(),
            UnixTransport::bind(&format!("bench-ipc-dp-{pid}-{tag}"), &agent)?,
            MonotonicClock::new()
        )),
    })
}

/// One value per round, for each cell.
type PerCell = Vec<Vec<f64>>;

/// The absorbed rate and the agent's CPU per answer, per cell, over `rounds`.
fn absorb_rounds(rounds: usize, s: &Settings) -> BoxResult<(PerCell, PerCell)> {
    let cells: Vec<(Variant, u64)> = vec![
        (Variant::Unix, 8),
        (Variant::UnixSpin, 8),
        (Variant::Shm, 8),
        (Variant::Shm, 256),
    ];
    let mut rates = vec![Vec::new(); cells.len()];
    let mut cpu = vec![Vec::new(); cells.len()];
    for round in 0..rounds {
        for (k, &(v, w)) in cells.iter().enumerate() {
            let (_, _, (r, cpu_us)) =
                measure(v, Some(w), &format!("ab-{}-{w}-{round}", v.name()), s)?;
            println!(
                "  round {round} {:9} window {w:3}: {r:>10.0} answered reports/s, agent CPU \
                 {cpu_us:.2} µs per answer (load average {})",
                v.name(),
                load_average()
            );
            rates[k].push(r);
            cpu[k].push(cpu_us);
        }
    }
    Ok((rates, cpu))
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
}

fn main() -> BoxResult<()> {
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, s) = if full {
        (
            3,
            Settings {
                warmup_rt: 2_000,
                timed_rt: 20_000,
                absorb_warmup: Duration::from_millis(500),
                absorb_span: Duration::from_secs(3),
            },
        )
    } else {
        (
            1,
            Settings {
                warmup_rt: 50,
                timed_rt: 200,
                absorb_warmup: Duration::from_millis(50),
                absorb_span: Duration::from_millis(200),
            },
        )
    };
    let variants = [Variant::Unix, Variant::UnixSpin, Variant::Shm];
    println!(
        "ccp-agent --alg cubic, unix vs shm: {rounds} round(s); load average {}",
        load_average()
    );
    let mut p50 = vec![Vec::new(); variants.len()];
    for round in 0..rounds {
        for (k, &v) in variants.iter().enumerate() {
            let (rt, lost, _) = measure(v, None, &format!("rt-{}-{round}", v.name()), &s)?;
            let q = |pm| percentile(&rt, pm).unwrap_or(f64::NAN);
            println!(
                "  round {round} {:9} round trip µs: p50 {:.2} p90 {:.2} p99 {:.2} p99.9 {:.2} \
                 max {:.2} ({} timed, {lost} lost)",
                v.name(),
                q(500),
                q(900),
                q(990),
                q(999),
                rt.last().copied().unwrap_or(f64::NAN),
                rt.len()
            );
            p50[k].push(q(500));
        }
    }
    let (mut rates, mut cpu) = absorb_rounds(rounds, &s)?;
    let med = |v: &mut Vec<f64>| {
        v.sort_by(f64::total_cmp);
        percentile(v, 500).unwrap_or(f64::NAN)
    };
    let m: Vec<f64> = p50.iter_mut().map(med).collect();
    println!(
        "  median round-trip p50 µs: unix {:.2}, unix-spin {:.2}, shm {:.2}; shm/unix {:.3}, \
         shm/unix-spin {:.3}",
        m[0],
        m[1],
        m[2],
        m[2] / m[0],
        m[2] / m[1]
    );
    let r: Vec<f64> = rates.iter_mut().map(med).collect();
    println!(
        "  median absorbed reports/s: unix w8 {:.0}, unix-spin w8 {:.0}, shm w8 {:.0}, \
         shm w256 {:.0}; shm w8/unix {:.2}, shm w256/unix {:.2}",
        r[0],
        r[1],
        r[2],
        r[3],
        r[2] / r[0],
        r[3] / r[0]
    );
    let c: Vec<f64> = cpu.iter_mut().map(med).collect();
    println!(
        "  median agent CPU µs per answer: unix w8 {:.2}, unix-spin w8 {:.2}, shm w8 {:.2}, \
         shm w256 {:.2} (a whole core would absorb {:.0}/s over shm at w256)",
        c[0],
        c[1],
        c[2],
        c[3],
        1e6 / c[3]
    );
    println!("  load average at the end {}", load_average());
    Ok(())
}
