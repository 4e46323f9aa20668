//! The ns-3 comparison (`eval/ns3/`, `docs/calibration-ns3.md`): its
//! driver runs two calibration conditions through ns-3's TCP models and writes a `results.csv`
//! that `ccp-eval agree` reads, with the path's physics in it (a full link and a full buffer
//! on a loss-free path, the random loss rate and a loss-limited rate on a lossy one), and its
//! random loss is drawn from the testbed's generator.
//!
//! ns-3 is optional (`make ns3` installs Debian's 3.37): without it this test says so and
//! passes.

use std::path::{Path, PathBuf};
use std::process::Command;

use ccp_datapath::sim::rng::Rng;
use ccp_eval::agree;
use ccp_eval::results::read_rows;

fn root() -> PathBuf {
    let manifest = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest.parent().unwrap_or(manifest).to_path_buf()
}

const SCENARIO: &str = r#"
name = "ns3-check"
duration_s = 10
seeds = [1]
schemes = ["native-cubic", "native-reno"]

[[conditions]]
env = "calibrate"
id = "10M-20ms-2bdp"
bw_mbps = 10
rtt_ms = 20
buffer_bdp = 2.0

[[conditions]]
env = "calibrate"
id = "10M-20ms-0.5bdp-1pct"
bw_mbps = 10
rtt_ms = 20
loss = 0.01
buffer_bdp = 0.5
"#;

/// The loss generator is the testbed relay's and the simulator's (`Rng::derive(seed, 1)`, one
/// draw per data-direction frame), so a seed drops the same frame indices on all three.
fn check_generator(bin: &Path) {
    for seed in [1u64, 2, 17] {
        let out = Command::new(bin)
            .args(["--rngCheck=1000", &format!("--seed={seed}")])
            .output()
            .unwrap_or_else(|e| panic!("running {}: {e}", bin.display()));
        assert!(out.status.success());
        let mut rng = Rng::derive(seed, 1);
        let want: Vec<String> = (0..1000).map(|_| rng.next_u64().to_string()).collect();
        let text = String::from_utf8_lossy(&out.stdout);
        let got: Vec<&str> = text.lines().collect();
        assert_eq!(got, want, "seed {seed}");
    }
}

#[test]
fn ns3_driver_writes_rows_agree_reads() {
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join("ns3-calibrate");
    std::fs::create_dir_all(&dir).unwrap();
    // Builds the ns-3 program into the test's directory; exit 3: ns-3 is not installed.
    let bin = dir.join("calibrate");
    let out = Command::new(root().join("eval/ns3/build.sh"))
        .arg(&bin)
        .output()
        .expect("running eval/ns3/build.sh");
    match out.status.code() {
        Some(0) => {}
        Some(3) => {
            eprintln!("skipped: {}", String::from_utf8_lossy(&out.stderr).trim());
            return;
        }
        _ => panic!(
            "eval/ns3/build.sh failed: {}",
            String::from_utf8_lossy(&out.stderr)
        ),
    }
    let scenario = dir.join("ns3-check.toml");
    std::fs::write(&scenario, SCENARIO).unwrap();
    let out = dir.join("out");
    let run = Command::new("python3")
        .arg(root().join("eval/ns3/run.py"))
        .arg(&scenario)
        .arg("--out")
        .arg(&out)
        .args(["--jobs", "1", "--binary"])
        .arg(&bin)
        .output()
        .expect("running eval/ns3/run.py");
    assert!(
        run.status.success(),
        "run.py: {}{}",
        String::from_utf8_lossy(&run.stdout),
        String::from_utf8_lossy(&run.stderr)
    );
    let rows = read_rows(&out.join("results.csv")).expect("results.csv in ccp-eval's schema");
    assert_eq!(rows.len(), 4, "2 conditions x 2 schemes x 1 seed");
    for r in &rows {
        assert_eq!(r.status, "ok", "{r:?}");
        assert_eq!(r.role, "main");
        assert_eq!(r.seed, 1);
        assert_eq!(r.scenario, "ns3-check");
        // The runner's buffer: 0.5 and 2 BDP of 10 Mbit/s x 20 ms (25,000 bytes).
        let want = if r.condition.contains("2bdp") {
            50_000
        } else {
            12_500
        };
        assert_eq!(r.buffer_bytes, want, "{}", r.condition);
        // Never below the path's RTT; p95_rtt_ms is the same srtt series, as on the kernel.
        assert!(r.p95_srtt_ms >= 20.0, "{r:?}");
        assert!((r.p95_rtt_ms - r.p95_srtt_ms).abs() < 1e-9, "{r:?}");
    }
    for r in rows.iter().filter(|r| r.loss == 0.0) {
        // A full link (goodput tops out at 1448/1514 of the frame rate, plus the bytes in
        // flight at the end) and a full 2-BDP buffer (33 frames of 1.2 ms) at the p95.
        assert!(
            (0.93..=0.97).contains(&r.utilization),
            "{}: {}",
            r.scheme,
            r.utilization
        );
        assert!(
            (55.0..=63.0).contains(&r.p95_srtt_ms),
            "{}: {}",
            r.scheme,
            r.p95_srtt_ms
        );
        assert!(r.loss_rate < 0.02, "{}: {}", r.scheme, r.loss_rate);
    }
    for r in rows.iter().filter(|r| r.loss > 0.0) {
        // Retransmissions are the random losses (1 %: about 20-60 of ~2,000-5,000 segments),
        // and the rate is loss-limited, well below the link's.
        assert!(
            (0.004..=0.02).contains(&r.loss_rate),
            "{}: {}",
            r.scheme,
            r.loss_rate
        );
        assert!(
            (0.05..0.85).contains(&r.utilization),
            "{}: {}",
            r.scheme,
            r.utilization
        );
    }
    // `ccp-eval agree` reads the directory: each cell against itself agrees.
    let read = agree::read_dirs(std::slice::from_ref(&out)).unwrap();
    let cells = agree::cells(&read, &read);
    assert_eq!(cells.len(), 4);
    assert!(cells.iter().all(|c| c.util_ok() && c.rtt_ok()));

    check_generator(&bin);

    // Bad input is a clear error, not a crash.
    let bad = Command::new(&bin)
        .args([
            "--condition=x",
            "--scheme=y",
            "--model=TcpVegasX",
            "--bwMbps=10",
            "--rttMs=20",
            "--bufferBytes=12500",
        ])
        .output()
        .unwrap();
    assert_eq!(bad.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--model must be"));
}
