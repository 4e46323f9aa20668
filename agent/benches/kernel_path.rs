//! The kernel path, measured: control-loop latency and CPU per byte of the BPF datapath
//! against the kernel's own Cubic, on real TCP through the network-namespace testbed.
//!
//! The built `ccp-agent --alg cubic` and `ccp-kernel-datapath` run as processes (the deployed
//! topology, unix sockets between them); flows run through `ccp_datapath::kernel::testbed`.
//! On each link, rounds alternate one flow with the kernel's `cubic` and one with `ccp`
//! (driven by the agent's Cubic), each `SPAN` long, in the same run:
//! - **CPU per byte**: busy CPU time of the whole machine (`/proc/stat`: everything but idle
//!   and iowait, all cores: sender, receiver, relay, softirqs, BPF, bridge, agent) over the
//!   payload bytes the receiver read. The `ccp` rounds also report the CPU of the two
//!   user-space processes alone (`/proc/<pid>/stat`).
//! - **Control loop**: `ccp-kernel-datapath --latency-out`: for each report the agent
//!   answered, the time from the ACK in the BPF program (`bpf_ktime_get_ns`) to the write of
//!   the answer into the kernel's control map (the window applies from the next ACK).
//!
//! `KERNEL_PATH_BUSY_POLL=1` runs the datapath with `--busy-poll` (no sleeping in the bridge);
//! `KERNEL_PATH_NORMAL_RELAY=1` runs the testbed's relay at normal priority (it preempts the
//! bridge and the agent otherwise).
//!
//! Needs root, BPF `struct_ops` and network namespaces (says why and exits otherwise). Not
//! criterion: each sample is seconds of real traffic. Run:
//! `cargo bench -p ccp-agent --features kernel --bench kernel_path` (under
//! `cargo test --benches` a short smoke version runs).

use std::path::Path;
use std::time::Duration;

mod common;

use ccp_datapath::kernel::testbed::{
    Bandwidth, FlowSpec, LinkConfig, Testbed, TestbedConfig, TestbedError,
};
use ccp_datapath::stats::percentile;
use common::{BoxResult, Proc, clock_ticks};

/// Whether the environment variable `name` is `1`.
fn env_flag(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v == "1")
}

/// `KERNEL_PATH_BUSY_POLL=1`: run the datapath with `--busy-poll`.
fn busy_poll() -> bool {
    env_flag("KERNEL_PATH_BUSY_POLL")
}

/// Busy CPU time of the whole machine so far (all cores), seconds.
fn machine_busy_s() -> f64 {
    let stat = std::fs::read_to_string("/proc/stat").unwrap_or_default();
    let Some(line) = stat.lines().next() else {
        return 0.0;
    };
    let f: Vec<u64> = line
        .split_whitespace()
        .skip(1)
        .map(|x| x.parse().unwrap_or(0))
        .collect();
    // user nice system idle iowait irq softirq steal (guest is inside user).
    let busy: u64 = f
        .iter()
        .take(8)
        .enumerate()
        .filter(|(i, _)| *i != 3 && *i != 4)
        .map(|(_, v)| v)
        .sum();
    busy as f64 / clock_ticks()
}

struct Sample {
    mbps: f64,
    cpu_ns_per_byte: f64,
    procs_ns_per_byte: f64,
}

fn one_flow(testbed: &Testbed, cca: &str, span: Duration, procs: &[&Proc]) -> BoxResult<Sample> {
    let busy0 = machine_busy_s();
    let procs0: f64 = procs.iter().map(|p| p.cpu_s()).sum();
    let flows = testbed.run(&[FlowSpec::timed(cca, span)])?;
    let busy = machine_busy_s() - busy0;
    let procs_cpu: f64 = procs.iter().map(|p| p.cpu_s()).sum::<f64>() - procs0;
    let f = &flows[0];
    if f.cca != cca {
        return Err(format!("the flow ran {} instead of {cca}", f.cca).into());
    }
    let bytes = f.bytes_received.max(1) as f64;
    Ok(Sample {
        mbps: f.goodput_bps / 1e6,
        cpu_ns_per_byte: busy * 1e9 / bytes,
        procs_ns_per_byte: procs_cpu * 1e9 / bytes,
    })
}

/// The nearest-rank median (0 for none).
fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    percentile(&v, 500).unwrap_or(0.0)
}

/// `ccp-agent --alg cubic` and `ccp-kernel-datapath` writing its loop samples to `latency`.
fn spawn_pair(
    agent_name: &str,
    dp_name: &str,
    config: &Path,
    latency: &Path,
) -> BoxResult<(Proc, Proc)> {
    let agent = Proc::spawn(
        env!("CARGO_BIN_EXE_ccp-agent"),
        &[
            "--ipc",
            "unix",
            "--alg",
            "cubic",
            "--name",
            agent_name,
            "--config",
            &config.to_string_lossy(),
        ],
        agent_name,
        "warn",
    )?;
    let dp = Proc::spawn(
        env!("CARGO_BIN_EXE_ccp-kernel-datapath"),
        &[
            "--name",
            dp_name,
            "--agent",
            agent_name,
            "--latency-out",
            &latency.to_string_lossy(),
            if busy_poll() {
                "--busy-poll"
            } else {
                "--stats-secs=0"
            },
        ],
        dp_name,
        // Its summary line at exit splits the control loop into its ring-buffer and agent parts.
        "warn,ccp_kernel_datapath=info",
    )?;
    Ok((agent, dp))
}

