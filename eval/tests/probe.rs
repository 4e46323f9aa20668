//! The probe policy's pipeline end to end through the `ccp-eval` binary: `gen-data --kind
//! probe` on a small scenario (every flow probed on its start, then switched to each candidate
//! in turn), `train probe`, then `run` with `selector-probe` on those models; and the errors
//! for data that does not fit together.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

const SCENARIO: &str = r#"
name = "probe-small"
duration_s = 6
seeds = [1, 2]

[grid]
env = "small"
bw_mbps = [5, 20]
rtt_ms = [20, 60]
loss = [0.0, 0.01]
buffer_bdp = [1.0]

[[flows]]
count = 1
"#;

fn eval(args: &[&str], models: Option<&Path>) -> std::process::Output {
    common::eval(args, "CCP_PROBE_MODELS", models)
}

fn ok(o: &std::process::Output) {
    assert!(
        o.status.success(),
        "{}{}",
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    );
}

#[test]
fn gen_data_train_and_run_selector_probe() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("small.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let sc = scenario.to_str().unwrap();
    let data = dir.path().join("data");
    let models = dir.path().join("models");

    let o = eval(
        &[
            "gen-data",
            sc,
            "--kind",
            "probe",
            "--out",
            data.to_str().unwrap(),
        ],
        None,
    );
    ok(&o);
    let meta: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(data.join("probe.json")).unwrap()).unwrap();
    assert_eq!(meta["window"]["min_ms"], 1500);
    let starts = meta["starts"].as_object().unwrap();
    assert_eq!(starts.len(), 3, "a start per mode: {starts:?}");

    check_rows(&data);

    let o = eval(
        &[
            "train",
            "probe",
            data.to_str().unwrap(),
            "--out",
            models.to_str().unwrap(),
        ],
        None,
    );
    ok(&o);
    assert!(models.join("manifest.json").exists());
    let summary = String::from_utf8_lossy(&o.stdout);
    assert!(summary.contains("bags: 1;"), "{summary}");
    assert!(models.join("bag0").is_dir());

    let out = dir.path().join("run");
    let o = eval(
        &[
            "run",
            sc,
            "--schemes",
            "selector-probe",
            "--out",
            out.to_str().unwrap(),
        ],
        Some(&models),
    );
    ok(&o);
    let results = std::fs::read_to_string(out.join("results.csv")).unwrap();
    assert_eq!(
        results
            .lines()
            .filter(|l| l.contains("selector-probe") && l.contains(",main,"))
            .count(),
        16
    );
    // One decision per flow: at most one swap each.
    let swaps = std::fs::read_to_string(out.join("swaps.csv")).unwrap_or_default();
    let mut per_flow: BTreeMap<String, usize> = BTreeMap::new();
    for l in swaps.lines().skip(1) {
        let c: Vec<&str> = l.split(',').collect();
        *per_flow.entry(format!("{}/{}", c[1], c[4])).or_default() += 1;
    }
    assert!(per_flow.values().all(|n| *n <= 1), "{per_flow:?}");
    check_decisions(&out, &swaps);

    refuses_data_that_does_not_fit(dir.path(), &data, &models);
    kind_settings_that_cannot_be_used(dir.path(), sc, &data, &models);
}

/// The kind model's settings that cannot be used: an unknown classifier is refused, and a
/// second look whose model does not load is said once while the run goes on without it.
fn kind_settings_that_cannot_be_used(dir: &Path, sc: &str, data: &Path, models: &Path) {
    // A second look at the kind whose model does not load: said once, and the run goes on
    // without it.
    let o = std::process::Command::new(env!("CARGO_BIN_EXE_ccp-eval"))
        .args(["run", sc, "--schemes", "selector-probe", "--out"])
        .arg(dir.join("run-later-kind"))
        .env("CCP_PROBE_MODELS", models)
        .env("CCP_PROBE_LATER_KIND", dir.join("no-such-model"))
        .env(
            "CCP_LPTCP_MODEL",
            Path::new(env!("CARGO_MANIFEST_DIR"))
                .join("../algorithms/tests/fixtures/lptcp-forest.json"),
        )
        .output()
        .unwrap();
    ok(&o);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(
        err.matches("without its second look at the kind").count(),
        1,
        "{err}"
    );

    // The kind model's classifier is one of two, named.
    let kind = dir.join("kind");
    let o = eval(
        &[
            "train",
            "probe-kind",
            data.to_str().unwrap(),
            "--classifier",
            "forest",
            "--out",
            kind.to_str().unwrap(),
        ],
        None,
    );
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--classifier \"forest\""), "{err}");
    assert!(!kind.exists());
}

