//! `run --datapath kernel`: a scenario's flows as real kernel TCP connections through the
//! network-namespace testbed (`ccp_datapath::kernel::testbed`), with the same rows, series,
//! swaps and report as the simulator.
//!
//! Per run: a fresh testbed (sender, router and receiver namespaces; `htb` bottleneck or the
//! relay's trace replay; the relay's delay and random loss) configured from the condition;
//! the condition's phases applied with `Testbed::set_link` at their times; one flow per
//! scenario flow. Built-in schemes run as the kernel's own algorithms (`native-reno` ->
//! `reno`, `native-cubic` -> `cubic`); CCP schemes and selectors run as the BPF congestion
//! control `ccp`, driven by a portus agent with every scheme registered (in this process,
//! over portus's channel IPC) through [`KernelBridge`]. Runs are sequential and real time.
//!
//! What differs from the simulator (`docs/calibration.md`):
//! - RTT samples are the kernel's smoothed RTT (`tcpi_rtt`) every 10 ms, not one per ACK;
//!   queueing delay is that minus the condition's propagation RTT.
//! - Loss is retransmitted segments over data segments sent (the bottleneck's drops are not
//!   attributed to flows); timeouts are the entries into `TCP_CA_Loss` seen in the 10 ms
//!   `TCP_INFO` samples.
//! - A run's start is the moment its first flow connects; a flow's throughput counts from
//!   its scheduled start, like the simulator's.
//!
//! Not supported (a clear error, the run's rows marked failed): on/off flows, ACK aggregation,
//! and two different CCP schemes in one run (the bridge asks the agent for one algorithm).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use ccp_datapath::kernel::testbed::{
    Amount, Bandwidth, FlowResult as KernelFlow, FlowSpec as KernelFlowSpec, LinkConfig, Testbed,
    TestbedConfig,
};
use ccp_datapath::kernel::{BridgeStats, KernelBridge, KernelDatapath, KernelStats};
use ccp_datapath::runtime::{ChannelTransport, Datapath, DatapathConfig, MonotonicClock};
use ccp_datapath::sim::{FlowResult, LinkRate, PathChange, Sample, Scheme};
use ccp_datapath::stats::percentile;
use tracing::info;

use super::{Finished, Job, JobOutput, flow_specs, job_output, link_for, path_changes, swap_rows};
use crate::scenario::{Condition, Scenario};
use crate::schemes;

/// What the BPF side of one run did.
#[derive(Debug, Clone, Default)]
pub struct KernelRunStats {
    /// The bridge's counters.
    pub bridge: BridgeStats,
    /// The BPF program's counters.
    pub kernel: KernelStats,
    /// Control-loop samples (ACK in the kernel to the agent's answer in the map), ns.
    pub loop_ns: Vec<u64>,
}

/// The BPF datapath and the bridge, running in their own thread for one run (the loaded
/// object is not `Send`: it is created, used and dropped there).
struct BridgeThread {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<KernelRunStats, String>>,
}

impl BridgeThread {
    /// Loads `ccp`, connects the runtime to `transport` and runs the bridge until stopped.
    /// Returns once the congestion control is registered (or failed to be).
    fn start(transport: ChannelTransport, alg: String) -> Result<Self, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("ccp-eval-kernel-bridge".into())
            .spawn(move || {
                let kernel = match KernelDatapath::load() {
                    Ok(k) => k,
                    Err(e) => {
                        let msg = format!("loading the BPF datapath: {e}");
                        let _ = ready_tx.send(Err(msg.clone()));
                        return Err(msg);
                    }
                };
                let runtime =
                    Datapath::new(DatapathConfig::default(), transport, MonotonicClock::new());
                let mut bridge = KernelBridge::new(kernel, runtime, Some(alg));
                let _ = ready_tx.send(Ok(()));
                while !flag.load(Ordering::Relaxed) {
                    bridge
                        .step(Duration::from_millis(5))
                        .map_err(|e| format!("kernel bridge: {e}"))?;
                }
                Ok(KernelRunStats {
                    bridge: bridge.stats(),
                    kernel: bridge.kernel.stats().unwrap_or_default(),
                    loop_ns: bridge.take_loop_latencies(),
                })
            })
            .map_err(|e| format!("starting the bridge thread: {e}"))?;
        match ready_rx.recv() {
            Ok(Ok(())) => Ok(Self { stop, thread }),
            Ok(Err(e)) => {
                let _ = thread.join();
                Err(e)
            }
            Err(_) => Err(match thread.join() {
                Ok(Err(e)) => e,
                _ => "the bridge thread ended before loading".into(),
            }),
        }
    }

    fn finish(self) -> Result<KernelRunStats, String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| "the bridge thread panicked".to_string())?
    }
}

