//! End to end: the built `ccp-agent` binary in its own process, this project's datapath
//! runtime (`Datapath` + `UnixTransport`) in the test, synthetic flows in real time.
//!
//! Checked: flows that ask for nothing get `--alg selector` (Rein policy) and are controlled;
//! flows that name an algorithm get it; the first program change carries `iw * mss` from the
//! IW table; SIGHUP with a changed config gives new flows the new table while the running flow
//! keeps being answered; SIGHUP with a bad config keeps the old one; a bad config at start
//! exits with status 2 naming the field. Every test uses its own socket names.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::Ipv4Addr;
use std::path::{Path, PathBuf};
use std::process::Command;

mod common;

use common::Agent;
use common::runtime::{Dp, MSS, assert_controlled, datapath, open_flow};

/// A fresh folder for one test's config files.
fn config_dir(tag: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccp-agent-e2e-{}-{tag}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir
}

/// Writes `agent.toml` (Rein, IW table `10.0.0.0/24 -> iw`, default 10) into `dir`.
fn write_config(dir: &Path, policy: &str, iw: u32) -> PathBuf {
    std::fs::write(
        dir.join("iw.csv"),
        format!("start,end,iw\n10.0.0.0,10.0.0.255,{iw}\n"),
    )
    .unwrap();
    let path = dir.join("agent.toml");
    std::fs::write(
        &path,
        format!(
            "[selector]\npolicy = \"{policy}\"\n[selector.hysteresis]\nagreeing_decisions = 2\n\
             [preferences]\n443 = \"throughput\"\n\
             [iw]\ntable = \"iw.csv\"\ndefault_iw = 10\nmax_iw = 100\n"
        ),
    )
    .unwrap();
    path
}

#[test]
fn selector_flows_get_the_iw_and_sighup_reloads_without_dropping_flows() {
    let pid = std::process::id();
    let (agent_name, dp_name) = (format!("agent-e2e-{pid}-a"), format!("dp-e2e-{pid}-a"));
    let dir = config_dir("reload");
    let config = write_config(&dir, "rein", 20);
    let mut agent = Agent::spawn("selector", &config, &agent_name);
    agent.wait_bound();
    let mut dp = datapath(&dp_name, &agent_name);
    let inside = Ipv4Addr::new(10, 0, 0, 2);
    let outside = Ipv4Addr::new(198, 51, 100, 7);

    // 1. The default algorithm (the selector) takes the flow, from the table's IW.
    let (mut first, iw_first) = open_flow(&mut dp, inside, None);
    assert_eq!(iw_first, 20 * MSS, "IW from the table");
    assert_controlled(&mut dp, &mut first, 300);
    let (mut outer, iw_outer) = open_flow(&mut dp, outside, None);
    assert_eq!(iw_outer, 10 * MSS, "default IW outside the table");
    assert_controlled(&mut dp, &mut outer, 100);
    // A flow naming an algorithm gets it, with the same IW rule.
    let (mut reno, iw_reno) = open_flow(&mut dp, inside, Some("reno"));
    assert_eq!(iw_reno, 20 * MSS);
    assert_controlled(&mut dp, &mut reno, 100);

    // 2. SIGHUP with a new table: new flows get it, the running flow keeps being answered.
    let config2 = write_config(&dir, "static:vegas", 40);
    assert_eq!(config, config2);
    agent.signal(libc::SIGHUP);
    agent.wait_for_line("reloaded", 1).unwrap();
    assert_controlled(&mut dp, &mut first, 200);
    let (mut second, iw_second) = open_flow(&mut dp, inside, None);
    assert_eq!(iw_second, 40 * MSS, "the reloaded table");
    assert_controlled(&mut dp, &mut second, 200);

    // 3. SIGHUP with a bad config: logged, the previous config stays.
    write_config(&dir, "no-such-policy", 60);
    agent.signal(libc::SIGHUP);
    let why = agent.wait_for_line("reload failed", 1).unwrap();
    assert!(why.contains("selector.policy"), "{why}");
    let (mut third, iw_third) = open_flow(&mut dp, inside, None);
    assert_eq!(iw_third, 40 * MSS, "the previous config stays");
    assert_controlled(&mut dp, &mut third, 100);
    assert_controlled(&mut dp, &mut first, 100);
    assert_eq!(dp.stats().msgs_rejected, 0);
    std::fs::remove_dir_all(&dir).unwrap();
}