fn bench_link(label: &str, link: LinkConfig, rounds: usize, span: Duration) -> BoxResult<()> {
    let tb_config =
        TestbedConfig::new(link).with_realtime_relay(!env_flag("KERNEL_PATH_NORMAL_RELAY"));
    let testbed = match Testbed::new(tb_config) {
        Ok(t) => t,
        Err(e) if e.is_unavailable() => return Err(Box::new(e)),
        Err(e) => return Err(format!("testbed: {e}").into()),
    };
    let pid = std::process::id();
    let agent_name = format!("kbench-agent-{pid}");
    let dp_name = format!("kbench-dp-{pid}");
    let config = std::env::temp_dir().join(format!("kbench-{pid}.toml"));
    std::fs::write(&config, "")?;
    let latency = std::env::temp_dir().join(format!("kbench-{pid}-{label}.lat"));
    let (agent, dp) = spawn_pair(&agent_name, &dp_name, &config, &latency)?;
    // The agent installs its programs on the datapath's READY.
    std::thread::sleep(Duration::from_millis(300));
    let (mut native, mut ccp) = (Vec::new(), Vec::new());
    for round in 0..rounds {
        let order: [&str; 2] = if round % 2 == 0 {
            ["cubic", "ccp"]
        } else {
            ["ccp", "cubic"]
        };
        for cca in order {
            let s = if cca == "ccp" {
                one_flow(&testbed, cca, span, &[&agent, &dp])?
            } else {
                one_flow(&testbed, cca, span, &[])?
            };
            println!(
                "  {label} round {round} {cca:5}: {:7.1} Mbit/s, {:6.2} ns CPU per byte{}",
                s.mbps,
                s.cpu_ns_per_byte,
                if cca == "ccp" {
                    format!(
                        " (agent + datapath processes {:.2} ns/byte)",
                        s.procs_ns_per_byte
                    )
                } else {
                    String::new()
                }
            );
            if cca == "ccp" {
                ccp.push(s);
            } else {
                native.push(s);
            }
        }
    }
    dp.terminate()?;
    drop(agent);
    let mut loop_ns: Vec<u64> = std::fs::read_to_string(&latency)?
        .lines()
        .filter_map(|l| l.parse().ok())
        .collect();
    loop_ns.sort_unstable();
    let _ = std::fs::remove_file(&latency);
    let _ = std::fs::remove_file(&config);
    let med = |v: &[Sample], f: fn(&Sample) -> f64| median(v.iter().map(f).collect());
    let (n_cpu, c_cpu) = (
        med(&native, |s| s.cpu_ns_per_byte),
        med(&ccp, |s| s.cpu_ns_per_byte),
    );
    println!(
        "{label}: median of {rounds}: cubic {:.1} Mbit/s {n_cpu:.2} ns/byte; ccp {:.1} Mbit/s \
         {c_cpu:.2} ns/byte (x{:.3}; agent + datapath processes {:.2} ns/byte); control loop \
         {} samples p50 {:.1} µs p99 {:.1} µs",
        med(&native, |s| s.mbps),
        med(&ccp, |s| s.mbps),
        c_cpu / n_cpu.max(f64::MIN_POSITIVE),
        med(&ccp, |s| s.procs_ns_per_byte),
        loop_ns.len(),
        percentile(&loop_ns, 500).unwrap_or_default() as f64 / 1e3,
        percentile(&loop_ns, 990).unwrap_or_default() as f64 / 1e3,
    );
    Ok(())
}

fn main() -> BoxResult<()> {
    let full = std::env::args().any(|a| a == "--bench");
    let (rounds, span) = if full {
        (5, Duration::from_secs(8))
    } else {
        (1, Duration::from_millis(500))
    };
    let links = [
        (
            "100M-20ms",
            LinkConfig::constant(100_000_000, Duration::from_millis(20)),
        ),
        (
            "unshaped-2ms",
            LinkConfig::new(Bandwidth::Unlimited, Duration::from_millis(2)),
        ),
    ];
    // Probe once here: a datapath process that cannot load BPF would only say so on stderr.
    if let Err(e) = ccp_datapath::kernel::KernelDatapath::load() {
        if e.is_unavailable() {
            println!("kernel path: skipped: BPF struct_ops is not available here ({e})");
            return Ok(());
        }
        return Err(Box::new(e));
    }
    println!("kernel path: {rounds} round(s) of {span:?} per scheme and link");
    for (label, link) in links {
        match bench_link(label, link, rounds, span) {
            Ok(()) => {}
            Err(e) => {
                if let Some(t) = e.downcast_ref::<TestbedError>()
                    && t.is_unavailable()
                {
                    println!("kernel path: skipped: no network namespaces here ({t})");
                    return Ok(());
                }
                return Err(e);
            }
        }
    }
    Ok(())
}
