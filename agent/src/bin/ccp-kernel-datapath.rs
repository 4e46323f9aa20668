//! `ccp-kernel-datapath`: the eBPF kernel datapath (`ccp_datapath::kernel`) as a process, so
//! `ccp-agent --ipc unix` drives real kernel TCP flows with no kernel module.
//!
//! ```text
//! ccp-kernel-datapath [--name kernel] [--agent portus] [--alg <cca|selector>]
//!                     [--stats-secs 10] [--latency-out FILE] [--busy-poll]
//! ```
//!
//! It registers the BPF congestion control `ccp` (through a `struct_ops` link: it unregisters
//! when this process exits, however it exits), binds `/tmp/ccp/<name>`, announces itself to the
//! agent at `/tmp/ccp/<agent>` and then turns every ACK of every socket using `ccp` into a CCP
//! invocation; the agent's windows and rates go back into the kernel. Sockets opt in with
//! `setsockopt(TCP_CONGESTION, "ccp")`, or through `ccp-agent`'s `iw.kernel_cgroup` with
//! `kernel_cca = "ccp"`. When the agent dies or stalls, each flow falls back to the in-kernel
//! Reno after 500 ms, and the agent takes the flows back when it returns.
//!
//! SIGTERM or SIGINT stops it after a summary line: records, flows, control writes, ACKs on
//! which the kernel applied a user-space window or ran its fallback, and the control loop's
//! p50/p99 (ACK in the kernel to the agent's answer written back) with the p50 of its two
//! parts (the ring buffer up to the bridge, and the agent's answer), over the first 1,048,576
//! answered reports (later ones are counted, not kept). Needs root
//! (or `CAP_BPF` + `CAP_NET_ADMIN`); exit status 2 when BPF is not available, with the reason.

use std::path::{Path, PathBuf};
use std::process::ExitCode;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use ccp_datapath::kernel::{KernelBridge, KernelDatapath};
use ccp_datapath::runtime::{
    Clock, Datapath, DatapathConfig, MonotonicClock, Transport, UnixTransport,
};
use ccp_datapath::stats::percentile;
use clap::Parser;
use tracing::{info, warn};

/// The kernel datapath: BPF `ccp` congestion control driven by a CCP agent over unix sockets.
#[derive(Debug, Parser)]
#[command(name = "ccp-kernel-datapath", version)]
struct Cli {
    /// Unix socket name of this datapath: `/tmp/ccp/<name>`.
    #[arg(long, default_value = "kernel")]
    name: String,
    /// The agent's socket name: `/tmp/ccp/<agent>` (`ccp-agent --name`).
    #[arg(long, default_value = "portus")]
    agent: String,
    /// Algorithm asked for on every new flow; the agent's `--alg` when not given.
    #[arg(long)]
    alg: Option<String>,
    /// Seconds between statistics lines in the log (0: none).
    #[arg(long, default_value_t = 10)]
    stats_secs: u64,
    /// Writes every control-loop sample (ns, one per line) here at exit.
    #[arg(long)]
    latency_out: Option<PathBuf>,
    /// Never sleep: poll the ring buffer and the agent's socket in a loop (one core at 100 %),
    /// which takes the bridge's wake-ups out of the control loop.
    #[arg(long)]
    busy_poll: bool,
}

static STOP: AtomicBool = AtomicBool::new(false);

extern "C" fn on_stop(_: libc::c_int) {
    // Async-signal-safe: one atomic store.
    STOP.store(true, Ordering::SeqCst);
}

