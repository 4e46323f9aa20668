//! `iw.kernel_cgroup` end to end: the built `ccp-agent` binary attaches the sockops program to a
//! cgroup of its own and publishes its IW table there; a child process (this test binary
//! re-executed) moves itself into the cgroup, connects over loopback to a listener of the test
//! and reports `tcpi_snd_cwnd` right after `connect`, before any data: that is the initial
//! window the kernel uses for the first flight (`TCP_BPF_IW`). SIGHUP with a new table (and
//! `kernel_cca`) gives new connections the new IW (and congestion control); SIGTERM makes the agent remove the cgroup and exit 0.
//!
//! Without root, or without BPF sockops / cgroup v2, the test prints one line saying why and
//! returns.

#![allow(clippy::expect_used, clippy::unwrap_used)]

mod common;

use ccp_datapath::kernel::tcp;
use common::Agent;
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, Instant};

/// Set in the re-executed child: the cgroup to join and the address to connect to.
const PROBE_CGROUP: &str = "CCP_AGENT_IW_PROBE_CGROUP";
const PROBE_ADDR: &str = "CCP_AGENT_IW_PROBE_ADDR";

fn cgroup2_mount() -> Option<PathBuf> {
    std::fs::read_to_string("/proc/self/mounts")
        .ok()?
        .lines()
        .find_map(|l| {
            let mut f = l.split_whitespace();
            let (_, dir, fstype) = (f.next()?, f.next()?, f.next()?);
            (fstype == "cgroup2").then(|| PathBuf::from(dir))
        })
}

fn snd_cwnd(s: &TcpStream) -> u32 {
    tcp::info(s).expect("TCP_INFO").tcpi_snd_cwnd
}

fn cca_of(s: &TcpStream) -> String {
    tcp::congestion_control(s).expect("TCP_CONGESTION")
}

/// The child's side: join the cgroup, connect, print `cwnd=<n> cgroup=<its v2 line>`. A no-op in the
/// normal test run (the variables are unset).
#[test]
fn probe_child() {
    let (Ok(cgroup), Ok(addr)) = (std::env::var(PROBE_CGROUP), std::env::var(PROBE_ADDR)) else {
        return;
    };
    std::fs::write(
        Path::new(&cgroup).join("cgroup.procs"),
        std::process::id().to_string(),
    )
    .unwrap();
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let v2 = own.lines().find(|l| l.starts_with("0::")).unwrap_or("none");
    let s = TcpStream::connect(addr.as_str()).unwrap();
    println!("cwnd={} cca={} cgroup={v2}", snd_cwnd(&s), cca_of(&s));
}

/// Runs the child in `cgroup`, connecting to `listener`; returns its `tcpi_snd_cwnd` and CCA.
fn probe(cgroup: &Path, listener: &TcpListener) -> (u32, String) {
    let out = Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "probe_child", "--nocapture", "--test-threads=1"])
        .env(PROBE_CGROUP, cgroup)
        .env(PROBE_ADDR, listener.local_addr().unwrap().to_string())
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "probe failed: {stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    drop(listener.accept().unwrap());
    let line = stdout
        .lines()
        .find_map(|l| l.split_once("cwnd=").map(|(_, rest)| rest))
        .unwrap_or_else(|| panic!("no cwnd line in: {stdout}"));
    println!("probe: cwnd={line}");
    let name = cgroup.file_name().unwrap().to_string_lossy();
    assert!(line.contains(name.as_ref()), "child not in {name}: {line}");
    let mut words = line.split_whitespace();
    let cwnd = words.next().unwrap().parse().unwrap();
    let cca = words.next().unwrap().trim_start_matches("cca=").to_string();
    (cwnd, cca)
}

fn write_config(dir: &Path, cgroup: &Path, iw_127: u32, cca: Option<&str>) -> PathBuf {
    std::fs::write(
        dir.join("iw.csv"),
        format!("start,end,iw\n127.0.0.0,127.255.255.255,{iw_127}\n"),
    )
    .unwrap();
    let path = dir.join("agent.toml");
    std::fs::write(
        &path,
        format!(
            "[iw]\ntable = \"iw.csv\"\ndefault_iw = 10\nmax_iw = 200\nkernel_cgroup = \"{}\"\n{}",
            cgroup.display(),
            cca.map(|c| format!("kernel_cca = \"{c}\"\n"))
                .unwrap_or_default()
        ),
    )
    .unwrap();
    path
}

/// The cgroup v2 mount, or `None` (after one line saying why, unless this is the probe child)
/// when the test cannot attach sockops here.
fn cgroup_root_or_skip(test: &str) -> Option<PathBuf> {
    if std::env::var_os(PROBE_ADDR).is_some() {
        return None;
    }
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        println!("SKIP {test}: not root, cannot attach sockops to a cgroup");
        return None;
    }
    let root = cgroup2_mount();
    if root.is_none() {
        println!("SKIP {test}: no cgroup v2 mounted");
    }
    root
}

