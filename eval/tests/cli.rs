//! The `ccp-eval` binary on bad input and on a re-used output directory.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    reason = "test helpers; a failure is a test failure"
)]

use std::collections::BTreeSet;
use std::path::Path;
use std::process::{Command, Output};

fn ccp_eval(args: &[&str], dir: &Path) -> Output {
    Command::new(env!("CARGO_BIN_EXE_ccp-eval"))
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap()
}

fn stderr(o: &Output) -> String {
    String::from_utf8_lossy(&o.stderr).to_string()
}

/// Every file under `dir`, relative to it.
fn files(dir: &Path) -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        for e in std::fs::read_dir(&d).unwrap() {
            let p = e.unwrap().path();
            if p.is_dir() {
                todo.push(p);
            } else {
                let rel = p.strip_prefix(dir).unwrap();
                out.insert(rel.to_string_lossy().to_string());
            }
        }
    }
    out
}

const TWO: &str = r#"
name = "two"
duration_s = 1
series_interval_ms = 100
schemes = ["native-cubic", "native-reno"]
[[conditions]]
env = "wan"
bw_mbps = 10
rtt_ms = 20
[[conditions]]
env = "lan"
bw_mbps = 20
rtt_ms = 2
"#;

const ONE: &str = r#"
name = "one"
duration_s = 1
series_interval_ms = 100
schemes = ["native-reno"]
[[conditions]]
env = "wan"
bw_mbps = 5
rtt_ms = 20
"#;

#[test]
fn a_rerun_with_fewer_conditions_and_schemes_leaves_no_stale_file() {
    // Before this fix plots/series_* and tput_vs_delay_lan.svg of the first run stayed.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::write(d.join("two.toml"), TWO).unwrap();
    std::fs::write(d.join("one.toml"), ONE).unwrap();
    let o = ccp_eval(&["run", "two.toml", "--out", "out"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let first = files(&d.join("out"));
    assert!(first.contains("plots/tput_vs_delay_lan.svg"), "{first:?}");
    // A researcher's own files.
    std::fs::write(d.join("out/notes.md"), "mine").unwrap();
    std::fs::write(d.join("out/plots/sketch.png"), "mine").unwrap();

    let o = ccp_eval(&["run", "one.toml", "--out", "out"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ccp_eval(&["run", "one.toml", "--out", "fresh"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let mut want = files(&d.join("fresh"));
    want.insert("notes.md".into());
    want.insert("plots/sketch.png".into());
    assert_eq!(files(&d.join("out")), want);

    // `report` into a directory of another run: the same.
    let o = ccp_eval(&["run", "two.toml", "--out", "other"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    let o = ccp_eval(&["report", "fresh", "--out", "other"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(files(&d.join("other")), files(&d.join("fresh")));
    // In place, a report leaves the same files as the run.
    let o = ccp_eval(&["report", "fresh"], d);
    assert!(o.status.success(), "{}", stderr(&o));
    assert_eq!(files(&d.join("other")), files(&d.join("fresh")));
}

#[test]
fn out_of_range_scenario_fields_exit_2_naming_file_line_and_field() {
    // Before this fix `stagger_s = inf` was accepted and the scenario ran.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    let text = format!("{ONE}[[flows]]\ncount = 2\nstagger_s = inf\n");
    std::fs::write(d.join("bad.toml"), text).unwrap();
    let o = ccp_eval(&["run", "bad.toml", "--out", "out"], d);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(
        err.contains("bad.toml:12: flows[0].stagger_s: must be"),
        "{err}"
    );
    assert!(!d.join("out").exists(), "nothing is written");
}

#[test]
fn report_on_a_cut_off_results_csv_exits_2_naming_the_file() {
    // Before this fix a header cut off made an empty report and exit 0.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    std::fs::create_dir(d.join("cut")).unwrap();
    std::fs::write(d.join("cut/results.csv"), "scenario,env,condition,bw_mb").unwrap();
    let o = ccp_eval(&["report", "cut", "--out", "rep"], d);
    let err = stderr(&o);
    assert_eq!(o.status.code(), Some(2), "{err}");
    assert!(err.contains("cut/results.csv:1: cut off"), "{err}");
    assert!(!d.join("rep/report.md").exists());
}

#[test]
fn a_run_without_time_series_writes_no_series_csv_and_its_directory_reports() {
    let d = tempfile::tempdir().unwrap();
    std::fs::write(
        d.path().join("s.toml"),
        "name = \"s\"\nduration_s = 1\nschemes = [\"native-reno\"]\n[[conditions]]\nbw_mbps = 5\nrtt_ms = 20\n",
    )
    .unwrap();
    let o = ccp_eval(&["run", "s.toml", "--out", "r", "--jobs", "1"], d.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(!d.path().join("r/series.csv").exists());
    let o = ccp_eval(&["report", "r", "--out", "r2"], d.path());
    assert!(o.status.success(), "{}", stderr(&o));
    assert!(d.path().join("r2/report.md").is_file());
}

#[test]
fn a_selector_whose_candidate_cannot_load_exits_2_naming_the_candidate() {
    // Before this fix a selector ran ARC without its actor (ONNX Runtime not found from the
    // current directory) as ARC's fallback, and reported those numbers as its own.
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    for args in [
        &["run", "quick", "--schemes", "selector-rein", "--out", "out"][..],
        &["gen-data", "quick", "--kind", "probe", "--out", "data"][..],
    ] {
        let o = Command::new(env!("CARGO_BIN_EXE_ccp-eval"))
            .args(args)
            .current_dir(d)
            .env("CCP_ARC_MODEL", d.join("no-actor.onnx"))
            .output()
            .unwrap();
        let err = stderr(&o);
        assert_eq!(o.status.code(), Some(2), "{args:?}: {err}");
        assert!(
            err.contains("candidate arc: ") && err.contains("no-actor"),
            "{err}"
        );
    }
    assert!(
        !d.join("out").exists() && !d.join("data").exists(),
        "nothing is written"
    );
}
