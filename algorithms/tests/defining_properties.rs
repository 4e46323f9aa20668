//! Each algorithm's defining property, checked in the simulator on a grid of rates, RTTs and
//! buffers (`docs/algorithms.md`, "Defining properties"):
//!
//! | algorithm | property | checked as (second half of the run: "steady state") |
//! |---|---|---|
//! | Reno | fills the buffer, halves on a loss | median window at a reduction >= 70 % of BDP + buffer; median cut 0.4-0.6 (whole run) |
//! | Cubic | fills the buffer, `beta = 0.7` | the same, median cut 0.6-0.8 |
//! | BBR | ~1 BDP in flight, queue drained every `ProbeRTT` | mean queue <= 1 BDP; a 4-packet window every 10 s (+-1.5 s) |
//! | Copa | standing queue ~`1/delta` packets, ~0 loss | mean queue 0.5-7 packets; no drop |
//! | Vegas | `alpha..beta` packets queued | mean queue 1-5 packets (2-4 with a packet of slack) |
//! | Westwood+ | window after a loss ~ bandwidth estimate x min RTT | median window after a cut 0.6-1.4 BDP (whole run) |
//! | Illinois | `alpha`, `beta` adapt to delay | cuts of 1/8 when losses come at low delay (random loss), 1/2 at a full buffer |
//! | C2TCP | delay near its target (2 x min RTT) | mean RTT <= 2.3 x min RTT |
//! | Vivace | utility-optimal rate, low loss | utilization >= 80 %, loss <= 1 %, mean RTT <= 1.5 x min RTT |
//!
//! `cargo test -p ccp-algorithms --test defining_properties` checks a small grid and fails when a
//! property does not hold. `PROPERTY_GRID=full cargo test --release -p ccp-algorithms --test
//! defining_properties -- --nocapture` runs the larger grid (3 rates x 3 RTTs x 4 buffers
//! from 0.2 to 8 BDP) and prints the table of `docs/algorithms.md` instead of failing.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use ccp_algorithms::{
    AlgorithmConfig, BbrConfig, C2tcpConfig, Ccp, CopaConfig, CubicConfig, IllinoisConfig,
    RenoConfig, VegasConfig, VivaceConfig, WestwoodConfig,
};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowResult, FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, Simulation,
};

const MS: u64 = 1_000_000;
const MSS: u32 = 1448;
/// Bytes a full segment takes on the simulated link (payload and headers).
const FRAME_BYTES: f64 = 1514.0;

/// One condition of the grid.
#[derive(Debug, Clone, Copy)]
struct Cell {
    mbps: u64,
    rtt_ms: u64,
    buffer_bdp: f64,
    loss: f64,
}

impl Cell {
    const fn new(mbps: u64, rtt_ms: u64, buffer_bdp: f64) -> Self {
        Self {
            mbps,
            rtt_ms,
            buffer_bdp,
            loss: 0.0,
        }
    }

    fn bps(&self) -> u64 {
        self.mbps * 1_000_000
    }

    /// Packets per second the link carries.
    fn pkts_per_sec(&self) -> f64 {
        self.bps() as f64 / 8.0 / FRAME_BYTES
    }

    fn bdp_pkts(&self) -> f64 {
        self.pkts_per_sec() * self.rtt_ms as f64 / 1e3
    }

    fn buffer_bytes(&self) -> u64 {
        // At least two frames, as the evaluation harness does.
        ((self.bdp_pkts() * self.buffer_bdp).max(2.0) * FRAME_BYTES) as u64
    }

    fn label(&self) -> String {
        let loss = if self.loss > 0.0 {
            format!(", {} % loss", self.loss * 100.0)
        } else {
            String::new()
        };
        format!(
            "{} Mbit/s, {} ms, {} BDP{loss}",
            self.mbps, self.rtt_ms, self.buffer_bdp
        )
    }
}

/// What a run shows in its second half (steady state).
#[derive(Debug, Clone)]
struct Steady {
    cell: Cell,
    /// Link utilization, frames on the wire (1.0: the link is busy all the time).
    utilization: f64,
    /// Mean standing queue, packets (queueing delay x link rate, own transmission excluded).
    mean_queue_pkts: f64,
    /// Mean RTT over min RTT.
    rtt_ratio: f64,
    /// Drops at the bottleneck in the second half, and packets sent then.
    drops: u64,
    sent: u64,
    /// Window after / before each reduction of more than 10 % in one 10-ms sample, over the
    /// whole run (a sawtooth on a deep buffer at a long RTT is longer than any short run).
    cuts: Vec<f64>,
    /// Window before each such reduction over what the path holds (BDP plus buffer).
    before_cut_full: Vec<f64>,
    /// Window right after each such reduction, in BDPs.
    after_cut_bdp: Vec<f64>,
    /// Times the window was at most 4 packets after the first 2 s, s (start of each episode).
    small_window_s: Vec<f64>,
}

