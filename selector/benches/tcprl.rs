//! One `tcprl` policy decision at a step's end (feature window, observation, the DNC and one
//! LSTM step of the policy network in ONNX Runtime, argmax) over the shipped model
//! (`selector/models/tcprl`), on the candidates it was trained over. Needs ONNX Runtime
//! (`make venv` or `ORT_DYLIB_PATH`); without it the bench prints why and measures nothing.

#![allow(missing_docs)]

mod common;

use std::hint::black_box;
use std::path::Path;
use std::sync::Arc;

use ccp_selector::SelectionPolicy;
use ccp_selector::tcprl::{TcpRlModel, TcpRlPolicy};
use common::{features, report, sidecar_candidates, timed_pass};
use criterion::{Criterion, criterion_group, criterion_main};

/// One loss every 7 s of reports.
const LOSS_EVERY_US: u64 = 7_000_000;

fn decision(c: &mut Criterion) {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tcprl/tcprl.json");
    let loaded = sidecar_candidates(&path).and_then(|names| {
        TcpRlModel::load(&path, &names)
            .map(|m| (Arc::new(m), names))
            .map_err(|e| e.to_string())
    });
    let (model, names) = match loaded {
        Ok(m) => m,
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
    let summary = timed_pass(20_000, step_us, &mut now_us, |now| {
        let m = report(now, LOSS_EVERY_US);
        black_box(policy.decide(&features(&m, now, &names)));
    });
    assert_eq!(policy.errors(), 0);
    println!(
        "tcprl decision (DNC {}), {} candidates, {summary}",
        if model.has_dnc() { "on" } else { "absent" },
        names.len()
    );
    c.bench_function(&format!("tcprl_decision_{}_candidates", names.len()), |b| {
        b.iter(|| {
            now_us += step_us;
            let m = report(now_us, LOSS_EVERY_US);
            black_box(policy.decide(black_box(&features(&m, now_us, &names))))
        });
    });
}

criterion_group!(benches, decision);
criterion_main!(benches);