/// The kernel congestion control for a scheme, and the CCP algorithm the agent runs for it.
fn kernel_cca(scheme: &Scheme) -> Result<(String, Option<String>), String> {
    match scheme {
        Scheme::Reno => Ok(("reno".into(), None)),
        Scheme::Cubic => Ok(("cubic".into(), None)),
        Scheme::Ccp { alg } => Ok((ccp_datapath::kernel::CCA_NAME.into(), Some(alg.clone()))),
        Scheme::Fixed { .. } => Err("a fixed window has no kernel congestion control".into()),
    }
}

/// The testbed link of a condition at its start.
fn testbed_link(cond: &Condition) -> LinkConfig {
    let (link, _) = link_for(cond);
    let bandwidth = match link.rate {
        LinkRate::Constant { bps } => Bandwidth::Rate { bps },
        LinkRate::Trace(t) => Bandwidth::Trace(t),
    };
    LinkConfig::new(bandwidth, Duration::from_secs_f64(cond.rtt_ms / 1e3))
        .with_buffer_bytes(link.buffer_bytes)
        .with_loss(link.loss)
}

/// `link` after a phase change.
fn changed(mut link: LinkConfig, c: &PathChange) -> LinkConfig {
    if let Some(rate) = &c.rate {
        link.bandwidth = match rate {
            LinkRate::Constant { bps } => Bandwidth::Rate { bps: *bps },
            LinkRate::Trace(t) => Bandwidth::Trace(t.clone()),
        };
    }
    if let Some(owd) = c.one_way_delay_ns {
        link.data_delay = Duration::from_nanos(owd);
        link.ack_delay = Duration::from_nanos(owd);
    }
    if let Some(loss) = c.loss {
        link.loss = loss;
    }
    if let Some(b) = c.buffer_bytes {
        link.buffer_bytes = b;
    }
    link
}

/// A kernel flow's measurements in the simulator's result type, so rows, series and the
/// report are computed by the same code. The series keeps one `TCP_INFO` sample per
/// `every_ns` (none when 0), as the simulator's.
fn as_flow_result(
    k: &KernelFlow,
    start_ns: u64,
    base_rtt_us: u32,
    sized: bool,
    every_ns: u64,
) -> FlowResult {
    let rtt_samples_us: Vec<u32> = k
        .samples
        .iter()
        .map(|s| s.srtt_us)
        .filter(|&r| r > 0)
        .collect();
    let queue_delay_samples_us = rtt_samples_us
        .iter()
        .map(|r| r.saturating_sub(base_rtt_us))
        .collect();
    let mut series: Vec<Sample> = Vec::new();
    if every_ns > 0 {
        for s in &k.samples {
            let t_ns = s.at.as_nanos() as u64;
            if series.last().is_some_and(|l| t_ns < l.t_ns + every_ns) {
                continue;
            }
            series.push(Sample {
                t_ns,
                cwnd_bytes: u32::try_from(s.cwnd_bytes()).unwrap_or(u32::MAX),
                delivered_bytes: s.bytes_acked,
            });
        }
    }
    let end_ns = (k.started_at + k.connect_time + k.active).as_nanos() as u64;
    FlowResult {
        start_ns,
        completion_ns: (sized && k.completed).then_some(end_ns),
        delivered_bytes: k.bytes_received,
        packets_sent: k.data_segs_out,
        packets_dropped: k.retrans_segs,
        packets_lost: k.retrans_segs,
        retransmits: k.retrans_segs,
        // Entries into TCP_CA_Loss (4) seen in the 10 ms samples: retransmission timeouts.
        timeouts: k
            .samples
            .windows(2)
            .filter(|w| w[1].ca_state == 4 && w[0].ca_state != 4)
            .count() as u64,
        srtt_samples_us: rtt_samples_us.clone(),
        rtt_samples_us,
        queue_delay_samples_us,
        min_rtt_ns: u64::from(k.min_rtt_us) * 1000,
        series,
        ..FlowResult::default()
    }
}