fn install_stop_handlers() -> std::io::Result<()> {
    let handler: extern "C" fn(libc::c_int) = on_stop;
    for signal in [libc::SIGTERM, libc::SIGINT] {
        // SAFETY: the handler only stores to an atomic (async-signal-safe); `signal` with a
        // valid function pointer has no other preconditions.
        let previous = unsafe { libc::signal(signal, handler as libc::sighandler_t) };
        if previous == libc::SIG_ERR {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The summary line at exit, and the control-loop samples to `latency_out`.
fn summarize<T: Transport, C: Clock>(
    bridge: &KernelBridge<T, C>,
    mut latencies: Vec<u64>,
    parts: &[(u64, u64)],
    latency_out: Option<&Path>,
) {
    latencies.sort_unstable();
    let mut ring: Vec<u64> = parts.iter().map(|p| p.0).collect();
    let mut agent: Vec<u64> = parts.iter().map(|p| p.1).collect();
    ring.sort_unstable();
    agent.sort_unstable();
    let s = bridge.stats();
    let k = bridge.kernel.stats().ok();
    let us = |sorted: &[u64], per_mille| percentile(sorted, per_mille).unwrap_or(0) as f64 / 1e3;
    info!(
        records = s.records,
        acks = s.acks,
        flows = s.flows_created,
        control_writes = s.control_writes,
        agent_writes = s.agent_writes,
        user_acks = k.map_or(0, |k| k.user_acks),
        fallback_acks = k.map_or(0, |k| k.fallback_acks),
        records_dropped = k.map_or(0, |k| k.records_dropped),
        loop_samples = latencies.len(),
        loop_p50_us = us(&latencies, 500),
        loop_p99_us = us(&latencies, 990),
        ring_p50_us = us(&ring, 500),
        agent_p50_us = us(&agent, 500),
        per_ack_ns = s.busy_ns / s.acks.max(1),
        "stopped"
    );
    if let Some(path) = latency_out {
        let text = latencies.iter().fold(String::new(), |mut out, v| {
            out.push_str(&v.to_string());
            out.push('\n');
            out
        });
        if let Err(e) = std::fs::write(path, text) {
            warn!(path = %path.display(), error = %e, "cannot write the latency samples");
        }
    }
}

fn main() -> ExitCode {
    ccp_agent::init_logging();
    let cli = Cli::parse();
    let kernel = match KernelDatapath::load() {
        Ok(k) => k,
        Err(e) => {
            let why = if e.is_unavailable() {
                "BPF struct_ops congestion control is not available here"
            } else {
                "cannot load the BPF datapath"
            };
            eprintln!("ccp-kernel-datapath: {why}: {e}");
            return ExitCode::from(2);
        }
    };
    let transport = match UnixTransport::bind(&cli.name, &cli.agent) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("ccp-kernel-datapath: binding /tmp/ccp/{}: {e}", cli.name);
            return ExitCode::from(2);
        }
    };
    if let Err(e) = install_stop_handlers() {
        eprintln!("ccp-kernel-datapath: cannot install the signal handlers: {e}");
        return ExitCode::from(1);
    }
    let runtime = Datapath::new(DatapathConfig::default(), transport, MonotonicClock::new());
    let mut bridge = KernelBridge::new(kernel, runtime, cli.alg.clone());
    info!(name = %cli.name, agent = %cli.agent, alg = ?cli.alg, "kernel datapath running: \
        sockets using `ccp` are driven by the agent");

    let every = Duration::from_secs(cli.stats_secs);
    let mut next_stats = Instant::now() + every;
    let mut result = Ok(());
    while !STOP.load(Ordering::SeqCst) {
        let wait = if cli.busy_poll {
            Duration::ZERO
        } else {
            Duration::from_millis(50)
        };
        if let Err(e) = bridge.step(wait) {
            result = Err(e);
            break;
        }
        if cli.stats_secs > 0 && Instant::now() >= next_stats {
            next_stats += every;
            let s = bridge.stats();
            let k = bridge.kernel.stats().unwrap_or_default();
            info!(
                acks = s.acks,
                flows = s.flows_created,
                open = bridge.runtime.connection_count(),
                writes = s.control_writes,
                user_acks = k.user_acks,
                fallback_acks = k.fallback_acks,
                agent_gone = bridge.runtime.in_fallback(),
                "stats"
            );
        }
    }
    // The bridge keeps the first samples (bounded); they are summarized once, at exit.
    let latencies = bridge.take_loop_latencies();
    let parts = bridge.take_loop_parts();
    summarize(&bridge, latencies, &parts, cli.latency_out.as_deref());
    match result {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("ccp-kernel-datapath: {e}");
            ExitCode::from(1)
        }
    }
}
