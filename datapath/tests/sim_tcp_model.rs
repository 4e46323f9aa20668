//! The simulator's Linux-like TCP behaviours (`sim::TcpModel`) end to end, each against what
//! Linux does: delayed-ACK timing, one reduction per recovery with PRR, the `htb` token burst,
//! the smoothed-RTT series, and the loss probe of a short flow's lost tail.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/aimd.rs"]
mod aimd;

use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, RecoveryModel, Scheme, SimConfig, SimResult, Simulation,
    TcpModel, WIRE_OVERHEAD_BYTES,
};

const MS: u64 = 1_000_000;
const MSS: u32 = 1448;

fn config(bps: u64, buffer_bytes: u64, loss: f64, flows: Vec<FlowSpec>, ms: u64) -> SimConfig {
    SimConfig {
        seed: 7,
        duration_ns: ms * MS,
        link: LinkSpec {
            rate: LinkRate::Constant { bps },
            buffer_bytes,
            loss,
        },
        flows,
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 0,
        datapath: DatapathConfig::default(),
    }
}

fn run(cfg: SimConfig, model: TcpModel) -> SimResult {
    Simulation::new(cfg, None)
        .expect("config")
        .with_model(model)
        .run()
        .expect("run")
}

/// Serialization of one full frame at `bps`, ns.
fn frame_ns(bps: u64) -> u64 {
    u64::from(MSS + WIRE_OVERHEAD_BYTES) * 8 * 1_000_000_000 / bps
}

/// A window of one segment never has two full segments unacknowledged: after the 16
/// quick-acks of a new connection, every segment waits for the delayed-ACK timer, so its RTT
/// is the path's plus `TCP_DELACK_MIN` (40 ms); without delayed ACKs it is the path's.
#[test]
fn a_lone_segment_waits_for_the_40_ms_delayed_ack_timer() {
    let bps = 100_000_000;
    let flow = FlowSpec::bulk(Scheme::Fixed { cwnd_bytes: MSS }, 10 * MS);
    // With the token burst a lone frame leaves an idle link at once; serialized, it takes
    // one frame time.
    let path = 20 * MS + frame_ns(bps);
    for (model, quick_rtt, later_rtt) in [
        (TcpModel::default(), 20 * MS, 60 * MS),
        (TcpModel::legacy(), path, path),
    ] {
        let r = run(
            config(bps, 1_000_000, 0.0, vec![flow.clone()], 3_000),
            model,
        );
        let rtts = &r.flows[0].rtt_samples_us;
        assert!(rtts.len() > 30, "{} samples", rtts.len());
        let us = |ns: u64| (ns / 1_000) as u32;
        for (i, &rtt) in rtts.iter().enumerate() {
            let want = if i < 16 { quick_rtt } else { later_rtt };
            assert_eq!(rtt, us(want), "sample {i} with {model:?}");
        }
    }
}

/// Two segments per window: the second completes a pair and is acknowledged at once (one ACK
/// for both), so no ACK waits for the timer and the window moves every path RTT.
#[test]
fn every_second_segment_is_acknowledged_at_once() {
    let bps = 100_000_000;
    let flow = FlowSpec::bulk(
        Scheme::Fixed {
            cwnd_bytes: 2 * MSS,
        },
        10 * MS,
    );
    let r = run(
        config(bps, 1_000_000, 0.0, vec![flow], 3_000),
        TcpModel::default(),
    );
    let f = &r.flows[0];
    let max = *f.rtt_samples_us.iter().max().unwrap();
    assert!(
        u64::from(max) < 22 * MS / 1_000 + 1_000,
        "no delayed-ACK wait: max RTT {max} µs"
    );
    // Half as many ACKs as packets once quick-ack mode is over.
    let acks = f.rtt_samples_us.len() as u64;
    assert!(
        acks < f.packets_sent * 6 / 10,
        "{acks} ACKs for {} packets",
        f.packets_sent
    );
}

/// The testbed's `htb` passes its burst (two frames at 10 Mbit/s) at once: of an initial
/// window of 10 segments offered to a 4-frame buffer, 3 leave at once and 4 wait, so 3 are
/// dropped; with plain serialization the frame being sent counts against the buffer and 6
/// are dropped.
#[test]
fn the_token_burst_takes_part_of_the_initial_window() {
    let wire = u64::from(MSS + WIRE_OVERHEAD_BYTES);
    let flow = FlowSpec::bulk(
        Scheme::Fixed {
            cwnd_bytes: 10 * MSS,
        },
        10 * MS,
    );
    let cfg = || config(10_000_000, 4 * wire, 0.0, vec![flow.clone()], 5);
    let with = run(cfg(), TcpModel::default());
    let without = run(
        cfg(),
        TcpModel {
            link_burst: false,
            ..TcpModel::default()
        },
    );
    assert_eq!(with.tail_drops, 3);
    assert_eq!(without.tail_drops, 6);
}