impl Steady {
    fn loss(&self) -> f64 {
        self.drops as f64 / self.sent.max(1) as f64
    }
}

fn sim<C: AlgorithmConfig + Send>(config: C, cell: Cell, secs: u64) -> FlowResult {
    let cfg = SimConfig {
        seed: 1,
        duration_ns: secs * 1_000 * MS,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: cell.bps() },
            buffer_bytes: cell.buffer_bytes(),
            loss: cell.loss,
        },
        flows: vec![FlowSpec::bulk(
            Scheme::Ccp {
                alg: C::NAME.to_string(),
            },
            cell.rtt_ms * MS / 2,
        )],
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 10 * MS,
        datapath: DatapathConfig::default(),
    };
    let r = Simulation::new(cfg, Some(LockstepAgent::new(Ccp::new(config))))
        .expect("config")
        .run()
        .expect("run");
    r.flows.into_iter().next().expect("one flow")
}

/// Runs `config` on `cell` for `secs` and measures the second half. The run is deterministic,
/// so the drops of the second half are those of the whole run minus those of a run of half
/// the length.
fn steady<C: AlgorithmConfig + Send + Clone>(config: C, cell: Cell, secs: u64) -> Steady {
    let half = sim(config.clone(), cell, secs / 2);
    let f = sim(config, cell, secs);
    assert_eq!(f.vm_faults, 0);
    let mid_ns = secs * 1_000 * MS / 2;
    let series = &f.series;
    let at = |t: u64| {
        series
            .iter()
            .take_while(|s| s.t_ns <= t)
            .last()
            .map_or(0, |s| s.delivered_bytes)
    };
    let delivered = at(secs * 1_000 * MS).saturating_sub(at(mid_ns));
    let utilization = delivered as f64 * 8.0 * (FRAME_BYTES / f64::from(MSS))
        / (secs as f64 / 2.0)
        / cell.bps() as f64;
    let q = &f.queue_delay_samples_us[f.queue_delay_samples_us.len() / 2..];
    let pkt_us = FRAME_BYTES * 8.0 / cell.bps() as f64 * 1e6;
    let mean_q_us = q.iter().map(|&x| f64::from(x)).sum::<f64>() / q.len().max(1) as f64;
    let rtts = &f.rtt_samples_us[f.rtt_samples_us.len() / 2..];
    let mean_rtt = rtts.iter().map(|&x| f64::from(x)).sum::<f64>() / rtts.len().max(1) as f64;
    let bdp_bytes = cell.bdp_pkts() * f64::from(MSS);
    let mut cuts = Vec::new();
    let mut before_cut_full = Vec::new();
    let holds_bytes = bdp_bytes + cell.buffer_bytes() as f64 * f64::from(MSS) / FRAME_BYTES;
    let mut after_cut_bdp = Vec::new();
    let mut small_window_s = Vec::new();
    let mut small = false;
    for w in series.windows(2) {
        let (a, b) = (f64::from(w[0].cwnd_bytes), f64::from(w[1].cwnd_bytes));
        if b < 0.9 * a {
            cuts.push(b / a);
            before_cut_full.push(a / holds_bytes);
            after_cut_bdp.push(b / bdp_bytes);
        }
        let is_small = w[1].cwnd_bytes <= 4 * MSS + MSS / 2;
        if is_small && !small && w[1].t_ns > 2_000 * MS {
            small_window_s.push(w[1].t_ns as f64 / 1e9);
        }
        small = is_small;
    }
    Steady {
        cell,
        utilization,
        mean_queue_pkts: (mean_q_us / pkt_us - 1.0).max(0.0),
        rtt_ratio: mean_rtt / (f.min_rtt_ns as f64 / 1e3).max(1.0),
        drops: f.packets_dropped.saturating_sub(half.packets_dropped),
        sent: f.packets_sent.saturating_sub(half.packets_sent),
        cuts,
        before_cut_full,
        after_cut_bdp,
        small_window_s,
    }
}

fn median(v: &[f64]) -> Option<f64> {
    let mut v = v.to_vec();
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied()
}

