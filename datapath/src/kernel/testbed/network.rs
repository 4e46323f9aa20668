//! The testbed as a [`Network`]: a [`NetworkSpec`]'s flows as real kernel TCP connections,
//! with the same result type as the simulator.
//!
//! Per run: a fresh [`Testbed`] configured from the spec's link (the `htb` bottleneck or the
//! relay's trace replay; the relay's delay and random loss), the spec's path changes applied
//! with [`Testbed::set_link`] at their times, one connection per flow. Built-in schemes run as
//! the kernel's own algorithms ([`Scheme::Reno`] -> `reno`, [`Scheme::Cubic`] -> `cubic`); CCP
//! schemes run as the BPF congestion control `ccp`, whose runtime talks, through
//! [`KernelBridge`], to the agent at the other end of the [`ChannelTransport`] given to
//! [`KernelNetwork::with_agent`]. Runs are real time.
//!
//! What differs from the simulator (`docs/calibration.md`):
//! - RTT samples are the kernel's smoothed RTT (`tcpi_rtt`) every 10 ms, not one per ACK. To
//!   average as the simulator does, each sample counts once per ACK the sender received since
//!   the sample before (`tcpi_segs_in`); queueing delay (the smoothed RTT minus the flow's
//!   propagation RTT) once per packet delivered (`tcpi_delivered`). `p95_srtt_ms` keeps one
//!   per 10 ms, as the simulator's.
//! - Loss (dropped, lost, retransmitted) is the flow's retransmitted segments (the
//!   bottleneck's drops are not attributed to flows); timeouts are the kernel's own count
//!   (`tcpi_total_rto`; a lost SYN's timeout counts too, and the simulator has no handshake).
//! - A flow's throughput counts from its scheduled start, like the simulator's.
//!
//! With `CCP_KERNEL_TRACE_DIR=<dir>` in the environment, every run with CCP flows writes the
//! bridge's per-ACK trace ([`KernelBridge::with_trace`]: what the BPF program reported, the
//! windows the agent set) to `<dir>/bridge-<pid>-<n>.csv`.
//!
//! Not supported (a [`KernelNetworkError::Unsupported`]): on/off flows, ACK aggregation, a
//! fixed window, flows with different propagation delays (the testbed has one path), and two
//! different CCP algorithms in one run (the bridge asks the agent for one).

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::thread::JoinHandle;
use std::time::Duration;

use thiserror::Error;
use tracing::info;

use super::transfer::{Amount, FlowResult as KernelFlow, FlowSpec as KernelFlowSpec, InfoSample};
use super::{Bandwidth, LinkConfig, Testbed, TestbedConfig, TestbedError};
use crate::kernel::{BridgeStats, CCA_NAME, KernelBridge, KernelDatapath, KernelStats};
use crate::netem::{
    FlowResult, FlowSpec, LinkRate, LinkSpec, Network, NetworkResult, NetworkSpec, PathChange,
    Sample, Scheme,
};
use crate::runtime::{ChannelTransport, Datapath, DatapathConfig, MonotonicClock};
use crate::stats::percentile;

/// Why a run on the testbed failed.
#[derive(Debug, Error)]
pub enum KernelNetworkError {
    /// The spec asks for something the testbed does not emulate.
    #[error("not supported with kernel TCP: {0}")]
    Unsupported(String),
    /// The testbed could not be built or its flows failed.
    #[error(transparent)]
    Testbed(#[from] TestbedError),
    /// The BPF datapath, its bridge or the agent failed.
    #[error("{0}")]
    Control(String),
}

/// One run on the kernel testbed.
pub struct KernelNetwork {
    agent: Option<ChannelTransport>,
}

impl KernelNetwork {
    /// A testbed run with no agent: only built-in schemes can run.
    pub fn new() -> Self {
        Self { agent: None }
    }

