//! `run --datapath kernel` end to end: a two-condition scenario (the second with a mid-run path
//! change) as real kernel TCP through the network-namespace testbed, with the kernel's Cubic and
//! with our Cubic through the BPF datapath; the rows must look like the simulator's for the same
//! scenario. And the learned algorithms (LP-TCP, RL-TCP, ARC) each drive a real flow through
//! the BPF datapath. Without root, network namespaces or BPF `struct_ops`, each test prints one
//! line and returns.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use ccp_datapath::kernel::KernelDatapath;
use ccp_datapath::kernel::testbed::{LinkConfig, Testbed, TestbedConfig};
use ccp_eval::runner::{self, DatapathKind, RunOptions};
use ccp_eval::scenario::Scenario;
use std::sync::Mutex;
use std::time::Duration;

/// One test at a time: each registers the `ccp` congestion control and times real transfers.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const SCENARIO: &str = r#"
name = "kernel-mode-test"
duration_s = 3
seeds = [1]
schemes = ["native-cubic", "cubic"]
series_interval_ms = 100

[[conditions]]
id = "20M-20ms"
bw_mbps = 20
rtt_ms = 20
buffer_bdp = 1.0

[[conditions]]
id = "20M-20ms-then-5M"
bw_mbps = 20
rtt_ms = 20
buffer_bdp = 1.0
[[conditions.phases]]
at_s = 1.5
bw_mbps = 5
"#;

/// The testbed's turn, or `None` (after one line naming `test` and why) when namespaces or BPF
/// `struct_ops` are not available here.
fn turn(test: &str) -> Option<std::sync::MutexGuard<'static, ()>> {
    let turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    match available() {
        Ok(()) => Some(turn),
        Err(why) => {
            println!("skipped {test}: {why}");
            None
        }
    }
}

fn available() -> Result<(), String> {
    let link = LinkConfig::constant(10_000_000, Duration::from_millis(10));
    match Testbed::new(TestbedConfig::new(link)) {
        Ok(_) => {}
        Err(e) if e.is_unavailable() => return Err(format!("no network namespaces ({e})")),
        Err(e) => panic!("testbed: {e}"),
    }
    match KernelDatapath::load() {
        Ok(_) => Ok(()),
        Err(e) if e.is_unavailable() => Err(format!("no BPF struct_ops ({e})")),
        Err(e) => panic!("BPF datapath: {e}"),
    }
}

/// `toml` (a scenario named `name`) run on kernel TCP.
fn on_kernel(name: &str, toml: &str) -> runner::RunOutput {
    let scenario = Scenario::parse(name, toml, None).unwrap();
    let kernel = RunOptions {
        datapath: DatapathKind::Kernel,
        ..RunOptions::default()
    };
    let jobs = runner::plan(&scenario, &kernel).unwrap();
    runner::run(&scenario, &jobs, &kernel)
}

#[test]
fn a_scenario_runs_as_real_tcp_with_the_simulators_rows() {
    let Some(_turn) = turn("a_scenario_runs_as_real_tcp_with_the_simulators_rows") else {
        return;
    };
    let scenario = Scenario::parse("kernel-mode-test.toml", SCENARIO, None).unwrap();
    let kernel = RunOptions {
        datapath: DatapathKind::Kernel,
        ..RunOptions::default()
    };
    let jobs = runner::plan(&scenario, &kernel).unwrap();
    let out = runner::run(&scenario, &jobs, &kernel);
    let sim = runner::run(&scenario, &jobs, &RunOptions::default());
    assert_eq!(out.failed, 0, "{:?}", out.rows);
    assert_eq!(out.rows.len(), sim.rows.len());
    for (k, s) in out.rows.iter().zip(&sim.rows) {
        println!(
            "{} {}: kernel {:.2} Mbit/s p95 {:.1} ms loss {:.4}; sim {:.2} Mbit/s p95 {:.1} ms",
            k.condition,
            k.scheme,
            k.throughput_mbps,
            k.p95_rtt_ms,
            k.loss_rate,
            s.throughput_mbps,
            s.p95_rtt_ms
        );
        assert_eq!((&k.condition, &k.scheme), (&s.condition, &s.scheme));
        assert_eq!(k.status, "ok");
        // Same link, same algorithm: within 25 % over a 3 s run (slow start included).
        let gap = (k.throughput_mbps - s.throughput_mbps).abs() / s.throughput_mbps;
        assert!(gap < 0.25, "{k:?} vs {s:?}");
        // 20 ms of propagation, at most the 50 kB buffer's queueing at 5 Mbit/s (80 ms) more.
        assert!(k.p95_rtt_ms >= 19.0 && k.p95_rtt_ms < 110.0, "{k:?}");
    }
    // The phase took effect on the kernel too: 20 Mbit/s for 1.5 s, then 5.
    let changed: Vec<_> = out
        .rows
        .iter()
        .filter(|r| r.condition == "20M-20ms-then-5M")
        .collect();
    let steady: Vec<_> = out
        .rows
        .iter()
        .filter(|r| r.condition == "20M-20ms")
        .collect();
    for (c, s) in changed.iter().zip(&steady) {
        assert!(
            c.throughput_mbps < 0.8 * s.throughput_mbps,
            "the rate change did not show: {} vs {}",
            c.throughput_mbps,
            s.throughput_mbps
        );
    }
    assert!(out.series.iter().any(|s| s.scheme == "cubic"));
}

