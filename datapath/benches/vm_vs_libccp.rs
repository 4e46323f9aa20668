//! VM cost per ACK: our runtime's `invoke` against libccp's `ccp_invoke`, same program, same
//! primitives, interleaved rounds in one process.
//!
//! Not a criterion bench on purpose: the `libccp` crate exports an unmangled C symbol `log`
//! that replaces libm's, so any `f64::ln` in this binary (criterion's bootstrap and KDE use it)
//! jumps into libccp's logging callback and crashes. This file uses integer arithmetic only and
//! prints integers (picoseconds per ACK, ratios in thousandths).
//!
//! Run: `cargo bench -p ccp-datapath --bench vm_vs_libccp`

use std::hint::black_box;
use std::sync::{Arc, Mutex};
use std::time::Instant;

use ccp_datapath::runtime::{Clock, Datapath, ManualClock, MonotonicClock, Primitives};
use ccp_datapath::stats;

mod common;
use common::{
    Discard, VM_PROGRAM_SRC, VM_PROGRAM_UID, change_prog_msg, install_msg, our_datapath, prims,
};

type BoxResult<T> = Result<T, Box<dyn std::error::Error>>;

/// ACKs per timed round.
const ACKS_PER_ROUND: u64 = 20_000;
/// Timed rounds per variant (after warm-up rounds that are thrown away).
const ROUNDS: usize = 300;
const WARMUP_ROUNDS: usize = 20;

// ---- libccp side -------------------------------------------------------------------------

/// Counts what libccp sends (reports), discards the bytes.
struct LibDp {
    sent: Arc<std::sync::atomic::AtomicU64>,
}

impl libccp::DatapathOps for LibDp {
    fn send_msg(&mut self, _msg: &[u8]) {
        self.sent.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
    }
}

/// Per-flow state libccp's callbacks write to.
struct LibConn {
    cwnd: u32,
    rate: u32,
}

impl libccp::CongestionOps for LibConn {
    fn set_cwnd(&mut self, cwnd: u32) {
        self.cwnd = cwnd;
    }

    fn set_rate_abs(&mut self, rate: u32) {
        self.rate = rate;
    }
}

fn lib_prims(p: &Primitives) -> libccp::Primitives {
    libccp::Primitives::default()
        .with_bytes_acked(p.bytes_acked)
        .with_packets_acked(p.packets_acked)
        .with_lost_pkts_sample(p.lost_pkts_sample)
        .with_rtt_sample_us(p.rtt_sample_us)
        .with_bytes_in_flight(p.bytes_in_flight)
        .with_packets_in_flight(p.packets_in_flight)
        .with_snd_cwnd(p.snd_cwnd)
        .with_rate_outgoing(p.rate_outgoing)
        .with_rate_incoming(p.rate_incoming)
}

fn run_libccp(conn: &mut libccp::Connection<'_, LibConn>, start: u64) -> BoxResult<u64> {
    let t = Instant::now();
    for i in start..start + ACKS_PER_ROUND {
        conn.load_primitives(lib_prims(&prims(i)));
        conn.invoke()?;
    }
    let ns = t.elapsed().as_nanos() as u64;
    black_box(conn.cwnd);
    Ok(ns)
}

// ---- our side ----------------------------------------------------------------------------

fn run_ours<C: Clock>(
    dp: &mut Datapath<Discard, C>,
    sid: u32,
    start: u64,
    tick: &dyn Fn(),
) -> BoxResult<u64> {
    let t = Instant::now();
    for i in start..start + ACKS_PER_ROUND {
        tick();
        let a = dp.invoke(sid, &prims(i))?;
        black_box(a);
    }
    Ok(t.elapsed().as_nanos() as u64)
}

/// What a datapath embedding our runtime libccp-style would implement.
trait CongestionOps {
    fn set_cwnd(&mut self, cwnd: u32);
    fn set_rate_abs(&mut self, rate: u32);
}

impl CongestionOps for LibConn {
    fn set_cwnd(&mut self, cwnd: u32) {
        self.cwnd = cwnd;
    }

    fn set_rate_abs(&mut self, rate: u32) {
        self.rate = rate;
    }
}

/// Our runtime driven the way libccp's Rust binding is: primitives stored under a mutex, a
/// second lock around `invoke`, results applied through a trait-object callback.
struct LockedOurs {
    inner: Arc<Mutex<(Datapath<Discard, MonotonicClock>, Primitives)>>,
    ops: Box<dyn CongestionOps>,
    sid: u32,
}

impl LockedOurs {
    fn load_primitives(&mut self, p: Primitives) {
        if let Ok(mut g) = self.inner.lock() {
            g.1 = p;
        }
    }

    fn invoke(&mut self) -> BoxResult<()> {
        let mut g = self.inner.lock().map_err(|_| "poisoned")?;
        let (dp, p) = &mut *g;
        let a = dp.invoke(self.sid, p)?;
        drop(g);
        if let Some(c) = a.cwnd_bytes {
            self.ops.set_cwnd(c);
        }
        if let Some(r) = a.rate_bytes_per_sec {
            self.ops.set_rate_abs(r);
        }
        Ok(())
    }
}

fn run_locked(l: &mut LockedOurs, start: u64) -> BoxResult<u64> {
    let t = Instant::now();
    for i in start..start + ACKS_PER_ROUND {
        l.load_primitives(prims(i));
        l.invoke()?;
    }
    Ok(t.elapsed().as_nanos() as u64)
}

// ---- statistics, integers only ------------------------------------------------------------

