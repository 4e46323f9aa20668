//! One `tcprl` policy decision at a step's end (feature window, observation, the DNC and one
//! LSTM step of the policy network in ONNX Runtime, argmax) over the shipped 11-candidate model
//! (`selector/models/tcprl`). Needs ONNX Runtime (`make venv` or `ORT_DYLIB_PATH`); without it
//! the bench prints why and measures nothing.

#![allow(missing_docs)]

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use ccp_algorithms::Measurement;
use ccp_datapath::stats::percentile;
use ccp_selector::tcprl::{TcpRlModel, TcpRlPolicy};
use ccp_selector::{Features, SelectionPolicy};
use criterion::{Criterion, criterion_group, criterion_main};

/// The shipped model's candidates (the selectors' eleven).
const NAMES: [&str; 11] = [
    "cubic", "reno", "bbr", "copa", "vegas", "westwood", "illinois", "c2tcp", "vivace", "lptcp",
    "rltcp",
];

fn decision(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tcprl/tcprl.json");
    let model = match TcpRlModel::load(&path, &NAMES) {
        Ok(m) => Arc::new(m),
        Err(e) => {
            eprintln!("skipping tcprl decision bench: {e}");
            return;
        }
    };
    // Every report ends a step (a step of 10 ms of reports 1 s apart), so each call runs the
    // DNC and the policy network.
    let step_us = 1_000_000u64;
    let mut policy = TcpRlPolicy::new(model.clone(), 1);
    let mut now_us = 0u64;
    let mut times_ns: Vec<u128> = (0..20_000)
        .map(|_| {
            now_us += step_us;
            let m = report(now_us);
            let t = std::time::Instant::now();
            black_box(policy.decide(&features(&m, now_us)));
            t.elapsed().as_nanos()
        })
        .collect();
    assert_eq!(policy.errors(), 0);
    times_ns.sort_unstable();
    let at = |per_mille| percentile(&times_ns, per_mille).unwrap_or(0) as f64 / 1e3;
    println!(
        "tcprl decision (DNC {}), 11 candidates, {} samples: median {:.2} us, p99 {:.2} us, max {:.2} us",
        if model.has_dnc() { "on" } else { "absent" },
        times_ns.len(),
        at(500),
        at(990),
        at(1000)
    );
    c.bench_function("tcprl_decision_11_candidates", |b| {
        b.iter(|| {
            now_us += step_us;
            let m = report(now_us);
            black_box(policy.decide(black_box(&features(&m, now_us))))
        });
    });
}

fn report(now_us: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes: 60_000,
        lost_pkts: u64::from(now_us.is_multiple_of(7_000_000)),
        rtt_us: 50_000 + now_us % 7_000,
        min_rtt_us: 50_000,
        rate_incoming_bytes_per_sec: 1_200_000,
        ..Measurement::default()
    }
}

fn features(m: &Measurement, now_us: u64) -> Features<'_> {
    Features {
        measurement: m,
        current: 1,
        candidates: &NAMES,
        now_us,
        srtt_us: 50_000,
        reports: now_us / 50_000,
    }
}

criterion_group!(benches, decision);
criterion_main!(benches);