/// `decisions.csv` explains every selector flow's choice at the probe's end (the part of the
/// policy that made it, the probe's features and a score per candidate) and every switch it
/// made.
fn check_decisions(out: &Path, swaps: &str) {
    let text = std::fs::read_to_string(out.join("decisions.csv")).unwrap();
    let mut lines = text.lines();
    assert_eq!(
        lines.next(),
        Some("scenario,condition,scheme,seed,sock_id,t_s,from,to,by,features,scores")
    );
    let parts: Vec<&str> = ccp_selector::probe::Part::ALL
        .iter()
        .map(|p| p.as_str())
        .collect();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let flows: BTreeSet<(&str, &str, &str)> = rows.iter().map(|r| (r[1], r[3], r[4])).collect();
    assert_eq!(
        flows.len(),
        16,
        "one explained flow per flow under test: {flows:?}"
    );
    for r in &rows {
        assert_eq!(r.len(), 11, "{r:?}");
        assert!(parts.contains(&r[8]), "a part of the probe policy: {r:?}");
        // Nothing here is forced, handed over (no delay-mode port) or delegated.
        assert!(!["forced", "handover", "delegate"].contains(&r[8]), "{r:?}");
        assert_eq!(
            r[9].split(';').count(),
            ccp_selector::probe::N_FEATURES,
            "{r:?}"
        );
        let scored: BTreeSet<&str> = r[10]
            .split(';')
            .map(|s| s.split_once('=').unwrap().0)
            .collect();
        assert_eq!(scored.len(), 12, "a score per candidate: {r:?}");
        assert!(scored.contains("copa") && scored.contains("bbr"), "{r:?}");
        let min_rtt: f64 = r[9].split(';').next().unwrap().parse().unwrap();
        assert!(min_rtt > 0.0, "{r:?}");
    }
    for l in swaps.lines().skip(1) {
        let c: Vec<&str> = l.split(',').collect();
        if c[6] == c[7] {
            continue; // a re-seat (a path change or the drain), not a choice
        }
        // (condition, seed, sock, from, to) of the swap, asked for in a decision before it.
        assert!(
            rows.iter().any(
                |r| (r[1], r[3], r[4], r[6], r[7]) == (c[1], c[3], c[4], c[6], c[7])
                    && r[5].parse::<f64>().unwrap() <= c[5].parse::<f64>().unwrap()
            ),
            "swap {l} has no decision"
        );
    }
}

/// Every (condition, seed, mode) has one row per candidate, the stay row among them, and the
/// features of one start are the same in every row: the runs differ only after the probe.
fn check_rows(data: &Path) {
    let text = std::fs::read_to_string(data.join("probe.csv")).unwrap();
    let mut groups: BTreeMap<(String, String, String), Vec<Vec<String>>> = BTreeMap::new();
    for line in text.lines().skip(1) {
        let cols: Vec<String> = line.split(',').map(String::from).collect();
        assert_eq!(cols.len(), 6 + ccp_selector::probe::N_FEATURES, "{line}");
        groups
            .entry((cols[0].clone(), cols[1].clone(), cols[2].clone()))
            .or_default()
            .push(cols);
    }
    assert_eq!(groups.len(), 8 * 2 * 3, "{:?}", groups.keys());
    for ((cond, _, mode), rows) in &groups {
        let targets: BTreeSet<&str> = rows.iter().map(|r| r[4].as_str()).collect();
        assert_eq!(targets.len(), 12, "{cond} {mode}: {targets:?}");
        let start = &rows[0][3];
        assert!(targets.contains(start.as_str()));
        assert!(rows.iter().all(|r| r[6..] == rows[0][6..]), "{cond} {mode}");
        // The probe saw the path: its minimum RTT is one of the grid's (plus serialization).
        let min_rtt: f64 = rows[0][6].parse().unwrap();
        assert!(
            [20.0, 60.0]
                .iter()
                .any(|w| min_rtt >= *w && min_rtt < w * 1.2),
            "{cond}: {min_rtt}"
        );
    }
    // The switch changed something: scores differ between targets.
    assert!(
        groups.values().any(|rows| {
            let scores: BTreeSet<&str> = rows.iter().map(|r| r[5].as_str()).collect();
            scores.len() > 3
        }),
        "every switch scored the same"
    );
}

