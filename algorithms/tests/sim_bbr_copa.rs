//! BBR v1 and Copa in the simulator, through the portus adapter in lock-step with virtual
//! time: low queueing delay at high utilization on a deep (5-BDP) buffer, fairness between two
//! flows of the same algorithm, and the suite's invariants under random report sequences.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::marker::PhantomData;

use ccp_algorithms::{AlgorithmConfig, BbrConfig, Ccp, CopaConfig, CubicConfig};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, LockstepAgent, SimConfig, SimResult, Simulation,
};

const MS: u64 = 1_000_000;
const LINK_BPS: u64 = 10_000_000;
/// 10 Mbit/s x 50 ms.
const BDP_BYTES: u64 = LINK_BPS / 8 / 20;

fn run<C: AlgorithmConfig + Send>(config: C, flows: usize, secs: u64) -> SimResult {
    run_seed(config, flows, secs, 11)
}

fn run_seed<C: AlgorithmConfig + Send>(config: C, flows: usize, secs: u64, seed: u64) -> SimResult {
    let agent = LockstepAgent::new(Ccp::new(config));
    let cfg = SimConfig {
        seed,
        duration_ns: secs * 1_000 * MS,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: LINK_BPS },
            buffer_bytes: 5 * BDP_BYTES,
            loss: 0.0,
        },
        flows: (0..flows)
            .map(|i| FlowSpec {
                start_ns: i as u64 * 500 * MS,
                ..FlowSpec::bulk(
                    ccp_datapath::sim::Scheme::Ccp {
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

/// Utilization of the whole run, and mean queueing delay over mean min RTT.
fn delay_and_utilization(label: &str, r: &SimResult) -> (f64, f64) {
    let f = &r.flows[0];
    let util = f.throughput_bps(r.duration_ns) / LINK_BPS as f64;
    let min_rtt_us = f.min_rtt_ns as f64 / 1e3;
    let qd = f.mean_queue_delay_us();
    println!(
        "{label}: utilization {util:.3}, mean queueing delay {:.1} ms = {:.2} x min RTT {:.1} ms, \
         {} drops, {} timeouts",
        qd / 1e3,
        qd / min_rtt_us,
        min_rtt_us / 1e3,
        f.packets_dropped,
        f.timeouts
    );
    assert_eq!(f.vm_faults, 0);
    (util, qd / min_rtt_us)
}

/// Jain's index of the flows' throughput from `from_ns` to the end.
fn jain_after(label: &str, r: &SimResult, from_ns: u64) -> f64 {
    let x = common::late_throughputs(r, from_ns);
    let sum: f64 = x.iter().sum();
    let jain = common::jain(&x);
    println!(
        "{label}: throughputs {:?} Mbit/s, total {:.2}, Jain {jain:.3}",
        x.iter()
            .map(|v| (v / 1e4).round() / 100.0)
            .collect::<Vec<_>>(),
        sum / 1e6
    );
    jain
}

#[test]
fn bbr_keeps_the_queue_short_on_a_deep_buffer() {
    let r = run(BbrConfig::default(), 1, 30);
    let (util, q) = delay_and_utilization("bbr", &r);
    assert!(util >= 0.85, "utilization {util:.3}");
    assert!(q < 0.5, "queueing delay {q:.2} x min RTT");
}

#[test]
fn copa_keeps_the_queue_short_on_a_deep_buffer() {
    let r = run(CopaConfig::default(), 1, 30);
    let (util, q) = delay_and_utilization("copa", &r);
    assert!(util >= 0.85, "utilization {util:.3}");
    assert!(q < 0.5, "queueing delay {q:.2} x min RTT");
}

/// Fairness is a property of the typical run: how two BBR flows split the link in one 20 s
/// window depends on where their `ProbeBW` cycles and `ProbeRTT` phases fall, so the median over
/// three seeds is checked.
#[test]
fn two_bbr_flows_share_fairly() {
    let mut jains: Vec<f64> = (11..14)
        .map(|seed| {
            let r = run_seed(BbrConfig::default(), 2, 30, seed);
            jain_after(&format!("bbr x2, seed {seed}"), &r, 10_000 * MS)
        })
        .collect();
    jains.sort_by(f64::total_cmp);
    assert!(jains[1] >= 0.9, "median Jain {:.3} of {jains:?}", jains[1]);
}

#[test]
fn two_copa_flows_share_fairly() {
    let r = run(CopaConfig::default(), 2, 30);
    let jain = jain_after("copa x2", &r, 10_000 * MS);
    assert!(jain >= 0.9, "Jain {jain:.3}");
}

/// Cubic hands over to `B` at 10 s: the window stays within a factor of two for the first
/// RTT, there is no new Startup / slow start, and the link stays busy.
fn check_handoff<B: AlgorithmConfig + Default>(label: &str) {
    let at_ns = 10_000 * MS;
    let r = run(
        common::SwapConfig::<CubicConfig, B> {
            at_us: at_ns / 1_000,
            algs: PhantomData,
        },
        1,
        20,
    );
    let (swap_us, srtt_us, paced) = common::take_last_swap();
    assert!(paced, "{label}: no pacing rate after the handoff");
    assert!(swap_us >= at_ns / 1_000, "{label}: no handoff");
    let (swap_ns, rtt_ns) = (swap_us * 1_000, srtt_us.max(1) * 1_000);
    let f = &r.flows[0];
    let pkts = |s: &ccp_datapath::sim::Sample| f64::from(s.cwnd_bytes) / 1448.0;
    let before = f
        .series
        .iter()
        .rfind(|s| s.t_ns <= swap_ns)
        .map(pkts)
        .expect("samples before the handoff");
    let first_rtt: Vec<f64> = f
        .series
        .iter()
        .filter(|s| s.t_ns > swap_ns && s.t_ns < swap_ns + rtt_ns)
        .map(pkts)
        .collect();
    let next_second = f
        .series
        .iter()
        .filter(|s| s.t_ns > swap_ns && s.t_ns < swap_ns + 1_000 * MS)
        .map(pkts)
        .fold(0.0, f64::max);
    let util = f.throughput_bps(r.duration_ns) / LINK_BPS as f64;
    println!(
        "{label}: cwnd {before:.1} pkts before, {:.1}..{:.1} in the first RTT after, max {next_second:.1} in the next second; utilization {util:.3}",
        first_rtt.iter().copied().fold(f64::INFINITY, f64::min),
        first_rtt.iter().copied().fold(0.0, f64::max),
    );
    assert!(
        first_rtt
            .iter()
            .all(|&w| w >= before / 2.0 - 1.0 && w <= before * 2.0 + 1.0),
        "{label}: the window left [cwnd/2, 2 cwnd] in the first RTT"
    );
    assert!(
        next_second <= before * 2.0 + 1.0,
        "{label}: the window grew from {before:.1} to {next_second:.1} pkts in a second"
    );
    assert!(util >= 0.85, "{label}: utilization {util:.3}");
    assert_eq!(f.vm_faults, 0);
}

#[test]
fn adopting_a_handoff_mid_flow_does_not_restart_startup_or_slow_start() {
    check_handoff::<BbrConfig>("cubic -> bbr");
    check_handoff::<CopaConfig>("cubic -> copa");
}

// ---- invariants (the suite's property test, for these two) ----

// The suite-wide invariants (random report sequences) run for every algorithm in
// tests/property.rs.