/// A slow-start overshoot on 50 Mbit/s, 100 ms, 0.5 BDP drops many packets over one window:
/// Linux's recovery reduces once (Reno: to half) and PRR keeps the flight near `ssthresh`, so
/// the window after recovery is about half the window at the loss. The earlier time-based rule
/// cut once per smoothed RTT, i.e. again and again while the queue's RTT grew, and ended far
/// lower. Utilization follows (the kernel gets 0.94 here, `docs/calibration.md`).
#[test]
fn an_overshoot_is_one_reduction_with_linux_recovery() {
    let bps = 50_000_000;
    let bdp = bps / 8 / 10;
    let flow = FlowSpec::bulk(Scheme::Reno, 50 * MS);
    let cfg = || {
        let mut c = config(bps, bdp / 2, 0.0, vec![flow.clone()], 20_000);
        c.sample_interval_ns = 10 * MS;
        c
    };
    // The window at its peak and one second later (recovery is over by then).
    let min_after_loss = |r: &SimResult| {
        let s = &r.flows[0].series;
        let peak = s.iter().map(|x| x.cwnd_bytes).max().unwrap();
        let at = s.iter().position(|x| x.cwnd_bytes == peak).unwrap();
        (peak, s[at + 100].cwnd_bytes)
    };
    let linux = run(cfg(), TcpModel::default());
    let legacy = run(
        cfg(),
        TcpModel {
            recovery: RecoveryModel::TimeBased,
            ..TcpModel::default()
        },
    );
    let (peak, low) = min_after_loss(&linux);
    let (lpeak, llow) = min_after_loss(&legacy);
    println!("linux: peak {peak} then {low}; time-based: peak {lpeak} then {llow}");
    let ratio = f64::from(low) / f64::from(peak);
    assert!(
        (0.48..0.52).contains(&ratio),
        "one halving: peak {peak}, a second later {low}"
    );
    assert!(
        f64::from(llow) < 0.3 * f64::from(lpeak),
        "time-based: several cuts, peak {lpeak}, a second later {llow}"
    );
    let util = |r: &SimResult| r.flows[0].throughput_bps(r.duration_ns) / bps as f64;
    assert!(
        util(&linux) > util(&legacy) + 0.1,
        "{} vs {}",
        util(&linux),
        util(&legacy)
    );
}

/// The smoothed-RTT series has one sample per 10 ms of the flow, and on an empty path it
/// sits at the propagation RTT (plus serialization).
#[test]
fn the_srtt_series_is_sampled_every_10_ms() {
    let bps = 100_000_000;
    let flow = FlowSpec::bulk(
        Scheme::Fixed {
            cwnd_bytes: 2 * MSS,
        },
        10 * MS,
    );
    let r = run(
        config(bps, 1_000_000, 0.0, vec![flow], 1_000),
        TcpModel::default(),
    );
    let s = &r.flows[0].srtt_samples_us;
    // The first sample comes once an RTT was measured (after 20 ms).
    assert!((97..=99).contains(&s.len()), "{} samples", s.len());
    let last = *s.last().unwrap();
    assert!((20_000..20_400).contains(&last), "srtt {last} µs");
}

/// A flow that fits in its initial window and loses its tail (nine segments into a five-frame
/// buffer behind the shaper's burst) sends nothing when its first ACKs arrive, but they re-arm its timer: the loss probe
/// goes 2 srtt after the last ACK, as in Linux (`FLAG_SET_XMIT_TIMER`), not at the 1 s the
/// initial RTO set before any RTT was known.
#[test]
fn a_short_flows_lost_tail_is_probed_two_srtt_after_its_last_ack() {
    let bps = 10_000_000;
    let frame = u64::from(MSS + WIRE_OVERHEAD_BYTES);
    for scheme in [Scheme::Cubic, Scheme::Reno] {
        let mut flow = FlowSpec::bulk(scheme.clone(), 10 * MS);
        flow.size_bytes = Some(9 * u64::from(MSS));
        let r = run(
            config(bps, 5 * frame, 0.0, vec![flow], 3_000),
            TcpModel::default(),
        );
        let f = &r.flows[0];
        assert!(
            f.packets_dropped >= 1,
            "{scheme:?}: {} dropped",
            f.packets_dropped
        );
        assert_eq!(
            f.timeouts, 0,
            "{scheme:?}: the probe, not an RTO, repairs the tail"
        );
        // About 20 ms path + 6 ms queue per round: the first round, a probe about 2 srtt
        // after the last ACK, the repair; far below the initial RTO's 1 s.
        let done = f.completion_ns.expect("completes");
        assert!(done < 300 * MS, "{scheme:?}: completed at {} ms", done / MS);
    }
}

