//! Antelope's pipeline end to end through the `ccp-eval` binary: `gen-data` on a small
//! scenario, `train antelope`, then `run` with `selector-antelope` on those models, and the
//! errors for missing or broken models.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::Path;

const SCENARIO: &str = r#"
name = "antelope-small"
duration_s = 6
seeds = [1]

[grid]
env = "small"
bw_mbps = [5, 40]
rtt_ms = [20, 80]
loss = [0.0, 0.02]
buffer_bdp = [1.0]

[[flows]]
count = 1
"#;

fn eval(args: &[&str], models: Option<&Path>) -> std::process::Output {
    common::eval(args, "CCP_ANTELOPE_MODELS", models)
}

#[test]
fn gen_data_train_and_run_selector_antelope() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("small.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let sc = scenario.to_str().unwrap();
    let data = dir.path().join("data");
    let models = dir.path().join("models");

    let o = eval(&["gen-data", sc, "--out", data.to_str().unwrap()], None);
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let samples = std::fs::read_to_string(data.join("samples.csv")).unwrap();
    let rows = samples.lines().count() - 1;
    assert!(rows > 500, "only {rows} samples");
    // Random switching reached more than a handful of candidates.
    let ccas: std::collections::BTreeSet<&str> = samples
        .lines()
        .skip(1)
        .filter_map(|l| l.split(',').nth(7))
        .collect();
    assert!(ccas.len() >= 6, "{ccas:?}");

    let o = eval(
        &[
            "train",
            "antelope",
            data.to_str().unwrap(),
            "--out",
            models.to_str().unwrap(),
        ],
        None,
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    assert!(models.join("manifest.json").exists());

    let out = dir.path().join("run");
    let o = eval(
        &[
            "run",
            sc,
            "--out",
            out.to_str().unwrap(),
            "--schemes",
            "selector-antelope,cubic",
        ],
        Some(&models),
    );
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let results = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(results.matches("selector-antelope").count(), 8 * 2);
    // The trace of swaps is written, naming candidates.
    let swaps = std::fs::read_to_string(out.join("swaps.csv")).unwrap();
    assert!(swaps.lines().count() > 1);
    assert!(
        swaps
            .lines()
            .skip(1)
            .all(|l| l.contains("selector-antelope"))
    );
}

/// `ccp-eval run quick --schemes selector-antelope` with models from `models`.
fn run_antelope(out: &Path, models: &Path) -> std::process::Output {
    eval(
        &[
            "run",
            "quick",
            "--out",
            out.to_str().unwrap(),
            "--schemes",
            "selector-antelope",
        ],
        Some(models),
    )
}

#[test]
fn missing_or_broken_models_are_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let out = dir.path().join("run");
    let missing = dir.path().join("nothing-here");
    let o = run_antelope(&out, &missing);
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(
        err.contains("selector-antelope") && err.contains("manifest.json"),
        "{err}"
    );
    assert!(!out.join("results.csv").exists());

    std::fs::create_dir_all(&missing).unwrap();
    std::fs::write(missing.join("manifest.json"), "{ broken").unwrap();
    let o = run_antelope(&out, &missing);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("not a valid model manifest"));

    // A samples file with a bad line names it.
    let bad = dir.path().join("samples.csv");
    std::fs::write(&bad, "nonsense\n").unwrap();
    let o = eval(
        &[
            "train",
            "antelope",
            bad.to_str().unwrap(),
            "--out",
            dir.path().join("m").to_str().unwrap(),
        ],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains(":1:"));
}
