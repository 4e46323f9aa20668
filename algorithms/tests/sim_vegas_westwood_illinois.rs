//! Vegas, Westwood+ and Illinois in the simulator, through the portus adapter in lock-step with
//! virtual time, on a 10 Mbit/s, 50 ms path: the behaviour their papers claim. Also the
//! suite's property invariants (no panic, no NaN, window within [2 MSS, 2^32 - 1], a timeout
//! shrinks the window) on random report sequences for these three.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::marker::PhantomData;

use ccp_algorithms::{
    AlgorithmConfig, Ccp, FlowStart, Handoff, IllinoisConfig, Measurement, Pacing, RenoConfig,
    VegasConfig, WestwoodConfig,
};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, SimResult, Simulation,
};
use proptest::prelude::*;

const MS: u64 = 1_000_000;
const MSS: u32 = 1448;
const LINK_BPS: u64 = 10_000_000;
/// 10 Mbit/s x 50 ms.
const BDP_BYTES: u64 = LINK_BPS / 8 / 20;
/// One packet's transmission time at 10 Mbit/s, µs.
const PKT_US: f64 = MSS as f64 * 8.0 / LINK_BPS as f64 * 1e6;

struct Path {
    buffer_bytes: u64,
    loss: f64,
    flows: usize,
    secs: u64,
    seed: u64,
}

fn run<C: AlgorithmConfig + Send>(config: C, path: &Path) -> SimResult {
    let agent = LockstepAgent::new(Ccp::new(config));
    let cfg = SimConfig {
        seed: path.seed,
        duration_ns: path.secs * 1_000 * MS,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: LINK_BPS },
            buffer_bytes: path.buffer_bytes,
            loss: path.loss,
        },
        flows: (0..path.flows)
            .map(|_| {
                FlowSpec::bulk(
                    Scheme::Ccp {
                        alg: C::NAME.to_string(),
                    },
                    25 * MS,
                )
            })
            .collect(),
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 10 * MS,
        datapath: DatapathConfig::default(),
    };
    Simulation::new(cfg, Some(agent))
        .expect("config")
        .run()
        .expect("run")
}

fn total_utilization(r: &SimResult) -> f64 {
    r.flows
        .iter()
        .map(|f| f.throughput_bps(r.duration_ns))
        .sum::<f64>()
        / LINK_BPS as f64
}

#[test]
fn vegas_keeps_between_alpha_and_beta_packets_queued() {
    // Brakmo & Peterson §3.2: alpha..beta = 2..4 packets queued, a few ms at 10 Mbit/s.
    let r = run(
        VegasConfig::default(),
        &Path {
            buffer_bytes: 5 * BDP_BYTES,
            loss: 0.0,
            flows: 1,
            secs: 20,
            seed: 7,
        },
    );
    let f = &r.flows[0];
    let util = total_utilization(&r);
    let q_us = f.mean_queue_delay_us();
    let q_pkts = q_us / PKT_US;
    println!(
        "vegas: utilization {util:.3}, mean queueing delay {:.2} ms = {q_pkts:.2} packets, {} drops",
        q_us / 1e3,
        f.packets_dropped
    );
    assert!(util >= 0.85, "utilization {util:.3}");
    assert!(
        (1.0..=6.0).contains(&q_pkts),
        "mean queue {q_pkts:.2} packets"
    );
    assert_eq!(f.packets_dropped, 0, "Vegas never fills a 5-BDP buffer");
    assert_eq!(f.vm_faults, 0);
}

#[test]
fn westwood_beats_reno_under_random_loss() {
    // Mascolo et al. §4 / Grieco & Mascolo: BWE * RTTmin does not halve the window on a
    // random loss.
    let path = Path {
        buffer_bytes: 5 * BDP_BYTES,
        loss: 0.01,
        flows: 1,
        secs: 30,
        seed: 11,
    };
    let w = run(WestwoodConfig::default(), &path);
    let r = run(RenoConfig::default(), &path);
    let (wu, ru) = (total_utilization(&w), total_utilization(&r));
    println!(
        "1 % loss: westwood utilization {wu:.3} ({} random drops), reno {ru:.3} ({} random drops); ratio {:.2}",
        w.random_drops,
        r.random_drops,
        wu / ru
    );
    assert!(wu > 1.2 * ru, "westwood {wu:.3} vs reno {ru:.3}");
    assert_eq!(w.flows[0].vm_faults, 0);
}

