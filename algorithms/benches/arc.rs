//! ARC's inference with the shipped actor (`models/arc/actor.onnx`, FC128-FC128-tanh over 70
//! inputs) in ONNX Runtime: one `Actor::act` (what the inference thread does per decision), and
//! one whole report of an inline (deferred) flow (state, inference, rate rule). Needs ONNX
//! Runtime (`make venv` or `ORT_DYLIB_PATH`); without it the bench prints why and measures
//! nothing.

#![allow(missing_docs)]

use std::hint::black_box;
use std::path::Path;

use ccp_algorithms::arc::{ArcCc, ArcConfig, Inference};
use ccp_algorithms::{Algorithm, FlowStart, Handoff, Measurement};
use criterion::{Criterion, criterion_group, criterion_main};

fn percentile(sorted: &[u128], per_mille: usize) -> f64 {
    if sorted.is_empty() {
        return 0.0;
    }
    let i = (sorted.len() * per_mille / 1000).min(sorted.len() - 1);
    sorted[i] as f64 / 1e3
}

fn inference(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/arc/actor.onnx");
    let cfg = ArcConfig::with_model(&path).inference(Inference::Deferred);
    if let Err(e) = ccp_algorithms::AlgorithmConfig::ready(&cfg) {
        eprintln!("skipping arc inference bench: {e}");
        return;
    }
    let Some(actor) = cfg.store().current() else {
        return;
    };
    let state: Vec<f32> = (0..actor.input_len())
        .map(|i| (i % 7) as f32 * 0.3)
        .collect();
    let mut times_ns: Vec<u128> = (0..20_000)
        .map(|_| {
            let t = std::time::Instant::now();
            black_box(actor.act(black_box(&state)).ok());
            t.elapsed().as_nanos()
        })
        .collect();
    times_ns.sort_unstable();
    println!(
        "arc inference, {} inputs, {} samples: median {:.2} us, p99 {:.2} us, max {:.2} us",
        actor.input_len(),
        times_ns.len(),
        percentile(&times_ns, 500),
        percentile(&times_ns, 990),
        percentile(&times_ns, 1000)
    );
    c.bench_function("arc_inference", |b| {
        b.iter(|| black_box(actor.act(black_box(&state)).ok()));
    });
    let start = FlowStart {
        sock_id: 1,
        mss_bytes: 1448,
        init_cwnd_bytes: 14_480,
        seed: 1,
    };
    let mut flow = ArcCc::new(&cfg, &start);
    flow.activate(&Handoff::flow_start(&start));
    let mut now_us = 0u64;
    c.bench_function("arc_report_inline", |b| {
        b.iter(|| {
            now_us += 50_000;
            black_box(flow.on_report(black_box(&report(now_us))))
        });
    });
}

fn report(now_us: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes: 60_000,
        lost_pkts: u64::from(now_us.is_multiple_of(7_000_000)),
        rtt_us: 100_000 + now_us % 7_000,
        min_rtt_us: 100_000,
        rate_incoming_bytes_per_sec: 1_200_000,
        rate_outgoing_bytes_per_sec: 1_250_000,
        ..Measurement::default()
    }
}

criterion_group!(benches, inference);
criterion_main!(benches);