/// Picoseconds per ACK of one round.
fn ps_per_ack(ns: u64) -> u64 {
    ns * 1_000 / ACKS_PER_ROUND
}

/// The nearest-rank `per_mille` quantile of sorted samples (0 for none).
fn percentile(sorted: &[u64], per_mille: u32) -> u64 {
    stats::percentile(sorted, per_mille).unwrap_or(0)
}

/// `ps` as "12.345 ns".
fn fmt_ns(ps: u64) -> String {
    format!("{}.{:03} ns", ps / 1_000, ps % 1_000)
}

/// `num / den` as "0.873".
fn fmt_ratio(num: u64, den: u64) -> String {
    let r = num * 1_000 / den.max(1);
    format!("{}.{:03}", r / 1_000, r % 1_000)
}

fn main() -> BoxResult<()> {
    // `cargo bench` passes `--bench`; `cargo test --benches` passes nothing special: run a
    // short smoke version then.
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, warmup) = if full {
        (ROUNDS, WARMUP_ROUNDS)
    } else {
        (3, 1)
    };

    let (n_instrs, install) = install_msg(VM_PROGRAM_SRC, VM_PROGRAM_UID)?;

    // libccp, set up from portus's own bytes.
    let lib_sent = Arc::new(std::sync::atomic::AtomicU64::new(0));
    let lib_dp = libccp::DatapathBuilder::default()
        .with_ops(LibDp {
            sent: lib_sent.clone(),
        })
        .with_id(0)
        .init()?;
    let mut lib_conn = libccp::Connection::start(
        &lib_dp,
        LibConn { cwnd: 0, rate: 0 },
        libccp::FlowInfo::default()
            .with_init_cwnd(14_480)
            .with_mss(1448),
    )?;
    lib_dp.recv_msg(&mut install.clone())?;
    lib_dp.recv_msg(&mut change_prog_msg(1, VM_PROGRAM_UID)?)?;

    // Ours, three ways.
    let manual = ManualClock::new(0);
    let (mut ours_manual, sid_m) = our_datapath(manual.clone())?;
    let (mut ours_mono, sid_t) = our_datapath(MonotonicClock::new())?;
    let (dp_locked, sid_l) = our_datapath(MonotonicClock::new())?;
    let mut locked = LockedOurs {
        inner: Arc::new(Mutex::new((dp_locked, Primitives::default()))),
        ops: Box::new(LibConn { cwnd: 0, rate: 0 }),
        sid: sid_l,
    };
    let tick = || manual.advance_ns(1_000);
    let no_tick = || {};

    // Sanity: same number of reports from both VMs over the same ACKs.
    let lib_before = lib_sent.load(std::sync::atomic::Ordering::Relaxed);
    let ours_before = ours_manual.stats().reports_sent;
    run_libccp(&mut lib_conn, 1)?;
    run_ours(&mut ours_manual, sid_m, 1, &tick)?;
    let lib_reports = lib_sent.load(std::sync::atomic::Ordering::Relaxed) - lib_before;
    let our_reports = ours_manual.stats().reports_sent - ours_before;
    if lib_reports != our_reports || our_reports == 0 {
        return Err(
            format!("report counts differ: libccp {lib_reports}, ours {our_reports}").into(),
        );
    }
    if ours_manual.stats().vm_faults != 0 {
        return Err("our VM faulted".into());
    }

    let names = [
        "ours, ManualClock (advanced per ACK)",
        "ours, MonotonicClock (clock read per ACK, like libccp)",
        "ours, libccp-binding style (2 mutex locks + dyn callbacks, MonotonicClock)",
        "libccp ccp_invoke via libccp::Connection (load_primitives + invoke)",
    ];
    let mut samples: [Vec<u64>; 4] = Default::default();
    let mut start = ACKS_PER_ROUND + 1;
    for round in 0..warmup + rounds {
        // Rotate the order so no variant always runs right after another.
        for k in 0..4 {
            let v = (k + round) % 4;
            let ns = match v {
                0 => run_ours(&mut ours_manual, sid_m, start, &tick)?,
                1 => run_ours(&mut ours_mono, sid_t, start, &no_tick)?,
                2 => run_locked(&mut locked, start)?,
                _ => run_libccp(&mut lib_conn, start)?,
            };
            if round >= warmup {
                samples[v].push(ps_per_ack(ns));
            }
        }
        start += ACKS_PER_ROUND;
    }
    for s in &mut samples {
        s.sort_unstable();
    }

    println!(
        "program: {n_instrs} instructions, report every 100 ACKs; {rounds} rounds x {ACKS_PER_ROUND} ACKs per variant, interleaved"
    );
    println!(
        "sanity: {our_reports} reports from each VM over {ACKS_PER_ROUND} identical ACKs; our VM faults: {}",
        ours_manual.stats().vm_faults
    );
    println!("per-ACK time, over rounds: median [p10, p90]");
    for (name, s) in names.iter().zip(&samples) {
        println!(
            "  {name}: {} [{}, {}]",
            fmt_ns(percentile(s, 500)),
            fmt_ns(percentile(s, 100)),
            fmt_ns(percentile(s, 900)),
        );
    }
    let lib = percentile(&samples[3], 500);
    println!("ratios of medians (ours / libccp; < 1 means ours is faster):");
    for (name, s) in names.iter().zip(&samples).take(3) {
        println!("  {name}: {}", fmt_ratio(percentile(s, 500), lib));
    }
    drop(lib_conn);
    Ok(())
}
