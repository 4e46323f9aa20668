//! The window following the ACK clock in the datapath (`ack_clock`, the program
//! `suite_per_rtt_urgent_clocked`, the registry's `reno-ackclock` and `cubic-ackclock`), in the
//! simulator through the portus adapter in lock-step:
//!
//! - on a clean path a short flow finishes about when the datapath's own Reno or Cubic does,
//!   sooner than with the agent's slow start (one window step per report); exactly then where
//!   the program runs in the ACK's own path (ccp-kernel: `TcpModel::ccp_inline_programs`),
//!   a few ACKs later on the eBPF datapath's timing (the default model), where a program's
//!   window applies from the next ACK;
//! - in a shallow buffer a short flow finishes sooner than with the agent's window;
//! - the cut on lost ACKs saves retransmissions where the program runs in the ACK's own path,
//!   not one ACK late;
//! - the first loss ends the slow start: a long flow then behaves as the agent's algorithm
//!   says, with no window growth left in the datapath.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use ccp_algorithms::{AlgorithmConfig, Ccp, CubicConfig, RenoConfig};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, SimResult, Simulation, TcpModel,
};

const MS: u64 = 1_000_000;
const LINK_BPS: u64 = 10_000_000;
/// 10 Mbit/s x 40 ms.
const BDP_BYTES: u64 = LINK_BPS / 8 / 25;

fn config(scheme: Scheme, size_bytes: Option<u64>, secs: u64) -> SimConfig {
    config_with_buffer(scheme, size_bytes, secs, BDP_BYTES)
}

fn config_with_buffer(
    scheme: Scheme,
    size_bytes: Option<u64>,
    secs: u64,
    buffer_bytes: u64,
) -> SimConfig {
    let mut flow = FlowSpec::bulk(scheme, 20 * MS);
    flow.size_bytes = size_bytes;
    SimConfig {
        seed: 3,
        duration_ns: secs * 1_000 * MS,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: LINK_BPS },
            buffer_bytes,
            loss: 0.0,
        },
        flows: vec![flow],
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 10 * MS,
        datapath: DatapathConfig::default(),
    }
}

fn run_ccp<C: AlgorithmConfig + Send>(alg: C, size_bytes: Option<u64>, secs: u64) -> SimResult {
    run_ccp_in(
        alg,
        config(Scheme::Reno, size_bytes, secs),
        TcpModel::default(),
    )
}

/// `alg` as the one flow of `cfg` (whose scheme it replaces), under `model`.
fn run_ccp_in<C: AlgorithmConfig + Send>(alg: C, mut cfg: SimConfig, model: TcpModel) -> SimResult {
    cfg.flows[0].scheme = Scheme::Ccp {
        alg: C::NAME.to_string(),
    };
    Simulation::new(cfg, Some(LockstepAgent::new(Ccp::new(alg))))
        .expect("config")
        .with_model(model)
        .run()
        .expect("run")
}

fn run_native(scheme: Scheme, size_bytes: Option<u64>) -> SimResult {
    Simulation::new(config(scheme, size_bytes, 5), None)
        .expect("config")
        .run()
        .expect("run")
}

/// Completion time of the run's one flow, ms.
fn fct_ms(r: &SimResult) -> f64 {
    let f = &r.flows[0];
    let done = f.completion_ns.expect("the flow completes");
    (done - f.start_ns) as f64 / MS as f64
}

#[test]
fn a_short_flow_finishes_as_the_datapaths_own_slow_start_finishes_it() {
    // 100 kB: three rounds from a 10-segment initial window, within the 1-BDP buffer (at 200
    // kB the last round overflows it and the loss recoveries differ).
    let size = Some(100_000);
    let in_ack_path = TcpModel {
        ccp_inline_programs: true,
        ..TcpModel::default()
    };
    let clocked = |model| {
        let cubic = CubicConfig::default().ack_clock(true);
        fct_ms(&run_ccp_in(cubic, config(Scheme::Reno, size, 5), model))
    };
    let (inline, ebpf) = (clocked(in_ack_path), clocked(TcpModel::default()));
    let native = fct_ms(&run_native(Scheme::Cubic, size));
    assert!(
        (inline - native).abs() < 0.5,
        "{inline:.2} ms with the program in the ACK's path, {native:.2} ms natively"
    );
    assert!(
        ebpf > inline && ebpf < 1.02 * native,
        "{ebpf:.2} ms on the eBPF timing, {inline:.2} ms in the ACK's path, {native:.2} ms natively"
    );
    for (name, agent, datapath, native) in [
        (
            "reno",
            fct_ms(&run_ccp(RenoConfig::default(), size, 5)),
            fct_ms(&run_ccp(RenoConfig::default().ack_clock(true), size, 5)),
            fct_ms(&run_native(Scheme::Reno, size)),
        ),
        (
            "cubic",
            fct_ms(&run_ccp(CubicConfig::default(), size, 5)),
            ebpf,
            native,
        ),
    ] {
        assert!(
            (datapath - native).abs() < 0.02 * native,
            "{name}: {datapath:.2} ms in the datapath, {native:.2} ms natively"
        );
        assert!(
            agent > datapath + 10.0,
            "{name}: the agent's slow start ({agent:.2} ms) should lose a round's part to the \
             datapath's ({datapath:.2} ms)"
        );
    }
}

