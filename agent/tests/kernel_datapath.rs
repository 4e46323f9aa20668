//! Real kernel TCP driven by `ccp-agent` through `ccp-kernel-datapath`, across the
//! network-namespace testbed (sender, router, receiver; an `htb` bottleneck and our delay
//! relay): both binaries run as child processes, the flow is a real TCP connection using the
//! BPF congestion control `ccp`.
//!
//! - `--alg cubic`: the kernel applies the agent's windows (the BPF program counts ACKs on
//!   which a user-space window was applied); the agent is then killed, the flow goes on under
//!   the in-kernel fallback and keeps moving data.
//! - `--alg selector` with the `rotate:N` policy: the flow is handed between candidates mid-
//!   flow (the agent logs each swap) and keeps the link busy.
//! - `--alg arc` with `--arc-trajectories`: ARC's actor paces a real flow from its inference
//!   thread, every decision lands in the `SQLite` store, and a new model version written mid-flow
//!   is picked up without a restart (needs ONNX Runtime too).
//!
//! Everything is removed at the end: the namespaces (the testbed's drop), `ccp` (the datapath
//! process exits, its `struct_ops` link goes with it), the sockets under `/tmp/ccp`. Without
//! root, BPF `struct_ops` or network namespaces, each test prints one line saying why and
//! returns.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

use ccp_datapath::kernel::testbed::{FlowSpec, LinkConfig, Testbed, TestbedConfig, cleanup_stale};
use common::Agent;

/// One test at a time: both register `ccp`, and both time real transfers.
static ONE_AT_A_TIME: Mutex<()> = Mutex::new(());

const RATE_BPS: u64 = 20_000_000;
const RTT: Duration = Duration::from_millis(40);

fn testbed_or_skip(test: &str) -> Option<Testbed> {
    let link = LinkConfig::constant(RATE_BPS, RTT).with_buffer_bdp(1.0);
    match Testbed::new(TestbedConfig::new(link)) {
        Ok(t) => Some(t),
        Err(e) if e.is_unavailable() => {
            println!("skipped {test}: network namespaces are not available here ({e})");
            None
        }
        Err(e) => panic!("{test}: testbed: {e}"),
    }
}

/// `agent.toml` holding `text`, in a fresh folder removed when the returned guard drops.
fn config(tag: &str, text: &str) -> (tempfile::TempDir, PathBuf) {
    let dir = tempfile::Builder::new()
        .prefix(&format!("ccp-agent-kdp-{tag}-"))
        .tempdir()
        .unwrap();
    let path = dir.path().join("agent.toml");
    std::fs::write(&path, text).unwrap();
    (dir, path)
}

/// `ccp-kernel-datapath` for the agent `agent`, or `None` (after one line) when BPF
/// `struct_ops` is not available here.
fn datapath_or_skip(test: &str, name: &str, agent: &str) -> Option<Agent> {
    let mut dp = Agent::spawn_program(
        Path::new(env!("CARGO_BIN_EXE_ccp-kernel-datapath")),
        &["--name", name, "--agent", agent, "--stats-secs", "1"],
        name,
        "datapath",
    );
    match dp.wait_for_line("kernel datapath running", 1) {
        Ok(_) => Some(dp),
        Err(status) => {
            let log = dp.log();
            assert_eq!(status.code(), Some(2), "ccp-kernel-datapath failed: {log}");
            assert!(
                log.contains("not available"),
                "ccp-kernel-datapath could not load: {log}"
            );
            println!("skipped {test}: {}", log.lines().last().unwrap_or(""));
            None
        }
    }
}

/// `key=<number>` from a log line.
fn field(line: &str, key: &str) -> u64 {
    line.split_whitespace()
        .find_map(|w| w.strip_prefix(&format!("{key}=")))
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| panic!("no {key}= in {line:?}"))
}

/// Stops the datapath (SIGTERM) and returns its summary line.
fn stop(mut dp: Agent) -> String {
    dp.signal(libc::SIGTERM);
    let line = dp.wait_for_line("stopped", 1).expect("summary line");
    let status = dp.child.wait().unwrap();
    assert!(status.success(), "ccp-kernel-datapath exited with {status}");
    line
}

fn ccp_registered() -> bool {
    std::fs::read_to_string("/proc/sys/net/ipv4/tcp_available_congestion_control")
        .unwrap_or_default()
        .split_whitespace()
        .any(|c| c == "ccp")
}