const LEARNED: &str = r#"
name = "kernel-learned-test"
duration_s = 4
seeds = [1]
schemes = ["lptcp", "rltcp", "arc"]

[[conditions]]
id = "20M-40ms"
bw_mbps = 20
rtt_ms = 40
buffer_bdp = 1.0
"#;

/// LP-TCP (its forest from `make models`), RL-TCP and ARC (ONNX Runtime and the shipped actor)
/// run real kernel TCP flows through the BPF datapath: every run is controlled by its agent
/// algorithm and moves data at a sane delay.
#[test]
fn the_learned_algorithms_drive_real_tcp_flows() {
    let Some(_turn) = turn("the_learned_algorithms_drive_real_tcp_flows") else {
        return;
    };
    let out = on_kernel("kernel-learned-test.toml", LEARNED);
    assert_eq!(out.rows.len(), 3);
    for r in &out.rows {
        println!(
            "{}: {:.2} Mbit/s, p95 RTT {:.1} ms, loss {:.4}, fallback {:.2} s, status {}",
            r.scheme, r.throughput_mbps, r.p95_rtt_ms, r.loss_rate, r.fallback_s, r.status
        );
        assert_eq!(r.status, "ok", "{r:?}");
        // A 20 Mbit/s link for 4 s, slow start included: well above a stuck window's rate.
        assert!(r.throughput_mbps > 5.0, "{r:?}");
        assert!(r.p95_rtt_ms >= 39.0 && r.p95_rtt_ms < 200.0, "{r:?}");
    }
}

const PREFERENCE: &str = r#"
name = "kernel-preference-test"
duration_s = 4
seeds = [1]
schemes = ["selector-probe"]

[[conditions]]
id = "delay-20M-40ms"
bw_mbps = 20
rtt_ms = 40
buffer_bdp = 2.0
flows = [{ count = 1, objective = "delay", port = 5001 }]

[[conditions]]
id = "20M-40ms"
bw_mbps = 20
rtt_ms = 40
buffer_bdp = 2.0
"#;

/// The selectors see the port of the scenario's flows on kernel TCP too (the testbed's sinks
/// listen on ephemeral ports): a delay-sensitive flow of `selector-probe` starts on Vegas and
/// moves to Copa at the probe's end (its hand-over), a default-mode flow does not.
#[test]
fn a_kernel_flows_preference_mode_comes_from_the_scenarios_port() {
    let Some(_turn) = turn("a_kernel_flows_preference_mode_comes_from_the_scenarios_port") else {
        return;
    };
    let out = on_kernel("kernel-preference-test.toml", PREFERENCE);
    assert!(out.rows.iter().all(|r| r.status == "ok"), "{:?}", out.rows);
    let swaps = |cond: &str| -> Vec<_> {
        out.swaps
            .iter()
            .filter(|s| s.condition == cond)
            .map(|s| (s.from.as_str(), s.to.as_str(), s.t_s))
            .collect()
    };
    let delay = swaps("delay-20M-40ms");
    assert_eq!(delay.len(), 1, "{delay:?}");
    let (from, to, t) = delay[0];
    assert_eq!((from, to), ("vegas", "copa"), "{delay:?}");
    // The probe window: 1.5 s and 10 minimum RTTs, then the loss hold may delay the swap.
    assert!((1.4..3.5).contains(&t), "{delay:?}");
    assert!(
        swaps("20M-40ms").iter().all(|s| s.0 != "vegas"),
        "{:?}",
        swaps("20M-40ms")
    );
}