/// A run whose flows have all ended stops there: nothing is left to sample, so a short
/// flow given ten minutes of virtual time costs what the flow itself costs, with the same
/// results as a run whose duration ends just after it.
#[test]
fn a_run_ends_with_its_last_finite_flow() {
    let bps = 20_000_000;
    let mut flow = FlowSpec::bulk(Scheme::Cubic, 10 * MS);
    flow.size_bytes = Some(100 * u64::from(MSS));
    let long = run(
        config(bps, 200_000, 0.0, vec![flow.clone()], 600_000),
        TcpModel::default(),
    );
    let short = run(
        config(bps, 200_000, 0.0, vec![flow], 1_000),
        TcpModel::default(),
    );
    let (l, s) = (&long.flows[0], &short.flows[0]);
    assert!(
        l.completion_ns.is_some_and(|t| t < 1_000 * MS),
        "{:?}",
        l.completion_ns
    );
    assert_eq!(l.completion_ns, s.completion_ns);
    assert_eq!(l.srtt_samples_us, s.srtt_samples_us);
    assert_eq!(long.events, short.events, "events after the flow ended");
}

/// A datapath program that reports when `Micros` passes the last RTT sample reports once per
/// RTT (and at once on a loss) on the kernel, where each ACK reaches the CCP runtime a little late (the BPF ring buffer
/// and the bridge). On a path whose RTT never varies, handling every ACK at its own exact time
/// makes `Micros` equal the RTT sample at the same ACK one round later: no report then, so
/// reports slip by a round now and then. With the record delay (the default) the AIMD test
/// algorithm, one MSS per report, reports about once per path RTT.
#[test]
fn the_record_delay_keeps_per_rtt_reports_from_slipping_on_exact_ties() {
    let count = |model: TcpModel| {
        let alg = aimd::Aimd::default();
        let counters = alg.counters.clone();
        let agent = ccp_datapath::sim::LockstepAgent::new(alg);
        let flow = FlowSpec::bulk(Scheme::Ccp { alg: "aimd".into() }, 10 * MS);
        // 50 Mbit/s, 20 ms, 1 % random loss: the window stays small, its ACKs come in one
        // tight cluster per round, and the RTT never varies.
        let cfg = config(50_000_000, 10_000_000, 0.01, vec![flow], 2_000);
        Simulation::new(cfg, Some(agent))
            .expect("config")
            .with_model(model)
            .run()
            .expect("run");
        counters.reports.load(std::sync::atomic::Ordering::Relaxed)
    };
    let with = count(TcpModel::default());
    let exact = count(TcpModel {
        ccp_record_delay_ns: 0,
        ..TcpModel::default()
    });
    println!(
        "reports in 2 s (about 100 path RTTs, and one per loss episode): {with} with the record delay, {exact} without"
    );
    assert!((90..=110).contains(&with), "{with} reports");
    assert!(exact * 100 < with * 95, "{exact} reports without the delay");
}

/// Linux's receiver offers 64 KiB first (45 segments) and grows its buffer once per RTT from
/// what the application read (`rwnd`: dynamic right-sizing), so a fixed 1,000-packet window on
/// a clean 100 ms path goes out over the first RTTs as the receiver allows, while without a
/// receive window it goes out at once; once the buffer has grown both deliver the same.
#[test]
fn the_receivers_window_holds_back_a_large_window_for_its_first_rtts() {
    let bps = 200_000_000;
    let flow = FlowSpec::bulk(
        Scheme::Fixed {
            cwnd_bytes: 1000 * MSS,
        },
        50 * MS,
    );
    let delivered_by = |r: &SimResult, t_ns: u64| {
        r.flows[0]
            .series
            .iter()
            .take_while(|s| s.t_ns <= t_ns)
            .last()
            .map_or(0, |s| s.delivered_bytes)
    };
    let mut rates = Vec::new();
    for (model, first_rtts) in [
        (TcpModel::with_receive_window(), 45..=200),
        (TcpModel::default(), 1000..=2000),
    ] {
        let mut cfg = config(bps, 50_000_000, 0.0, vec![flow.clone()], 3_000);
        cfg.sample_interval_ns = 10 * MS;
        let r = run(cfg, model);
        // Two RTTs in: the first flight (and with a receive window, about one more) is in.
        let segs = delivered_by(&r, 210 * MS) / u64::from(MSS);
        assert!(
            first_rtts.contains(&segs),
            "{segs} segments delivered in two RTTs with {model:?}"
        );
        rates.push(delivered_by(&r, 3_000 * MS) - delivered_by(&r, 2_000 * MS));
    }
    let (with, without) = (rates[0] as f64, rates[1] as f64);
    assert!(
        (with / without - 1.0).abs() < 0.02,
        "after two seconds: {with} vs {without} bytes per second"
    );
}
