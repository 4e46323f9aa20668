//! What a row says about its link and its control must be true: trace links carry their
//! trace's rate, utilization never exceeds 1, a sub-frame buffer still moves packets, and a
//! flow that delivered nothing, or that its scheme never controlled, is never `ok`.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::io::Write as _;

use ccp_eval::results::FlowRow;
use ccp_eval::runner::{self, Job, RunError, RunOptions};
use ccp_eval::scenario::Scenario;

fn rows(text: &str, base: Option<&std::path::Path>) -> Vec<FlowRow> {
    let s = Scenario::parse("test.toml", text, base).unwrap();
    let opts = RunOptions {
        jobs: 2,
        ..RunOptions::default()
    };
    let plan = runner::plan(&s, &opts).unwrap();
    runner::run(&s, &plan, &opts).rows
}

#[test]
fn a_fast_cellular_trace_carries_its_rate() {
    // A generated 48 Mbit/s trace repeats milliseconds 4 times: the link once delivered one
    // packet per millisecond (11.2 Mbit/s here).
    let rows = rows(
        r#"
        name = "fast-trace"
        duration_s = 8
        schemes = ["cubic", "bbr"]
        [[conditions]]
        cellular = { mean_mbps = 48, seed = 3 }
        rtt_ms = 20
        buffer_bdp = 2
        "#,
        None,
    );
    for r in &rows {
        assert_eq!(r.status, "ok", "{r:?}");
        assert!(r.bw_mbps > 40.0, "{r:?}");
        assert!(r.throughput_mbps > 0.6 * r.bw_mbps, "{r:?}");
        assert!(r.utilization <= 1.0, "{r:?}");
    }
}

#[test]
fn a_long_trace_keeps_its_rate_and_utilization_stays_below_one() {
    // 1.6 million opportunities in 180 s (107 Mbit/s): the mean rate once wrapped to 4.18
    // Mbit/s and the row said utilization 2.72.
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("long.trace");
    let mut f = std::io::BufWriter::new(std::fs::File::create(&path).unwrap());
    let lines = 1_600_000u64;
    for i in 0..lines {
        writeln!(f, "{}", i * 180_000 / lines + 1).unwrap();
    }
    f.flush().unwrap();
    drop(f);
    let rows = rows(
        r#"
        name = "long-trace"
        duration_s = 3
        schemes = ["cubic"]
        [[conditions]]
        trace = "long.trace"
        rtt_ms = 20
        buffer_bdp = 1
        "#,
        Some(dir.path()),
    );
    let r = &rows[0];
    assert_eq!(r.status, "ok", "{r:?}");
    assert!((r.bw_mbps - 106.67).abs() < 0.01, "{r:?}");
    assert!(r.utilization > 0.3 && r.utilization <= 1.0, "{r:?}");
}

#[test]
fn a_sub_frame_buffer_is_raised_to_two_frames_and_the_flow_moves() {
    // TCP-RL's grid: 1 Mbit/s x 10 ms x 1 BDP = 1,250 bytes, less than one 1514-byte frame.
    // Such a buffer once dropped every packet and the row said `ok` with throughput 0. The
    // smallest buffer is one frame on the wire and one waiting.
    let rows = rows(
        r#"
        name = "tiny-buffer"
        duration_s = 5
        schemes = ["native-cubic", "reno", "copa"]
        [[conditions]]
        bw_mbps = 1
        rtt_ms = 10
        buffer_bdp = 1
        [[conditions]]
        bw_mbps = 1
        rtt_ms = 10
        buffer_pkts = 1
        "#,
        None,
    );
    for r in &rows {
        assert_eq!(r.status, "ok", "{r:?}");
        assert_eq!(r.buffer_bytes, 2 * 1514, "{r:?}");
        assert!(r.utilization > 0.2, "{r:?}");
    }
    let e = Scenario::parse(
        "t.toml",
        "name = \"x\"\nduration_s = 1\n[[conditions]]\nbw_mbps = 1\nrtt_ms = 10\nbuffer_bytes = 1500\n",
        None,
    )
    .unwrap_err()
    .to_string();
    assert!(e.contains("t.toml:6") && e.contains("buffer_bytes"), "{e}");
}

#[test]
fn a_flow_that_delivers_nothing_is_not_ok() {
    let rows = rows(
        r#"
        name = "dead"
        duration_s = 3
        schemes = ["native-cubic", "reno"]
        [[conditions]]
        bw_mbps = 10
        rtt_ms = 20
        loss = 0.99999999
        "#,
        None,
    );
    for r in &rows {
        assert!(r.status.starts_with("no-delivery:"), "{r:?}");
    }
}

#[test]
fn lock_step_ccp_flows_are_controlled_throughout() {
    let rows = rows(
        r#"
        name = "control"
        duration_s = 2
        schemes = ["native-cubic", "native-reno", "cubic", "selector-rein"]
        [[conditions]]
        bw_mbps = 10
        rtt_ms = 20
        "#,
        None,
    );
    for r in &rows {
        assert_eq!(r.status, "ok", "{r:?}");
        assert!(r.fallback_s.abs() < 1e-12, "{r:?}");
        let ccp = !r.scheme.starts_with("native-");
        assert_eq!(r.takeovers, u64::from(ccp), "{r:?}");
    }
}

#[test]
fn a_realtime_run_without_its_agent_is_refused_or_marked() {
    let s = Scenario::parse(
        "t.toml",
        "name = \"rt\"\nduration_s = 1\nschemes = [\"reno\"]\n[[conditions]]\nbw_mbps = 10\nrtt_ms = 20\n",
        None,
    )
    .unwrap();
    let opts = RunOptions {
        realtime_agent: Some(format!("no-agent-here-{}", std::process::id())),
        ..RunOptions::default()
    };
    // Refused up front: no agent listens at that name.
    assert!(matches!(runner::plan(&s, &opts), Err(RunError::NoAgent(_))));
    // And a run that goes ahead anyway (the agent vanished after planning) is marked: its
    // rows were driven by the datapath's fallback rule, not by the scheme.
    let job = Job {
        index: 0,
        condition: 0,
        scheme: "reno".into(),
        seed: 1,
    };
    let out = runner::run(&s, &[job], &opts);
    let r = &out.rows[0];
    assert!(r.status.starts_with("no-control:"), "{r:?}");
    assert!(r.fallback_s > 0.9, "{r:?}");
    assert_eq!(r.takeovers, 0, "{r:?}");
}