#[test]
fn agent_drives_a_real_flow_and_the_flow_survives_its_death() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let test = "agent_drives_a_real_flow_and_the_flow_survives_its_death";
    let Some(testbed) = testbed_or_skip(test) else {
        return;
    };
    let pid = std::process::id();
    let agent_name = format!("kdp-agent-{pid}");
    let dp_name = format!("kdp-{pid}");
    let (_dir, cfg) = config("cubic", "");
    let mut agent = Agent::spawn("cubic", &cfg, &agent_name);
    agent.wait_bound();
    let Some(mut dp) = datapath_or_skip(test, &dp_name, &agent_name) else {
        return;
    };
    agent.wait_for_line("installing programs", 1).unwrap();

    let run = testbed
        .start(&[FlowSpec::timed("ccp", Duration::from_secs(8))])
        .unwrap();
    // The agent drives the flow for 3 s, then dies.
    std::thread::sleep(Duration::from_secs(3));
    let before = dp.wait_for_line("stats", 1).unwrap();
    agent.signal(libc::SIGKILL);
    let killed_at = run.started().elapsed();
    let flows = run.wait().unwrap();
    let summary = stop(dp);
    let flow = &flows[0];
    println!("before the kill: {before}\nsummary: {summary}\nflow: {flow:?}");

    assert_eq!(flow.cca, "ccp");
    assert!(flow.completed, "the flow did not run its 8 s: {flow:?}");
    assert_eq!(
        field(&summary, "flows"),
        1,
        "one connection, one flow: {summary}"
    );
    // Under the agent: the kernel applied user-space windows on nearly every ACK.
    let (user, fallback) = (
        field(&summary, "user_acks"),
        field(&summary, "fallback_acks"),
    );
    let user_before = field(&before, "user_acks");
    assert!(user_before > 1_000, "few agent-controlled ACKs: {before}");
    assert!(
        field(&before, "fallback_acks") * 10 < user_before,
        "the fallback ran while the agent was alive: {before}"
    );
    // After the kill (silence past 500 ms): the in-kernel fallback, and the data keeps moving.
    assert!(fallback > 1_000, "the fallback never took over: {summary}");
    assert!(user >= user_before);
    let after = flow
        .goodput_between(killed_at + Duration::from_secs(1), Duration::from_secs(8))
        .expect("samples after the kill");
    assert!(
        after > 0.5 * RATE_BPS as f64,
        "after the agent died the flow moved {after:.0} bit/s"
    );
    let under_agent = flow
        .goodput_between(Duration::from_secs(1), killed_at)
        .expect("samples under the agent");
    assert!(
        under_agent > 0.5 * RATE_BPS as f64,
        "under the agent the flow moved {under_agent:.0} bit/s"
    );

    drop(testbed);
    let start = Instant::now();
    while ccp_registered() && start.elapsed() < Duration::from_secs(5) {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!ccp_registered(), "`ccp` is still registered");
    assert!(
        cleanup_stale().unwrap().is_empty(),
        "namespaces were left behind"
    );
}

#[test]
fn selector_hands_a_real_flow_between_candidates() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let test = "selector_hands_a_real_flow_between_candidates";
    let Some(testbed) = testbed_or_skip(test) else {
        return;
    };
    let pid = std::process::id();
    let agent_name = format!("kdp-sel-agent-{pid}");
    let dp_name = format!("kdp-sel-{pid}");
    let (_dir, cfg) = config(
        "selector",
        "[selector]\npolicy = \"rotate:15\"\ncandidates = [\"cubic\", \"bbr\", \"reno\"]\n\
         [selector.hysteresis]\nagreeing_decisions = 1\ndwell_rtts = 0.0\nloss_hold_rtts = 0.0\n",
    );
    let mut agent = Agent::spawn("selector", &cfg, &agent_name);
    agent.wait_bound();
    let Some(dp) = datapath_or_skip(test, &dp_name, &agent_name) else {
        return;
    };
    agent.wait_for_line("installing programs", 1).unwrap();

    let flows = testbed
        .run(&[FlowSpec::timed("ccp", Duration::from_secs(5))])
        .unwrap();
    let summary = stop(dp);
    let flow = &flows[0];
    let swaps: Vec<String> = agent
        .log()
        .lines()
        .filter(|l| l.contains(" swap"))
        .map(str::to_string)
        .collect();
    println!("summary: {summary}\nswaps: {}\nflow: {flow:?}", swaps.len());

    assert!(swaps.len() >= 3, "too few swaps: {swaps:?}");
    for to in ["to=\"bbr\"", "to=\"reno\"", "to=\"cubic\""] {
        assert!(
            swaps.iter().any(|l| l.contains(to)),
            "never swapped {to}: {swaps:?}"
        );
    }
    let (user, fallback) = (
        field(&summary, "user_acks"),
        field(&summary, "fallback_acks"),
    );
    assert!(
        user > 10 * fallback.max(1),
        "windows were not applied from user space: {summary}"
    );
    assert!(flow.completed);
    assert!(
        flow.goodput_bps > 0.5 * RATE_BPS as f64,
        "the swaps stalled the flow: {flow:?}"
    );
}