/// A property of one algorithm: its name, what it says, and the check of one run (`Ok` with
/// the numbers shown, or `Err` with why it does not hold).
struct Property {
    alg: &'static str,
    says: &'static str,
    secs: u64,
    /// The small grid of `make test` for this algorithm.
    grid: &'static [Cell],
    run: fn(Cell, u64) -> Steady,
    check: fn(&Steady) -> Result<String, String>,
}

/// Message of a run in which the property cannot be seen: no reduction after slow start.
const NOT_SEEN: &str = "n/a: no reduction after slow start within the run";

/// The reductions after the first (the end of slow start, where the window grew in the same
/// report and an estimate may still lag) and not to the loss window (timeouts): (after /
/// before, before / (BDP + buffer), after in BDPs).
fn steady_cuts(s: &Steady) -> Vec<(f64, f64, f64)> {
    (1..s.cuts.len())
        .map(|i| (s.cuts[i], s.before_cut_full[i], s.after_cut_bdp[i]))
        .filter(|&(_, _, after)| after * s.cell.bdp_pkts() > 4.5)
        .collect()
}

fn fills_buffer_and_cuts(s: &Steady, lo: f64, hi: f64) -> Result<String, String> {
    let cuts = steady_cuts(s);
    let fill = median(&cuts.iter().map(|c| c.1).collect::<Vec<_>>()).ok_or(NOT_SEEN)?;
    let cut = median(&cuts.iter().map(|c| c.0).collect::<Vec<_>>()).ok_or(NOT_SEEN)?;
    let shown = format!(
        "median window at a cut {:.0} % of BDP + buffer, median cut {cut:.2}",
        fill * 100.0
    );
    if fill < 0.7 {
        return Err(format!("buffer not filled: {shown}"));
    }
    if !(lo..=hi).contains(&cut) {
        return Err(format!("cut outside {lo}-{hi}: {shown}"));
    }
    Ok(shown)
}

fn bbr(s: &Steady) -> Result<String, String> {
    let q_bdp = s.mean_queue_pkts / s.cell.bdp_pkts();
    let gaps: Vec<f64> = s.small_window_s.windows(2).map(|w| w[1] - w[0]).collect();
    let shown = format!(
        "mean queue {q_bdp:.2} BDP, ProbeRTT at {:?} s",
        s.small_window_s
            .iter()
            .map(|t| (t * 10.0).round() / 10.0)
            .collect::<Vec<_>>()
    );
    if q_bdp > 1.0 {
        return Err(format!("more than 1 BDP queued: {shown}"));
    }
    if gaps.is_empty() || gaps.iter().any(|g| !(8.5..=11.5).contains(g)) {
        return Err(format!("ProbeRTT not every ~10 s: {shown}"));
    }
    Ok(shown)
}

fn copa(s: &Steady) -> Result<String, String> {
    let shown = format!(
        "mean queue {:.1} pkts, {} drops, utilization {:.2}",
        s.mean_queue_pkts, s.drops, s.utilization
    );
    if !(0.5..=7.0).contains(&s.mean_queue_pkts) || s.drops > 0 {
        return Err(shown);
    }
    Ok(shown)
}

fn vegas(s: &Steady) -> Result<String, String> {
    let shown = format!("mean queue {:.1} pkts", s.mean_queue_pkts);
    if !(1.0..=5.0).contains(&s.mean_queue_pkts) {
        return Err(shown);
    }
    Ok(shown)
}

fn westwood(s: &Steady) -> Result<String, String> {
    let steady: Vec<f64> = steady_cuts(s).iter().map(|c| c.2).collect();
    let w = median(&steady).ok_or(NOT_SEEN)?;
    let shown = format!(
        "median window after a cut {w:.2} BDP ({} reductions)",
        steady.len()
    );
    if !(0.6..=1.4).contains(&w) {
        return Err(shown);
    }
    Ok(shown)
}

fn c2tcp(s: &Steady) -> Result<String, String> {
    let shown = format!(
        "mean RTT {:.2} x min RTT, utilization {:.2}",
        s.rtt_ratio, s.utilization
    );
    if s.rtt_ratio > 2.3 {
        return Err(shown);
    }
    Ok(shown)
}

fn vivace(s: &Steady) -> Result<String, String> {
    let shown = format!(
        "utilization {:.2}, loss {:.2} %, mean RTT {:.2} x min",
        s.utilization,
        s.loss() * 100.0,
        s.rtt_ratio
    );
    if s.utilization < 0.8 || s.loss() > 0.01 || s.rtt_ratio > 1.5 {
        return Err(shown);
    }
    Ok(shown)
}