#[test]
fn illinois_fills_a_one_bdp_buffer() {
    let r = run(
        IllinoisConfig::default(),
        &Path {
            buffer_bytes: BDP_BYTES,
            loss: 0.0,
            flows: 1,
            secs: 30,
            seed: 7,
        },
    );
    let f = &r.flows[0];
    let util = total_utilization(&r);
    println!(
        "illinois: utilization {util:.3}, {} drops, {} timeouts, mean queueing delay {:.1} ms",
        f.packets_dropped,
        f.timeouts,
        f.mean_queue_delay_us() / 1e3
    );
    assert!(util >= 0.90, "utilization {util:.3}");
    assert_eq!(f.vm_faults, 0);
}

#[test]
fn two_illinois_flows_share_fairly() {
    let r = run(
        IllinoisConfig::default(),
        &Path {
            buffer_bytes: BDP_BYTES,
            loss: 0.0,
            flows: 2,
            secs: 40,
            seed: 3,
        },
    );
    let x = common::late_throughputs(&r, 20_000 * MS);
    let j = common::jain(&x);
    println!(
        "illinois x2: {:.2} / {:.2} Mbit/s over the last 20 s, Jain {j:.3}, utilization {:.3}",
        x[0] / 1e6,
        x[1] / 1e6,
        total_utilization(&r)
    );
    assert!(j >= 0.9, "Jain {j:.3}");
}

/// Vegas's dead zone lets each flow keep anywhere between `alpha` and `beta` packets queued,
/// and throughput shares follow the queued packets, so two Vegas flows can settle at up to
/// 1:2 (Jain 0.9) and stay there: the bound is 0.85, not 0.9 (measured 0.907 here).
#[test]
fn two_vegas_flows_share_within_the_dead_zone() {
    let r = run(
        VegasConfig::default(),
        &Path {
            buffer_bytes: 5 * BDP_BYTES,
            loss: 0.0,
            flows: 2,
            secs: 40,
            seed: 3,
        },
    );
    let x = common::late_throughputs(&r, 20_000 * MS);
    let j = common::jain(&x);
    println!(
        "vegas x2: {:.2} / {:.2} Mbit/s over the last 20 s, Jain {j:.3}, utilization {:.3}",
        x[0] / 1e6,
        x[1] / 1e6,
        total_utilization(&r)
    );
    assert!(j >= 0.85, "Jain {j:.3}");
}

/// Hands over at 10 s on a 1-BDP path: the window stays within [cwnd/2, 2 cwnd] for the
/// first RTT and does not slow-start (doubling every ~80 ms RTT) in the next second.
fn check_handoff<A, B>(label: &str)
where
    A: AlgorithmConfig + Default,
    B: AlgorithmConfig + Default,
{
    let at_ns = 10_000 * MS;
    let r = run(
        common::SwapConfig::<A, B> {
            at_us: at_ns / 1_000,
            algs: PhantomData,
        },
        &Path {
            buffer_bytes: BDP_BYTES,
            loss: 0.0,
            flows: 1,
            secs: 15,
            seed: 7,
        },
    );
    let util = total_utilization(&r);
    let w = common::HandoffWindows::of(&r, at_ns, MSS);
    w.check_first_rtt(label, util);
    w.check_next_second(label, 2.0 * w.before);
    assert!(util >= 0.85, "{label}: utilization {util:.3}");
    assert_eq!(r.flows[0].vm_faults, 0);
}

