//! The template gets the whole toolchain without a line changed in the suite: it runs as a
//! `ccp-eval` scheme, is a selector candidate, and `my-ccp-agent` serves it to a flow.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::net::Ipv4Addr;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use ccp_datapath::runtime::{
    Control, Datapath, FlowInfo, MonotonicClock, Primitives, UnixTransport,
};

#[test]
fn capped_runs_as_a_scheme_next_to_the_suite() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = dir.path().join("s.toml");
    std::fs::write(
        &scenario,
        "name = \"t\"\nduration_s = 5\n[[conditions]]\nbw_mbps = 10\nrtt_ms = 40\nbuffer_bdp = 4\n",
    )
    .unwrap();
    let out = dir.path().join("out");
    let status = Command::new(env!("CARGO_BIN_EXE_my-ccp-eval"))
        .args([
            "run",
            scenario.to_str().unwrap(),
            "--schemes",
            "capped,cubic",
            "--out",
        ])
        .arg(&out)
        .status()
        .unwrap();
    assert!(status.success());
    let csv = std::fs::read_to_string(out.join("results.csv")).unwrap();
    let mut lines = csv.lines();
    let header: Vec<&str> = lines.next().unwrap().split(',').collect();
    let col = |name: &str| header.iter().position(|h| *h == name).unwrap();
    let rows: Vec<Vec<&str>> = lines.map(|l| l.split(',').collect()).collect();
    let row = |scheme: &str| rows.iter().find(|r| r[col("scheme")] == scheme).unwrap();
    let (capped, cubic) = (row("capped"), row("cubic"));
    assert_eq!(capped[col("status")], "ok");
    let p95 = |r: &Vec<&str>| r[col("p95_rtt_ms")].parse::<f64>().unwrap();
    let util = |r: &Vec<&str>| r[col("utilization")].parse::<f64>().unwrap();
    let qdelay = |r: &Vec<&str>| r[col("mean_qdelay_ms")].parse::<f64>().unwrap();
    // A 4-BDP buffer: Cubic fills it; the delay cap keeps the mean queueing delay near its
    // 25 ms (the 5-s run's slow start overshoots above it, so the p95 is higher).
    assert!(util(capped) > 0.8, "{capped:?}");
    assert!(
        qdelay(capped) < 35.0 && p95(capped) < p95(cubic),
        "{capped:?} {cubic:?}"
    );
    let list = Command::new(env!("CARGO_BIN_EXE_my-ccp-eval"))
        .arg("list")
        .output()
        .unwrap();
    assert!(String::from_utf8_lossy(&list.stdout).contains("capped"));
}

#[test]
fn capped_is_a_selector_candidate() {
    ccp_algorithms::registry::install(custom_cca::registry().unwrap()).unwrap();
    let names = ccp_eval::selectors::candidate_names();
    // The suite's eleven and `capped`.
    assert_eq!(
        names.len(),
        ccp_algorithms::Registry::builtin().names().len() + 1
    );
    assert!(names.contains(&"capped"), "{names:?}");
}

/// A child process stopped when the test ends, however it ends.
struct Stopped(std::process::Child);

impl Drop for Stopped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

#[test]
fn my_agent_serves_capped_to_a_flow() {
    let pid = std::process::id();
    let (agent, dp_name) = (format!("my-agent-{pid}"), format!("my-dp-{pid}"));
    let _child = Stopped(
        Command::new(env!("CARGO_BIN_EXE_my-ccp-agent"))
            .args(["--alg", "cubic", "--name", &agent])
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .unwrap(),
    );
    let sock = Path::new("/tmp/ccp").join(&agent);
    let start = Instant::now();
    while !sock.exists() {
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "agent did not bind"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
    let transport = UnixTransport::bind(&dp_name, &agent).unwrap();
    let mut dp = Datapath::new(
        ccp_datapath::agent::demo_config(),
        transport,
        MonotonicClock::new(),
    );
    let mss = 1448;
    let sid = dp
        .create_flow(FlowInfo {
            init_cwnd_bytes: 10 * mss,
            mss_bytes: mss,
            src_ip: u32::from(Ipv4Addr::new(192, 0, 2, 1)),
            src_port: 40_000,
            dst_ip: u32::from(Ipv4Addr::new(198, 51, 100, 1)),
            dst_port: 443,
            alg: Some("capped".into()),
        })
        .unwrap();
    let mut prims = Primitives {
        rtt_sample_us: 10_000,
        snd_cwnd: 10 * mss,
        ..Primitives::default()
    };
    // The agent installs capped's program; ACKs at a 10 ms RTT grow the window under it.
    let step = |dp: &mut Datapath<_, _>, prims: &mut Primitives| {
        dp.poll();
        prims.bytes_acked = mss;
        prims.packets_acked = 1;
        let a = dp.invoke(sid, prims).unwrap();
        if let Some(c) = a.cwnd_bytes {
            prims.snd_cwnd = c;
        }
        std::thread::sleep(Duration::from_micros(200));
        a.control == Control::Agent
    };
    let start = Instant::now();
    let mut agent_acks = 0;
    while agent_acks < 200 {
        agent_acks += u32::from(step(&mut dp, &mut prims));
        assert!(
            start.elapsed() < Duration::from_secs(20),
            "agent never took the flow"
        );
    }
    let grown = prims.snd_cwnd;
    assert!(grown > 10 * mss, "window never grew: {grown}");
    // Then 90 ms of queueing delay: capped backs off (the default, Cubic, would keep growing
    // without a loss), so this flow runs capped.
    prims.rtt_sample_us = 100_000;
    let start = Instant::now();
    while start.elapsed() < Duration::from_millis(1500) {
        step(&mut dp, &mut prims);
    }
    assert!(
        prims.snd_cwnd < grown,
        "no back-off: {} after {grown}",
        prims.snd_cwnd
    );
    let _ = std::fs::remove_file(&sock);
    let _ = std::fs::remove_file(Path::new("/tmp/ccp").join(&dp_name));
}
