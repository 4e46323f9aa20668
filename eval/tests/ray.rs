//! `run --ray`: a scenario's shards as tasks on a local Ray cluster give the files a local run
//! writes, byte for byte, also when a worker is killed mid-shard (Ray retries it; nothing is
//! counted twice). Needs a Python with `ray` (`make venv`); without one the test prints why and
//! returns, unless `CCP_RAY_REQUIRED=1` (as `make test` sets) makes that a failure.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;
use std::process::Command;

/// Three conditions (one with a path change), a native, a CCP and two selector schemes, two
/// seeds: 24 runs, series, swaps and explained decisions included.
const SCENARIO: &str = r#"
name = "ray-test"
duration_s = 4
seeds = [1, 2]
schemes = ["native-cubic", "bbr", "selector-rein", "selector-probe"]
series_interval_ms = 500

[[conditions]]
id = "10M-20ms"
bw_mbps = 10
rtt_ms = 20
buffer_bdp = 1.0

[[conditions]]
id = "20M-40ms-lossy"
bw_mbps = 20
rtt_ms = 40
buffer_bdp = 0.5
loss = 0.01

[[conditions]]
id = "10M-then-2M"
bw_mbps = 10
rtt_ms = 30
buffer_bdp = 2.0
[[conditions.phases]]
at_s = 2.0
bw_mbps = 2
"#;

const OUTPUTS: &[&str] = &[
    "results.csv",
    "series.csv",
    "swaps.csv",
    "decisions.csv",
    "selector.md",
    "summary.json",
    "report.md",
];

fn ray_available() -> Result<(), String> {
    let python = ccp_eval::ray::python();
    let ok = Command::new(&python)
        .args(["-c", "import ray"])
        .output()
        .is_ok_and(|o| o.status.success());
    if ok {
        Ok(())
    } else {
        Err(format!("no `ray` importable by {}", python.display()))
    }
}

fn ccp_eval(args: &[&str], env: &[(&str, &Path)]) -> String {
    // Ray keeps a session folder per cluster under its temp root: one of this call's own.
    let ray_root = tempfile::Builder::new()
        .prefix("ccp-ray-test-")
        .tempdir()
        .expect("a temp dir");
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_ccp-eval"));
    cmd.args(args).env("RAY_TMPDIR", ray_root.path());
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("ccp-eval runs");
    let stderr = String::from_utf8_lossy(&out.stderr).into_owned();
    assert!(out.status.success(), "ccp-eval {args:?} failed: {stderr}");
    stderr
}

fn assert_same_outputs(local: &Path, ray: &Path) {
    for f in OUTPUTS {
        let a = std::fs::read(local.join(f)).unwrap_or_else(|e| panic!("{f} (local): {e}"));
        let b = std::fs::read(ray.join(f)).unwrap_or_else(|e| panic!("{f} (ray): {e}"));
        assert!(a == b, "{f} differs between the local run and the Ray run");
    }
    assert!(
        !ray.join(".ray-shards").exists(),
        "the shards' working files were left behind"
    );
}

#[test]
fn ray_sweeps_match_a_local_run_even_when_a_worker_dies() {
    if let Err(why) = ray_available() {
        assert!(
            std::env::var("CCP_RAY_REQUIRED").as_deref() != Ok("1"),
            "CCP_RAY_REQUIRED=1 but {why}"
        );
        println!("skipped: {why}");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("ray-test.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let scenario = scenario.to_str().unwrap();
    let out = |name: &str| dir.path().join(name);
    let path = |name: &str| out(name).to_str().unwrap().to_string();

    ccp_eval(
        &["run", scenario, "--out", &path("local"), "--jobs", "2"],
        &[],
    );
    let log = ccp_eval(
        &[
            "run",
            scenario,
            "--out",
            &path("ray"),
            "--jobs",
            "2",
            "--ray",
            "--ray-shards",
            "4",
        ],
        &[],
    );
    assert_eq!(log.matches("ray: shard ").count(), 4, "{log}");
    assert_same_outputs(&out("local"), &out("ray"));

    // The first attempt of shard 0 kills its own worker (and the `ccp-eval` it started)
    // mid-shard; Ray runs the shard again and the merge takes each run once.
    let marker = out("killed");
    let log = ccp_eval(
        &[
            "run",
            scenario,
            "--out",
            &path("ray-killed"),
            "--jobs",
            "2",
            "--ray",
            "--ray-shards",
            "3",
        ],
        &[("CCP_RAY_TEST_KILL_MARKER", &marker)],
    );
    assert!(marker.exists(), "no worker was killed: {log}");
    assert_eq!(log.matches("ray: shard ").count(), 3, "{log}");
    assert_same_outputs(&out("local"), &out("ray-killed"));
}

#[test]
fn ray_refuses_what_it_cannot_shard() {
    let out = tempfile::tempdir().unwrap();
    for extra in [&["--shard", "0/2"][..], &["--realtime"][..]] {
        let mut args = vec![
            "run",
            "quick",
            "--out",
            out.path().to_str().unwrap(),
            "--ray",
        ];
        args.extend_from_slice(extra);
        let o = Command::new(env!("CARGO_BIN_EXE_ccp-eval"))
            .args(&args)
            .output()
            .unwrap();
        assert_eq!(o.status.code(), Some(2), "{args:?}");
        assert!(String::from_utf8_lossy(&o.stderr).contains("--ray"));
    }
}