#[test]
fn adopting_a_handoff_mid_flow_does_not_restart_slow_start() {
    check_handoff::<RenoConfig, VegasConfig>("reno -> vegas");
    check_handoff::<RenoConfig, WestwoodConfig>("reno -> westwood");
    check_handoff::<RenoConfig, IllinoisConfig>("reno -> illinois");
    check_handoff::<IllinoisConfig, VegasConfig>("illinois -> vegas");
    check_handoff::<WestwoodConfig, RenoConfig>("westwood -> reno");
}

// ---- The suite's property invariants, for these three algorithms. ----

// The suite-wide invariants (random report sequences) run for every algorithm in
// tests/property.rs; this file keeps the handoff-adoption property of these three.
fn configs() -> Vec<Box<dyn ccp_algorithms::DynAlgorithmConfig>> {
    vec![
        Box::new(VegasConfig::default()),
        Box::new(WestwoodConfig::default()),
        Box::new(IllinoisConfig::default()),
    ]
}

/// Any `u32`, with the edges (0, 1, typical MSSs, 2^16 - 1, 2^31, `u32::MAX`) drawn often.
fn edge_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1u32),
        Just(536u32),
        Just(MSS),
        Just(9000u32),
        Just(65_535u32),
        Just(1u32 << 31),
        Just(u32::MAX),
        any::<u32>(),
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    /// Over every MSS and window a CREATE or handoff can carry and any RTT (0 means no sample,
    /// so no "RTT" to speak of: from 1 µs). One RTT acknowledges at most the window that was in
    /// flight, so the bytes acked are a share of it (tests/property.rs feeds any `u64`).
    #[test]
    fn adopting_a_handoff_keeps_the_window_within_a_factor_of_two_for_an_rtt(
        mss in edge_u32(),
        cwnd in edge_u32(),
        srtt_us in prop_oneof![Just(1u64), Just(u64::MAX), 1_000u64..500_000, 1u64..],
        ss in any::<bool>(),
        lost in any::<bool>(),
        acked_share in prop_oneof![Just(0.0f64), Just(1.0f64), 0.0f64..=1.0],
    ) {
        let start = FlowStart { sock_id: 3, mss_bytes: mss, init_cwnd_bytes: 10 * MSS, seed: 1 };
        // An MSS of 0 counts as 1 byte; windows are at least 2 MSS, at most u32::MAX.
        let mss_bytes = u64::from(mss.max(1));
        let adopted = cwnd.max(mss.max(1).saturating_mul(2));
        let h = Handoff {
            now_us: 1_000_000,
            cwnd_bytes: cwnd,
            ssthresh_bytes: if ss { u32::MAX } else { cwnd },
            pacing: Pacing::Unpaced,
            srtt_us,
            min_rtt_us: srtt_us,
            delivery_rate_bytes_per_sec: u64::from(cwnd) * 1_000_000 / srtt_us,
            last_loss_us: lost.then_some(500_000),
            in_first_slow_start: ss,
        };
        for cfg in configs() {
            let mut alg = cfg.build(&start);
            let c = alg.activate(&h);
            prop_assert_eq!(c.cwnd_bytes, Some(adopted), "{}", cfg.name());
            prop_assert_eq!(c.pacing, Some(Pacing::Unpaced));
            // One RTT of ACKs, no delay increase.
            let m = Measurement {
                now_us: h.now_us.saturating_add(srtt_us),
                acked_bytes: (f64::from(adopted) * acked_share) as u64,
                rtt_us: srtt_us,
                min_rtt_us: srtt_us,
                ..Measurement::default()
            };
            alg.on_report(&m);
            let w = u64::from(alg.cwnd_bytes());
            let adopted = u64::from(adopted);
            prop_assert!(w >= adopted / 2 && w <= 2 * adopted,
                "{}: {w} after adopting {adopted}", cfg.name());
            // Outside slow start: avoidance, but for a loss-based rule that saw no loss
            // (Westwood, Illinois: `WindowRule::SLOW_START_UNTIL_LOSS`).
            if !ss && (lost || cfg.name() == "vegas") {
                prop_assert!(w <= adopted + 10 * mss_bytes,
                    "{}: slow start after adopting {adopted} outside it: {w}", cfg.name());
            }
        }
    }
}