/// Data with other windows does not train together; a bad file is an error, not a panic.
fn refuses_data_that_does_not_fit(dir: &Path, data: &Path, models: &Path) {
    let other = dir.join("other");
    std::fs::create_dir_all(&other).unwrap();
    std::fs::copy(data.join("probe.csv"), other.join("probe.csv")).unwrap();
    // The same rows, recorded with another window.
    let other_window = || {
        let meta = std::fs::read_to_string(data.join("probe.json")).unwrap();
        std::fs::write(other.join("probe.json"), meta.replace("1500", "900")).unwrap();
    };
    other_window();
    let both = [
        "train",
        "probe",
        data.to_str().unwrap(),
        other.to_str().unwrap(),
        "--out",
        models.to_str().unwrap(),
    ];
    let o = eval(&both, None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("differ"));
    std::fs::write(other.join("probe.json"), "{").unwrap();
    let o = eval(&both, None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("probe.json"));
    // Three bags: three folders.
    let bagged = dir.join("bagged");
    let o = train_probe(data, &bagged, &["--bags", "3"]);
    ok(&o);
    assert!(String::from_utf8_lossy(&o.stdout).contains("bags: 3;"));
    assert!((0..3).all(|k| bagged.join(format!("bag{k}")).is_dir()));
    let o = train_probe(data, models, &["--bags", "0"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--bags"));
    let o = train_probe(data, models, &["--folds", "1"]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("--folds"));
    // A held-out set is scored and its predictions written, one row per flow and target; one
    // recorded with another window is refused like training data.
    let preds = dir.join("predictions");
    let (d, p) = (data.to_str().unwrap(), preds.to_str().unwrap());
    let o = train_probe(data, models, &["--holdout", d, "--predictions", p]);
    ok(&o);
    let out = String::from_utf8_lossy(&o.stdout);
    assert!(out.contains("held out (margin"), "{out}");
    let rows = std::fs::read_to_string(preds.join("holdout.csv")).unwrap();
    let data_rows = std::fs::read_to_string(data.join("probe.csv")).unwrap();
    assert_eq!(rows.lines().count(), data_rows.lines().count());
    assert!(rows.starts_with("condition,seed,mode,target,predicted,gain\n"));
    assert!(!preds.join("cv.csv").exists());
    other_window();
    let o = train_probe(data, models, &["--holdout", other.to_str().unwrap()]);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("differ"));
    // A saved set scored on the rows it was fitted on: the same table as --holdout printed.
    let m = models.to_str().unwrap();
    let o = eval(&["score-probe", m, d, "--predictions", p], None);
    ok(&o);
    let scored = String::from_utf8_lossy(&o.stdout);
    let line = |s: &str| {
        s.split("(margin")
            .nth(1)
            .map(|t| t.lines().next().unwrap().to_string())
    };
    assert_eq!(line(&scored), line(&out), "{scored}");
    assert_eq!(
        std::fs::read_to_string(preds.join("holdout.csv")).unwrap(),
        rows
    );
    let o = eval(&["score-probe", m, other.to_str().unwrap()], None);
    assert_eq!(o.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&o.stderr).contains("differ"));
    let o = eval(
        &["score-probe", dir.join("none").to_str().unwrap(), d],
        None,
    );
    assert_eq!(o.status.code(), Some(2));
}

/// `ccp-eval train probe DATA --out OUT` with `extra` arguments.
fn train_probe(data: &Path, out: &Path, extra: &[&str]) -> std::process::Output {
    let mut args = vec![
        "train",
        "probe",
        data.to_str().unwrap(),
        "--out",
        out.to_str().unwrap(),
    ];
    args.extend_from_slice(extra);
    eval(&args, None)
}
