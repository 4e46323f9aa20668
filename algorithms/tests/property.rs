//! One model-based property test run against every algorithm of the suite (and LP-TCP with a
//! test forest, whether or not `eval/models` holds one; ARC with its shipped actor, inline,
//! when ONNX Runtime is there, else without one): random sequences
//! of reports (zero RTT, huge RTT, no ACKs, repeated timeouts, rate 0, time going backwards)
//! and handoffs never panic, keep the window within [2 MSS, 2^32 - 1] with no NaN leaking out,
//! and answer a timeout by shrinking the window.
//!
//! Every value is drawn over its wire field's whole range: the MSS and initial window are any
//! `u32` (0, 1, 2^31, `u32::MAX` included; an MSS of 0 counts as 1 byte, see `FlowStart`),
//! every report field any `u64`, lost packets included.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use ccp_algorithms::{
    ArcConfig, DynAlgorithmConfig, FlowStart, Handoff, LpTcpConfig, Measurement, Pacing, suite,
};
use proptest::prelude::*;

#[derive(Debug, Clone)]
enum Op {
    Report(Measurement),
    Handoff(Handoff),
}

fn edge_u64() -> impl Strategy<Value = u64> {
    prop_oneof![
        Just(0u64),
        Just(1u64),
        Just(u64::from(u32::MAX)),
        Just(u64::MAX),
        0u64..10_000_000,
        any::<u64>(),
    ]
}

fn edge_u32() -> impl Strategy<Value = u32> {
    prop_oneof![
        Just(0u32),
        Just(1u32),
        Just(536u32),
        Just(1448u32),
        Just(9000u32),
        Just(65_535u32),
        Just(1u32 << 31),
        Just(u32::MAX),
        any::<u32>(),
    ]
}

fn measurement() -> impl Strategy<Value = Measurement> {
    (
        (
            edge_u64(),
            edge_u64(),
            edge_u64(),
            edge_u64(),
            any::<bool>(),
        ),
        (
            edge_u64(),
            edge_u64(),
            edge_u64(),
            edge_u64(),
            edge_u64(),
            edge_u64(),
        ),
    )
        .prop_map(
            |(
                (now_us, acked_bytes, sacked_bytes, lost, timeout),
                (rtt, min_rtt, rin, rout, inflight, cwnd),
            )| {
                Measurement {
                    now_us,
                    acked_bytes,
                    sacked_bytes,
                    lost_pkts: lost,
                    timeout,
                    rtt_us: rtt,
                    min_rtt_us: min_rtt,
                    rate_incoming_bytes_per_sec: rin,
                    rate_outgoing_bytes_per_sec: rout,
                    inflight_bytes: inflight,
                    cwnd_bytes: cwnd,
                }
            },
        )
}

fn handoff() -> impl Strategy<Value = Handoff> {
    (
        edge_u64(),
        edge_u32(),
        edge_u32(),
        prop_oneof![
            Just(Pacing::Unpaced),
            any::<u32>().prop_map(Pacing::BytesPerSec)
        ],
        (edge_u64(), edge_u64(), edge_u64()),
        proptest::option::of(edge_u64()),
        any::<bool>(),
    )
        .prop_map(
            |(now_us, cwnd, ssthresh, pacing, (srtt, min_rtt, rate), last_loss, ss)| Handoff {
                now_us,
                cwnd_bytes: cwnd,
                ssthresh_bytes: ssthresh,
                pacing,
                srtt_us: srtt,
                min_rtt_us: min_rtt,
                delivery_rate_bytes_per_sec: rate,
                last_loss_us: last_loss,
                in_first_slow_start: ss,
            },
        )
}

fn op() -> impl Strategy<Value = Op> {
    prop_oneof![
        8 => measurement().prop_map(Op::Report),
        1 => handoff().prop_map(Op::Handoff),
    ]
}

/// Learned algorithms with a model whatever `eval/models` holds: LP-TCP with the test forest
/// (`tests/fixtures/lptcp-forest.json`, a 5-tree forest from `ccp-eval train lptcp`).
fn with_models() -> Vec<Box<dyn DynAlgorithmConfig>> {
    let forest =
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lptcp-forest.json");
    let v: Vec<Box<dyn DynAlgorithmConfig>> = vec![Box::new(
        LpTcpConfig::load(&forest).expect("the test forest loads"),
    )];
    // ARC runs in the suite with its shipped actor, inline; make sure it is the real thing.
    if let Err(e) = ArcConfig::default().ready()
        && std::env::var_os("CCP_ONNX_REQUIRED").is_some()
    {
        panic!("ARC's shipped actor does not load: {e}");
    }
    v
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(256))]

    #[test]
    fn every_algorithm_survives_any_report_sequence(
        mss in edge_u32(),
        iw in edge_u32(),
        ops in proptest::collection::vec(op(), 1..120),
    ) {
        let start = FlowStart { sock_id: 3, mss_bytes: mss, init_cwnd_bytes: iw, seed: 1 };
        let min = u64::from(mss.max(1)) * 2;
        for cfg in suite().into_iter().chain(with_models()) {
            let mut alg = cfg.build(&start);
            let first = alg.activate(&Handoff::flow_start(&start));
            prop_assert!(first.cwnd_bytes.is_some(), "{}: no window at start", cfg.name());
            prop_assert!(!matches!(first.pacing, Some(Pacing::BytesPerSec(0))));
            for op in &ops {
                let before = alg.cwnd_bytes();
                let control = match op {
                    Op::Report(m) => alg.on_report(m),
                    Op::Handoff(h) => alg.activate(h),
                };
                let cwnd = alg.cwnd_bytes();
                prop_assert!(u64::from(cwnd) >= min.min(u64::from(u32::MAX)),
                    "{}: window {cwnd} below 2 MSS after {op:?}", cfg.name());
                if let Some(c) = control.cwnd_bytes {
                    prop_assert_eq!(c, cwnd, "{}: control and state disagree", cfg.name());
                }
                if let Some(Pacing::BytesPerSec(r)) = control.pacing {
                    prop_assert!(r > 0, "{}: a zero rate is ignored by the datapath", cfg.name());
                }
                let h = alg.handoff();
                prop_assert_eq!(h.cwnd_bytes, cwnd);
                if let Op::Report(m) = op && m.timeout {
                    prop_assert!(cwnd < before || u64::from(cwnd) <= min,
                        "{}: timeout left the window at {cwnd} (was {before})", cfg.name());
                }
            }
        }
    }
}
