//! The simulator against theory: each test states the textbook expectation and checks the
//! simulated network meets it.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

#[path = "support/aimd.rs"]
mod aimd;

use aimd::Aimd;
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, SimError, SimResult,
    Simulation, Trace, WIRE_OVERHEAD_BYTES,
};

const MS: u64 = 1_000_000;
const MSS: u32 = 1448;
/// Bytes a 1448-byte segment occupies on the link.
const SEG: f64 = MSS as f64;
/// A segment on the wire: payload and headers (the link serializes and queues whole frames).
const WIRE: f64 = SEG + WIRE_OVERHEAD_BYTES as f64;

fn config(bps: u64, buffer_bytes: u64, loss: f64, flows: Vec<FlowSpec>, secs: u64) -> SimConfig {
    SimConfig {
        seed: 42,
        duration_ns: secs * 1_000 * MS,
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

fn run(cfg: SimConfig) -> SimResult {
    Simulation::new(cfg, None)
        .expect("config")
        .run()
        .expect("run")
}

fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    s * s / (xs.len() as f64 * s2)
}

#[test]
fn a_kernel_only_scheme_is_refused_with_its_name() {
    let flow = FlowSpec::bulk(Scheme::Kernel { cca: "bbr".into() }, 20 * MS);
    let err = Simulation::new(config(10_000_000, 10_000_000, 0.0, vec![flow], 1), None)
        .err()
        .expect("the simulator has no kernel BBR");
    assert!(
        matches!(&err, SimError::KernelOnly(c) if c == "bbr"),
        "{err}"
    );
    assert!(err.to_string().contains("kernel datapath"), "{err}");
}

#[test]
fn fixed_window_gets_min_of_window_over_rtt_and_capacity() {
    // 10 Mbit/s, 2 * 20 ms propagation: BDP = 50 kB = 34.5 segments.
    for (pkts, expect_bps) in [(10u32, 10.0 * SEG * 8.0 / 0.040), (100, 10e6 * SEG / WIRE)] {
        let flow = FlowSpec::bulk(
            Scheme::Fixed {
                cwnd_bytes: pkts * MSS,
            },
            20 * MS,
        );
        let r = run(config(10_000_000, 10_000_000, 0.0, vec![flow], 10));
        let got = r.flows[0].throughput_bps(r.duration_ns);
        // Serialization adds ~1.2 ms per segment to the RTT, so a small window lands a few
        // percent under cwnd/RTT_prop.
        let err = (got - expect_bps).abs() / expect_bps;
        println!("fixed cwnd {pkts} pkts: {got:.0} bit/s, theory {expect_bps:.0}");
        assert!(
            err < 0.06,
            "cwnd {pkts} pkts: {got:.0} bit/s, expected {expect_bps:.0} ({err:.3})"
        );
    }
}

/// A trace of `mbps` with the same number of opportunities every millisecond, 1 s long.
fn flat_trace(mbps: u64) -> Trace {
    // One opportunity carries 1500 bytes: mbps * 10^6 / 8 / 1500 per second.
    let per_s = mbps * 1_000_000 / 8 / 1500;
    let text = (0..per_s)
        .map(|k| (k * 1000 / per_s + 1).to_string())
        .collect::<Vec<_>>()
        .join("\n");
    Trace::parse("flat", &text).expect("trace")
}

#[test]
fn a_trace_link_delivers_its_rate_above_one_packet_per_ms() {
    // Each opportunity carries one 1448-byte segment. A trace link once delivered at most
    // one packet per millisecond (12 Mbit/s), whatever the trace said.
    for mbps in [6u64, 24, 48, 96] {
        let trace = flat_trace(mbps);
        let flow = FlowSpec::bulk(
            Scheme::Fixed {
                cwnd_bytes: 4_000 * MSS,
            },
            10 * MS,
        );
        let mut cfg = config(0, 50_000_000, 0.0, vec![flow], 5);
        cfg.link.rate = LinkRate::Trace(trace.clone());
        let r = run(cfg);
        let got = r.flows[0].throughput_bps(r.duration_ns);
        let expect = trace.mean_bps() as f64 * SEG / 1500.0;
        println!("trace {mbps} Mbit/s: {got:.0} bit/s, expected {expect:.0}");
        assert!(
            (got - expect).abs() / expect < 0.05,
            "trace {mbps} Mbit/s: {got:.0} bit/s, expected {expect:.0}"
        );
    }
}

#[test]
fn a_standing_queue_delays_by_queue_over_capacity() {
    // Window = BDP + 40 segments: 40 frames stand in the queue: 40 * 1514 * 8 / 10 Mbit/s.
    let bdp_pkts = (10e6 * 0.040 / 8.0 / WIRE).round() as u32;
    let flow = FlowSpec::bulk(
        Scheme::Fixed {
            cwnd_bytes: (bdp_pkts + 40) * MSS,
        },
        20 * MS,
    );
    let r = run(config(10_000_000, 10_000_000, 0.0, vec![flow], 10));
    let f = &r.flows[0];
    let expect_us = 40.0 * WIRE * 8.0 / 10e6 * 1e6;
    let got = f.mean_queue_delay_us();
    let err = (got - expect_us).abs() / expect_us;
    println!("standing queue of 40 segments: {got:.0} µs queueing, theory {expect_us:.0} µs");
    assert!(
        err < 0.05,
        "queueing delay {got:.0} µs, expected {expect_us:.0} µs"
    );
    assert_eq!(f.packets_dropped, 0);
}

#[test]
fn random_loss_rate_is_what_was_asked() {
    let flow = FlowSpec::bulk(
        Scheme::Fixed {
            cwnd_bytes: 30 * MSS,
        },
        10 * MS,
    );
    let r = run(config(50_000_000, 10_000_000, 0.02, vec![flow], 20));
    let p = r.random_drops as f64 / r.link_packets as f64;
    println!(
        "random loss 2 %: measured {p:.4} over {} packets",
        r.link_packets
    );
    // ~ 60k packets: the binomial standard deviation is 0.06 % absolute.
    assert!(
        (p - 0.02).abs() < 0.002,
        "loss rate {p:.4} over {} packets",
        r.link_packets
    );
    assert_eq!(r.tail_drops, 0);
}

#[test]
fn reno_under_random_loss_follows_the_mathis_formula() {
    // Throughput = MSS / RTT * sqrt(3 / (2p)) (Mathis et al. 1997), far below capacity.
    let p = 0.01;
    let rtt = 0.040;
    let flow = FlowSpec::bulk(Scheme::Reno, 20 * MS);
    let r = run(config(1_000_000_000, 100_000_000, p, vec![flow], 60));
    let got = r.flows[0].throughput_bps(r.duration_ns);
    let expect = SEG * 8.0 / rtt * (3.0 / (2.0 * p)).sqrt();
    let err = (got - expect).abs() / expect;
    println!("Reno at 1 % loss, 40 ms: {got:.0} bit/s, Mathis {expect:.0} ({err:.3})");
    assert!(
        err < 0.20,
        "Reno at 1 % loss: {got:.0} bit/s, Mathis {expect:.0} ({err:.3})"
    );
}

#[test]
fn two_identical_aimd_flows_share_fairly() {
    let flows = vec![
        FlowSpec::bulk(Scheme::Reno, 20 * MS),
        FlowSpec::bulk(Scheme::Reno, 20 * MS),
    ];
    // 20 Mbit/s, 40 ms: BDP 100 kB; one BDP of buffer.
    let r = run(config(20_000_000, 100_000, 0.0, flows, 60));
    let tputs: Vec<f64> = r
        .flows
        .iter()
        .map(|f| f.throughput_bps(r.duration_ns))
        .collect();
    let j = jain(&tputs);
    let util = tputs.iter().sum::<f64>() / 20e6;
    println!("two Reno flows: {tputs:?} bit/s, Jain {j:.4}, utilization {util:.3}");
    assert!(j >= 0.95, "Jain {j:.3} for {tputs:?}");
    assert!(util > 0.85, "utilization {util:.3}");
}

#[test]
fn same_seed_same_result_different_seed_different_losses() {
    let cfg = || {
        config(
            20_000_000,
            60_000,
            0.01,
            vec![FlowSpec::bulk(Scheme::Reno, 10 * MS)],
            5,
        )
    };
    let a = run(cfg());
    let b = run(cfg());
    assert_eq!(a.events, b.events);
    assert_eq!(a.flows[0].rtt_samples_us, b.flows[0].rtt_samples_us);
    assert_eq!(a.flows[0].delivered_bytes, b.flows[0].delivered_bytes);
    let mut c = cfg();
    c.seed = 43;
    assert_ne!(run(c).random_drops, a.random_drops);
}

#[test]
fn a_ccp_flow_in_lock_step_with_a_portus_agent_is_deterministic() {
    let go = || {
        let agent = LockstepAgent::new(Aimd::default());
        let flow = FlowSpec::bulk(Scheme::Ccp { alg: "aimd".into() }, 20 * MS);
        let mut cfg = config(10_000_000, 50_000, 0.0, vec![flow], 10);
        cfg.sample_interval_ns = 100 * MS;
        Simulation::new(cfg, Some(agent))
            .expect("config")
            .run()
            .expect("run")
    };
    let a = go();
    let b = go();
    let f = &a.flows[0];
    let util = f.throughput_bps(a.duration_ns) / 10e6;
    println!(
        "AIMD via lock-step agent: utilization {util:.3}, {} drops, {} events",
        f.packets_dropped, a.events
    );
    assert!(
        util > 0.8,
        "AIMD through the agent should fill the link: {util:.3}"
    );
    assert!(
        f.packets_dropped > 0,
        "AIMD probes until the 1-BDP buffer overflows"
    );
    assert_eq!(f.vm_faults, 0);
    let cwnds: Vec<u32> = f.series.iter().map(|s| s.cwnd_bytes).collect();
    assert_eq!(
        cwnds,
        b.flows[0]
            .series
            .iter()
            .map(|s| s.cwnd_bytes)
            .collect::<Vec<_>>()
    );
    assert_eq!(a.events, b.events);
}

#[test]
fn ack_aggregation_and_app_limited_periods() {
    // ACKs released every 10 ms arrive in bursts: RTT samples are multiples of 10 ms.
    let flow = FlowSpec::bulk(
        Scheme::Fixed {
            cwnd_bytes: 20 * MSS,
        },
        12 * MS,
    );
    let mut cfg = config(10_000_000, 1_000_000, 0.0, vec![flow.clone()], 5);
    cfg.ack_aggregation_ns = 10 * MS;
    let r = run(cfg);
    let rtts = &r.flows[0].rtt_samples_us;
    assert!(
        rtts.iter().all(|&u| u >= 24_000),
        "no RTT below the propagation delay"
    );
    assert!(
        rtts.iter().any(|&u| u >= 30_000),
        "aggregation delays some ACKs"
    );

    // On 1 s, off 1 s, with a window of one BDP (17 segments at 10 Mbit/s, 20 ms) so no
    // standing queue drains into the off periods: about half the capacity.
    let mut flow = FlowSpec::bulk(
        Scheme::Fixed {
            cwnd_bytes: 18 * MSS,
        },
        10 * MS,
    );
    flow.on_off_ns = Some((1_000 * MS, 1_000 * MS));
    let r = run(config(10_000_000, 1_000_000, 0.0, vec![flow], 20));
    let util = r.flows[0].throughput_bps(r.duration_ns) / 10e6;
    println!("on/off 1 s / 1 s: utilization {util:.3}");
    assert!((0.45..0.55).contains(&util), "utilization {util:.3}");
}
