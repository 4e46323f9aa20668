//! The shipped example ONNX model (`selector/models/example-onnx`) with the selector's
//! candidates in another order than the model's: the agent's default (`reno` first, the
//! suite's order) and a reversed one. It must load and decide exactly as in the model's own
//! order, by candidate name.
//!
//! Needs ONNX Runtime (`make venv`, or `ORT_DYLIB_PATH`); without it the test prints one line
//! and passes, unless `CCP_ONNX_REQUIRED` is set (the Makefile sets it).

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers; a failure is a test failure"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ccp_algorithms::Measurement;
use ccp_selector::onnx::{OnnxError, OnnxModel, OnnxPolicy};
use ccp_selector::{Decision, Features, SelectionPolicy};
use serde::Deserialize;

#[derive(Deserialize)]
struct Report {
    now_us: u64,
    acked_bytes: u64,
    sacked_bytes: u64,
    lost_pkts: u64,
    timeout: bool,
    rtt_us: u64,
    min_rtt_us: u64,
    rate_incoming_bytes_per_sec: u64,
}

#[derive(Deserialize)]
struct Reference {
    name: String,
    current: usize,
    reports: Vec<Report>,
    scores: Vec<f32>,
    sklearn_argmax: usize,
}

#[derive(Deserialize)]
struct Sidecar {
    candidates: Vec<String>,
    references: Vec<Reference>,
}

fn model_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../selector/models/example-onnx/policy.onnx")
}

/// The model for `order`, or `None` when ONNX Runtime is absent and not required.
fn load(order: &[&'static str]) -> Option<Arc<OnnxModel>> {
    match OnnxModel::load(&model_path(), order) {
        Ok(m) => Some(Arc::new(m)),
        Err(e @ OnnxError::LibraryNotFound { .. })
            if std::env::var_os("CCP_ONNX_REQUIRED").is_none() =>
        {
            println!("skipping onnx order test: {e}");
            None
        }
        Err(e) => panic!("loading the example model for {order:?}: {e}"),
    }
}

fn measurement(r: &Report) -> Measurement {
    Measurement {
        now_us: r.now_us,
        acked_bytes: r.acked_bytes,
        sacked_bytes: r.sacked_bytes,
        lost_pkts: r.lost_pkts,
        timeout: r.timeout,
        rtt_us: r.rtt_us,
        min_rtt_us: r.min_rtt_us,
        rate_incoming_bytes_per_sec: r.rate_incoming_bytes_per_sec,
        ..Measurement::default()
    }
}

#[test]
fn example_model_decides_by_name_whatever_the_candidate_order() {
    // Before this fix any order but the model's was refused ("does not match: candidates").
    let text = std::fs::read_to_string(model_path().with_extension("json")).unwrap();
    let sidecar: Sidecar = serde_json::from_str(&text).unwrap();
    let model_names: Vec<&str> = sidecar.candidates.iter().map(String::as_str).collect();
    assert_eq!(
        model_names,
        ccp_eval::selectors::candidate_names(),
        "ccp-eval's selectors use the model's order"
    );
    let suite: Vec<&'static str> = ccp_algorithms::suite().iter().map(|c| c.name()).collect();
    assert_ne!(
        suite, model_names,
        "the suite (the agent's default) starts with reno"
    );
    let mut reversed = ccp_eval::selectors::candidate_names();
    reversed.reverse();
    for order in [suite, reversed] {
        let Some(model) = load(&order) else { return };
        let pos = |model_index: usize| {
            order
                .iter()
                .position(|n| *n == model_names[model_index])
                .unwrap()
        };
        for r in &sidecar.references {
            let current = pos(r.current);
            let mut policy = OnnxPolicy::new(model.clone(), current);
            let mut last = Decision::Stay;
            for (i, rep) in r.reports.iter().enumerate() {
                last = policy.decide(&Features {
                    measurement: &measurement(rep),
                    current,
                    candidates: &order,
                    now_us: rep.now_us,
                    srtt_us: rep.rtt_us,
                    reports: i as u64 + 1,
                });
            }
            // Scores come back in the selector's order...
            for (k, name) in order.iter().enumerate() {
                let m = model_names.iter().position(|n| n == name).unwrap();
                let (got, want) = (policy.scores()[k], r.scores[m]);
                assert!(
                    (got - want).abs() < 1e-4,
                    "{}: {name}: {got} vs {want}",
                    r.name
                );
            }
            // ...and the decision names the model's choice.
            let best = pos(r.sklearn_argmax);
            let want = if best == current {
                Decision::Stay
            } else {
                Decision::SwitchTo(best)
            };
            assert_eq!(last, want, "{} with {order:?}", r.name);
            assert_eq!(policy.errors(), 0);
        }
    }
}

#[test]
fn other_candidates_are_refused_saying_which_are_needed() {
    let Some(_) = load(&ccp_eval::selectors::candidate_names()) else {
        return;
    };
    let mut names = ccp_eval::selectors::candidate_names();
    names[8] = "reno";
    let err = OnnxModel::load(&model_path(), &names)
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("candidates") && err.contains("vivace") && err.contains("any order"),
        "{err}"
    );
}