#[test]
fn a_short_flow_in_a_shallow_buffer_finishes_sooner_than_with_the_agents_window() {
    // 100 kB into a 6-kB (0.12-BDP) buffer: slow start overshoots it in the third round.
    let cfg = |scheme| config_with_buffer(scheme, Some(100_000), 5, 6_000);
    let model = TcpModel::default();
    let agent = fct_ms(&run_ccp_in(
        CubicConfig::default(),
        cfg(Scheme::Reno),
        model,
    ));
    let clocked = fct_ms(&run_ccp_in(
        CubicConfig::default().ack_clock(true),
        cfg(Scheme::Reno),
        model,
    ));
    let native = fct_ms(
        &Simulation::new(cfg(Scheme::Cubic), None)
            .expect("config")
            .run()
            .expect("run"),
    );
    eprintln!("VALUES {clocked} {agent} {native}");
    assert!(
        clocked < agent - 30.0 && clocked < native + 5.0,
        "{clocked:.1} ms with the ACK clock in the datapath, {agent:.1} ms without, \
         {native:.1} ms natively"
    );
}

#[test]
fn the_first_loss_ends_the_datapaths_slow_start_for_good() {
    let plain = run_ccp(RenoConfig::default(), None, 20);
    let dss = run_ccp(RenoConfig::default().ack_clock(true), None, 20);
    let (p, d) = (&plain.flows[0], &dss.flows[0]);
    assert!(d.packets_lost > 0, "a bulk flow fills the buffer");
    // Growth left on in the datapath would double the window every round past the first loss,
    // drop a window's worth every round and keep the window far above the path's.
    let ceiling = 3 * (BDP_BYTES + BDP_BYTES) as u32;
    let late = d.series.iter().filter(|s| s.t_ns > 5_000 * MS);
    assert!(
        late.clone().all(|s| s.cwnd_bytes < ceiling),
        "window above {ceiling} B after the first loss: max {:?}",
        late.map(|s| s.cwnd_bytes).max()
    );
    assert!(
        d.retransmits <= p.retransmits * 2 + 20,
        "{} retransmissions in the datapath's slow start, {} in the agent's",
        d.retransmits,
        p.retransmits
    );
    let (tp, td) = (
        p.throughput_bps(plain.duration_ns),
        d.throughput_bps(dss.duration_ns),
    );
    assert!(
        td > 0.9 * tp,
        "throughput {td:.0} b/s with the datapath's slow start, {tp:.0} b/s with the agent's"
    );
}

#[test]
fn the_loss_rule_saves_retransmissions_only_in_the_acks_own_path() {
    // A 2 Mbit/s, 16 ms path with a 2-packet buffer (the T-Mobile UMTS downlink's condition
    // of `docs/algorithms/ack-clock.md`, at a constant rate), flows of 20-200 kB: slow start
    // loses a burst at its first overflow. Where the program runs in the ACK's path, the cut
    // to what is in flight holds the retransmissions back on the ACK that found the loss; one
    // ACK late, on the eBPF timing, they leave at the old window and the buffer drops them
    // again.
    let in_ack_path = TcpModel {
        ccp_inline_programs: true,
        ..TcpModel::default()
    };
    let retransmits = |reno: bool, model: TcpModel| -> u64 {
        (20_000..=200_000)
            .step_by(15_000)
            .map(|size| {
                let mut cfg = config_with_buffer(Scheme::Reno, Some(size), 10, 3_028);
                cfg.link.rate = LinkRate::Constant { bps: 2_000_000 };
                cfg.flows[0].one_way_delay_ns = 8 * MS;
                let r = if reno {
                    run_ccp_in(RenoConfig::default().ack_clock(true), cfg, model)
                } else {
                    run_ccp_in(CubicConfig::default().ack_clock(true), cfg, model)
                };
                assert!(r.flows[0].completion_ns.is_some(), "{size} B completes");
                r.flows[0].retransmits
            })
            .sum()
    };
    for (name, reno) in [("reno-ackclock", true), ("cubic-ackclock", false)] {
        let (inline, ebpf) = (
            retransmits(reno, in_ack_path),
            retransmits(reno, TcpModel::default()),
        );
        assert!(
            inline * 20 < ebpf * 17,
            "{name}: {inline} retransmissions in the ACK's path, {ebpf} one ACK late"
        );
    }
}