#[test]
fn arc_paces_a_real_flow_records_it_and_hot_reloads_its_model() {
    let _turn = ONE_AT_A_TIME
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let test = "arc_paces_a_real_flow_records_it_and_hot_reloads_its_model";
    if let Err(e) = ccp_algorithms::onnx::resolve_library(None) {
        assert!(
            std::env::var_os("CCP_ONNX_REQUIRED").is_none(),
            "{test}: ONNX Runtime is required: {e}"
        );
        println!("skipped {test}: {e}");
        return;
    }
    let Some(testbed) = testbed_or_skip(test) else {
        return;
    };
    let pid = std::process::id();
    let agent_name = format!("kdp-arc-agent-{pid}");
    let dp_name = format!("kdp-arc-{pid}");
    // A copy of the shipped actor the test may rewrite, and the store.
    let scratch = tempfile::Builder::new()
        .prefix("ccp-agent-kdp-arc-")
        .tempdir()
        .unwrap();
    let dir = scratch.path();
    let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../algorithms/models/arc");
    for f in ["actor.onnx", "actor.json"] {
        std::fs::copy(shipped.join(f), dir.join(f)).unwrap();
    }
    let db = dir.join("trajectories.sqlite");
    let mut agent = spawn_arc_agent(&agent_name, dir, &db);
    agent.wait_bound();
    let Some(dp) = datapath_or_skip(test, &dp_name, &agent_name) else {
        return;
    };
    agent.wait_for_line("installing programs", 1).unwrap();

    let run = testbed
        .start(&[FlowSpec::timed("ccp", Duration::from_secs(8))])
        .unwrap();
    std::thread::sleep(Duration::from_secs(3));
    // A new version, written as a learner writes it (temporary file, then rename).
    let side = dir.join("actor.json");
    let mut json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&side).unwrap()).unwrap();
    let v0 = json["version"].as_u64().unwrap_or(0);
    json["version"] = (v0 + 100).into();
    let tmp = dir.join(".actor.json.tmp");
    std::fs::write(&tmp, json.to_string()).unwrap();
    std::fs::rename(&tmp, &side).unwrap();
    let flows = run.wait().unwrap();
    let summary = stop(dp);
    let flow = &flows[0];
    let loads: Vec<String> = agent
        .log()
        .lines()
        .filter(|l| l.contains("ARC model loaded"))
        .map(str::to_string)
        .collect();
    println!("summary: {summary}\nloads: {loads:?}\nflow: {flow:?}");
    agent.signal(libc::SIGTERM);

    assert!(flow.completed, "{flow:?}");
    assert!(
        flow.goodput_bps > 0.3 * RATE_BPS as f64,
        "ARC moved {:.0} bit/s on a {RATE_BPS} bit/s link",
        flow.goodput_bps
    );
    assert!(
        field(&summary, "user_acks") > 1_000,
        "the kernel did not apply ARC's windows: {summary}"
    );
    assert!(
        loads
            .iter()
            .any(|l| l.contains(&format!("version={}", v0 + 100))),
        "the new model was not picked up: {loads:?}"
    );
    check_store(&db, v0);
}

/// `ccp-agent --alg arc` with the model in `dir` and the store `db`, exploring.
fn spawn_arc_agent(agent_name: &str, dir: &Path, db: &Path) -> Agent {
    let cfg = dir.join("agent.toml");
    std::fs::write(&cfg, "").unwrap();
    let child = std::process::Command::new(env!("CARGO_BIN_EXE_ccp-agent"))
        .args(["--ipc", "unix", "--alg", "arc", "--name", agent_name])
        .arg("--config")
        .arg(&cfg)
        .arg("--arc-trajectories")
        .arg(db)
        .args(["--arc-explore", "0.1"])
        .env("RUST_LOG", "info")
        .env("CCP_ARC_MODEL", dir.join("actor.onnx"))
        .stdout(std::process::Stdio::null())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut agent = Agent::adopt(child, "agent");
    agent.sock = Path::new("/tmp/ccp").join(agent_name);
    agent
}

/// The store: one flow's decisions, actions applied (with exploration), by both versions.
fn check_store(db: &Path, v0: u64) {
    let con = rusqlite::Connection::open(db).unwrap();
    let (n, acted, flows_n): (i64, i64, i64) = con
        .query_row(
            "SELECT COUNT(*), COUNT(action), COUNT(DISTINCT flow) FROM decisions",
            [],
            |r| Ok((r.get(0)?, r.get(1)?, r.get(2)?)),
        )
        .unwrap();
    // 8 s at one decision per 20 ms (RTT/2 of 40 ms), some lost to the start.
    assert!(n > 150, "only {n} decisions stored");
    assert!(
        acted * 10 > n * 8,
        "{acted} of {n} decisions applied an action"
    );
    assert_eq!(flows_n, 1);
    let versions: Vec<i64> = con
        .prepare("SELECT DISTINCT model_version FROM decisions WHERE action IS NOT NULL ORDER BY 1")
        .unwrap()
        .query_map([], |r| r.get(0))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(
        versions,
        vec![v0 as i64, (v0 + 100) as i64],
        "decisions by model version"
    );
}
