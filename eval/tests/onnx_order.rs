//! `ccp-eval`'s selectors offer the candidates in the example ONNX model's own order (the
//! policy maps any order by name: `selector/tests/onnx.rs`).

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

#[test]
fn the_selectors_candidates_are_the_example_models() {
    let sidecar =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("../selector/models/example-onnx/policy.json");
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(sidecar).unwrap()).unwrap();
    let model: Vec<&str> = json["candidates"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c.as_str().unwrap())
        .collect();
    assert_eq!(model, ccp_eval::selectors::candidate_names());
}
