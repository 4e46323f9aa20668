//! One `onnx` policy decision (feature update + inference + argmax) over the example model
//! (`selector/models/example-onnx`), on the candidates it was trained over. Needs ONNX Runtime
//! (`make venv` or `ORT_DYLIB_PATH`); without it the bench prints why and measures nothing.

#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use ccp_selector::SelectionPolicy;
use ccp_selector::onnx::{OnnxModel, OnnxPolicy};
use common::{features, report, sidecar_candidates, timed_pass};
use criterion::{Criterion, criterion_group, criterion_main};

/// One loss every three reports.
const LOSS_EVERY_US: u64 = 150_000;

fn decision(c: &mut Criterion) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/example-onnx");
    let loaded = sidecar_candidates(&dir.join("policy.json")).and_then(|names| {
        OnnxModel::load(&dir.join("policy.onnx"), &names)
            .map(|m| (Arc::new(m), names))
            .map_err(|e| e.to_string())
    });
    let (model, names) = match loaded {
        Ok(m) => m,
        Err(e) => {
            eprintln!("skipping onnx decision bench: {e}");
            return;
        }
    };
    let mut policy = OnnxPolicy::new(model, 1);
    let mut now_us = 0u64;
    // Criterion reports the mean; the tail needs per-decision times, so time 20,000 single
    // decisions too and print their median and p99.
    let summary = timed_pass(20_000, 50_000, &mut now_us, |now| {
        let m = report(now, LOSS_EVERY_US);
        black_box(policy.decide(&features(&m, now, &names)));
    });
    println!("onnx decision, {} candidates, {summary}", names.len());
    c.bench_function(&format!("onnx_decision_{}_candidates", names.len()), |b| {
        b.iter(|| {
            now_us += 50_000;
            let m = report(now_us, LOSS_EVERY_US);
            black_box(policy.decide(black_box(&features(&m, now_us, &names))))
        });
    });
}

criterion_group!(benches, decision);
criterion_main!(benches);
