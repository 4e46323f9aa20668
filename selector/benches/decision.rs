//! One `onnx` policy decision (feature update + inference + argmax) over the 9-candidate
//! example model. Needs ONNX Runtime (`make venv` or `ORT_DYLIB_PATH`); without it the bench
//! prints why and measures nothing.

#![allow(missing_docs)]

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use ccp_algorithms::Measurement;
use ccp_selector::onnx::{OnnxModel, OnnxPolicy};
use ccp_selector::{Features, SelectionPolicy};
use criterion::{Criterion, criterion_group, criterion_main};

const NAMES: [&str; 9] = [
    "reno", "cubic", "bbr", "vegas", "westwood", "illinois", "copa", "c2tcp", "vivace",
];

fn decision(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/example-onnx/policy.onnx");
    let model = match OnnxModel::load(&path, &NAMES) {
        Ok(m) => Arc::new(m),
        Err(e) => {
            eprintln!("skipping onnx decision bench: {e}");
            return;
        }
    };
    let mut policy = OnnxPolicy::new(model, 1);
    let mut now_us = 0u64;
    c.bench_function("onnx_decision_9_candidates", |b| {
        b.iter(|| {
            now_us += 50_000;
            let m = Measurement {
                now_us,
                acked_bytes: 60_000,
                lost_pkts: u64::from(now_us.is_multiple_of(150_000)),
                rtt_us: 50_000 + now_us % 7_000,
                min_rtt_us: 50_000,
                rate_incoming_bytes_per_sec: 1_200_000,
                ..Measurement::default()
            };
            black_box(policy.decide(black_box(&Features {
                measurement: &m,
                current: 1,
                candidates: &NAMES,
                now_us,
                srtt_us: 50_000,
                reports: now_us / 50_000,
            })))
        });
    });
}

criterion_group!(benches, decision);
criterion_main!(benches);