/// The testbed flows of a job and the one CCP algorithm they need (if any).
fn plan_flows(
    flows: &[(&'static str, String, ccp_datapath::sim::FlowSpec)],
    duration: Duration,
) -> Result<(Vec<KernelFlowSpec>, Option<String>), String> {
    let mut ccp_alg: Option<String> = None;
    let mut specs = Vec::with_capacity(flows.len());
    for (_, name, spec) in flows {
        if spec.on_off_ns.is_some() {
            return Err("on/off flows are not supported with --datapath kernel".into());
        }
        let (cca, alg) = kernel_cca(&spec.scheme)?;
        if let Some(a) = alg {
            match &ccp_alg {
                Some(b) if *b != a => {
                    return Err(format!(
                        "two CCP schemes in one run ({b}, {a}): the kernel datapath asks the agent \
                         for one"
                    ));
                }
                _ => ccp_alg = Some(a),
            }
        }
        let start = Duration::from_nanos(spec.start_ns);
        let left = duration.saturating_sub(start);
        if left.is_zero() {
            return Err(format!("flow `{name}` starts after the run ends"));
        }
        let amount = match spec.size_bytes {
            Some(b) => Amount::Bytes(b),
            None => Amount::For(left),
        };
        specs.push(
            KernelFlowSpec::new(cca, amount)
                .starting_at(start)
                .with_timeout(left),
        );
    }
    Ok((specs, ccp_alg))
}

/// What the testbed gave back for one job.
struct Outcome {
    flows: Vec<KernelFlow>,
    swaps: Vec<crate::results::SwapRow>,
}

/// Builds the testbed, starts the agent and the bridge when a CCP algorithm is needed, runs the
/// flows with the condition's phases, and takes everything down again.
fn run_on_testbed(
    scenario: &Scenario,
    cond: &Condition,
    job: &Job,
    specs: &[KernelFlowSpec],
    ccp_alg: Option<&str>,
) -> Result<Outcome, String> {
    let link = testbed_link(cond);
    let testbed = Testbed::new(TestbedConfig::new(link.clone()).with_seed(job.seed))
        .map_err(|e| format!("testbed: {e}"))?;
    let agent = match ccp_alg {
        Some(alg) => {
            let (transport, agent_end) = ChannelTransport::pair(None);
            let (handle, selectors) = schemes::spawn_channel_agent(agent_end)
                .map_err(|e| format!("starting the agent: {e:?}"))?;
            match BridgeThread::start(transport, alg.to_string()) {
                Ok(bridge) => Some((handle, selectors, bridge)),
                Err(e) => {
                    handle.kill();
                    let _ = handle.wait();
                    return Err(e);
                }
            }
        }
        None => None,
    };

    // The phases as the whole link after each change, applied at their times.
    let mut changes = path_changes(cond);
    changes.sort_by_key(|c| c.at_ns);
    let mut current = link;
    let links: Vec<(Duration, LinkConfig)> = changes
        .iter()
        .map(|c| {
            current = changed(current.clone(), c);
            (Duration::from_nanos(c.at_ns), current.clone())
        })
        .collect();
    let results = testbed
        .run_with_changes(specs, &links)
        .map_err(|e| format!("flows: {e}"));
    let swaps = match agent {
        Some((handle, selectors, bridge)) => {
            let stats = bridge.finish();
            handle.kill();
            let _ = handle.wait();
            let k = stats?;
            if k.kernel.user_acks == 0 && k.kernel.fallback_acks > 0 {
                return Err(format!(
                    "the agent never controlled the run's CCP flows ({} ACKs on the in-kernel \
                     fallback)",
                    k.kernel.fallback_acks
                ));
            }
            let mut l = k.loop_ns;
            l.sort_unstable();
            let p = |per_mille: u32| percentile(&l, per_mille).unwrap_or_default();
            info!(condition = %cond.id, scheme = %job.scheme, acks = k.bridge.acks,
                user_acks = k.kernel.user_acks, fallback_acks = k.kernel.fallback_acks,
                loop_p50_us = p(500) as f64 / 1e3, loop_p99_us = p(990) as f64 / 1e3, "kernel run");
            swap_rows(&selectors, scenario, cond, job)
        }
        None => Vec::new(),
    };
    Ok(Outcome {
        flows: results?,
        swaps,
    })
}

/// Runs one job on the testbed.
pub(super) fn execute(
    scenario: &Scenario,
    cond: &Condition,
    job: &Job,
) -> Result<JobOutput, String> {
    if cond.ack_aggregation_ms > 0.0 {
        return Err("ACK aggregation is not emulated by the kernel testbed".into());
    }
    let flows = flow_specs(scenario, &job.scheme, 0);
    let duration = Duration::from_secs_f64(scenario.duration_s);
    let (specs, ccp_alg) = plan_flows(&flows, duration)?;
    let outcome = run_on_testbed(scenario, cond, job, &specs, ccp_alg.as_deref())?;

    let duration_ns = duration.as_nanos() as u64;
    let base_rtt_us = (cond.rtt_ms * 1e3) as u32;
    let every_ns = scenario.series_interval_ms * 1_000_000;
    let (link, capacity_bps) = link_for(cond);
    let results: Vec<FlowResult> = flows
        .iter()
        .zip(&outcome.flows)
        .map(|((_, _, spec), k)| {
            as_flow_result(
                k,
                spec.start_ns,
                base_rtt_us,
                spec.size_bytes.is_some(),
                every_ns,
            )
        })
        .collect();
    Ok(job_output(
        scenario,
        cond,
        job,
        &Finished {
            flows: &flows,
            results: &results,
            duration_ns,
            capacity_bps,
            first_rate: &link.rate,
            buffer_bytes: testbed_link(cond).buffer_bytes,
        },
        outcome.swaps,
        0,
    ))
}