    /// CCP flows are driven by the agent at the other end of `transport` (the caller serves
    /// it, e.g. with a portus agent over [`ChannelTransport::pair`]'s other end).
    #[must_use]
    pub fn with_agent(mut self, transport: ChannelTransport) -> Self {
        self.agent = Some(transport);
        self
    }
}

impl Default for KernelNetwork {
    fn default() -> Self {
        Self::new()
    }
}

impl Network for KernelNetwork {
    type Error = KernelNetworkError;

    fn run(self, spec: NetworkSpec) -> Result<NetworkResult, KernelNetworkError> {
        if spec.ack_aggregation_ns > 0 {
            return Err(KernelNetworkError::Unsupported(
                "ACK aggregation is not emulated by the testbed".into(),
            ));
        }
        let one_way_delay_ns = one_delay(&spec.flows)?;
        let duration = Duration::from_nanos(spec.duration_ns);
        let (flows, ccp_alg) = plan_flows(&spec.flows, duration)?;
        let link = testbed_link(&spec.link, one_way_delay_ns);
        let testbed = Testbed::new(TestbedConfig::new(link.clone()).with_seed(spec.seed))?;
        let bridge = match (ccp_alg, self.agent) {
            (Some(alg), Some(transport)) => {
                Some(BridgeThread::start(transport, alg).map_err(KernelNetworkError::Control)?)
            }
            (Some(alg), None) => {
                return Err(KernelNetworkError::Control(format!(
                    "CCP algorithm `{alg}` needs an agent (KernelNetwork::with_agent)"
                )));
            }
            (None, _) => None,
        };
        let results = testbed.run_with_changes(&flows, &link_changes(link, &spec.changes));
        if let Some(bridge) = bridge {
            check_control(bridge.finish().map_err(KernelNetworkError::Control)?)?;
        }
        let base_rtt_us = u32::try_from(2 * one_way_delay_ns / 1000).unwrap_or(u32::MAX);
        let flows = spec
            .flows
            .iter()
            .zip(&results?)
            .map(|(f, k)| as_flow_result(k, f, base_rtt_us, spec.sample_interval_ns))
            .collect();
        Ok(NetworkResult {
            flows,
            duration_ns: spec.duration_ns,
            ..NetworkResult::default()
        })
    }
}

/// The one propagation delay every flow shares, ns.
fn one_delay(flows: &[FlowSpec]) -> Result<u64, KernelNetworkError> {
    let Some(first) = flows.first() else {
        return Err(KernelNetworkError::Unsupported(
            "a run with no flows".into(),
        ));
    };
    if let Some(other) = flows
        .iter()
        .find(|f| f.one_way_delay_ns != first.one_way_delay_ns)
    {
        return Err(KernelNetworkError::Unsupported(format!(
            "flows with different propagation delays ({} and {} ns one way): the testbed has one \
             path",
            first.one_way_delay_ns, other.one_way_delay_ns
        )));
    }
    Ok(first.one_way_delay_ns)
}

/// The kernel congestion control for a scheme, and the CCP algorithm the agent runs for it.
fn kernel_cca(scheme: &Scheme) -> Result<(String, Option<String>), KernelNetworkError> {
    match scheme {
        Scheme::Reno => Ok(("reno".into(), None)),
        Scheme::Cubic => Ok(("cubic".into(), None)),
        Scheme::Kernel { cca } => Ok((cca.clone(), None)),
        Scheme::Ccp { alg } => Ok((CCA_NAME.into(), Some(alg.clone()))),
        Scheme::Fixed { .. } => Err(KernelNetworkError::Unsupported(
            "a fixed window has no kernel congestion control".into(),
        )),
    }
}

/// The testbed flows of a run and the one CCP algorithm they need (if any).
fn plan_flows(
    flows: &[FlowSpec],
    duration: Duration,
) -> Result<(Vec<KernelFlowSpec>, Option<String>), KernelNetworkError> {
    let mut ccp_alg: Option<String> = None;
    let mut specs = Vec::with_capacity(flows.len());
    for (i, spec) in flows.iter().enumerate() {
        if spec.on_off_ns.is_some() {
            return Err(KernelNetworkError::Unsupported("on/off flows".into()));
        }
        let (cca, alg) = kernel_cca(&spec.scheme)?;
        if let Some(a) = alg {
            match &ccp_alg {
                Some(b) if *b != a => {
                    return Err(KernelNetworkError::Unsupported(format!(
                        "two CCP algorithms in one run ({b}, {a}): the kernel datapath asks the \
                         agent for one"
                    )));
                }
                _ => ccp_alg = Some(a),
            }
        }
        let start = Duration::from_nanos(spec.start_ns);
        let left = duration.saturating_sub(start);
        if left.is_zero() {
            return Err(KernelNetworkError::Unsupported(format!(
                "flow {i} starts after the run ends"
            )));
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

/// The testbed link of a bottleneck with propagation delay `one_way_delay_ns` each way.
fn testbed_link(link: &LinkSpec, one_way_delay_ns: u64) -> LinkConfig {
    let owd = Duration::from_nanos(one_way_delay_ns);
    LinkConfig::new(Bandwidth::from(link.rate.clone()), 2 * owd)
        .with_delays(owd, owd)
        .with_buffer_bytes(link.buffer_bytes)
        .with_loss(link.loss)
}

/// The path changes as the whole link after each, at their times.
fn link_changes(mut current: LinkConfig, changes: &[PathChange]) -> Vec<(Duration, LinkConfig)> {
    let mut changes: Vec<&PathChange> = changes.iter().collect();
    changes.sort_by_key(|c| c.at_ns);
    changes
        .into_iter()
        .map(|c| {
            if let Some(rate) = &c.rate {
                current.bandwidth = match rate {
                    LinkRate::Constant { bps } => Bandwidth::Rate { bps: *bps },
                    LinkRate::Trace(t) => Bandwidth::Trace(t.clone()),
                };
            }
            if let Some(owd) = c.one_way_delay_ns {
                current.data_delay = Duration::from_nanos(owd);
                current.ack_delay = Duration::from_nanos(owd);
            }
            if let Some(loss) = c.loss {
                current.loss = loss;
            }
            if let Some(b) = c.buffer_bytes {
                current.buffer_bytes = b;
            }
            (Duration::from_nanos(c.at_ns), current.clone())
        })
        .collect()
}

/// A kernel flow's measurements as a [`FlowResult`]. The series keeps one `TCP_INFO` sample
/// per `every_ns` (none when 0), as the simulator's.
fn as_flow_result(k: &KernelFlow, spec: &FlowSpec, base_rtt_us: u32, every_ns: u64) -> FlowResult {
    let srtt_samples_us: Vec<u32> = k
        .samples
        .iter()
        .map(|s| s.srtt_us)
        .filter(|&r| r > 0)
        .collect();
    // Weighted as the simulator's: RTT per ACK, queueing delay per delivered packet.
    let mut rtt_samples_us = per_event(&k.samples, |s| s.srtt_us, |s| s.segs_in);
    if rtt_samples_us.is_empty() {
        rtt_samples_us.clone_from(&srtt_samples_us);
    }
    let queue_delay = |s: &InfoSample| s.srtt_us.saturating_sub(base_rtt_us);
    let mut queue_delay_samples_us = per_event(&k.samples, queue_delay, |s| s.delivered_pkts);
    if queue_delay_samples_us.is_empty() {
        queue_delay_samples_us = rtt_samples_us
            .iter()
            .map(|r| r.saturating_sub(base_rtt_us))
            .collect();
    }
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
        start_ns: spec.start_ns,
        completion_ns: (spec.size_bytes.is_some() && k.completed).then_some(end_ns),
        delivered_bytes: k.bytes_received,
        packets_sent: k.data_segs_out,
        packets_dropped: k.retrans_segs,
        packets_lost: k.retrans_segs,
        retransmits: k.retrans_segs,
        timeouts: timeouts(&k.samples),
        srtt_samples_us,
        rtt_samples_us,
        queue_delay_samples_us,
        min_rtt_ns: u64::from(k.min_rtt_us) * 1000,
        series,
        ..FlowResult::default()
    }
}

/// Each sample's `value` (skipped while the smoothed RTT is still 0) once per event `count`
/// counted since the sample before: what a measurement taken at every ACK (or every delivered
/// packet) would average, from the 10-ms samples. Empty when `count` never moves.
fn per_event(
    samples: &[InfoSample],
    value: impl Fn(&InfoSample) -> u32,
    count: impl Fn(&InfoSample) -> u32,
) -> Vec<u32> {
    let mut out = Vec::new();
    let mut before = 0u32;
    for s in samples {
        let n = count(s).wrapping_sub(before);
        before = count(s);
        if s.srtt_us > 0 {
            out.extend(std::iter::repeat_n(value(s), n as usize));
        }
    }
    out
}

/// A flow's retransmission timeouts: the kernel's own count in its last sample
/// (`tcpi_total_rto`, every RTO as the simulator counts them, and a lost handshake's too); on a
/// kernel before 6.7, the entries into the Loss state seen in the 10-ms samples.
fn timeouts(samples: &[InfoSample]) -> u64 {
    match samples.last().and_then(|s| s.total_rto) {
        Some(n) => u64::from(n),
        None => super::transfer::loss_state_entries(samples) as u64,
    }
}

/// What the BPF side of one run did.
#[derive(Debug, Clone, Default)]
struct ControlStats {
    bridge: BridgeStats,
    kernel: KernelStats,
    /// Control-loop samples (ACK in the kernel to the agent's answer in the map), ns.
    loop_ns: Vec<u64>,
}

/// A run whose CCP flows all ran on the in-kernel fallback never had an agent: an error, not
/// a result. Logs the control loop's latency otherwise.
fn check_control(k: ControlStats) -> Result<(), KernelNetworkError> {
    if k.kernel.user_acks == 0 && k.kernel.fallback_acks > 0 {
        return Err(KernelNetworkError::Control(format!(
            "the agent never controlled the run's CCP flows ({} ACKs on the in-kernel fallback)",
            k.kernel.fallback_acks
        )));
    }
    let mut l = k.loop_ns;
    l.sort_unstable();
    let p = |per_mille: u32| percentile(&l, per_mille).unwrap_or_default() as f64 / 1e3;
    info!(
        acks = k.bridge.acks,
        user_acks = k.kernel.user_acks,
        fallback_acks = k.kernel.fallback_acks,
        loop_p50_us = p(500),
        loop_p99_us = p(990),
        "kernel run"
    );
    Ok(())
}

/// Environment variable naming a directory: each run's bridge writes its CSV trace
/// ([`KernelBridge::with_trace`]) there as `bridge-<pid>-<n>.csv`, `n` counting the runs of
/// the process.
pub(crate) const TRACE_DIR_ENV: &str = "CCP_KERNEL_TRACE_DIR";

/// The next run's trace file, when [`TRACE_DIR_ENV`] is set (a file that cannot be created is
/// logged and skipped).
fn trace_file() -> Option<Box<dyn std::io::Write + Send>> {
    static RUNS: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let dir = std::env::var_os(TRACE_DIR_ENV)?;
    let n = RUNS.fetch_add(1, Ordering::Relaxed);
    let path = std::path::Path::new(&dir).join(format!("bridge-{}-{n}.csv", std::process::id()));
    match std::fs::File::create(&path) {
        Ok(f) => Some(Box::new(std::io::BufWriter::new(f))),
        Err(e) => {
            tracing::warn!(path = %path.display(), error = %e, "cannot create the bridge trace");
            None
        }
    }
}

/// The BPF datapath and the bridge, running in their own thread for one run (the loaded
/// object is not `Send`: it is created, used and dropped there).
struct BridgeThread {
    stop: Arc<AtomicBool>,
    thread: JoinHandle<Result<ControlStats, String>>,
}

impl BridgeThread {
    /// Loads `ccp`, connects the runtime to `transport` and runs the bridge until stopped.
    /// Returns once the congestion control is registered (or failed to be).
    fn start(transport: ChannelTransport, alg: String) -> Result<Self, String> {
        let stop = Arc::new(AtomicBool::new(false));
        let (ready_tx, ready_rx) = std::sync::mpsc::channel::<Result<(), String>>();
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("kernel-bridge".into())
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
                if let Some(out) = trace_file() {
                    bridge = bridge.with_trace(out);
                }
                let _ = ready_tx.send(Ok(()));
                while !flag.load(Ordering::Relaxed) {
                    bridge
                        .step(Duration::from_millis(5))
                        .map_err(|e| format!("kernel bridge: {e}"))?;
                }
                Ok(ControlStats {
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

    fn finish(self) -> Result<ControlStats, String> {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .join()
            .map_err(|_| "the bridge thread panicked".to_string())?
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn flow(scheme: Scheme, owd_ms: u64) -> FlowSpec {
        FlowSpec::bulk(scheme, owd_ms * 1_000_000)
    }

    #[test]
    fn timeouts_are_the_kernels_count_and_loss_entries_without_it() {
        // One Loss episode in which the timer fired three times (200, 400 and 800 ms of
        // backoff), then a second episode: five RTOs, two entries into the Loss state.
        let states = [0, 4, 4, 4, 4, 0, 0, 4, 0];
        let rtos = [0, 1, 2, 3, 3, 3, 3, 5, 5];
        let samples = |kernel_counts: bool| -> Vec<InfoSample> {
            states
                .iter()
                .zip(rtos)
                .map(|(&ca_state, n)| InfoSample {
                    ca_state,
                    total_rto: kernel_counts.then_some(n),
                    ..InfoSample::default()
                })
                .collect()
        };
        assert_eq!(timeouts(&samples(true)), 5);
        assert_eq!(timeouts(&samples(false)), 2);
        assert_eq!(timeouts(&[]), 0);
    }

    fn kernel_flow(samples: Vec<InfoSample>) -> KernelFlow {
        KernelFlow {
            index: 0,
            cca: "cubic".into(),
            local_port: 0,
            remote_port: 0,
            started_at: Duration::ZERO,
            connect_time: Duration::ZERO,
            active: Duration::ZERO,
            bytes_sent: 0,
            bytes_received: 0,
            completed: false,
            goodput_bps: 0.0,
            srtt_p50_us: 0,
            srtt_p95_us: 0,
            min_rtt_us: 0,
            retrans_segs: 0,
            data_segs_out: 0,
            loss: 0.0,
            samples,
            series: Vec::new(),
        }
    }

    #[test]
    fn delay_is_averaged_per_ack_and_per_packet_as_in_the_simulator() {
        // Before the handshake, then 1 s at 40 ms with 100 ACKs and 200 packets per sample,
        // then 1 s at 400 ms with 10 ACKs and 20 packets: time-weighted the mean RTT would be
        // 220 ms; per ACK it is (100 * 40 + 10 * 400) / 110 ms.
        let mut samples = vec![InfoSample::default()];
        let (mut acks, mut pkts) = (0u32, 0u32);
        for (srtt_ms, a, p) in [(40, 100, 200), (400, 10, 20)] {
            for _ in 0..100 {
                acks += a;
                pkts += p;
                samples.push(InfoSample {
                    srtt_us: srtt_ms * 1000,
                    segs_in: acks,
                    delivered_pkts: pkts,
                    ..InfoSample::default()
                });
            }
        }
        let r = as_flow_result(&kernel_flow(samples), &flow(Scheme::Cubic, 15), 30_000, 0);
        let want = f64::from(100 * 40 + 10 * 400) / 110.0 * 1000.0;
        assert!((r.mean_rtt_us() - want).abs() < 1.0, "{}", r.mean_rtt_us());
        assert_eq!(r.rtt_samples_us.len(), 100 * 110);
        let want_q = f64::from(200 * 10 + 20 * 370) / 220.0 * 1000.0;
        assert!((r.mean_queue_delay_us() - want_q).abs() < 1.0);
        // The smoothed RTT's own column stays one per 10 ms on both datapaths.
        assert_eq!(r.srtt_samples_us.len(), 200);
        // Counts that never move (no ACK seen) leave the time-weighted samples.
        let still = vec![
            InfoSample {
                srtt_us: 50_000,
                ..InfoSample::default()
            };
            3
        ];
        let r = as_flow_result(&kernel_flow(still), &flow(Scheme::Cubic, 15), 30_000, 0);
        assert_eq!(r.rtt_samples_us, vec![50_000; 3]);
        assert_eq!(r.queue_delay_samples_us, vec![20_000; 3]);
    }

    #[test]
    fn what_the_testbed_cannot_emulate_is_refused_before_it_is_built() {
        let d = Duration::from_secs(10);
        let ccp = |a: &str| Scheme::Ccp { alg: a.into() };
        assert!(plan_flows(&[flow(ccp("reno"), 10), flow(ccp("reno"), 10)], d).is_ok());
        assert!(matches!(
            plan_flows(&[flow(ccp("reno"), 10), flow(ccp("cubic"), 10)], d),
            Err(KernelNetworkError::Unsupported(m)) if m.contains("two CCP algorithms")
        ));
        let mut on_off = flow(Scheme::Cubic, 10);
        on_off.on_off_ns = Some((1, 1));
        assert!(plan_flows(&[on_off], d).is_err());
        assert!(plan_flows(&[flow(Scheme::Fixed { cwnd_bytes: 1 }, 10)], d).is_err());
        // The kernel's own algorithms by name, with no agent.
        assert_eq!(
            kernel_cca(&Scheme::Kernel { cca: "bbr".into() }).ok(),
            Some(("bbr".into(), None))
        );
        let mut late = flow(Scheme::Reno, 10);
        late.start_ns = d.as_nanos() as u64;
        assert!(plan_flows(&[late], d).is_err());
        assert!(one_delay(&[flow(Scheme::Reno, 10), flow(Scheme::Reno, 20)]).is_err());
        assert_eq!(
            one_delay(&[flow(Scheme::Reno, 10), flow(Scheme::Cubic, 10)]).ok(),
            Some(10_000_000)
        );
        assert!(one_delay(&[]).is_err());
    }

    #[test]
    fn path_changes_accumulate_into_whole_links() {
        let link = testbed_link(
            &LinkSpec {
                rate: LinkRate::Constant { bps: 10_000_000 },
                buffer_bytes: 50_000,
                loss: 0.0,
            },
            20_000_000,
        );
        assert_eq!(link.rtt(), Duration::from_millis(40));
        let changes = [
            PathChange {
                at_ns: 2_000_000_000,
                loss: Some(0.01),
                ..PathChange::default()
            },
            PathChange {
                at_ns: 1_000_000_000,
                rate: Some(LinkRate::Constant { bps: 5_000_000 }),
                ..PathChange::default()
            },
        ];
        let links = link_changes(link, &changes);
        assert_eq!(links[0].0, Duration::from_secs(1));
        assert_eq!(links[0].1.bandwidth, Bandwidth::Rate { bps: 5_000_000 });
        assert!(links[0].1.loss.abs() < 1e-12);
        assert_eq!(links[1].1.bandwidth, Bandwidth::Rate { bps: 5_000_000 });
        assert!((links[1].1.loss - 0.01).abs() < 1e-12);
        assert_eq!(links[1].1.buffer_bytes, 50_000);
    }
}