fn properties() -> Vec<Property> {
    vec![
        Property {
            alg: "reno",
            says: "fills the buffer; beta 0.5",
            secs: 20,
            grid: &SAWTOOTH_GRID,
            run: |c, s| steady(RenoConfig::default(), c, s),
            check: |s| fills_buffer_and_cuts(s, 0.4, 0.6),
        },
        Property {
            alg: "cubic",
            says: "fills the buffer; beta 0.7",
            secs: 20,
            grid: &SAWTOOTH_GRID,
            run: |c, s| steady(CubicConfig::default(), c, s),
            check: |s| fills_buffer_and_cuts(s, 0.6, 0.8),
        },
        Property {
            alg: "bbr",
            says: "<= 1 BDP queued; ProbeRTT every 10 s",
            secs: 26,
            grid: &SMALL_GRID,
            run: |c, s| steady(BbrConfig::default(), c, s),
            check: bbr,
        },
        Property {
            alg: "copa",
            says: "standing queue ~1/delta = 2 pkts; no loss",
            secs: 20,
            grid: &SMALL_GRID,
            run: |c, s| steady(CopaConfig::default(), c, s),
            check: copa,
        },
        Property {
            alg: "vegas",
            says: "alpha..beta = 2-4 pkts queued",
            secs: 20,
            grid: &SMALL_GRID,
            run: |c, s| steady(VegasConfig::default(), c, s),
            check: vegas,
        },
        Property {
            alg: "westwood",
            says: "window after a loss ~ BWE x min RTT",
            secs: 20,
            grid: &SAWTOOTH_GRID,
            run: |c, s| steady(WestwoodConfig::default(), c, s),
            check: westwood,
        },
        Property {
            alg: "c2tcp",
            says: "RTT near its target 2 x min RTT",
            secs: 20,
            grid: &SMALL_GRID,
            run: |c, s| steady(C2tcpConfig::default(), c, s),
            check: c2tcp,
        },
        Property {
            alg: "vivace",
            says: "high utilization, low loss and delay",
            secs: 20,
            grid: &SMALL_GRID,
            run: |c, s| steady(VivaceConfig::default(), c, s),
            check: vivace,
        },
    ]
}

/// Illinois: `beta` follows the delay at the loss (1/8 at low delay, 1/2 near the largest), so
/// random losses on an empty queue cut little and buffer overflows cut by half.
fn illinois(random: &Steady, overflow: &Steady) -> Result<String, String> {
    let cuts = |s: &Steady| steady_cuts(s).iter().map(|c| c.0).collect::<Vec<_>>();
    let low = median(&cuts(random)).ok_or(NOT_SEEN)?;
    let high = median(&cuts(overflow)).ok_or(NOT_SEEN)?;
    let shown = format!("median cut {low:.2} under random loss, {high:.2} at a full buffer");
    if low < 0.8 || !(0.4..=0.65).contains(&high) {
        return Err(shown);
    }
    Ok(shown)
}

const SMALL_GRID: [Cell; 4] = [
    Cell::new(10, 20, 0.5),
    Cell::new(10, 80, 4.0),
    Cell::new(40, 20, 4.0),
    Cell::new(40, 80, 1.0),
];

/// Cells where a loss-based sawtooth repeats within 20 s (reductions after slow start).
const SAWTOOTH_GRID: [Cell; 4] = [
    Cell::new(10, 20, 0.5),
    Cell::new(10, 20, 2.0),
    Cell::new(40, 20, 1.0),
    Cell::new(20, 40, 0.5),
];

/// Cells where a property is known not to hold, with the reason (`docs/algorithms.md`).
fn known_exception(alg: &str, c: &Cell) -> Option<&'static str> {
    match alg {
        // BBR v1 keeps 2 BDP in flight: a buffer under 1 BDP overflows at every gain cycle.
        "bbr" if c.buffer_bdp < 1.0 => Some("BBR v1 overflows buffers under 1 BDP"),
        // With Linux's delayed ACKs and the htb token burst in the simulator, Vivace's rate
        // probes (+/-5 % for a monitor interval, sent at once) overflow a buffer of a few
        // frames: 10 Mbit/s x 20 ms x 0.5 BDP holds 8; 16.8 % loss there (kernel TCP: 13.9 %
        // at 0.2 BDP). Its cells of 30 frames and more hold.
        "vivace" if (c.mbps * c.rtt_ms) as f64 * 125.0 * c.buffer_bdp < 10.0 * 1514.0 => {
            Some("Vivace's probes overflow a buffer of under 10 frames")
        }
        _ => None,
    }
}