#[test]
fn a_bad_config_at_start_exits_2_naming_the_field() {
    let dir = config_dir("bad");
    let path = dir.join("agent.toml");
    std::fs::write(&path, "[selector.hysteresis]\nagreeing_decisions = 0\n").unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_ccp-agent"))
        .args(["--ipc", "unix", "--alg", "selector", "--name"])
        .arg(format!("agent-e2e-{}-bad", std::process::id()))
        .arg("--config")
        .arg(&path)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("selector.hysteresis.agreeing_decisions"),
        "{err}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_ccp-agent"))
        .args(["--ipc", "unix", "--alg", "tahoe", "--config"])
        .arg(dir.join("missing.toml"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    // A selector candidate without its model (ARC's actor) is refused by name: it would run
    // as its fallback rule.
    let out = Command::new(env!("CARGO_BIN_EXE_ccp-agent"))
        .args(["--ipc", "unix", "--alg", "selector", "--name"])
        .arg(format!("agent-e2e-{}-unready", std::process::id()))
        .env("CCP_ARC_MODEL", dir.join("no-actor.onnx"))
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--alg selector: candidate arc: "), "{err}");
    std::fs::remove_dir_all(&dir).unwrap();
}

/// The pacing rate of the agent's first answer to a flow asking for `alg`.
fn first_rate(dp: &mut Dp, alg: Option<&str>) -> Option<u32> {
    let sid = dp
        .create_flow(ccp_datapath::runtime::FlowInfo {
            init_cwnd_bytes: 10 * MSS,
            mss_bytes: MSS,
            src_ip: u32::from(Ipv4Addr::new(192, 0, 2, 1)),
            src_port: 40_001,
            dst_ip: u32::from(Ipv4Addr::new(198, 51, 100, 9)),
            dst_port: 443,
            alg: alg.map(str::to_string),
        })
        .unwrap();
    let idle = ccp_datapath::runtime::Primitives {
        rtt_sample_us: 300,
        snd_cwnd: 10 * MSS,
        ..ccp_datapath::runtime::Primitives::default()
    };
    let start = std::time::Instant::now();
    loop {
        dp.poll();
        let a = dp.invoke(sid, &idle).unwrap();
        if a.control == ccp_datapath::runtime::Control::Agent {
            return a.rate_bytes_per_sec;
        }
        assert!(start.elapsed() < std::time::Duration::from_secs(10));
        std::thread::sleep(std::time::Duration::from_micros(200));
    }
}

#[test]
fn with_no_config_flows_get_the_algorithm_they_name_else_alg() {
    let pid = std::process::id();
    let (agent_name, dp_name) = (format!("agent-e2e-{pid}-n"), format!("dp-e2e-{pid}-n"));
    // No --ipc (unix is the default) and no --config: every default serves.
    let agent = Agent::spawn_program(
        std::path::Path::new(env!("CARGO_BIN_EXE_ccp-agent")),
        &["--alg", "reno", "--name", &agent_name],
        &agent_name,
        "agent",
    );
    agent.wait_bound();
    let mut dp = datapath(&dp_name, &agent_name);
    // Reno does not pace; BBR paces from its first answer.
    let unpaced = Some(u32::MAX);
    assert_eq!(first_rate(&mut dp, None), unpaced, "--alg reno");
    assert_eq!(
        first_rate(&mut dp, Some("no-such-cca")),
        unpaced,
        "--alg reno"
    );
    let bbr = first_rate(&mut dp, Some("bbr"));
    assert!(bbr.is_some_and(|r| r < u32::MAX), "bbr: {bbr:?}");
    assert_eq!(first_rate(&mut dp, Some("reno")), unpaced);
    // The selector by name too.
    assert!(first_rate(&mut dp, Some("selector")).is_some());
}

#[test]
fn a_busy_polling_agent_serves_unix_datagrams_the_same() {
    let pid = std::process::id();
    let (agent_name, dp_name) = (
        format!("agent-e2e-{pid}-spin"),
        format!("dp-e2e-{pid}-spin"),
    );
    let mut agent = Agent::spawn_program(
        Path::new(env!("CARGO_BIN_EXE_ccp-agent")),
        &[
            "--ipc",
            "unix",
            "--alg",
            "cubic",
            "--name",
            &agent_name,
            "--spin-us",
            "2000",
        ],
        &agent_name,
        "agent",
    );
    agent.wait_bound();
    let mut dp: Dp = datapath(&dp_name, &agent_name);
    let (mut a, _) = open_flow(&mut dp, Ipv4Addr::new(10, 0, 0, 9), Some("reno"));
    assert_controlled(&mut dp, &mut a, 50);
    // Idle longer than the spin: the agent sleeps, and the next report wakes it.
    std::thread::sleep(std::time::Duration::from_millis(50));
    assert_controlled(&mut dp, &mut a, 50);
    agent.signal(libc::SIGTERM);
    let totals = agent.wait_for_line("ipc guard totals", 1).unwrap();
    assert!(totals.contains("rejected=0"), "{totals}");
}
