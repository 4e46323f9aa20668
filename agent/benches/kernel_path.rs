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
//! `KERNEL_PATH_POLL_SIDES=1` measures instead which side's busy-polling shortens the control
//! loop, in one run on the 100 Mbit/s link: one `ccp` flow per round under each of four
//! pairs, alternated round by round (a fresh agent and datapath each time): neither side
//! polls; the bridge polls (`ccp-kernel-datapath --busy-poll`); the agent polls
//! (`ccp-agent --spin-us 1000000`, never sleeping while reports come); both poll.
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

/// Which sides of the control loop busy-poll.
#[derive(Debug, Clone, Copy)]
struct Polling {
    bridge: bool,
    agent: bool,
}

/// `ccp-agent --alg cubic` and `ccp-kernel-datapath` writing its loop samples to `latency`.
fn spawn_pair(
    agent_name: &str,
    dp_name: &str,
    config: &Path,
    latency: &Path,
) -> BoxResult<(Proc, Proc)> {
    spawn_polling(
        agent_name,
        dp_name,
        config,
        latency,
        Polling {
            bridge: busy_poll(),
            agent: false,
        },
    )
}

fn spawn_polling(
    agent_name: &str,
    dp_name: &str,
    config: &Path,
    latency: &Path,
    polling: Polling,
) -> BoxResult<(Proc, Proc)> {
    let config = config.to_string_lossy();
    let mut args = vec![
        "--ipc", "unix", "--alg", "cubic", "--name", agent_name, "--config", &config,
    ];
    if polling.agent {
        args.extend(["--spin-us", "1000000"]);
    }
    let agent = Proc::spawn(env!("CARGO_BIN_EXE_ccp-agent"), &args, agent_name, "warn")?;
    let dp = Proc::spawn(
        env!("CARGO_BIN_EXE_ccp-kernel-datapath"),
        &[
            "--name",
            dp_name,
            "--agent",
            agent_name,
            "--latency-out",
            &latency.to_string_lossy(),
            if polling.bridge {
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

/// `KERNEL_PATH_POLL_SIDES=1`: the control loop with neither, one or both sides polling.
fn bench_polling(rounds: usize, span: Duration) -> BoxResult<()> {
    let link = LinkConfig::constant(100_000_000, Duration::from_millis(20));
    let testbed = Testbed::new(TestbedConfig::new(link).with_realtime_relay(true))?;
    let pid = std::process::id();
    let config = std::env::temp_dir().join(format!("kbench-{pid}.toml"));
    std::fs::write(&config, "")?;
    let sides = [
        (
            "neither polls",
            Polling {
                bridge: false,
                agent: false,
            },
        ),
        (
            "bridge polls",
            Polling {
                bridge: true,
                agent: false,
            },
        ),
        (
            "agent polls",
            Polling {
                bridge: false,
                agent: true,
            },
        ),
        (
            "both poll",
            Polling {
                bridge: true,
                agent: true,
            },
        ),
    ];
    let mut loops: Vec<Vec<u64>> = vec![Vec::new(); sides.len()];
    let mut procs: Vec<Vec<f64>> = vec![Vec::new(); sides.len()];
    for round in 0..rounds {
        for (k, (label, polling)) in sides.iter().enumerate() {
            let tag = format!("{pid}-{round}-{k}");
            let (agent_name, dp_name) = (format!("kbench-agent-{tag}"), format!("kbench-dp-{tag}"));
            let latency = std::env::temp_dir().join(format!("kbench-{tag}.lat"));
            let (agent, dp) = spawn_polling(&agent_name, &dp_name, &config, &latency, *polling)?;
            std::thread::sleep(Duration::from_millis(300));
            let s = one_flow(&testbed, "ccp", span, &[&agent, &dp])?;
            dp.terminate()?;
            drop(agent);
            let mut ns: Vec<u64> = std::fs::read_to_string(&latency)?
                .lines()
                .filter_map(|l| l.parse().ok())
                .collect();
            let _ = std::fs::remove_file(&latency);
            ns.sort_unstable();
            println!(
                "  round {round} {label:13}: {:6.1} Mbit/s, agent + datapath {:6.2} ns/byte, \
                 loop {} samples p50 {:.1} µs p99 {:.1} µs (load average {})",
                s.mbps,
                s.procs_ns_per_byte,
                ns.len(),
                percentile(&ns, 500).unwrap_or_default() as f64 / 1e3,
                percentile(&ns, 990).unwrap_or_default() as f64 / 1e3,
                load_average(),
            );
            loops[k].extend(ns);
            procs[k].push(s.procs_ns_per_byte);
        }
    }
    let _ = std::fs::remove_file(&config);
    for (k, (label, _)) in sides.iter().enumerate() {
        loops[k].sort_unstable();
        println!(
            "{label:13}: control loop p50 {:.1} µs p99 {:.1} µs ({} samples, all rounds); \
             agent + datapath median {:.2} ns/byte",
            percentile(&loops[k], 500).unwrap_or_default() as f64 / 1e3,
            percentile(&loops[k], 990).unwrap_or_default() as f64 / 1e3,
            loops[k].len(),
            median(procs[k].clone()),
        );
    }
    Ok(())
}

fn load_average() -> String {
    std::fs::read_to_string("/proc/loadavg")
        .map(|l| l.split_whitespace().take(3).collect::<Vec<_>>().join(" "))
        .unwrap_or_default()
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
    if env_flag("KERNEL_PATH_POLL_SIDES") {
        println!(
            "kernel path, polling sides: {rounds} round(s) of {span:?}, load average {}",
            load_average()
        );
        return bench_polling(rounds, span);
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