#[test]
fn every_algorithm_shows_its_defining_property_on_a_small_grid() {
    let mut failures = Vec::new();
    for p in properties() {
        for &cell in p.grid {
            let s = (p.run)(cell, p.secs);
            let verdict = (p.check)(&s);
            println!("{:9} {:32} {:?}", p.alg, cell.label(), verdict);
            if let Err(why) = verdict
                && known_exception(p.alg, &cell).is_none()
            {
                failures.push(format!("{} ({}) on {}: {why}", p.alg, p.says, cell.label()));
            }
        }
    }
    let random = Cell {
        loss: 0.01,
        ..Cell::new(40, 40, 4.0)
    };
    let overflow = Cell::new(40, 40, 1.0);
    let v = illinois(
        &steady(IllinoisConfig::default(), random, 20),
        &steady(IllinoisConfig::default(), overflow, 20),
    );
    println!(
        "illinois  {:32} {v:?}",
        "40 Mbit/s, 40 ms: 1 % loss / 1 BDP"
    );
    if let Err(why) = v {
        failures.push(format!("illinois: {why}"));
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn bbr_probes_rtt_every_ten_seconds_and_drains_the_queue() {
    // Linux bbr_update_min_rtt: the filter refreshes on `<` or on expiry, so ProbeRTT comes
    // every 10 s on a path without jitter; before the fix (`<=`) it never came.
    let cell = Cell::new(20, 40, 2.0);
    let s = steady(BbrConfig::default(), cell, 32);
    let gaps: Vec<f64> = s.small_window_s.windows(2).map(|w| w[1] - w[0]).collect();
    assert!(s.small_window_s.len() >= 2, "{:?}", s.small_window_s);
    assert!(
        gaps.iter().all(|g| (9.5..=11.0).contains(g)),
        "ProbeRTT at {:?}",
        s.small_window_s
    );
    // During ProbeRTT the flight is 4 packets: the queue is empty and packets see the base RTT.
    assert!(s.rtt_ratio < 1.5, "mean RTT {:.2} x min RTT", s.rtt_ratio);
}

/// The larger grid for `docs/algorithms.md`; prints a markdown table, fails only on a panic.
#[test]
fn full_grid_table() {
    if std::env::var_os("PROPERTY_GRID").is_none_or(|v| v != "full") {
        return;
    }
    let mut cells = Vec::new();
    for mbps in [10, 50, 100] {
        for rtt_ms in [20, 50, 100] {
            for buffer_bdp in [0.2, 1.0, 4.0, 8.0] {
                cells.push(Cell::new(mbps, rtt_ms, buffer_bdp));
            }
        }
    }
    println!("| algorithm | property | holds in | not seen | where it does not (numbers) |");
    println!("|---|---|---|---|---|");
    for p in properties() {
        let (mut holds, mut unseen) = (0, 0);
        let mut misses = Vec::new();
        for &cell in &cells {
            let s = (p.run)(cell, p.secs);
            match (p.check)(&s) {
                Ok(_) => holds += 1,
                Err(why) if why == NOT_SEEN => unseen += 1,
                Err(why) => misses.push(format!("{}: {why}", cell.label())),
            }
        }
        println!(
            "| {} | {} | {holds}/{} | {unseen} | {} |",
            p.alg,
            p.says,
            cells.len() - unseen,
            misses.join("; ")
        );
    }
    let (mut holds, mut unseen) = (0, 0);
    let mut misses = Vec::new();
    for mbps in [10, 50, 100] {
        for rtt_ms in [20, 50, 100] {
            let random = Cell {
                loss: 0.01,
                ..Cell::new(mbps, rtt_ms, 4.0)
            };
            let overflow = Cell::new(mbps, rtt_ms, 1.0);
            match illinois(
                &steady(IllinoisConfig::default(), random, 20),
                &steady(IllinoisConfig::default(), overflow, 20),
            ) {
                Ok(_) => holds += 1,
                Err(why) if why == NOT_SEEN => unseen += 1,
                Err(why) => misses.push(format!("{mbps} Mbit/s, {rtt_ms} ms: {why}")),
            }
        }
    }
    println!(
        "| illinois | beta 1/8 at low delay, 1/2 at a full buffer | {holds}/{} | {unseen} | {} |",
        9 - unseen,
        misses.join("; ")
    );
}