#[test]
fn kernel_connections_get_the_table_iw_and_sighup_republishes() {
    const TEST: &str = "kernel_connections_get_the_table_iw_and_sighup_republishes";
    let Some(root) = cgroup_root_or_skip(TEST) else {
        return;
    };
    let tag = format!("ccp-agent-iw-test-{}", std::process::id());
    let cgroup = root.join(&tag);
    let dir = std::env::temp_dir().join(&tag);
    std::fs::create_dir_all(&dir).unwrap();
    let config = write_config(&dir, &cgroup, 7, None);

    let mut agent = Agent::spawn("cubic", &config, &tag);
    if let Err(status) = agent.wait_for_line("IW table published to the kernel", 1) {
        let log = agent.log();
        if status.code() == Some(2) && log.contains("needs root or CAP_BPF") {
            println!("SKIP {TEST}: sockops unavailable here: {log}");
            return;
        }
        panic!("agent exited with {status}: {log}");
    }
    assert!(cgroup.is_dir(), "{} not created", cgroup.display());

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    // Outside the cgroup: the kernel's own IW.
    let outside = TcpStream::connect(listener.local_addr().unwrap()).unwrap();
    let outside = (snd_cwnd(&outside), cca_of(&outside));
    drop(listener.accept().unwrap());
    let first = probe(&cgroup, &listener);
    println!("outside the cgroup: {outside:?}; inside, table 127/8 = 7: {first:?}");
    assert_eq!(first, (7, outside.1.clone()));
    assert_ne!(outside.0, 7);

    // A CCA different from the system default for the reloaded config.
    let cca = if outside.1 == "reno" { "cubic" } else { "reno" };
    write_config(&dir, &cgroup, 12, Some(cca));
    agent.signal(libc::SIGHUP);
    agent
        .wait_for_line("reloaded", 1)
        .unwrap_or_else(|s| panic!("agent exited with {s}"));
    assert!(agent.log().contains("IW table republished to the kernel"));
    let second = probe(&cgroup, &listener);
    println!("after SIGHUP, table 127/8 = 12, kernel_cca = {cca}: {second:?}");
    assert_eq!(second, (12, cca.to_string()));

    agent.signal(libc::SIGTERM);
    let start = Instant::now();
    let status = loop {
        if let Some(s) = agent.child.try_wait().unwrap() {
            break s;
        }
        assert!(
            start.elapsed() < Duration::from_secs(10),
            "agent ignores SIGTERM"
        );
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(status.success(), "exit after SIGTERM: {status}");
    assert!(
        !cgroup.exists(),
        "{} left behind after SIGTERM",
        cgroup.display()
    );
    std::fs::remove_dir_all(&dir).unwrap();
}

/// A `kernel_cgroup` the agent cannot use is an error at start: exit 2 with the reason.
#[test]
fn an_unusable_kernel_cgroup_fails_the_start() {
    if std::env::var_os(PROBE_ADDR).is_some() {
        return;
    }
    let tag = format!("ccp-agent-iw-bad-{}", std::process::id());
    let dir = std::env::temp_dir().join(&tag);
    std::fs::create_dir_all(&dir).unwrap();
    let config = write_config(&dir, &dir.join("not-a-cgroup"), 7, None);
    let mut agent = Agent::spawn("cubic", &config, &tag);
    let status = agent.child.wait().unwrap();
    std::thread::sleep(Duration::from_millis(100));
    let log = agent.log();
    assert_eq!(status.code(), Some(2), "{log}");
    assert!(log.contains("iw.kernel_cgroup"), "{log}");
    assert!(!dir.join("not-a-cgroup").exists());
    std::fs::remove_dir_all(&dir).unwrap();
}

/// `iw.learn` with `iw.kernel_cgroup`: the table the agent learns from closed flows (of this
/// project's datapath runtime, over unix sockets) is republished to the kernel, so a real TCP
/// connection in the cgroup starts from the learned IW (30: the only arm; everyone is in the
/// group `All`, so 127.0.0.1 too).
#[test]
fn the_learned_table_reaches_kernel_connections() {
    use common::learning::{LEARNED_IW, learn, short_flow, write_config};
    use common::runtime::datapath;
    const TEST: &str = "the_learned_table_reaches_kernel_connections";
    let Some(root) = cgroup_root_or_skip(TEST) else {
        return;
    };
    let tag = format!("ccp-agent-iw-learn-{}", std::process::id());
    let cgroup = root.join(&tag);
    let dir = std::env::temp_dir().join(&tag);
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let config = write_config(&dir, &format!("kernel_cgroup = \"{}\"\n", cgroup.display()));
    let agent_name = format!("{tag}-agent");
    let mut agent = Agent::spawn("cubic", &config, &agent_name);
    if let Err(status) = agent.wait_for_line("IW table published to the kernel", 1) {
        let log = agent.log();
        if status.code() == Some(2) && log.contains("needs root or CAP_BPF") {
            println!("SKIP {TEST}: sockops unavailable here: {log}");
            return;
        }
        panic!("agent exited with {status}: {log}");
    }
    agent.wait_bound();
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let before = probe(&cgroup, &listener);
    assert_eq!(before.0, 10, "the configured default before learning");

    let mut dp = datapath(&format!("{tag}-dp"), &agent_name);
    learn(&mut dp, &dir);
    let learned = probe(&cgroup, &listener);
    println!("before learning: {before:?}; after: {learned:?}");
    assert_eq!(learned.0, LEARNED_IW, "the kernel got the learned table");
    assert!(agent.log().contains("IW table republished to the kernel"));
    // Flows keep closing, so the table stays learned for CCP flows too.
    assert_eq!(short_flow(&mut dp), LEARNED_IW);
    drop(agent);
    std::fs::remove_dir_all(&dir).unwrap();
}
