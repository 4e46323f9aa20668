//! Runs a scenario: every condition with every scheme and seed, in parallel, each run a
//! [`ccp_datapath::netem::NetworkSpec`] on a network (the simulator, or the kernel testbed)
//! whose flows become [`FlowRow`]s.
//!
//! A run that fails or panics becomes rows with status `failed: <why>`; the others go on.
//! `--shard I/N` keeps the jobs whose index is I modulo N, so N machines can split a scenario
//! and `ccp-eval report` merges their directories.
//!
//! # Kernel mode
//! With [`DatapathKind::Kernel`] (`run --datapath kernel`; cargo feature `kernel`, Linux,
//! root) each run is real kernel TCP through the network-namespace testbed instead of a
//! simulation, one run at a time; `kernel` (the submodule) says what is measured differently.

use std::io::IsTerminal;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Mutex;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Instant;

use ccp_datapath::netem::{
    FlowResult, FlowSpec, LinkRate, LinkSpec, Network, NetworkSpec, PathChange, Scheme,
};
use ccp_datapath::runtime::UnixTransport;
use ccp_datapath::sim::{RealtimeSimulator, Simulator};
use ccp_datapath::stats::percentile_unsorted;
use ccp_selector::{Event, EventKind};
use thiserror::Error;

use crate::iw_web::workload::flow_size_pkts;
use crate::results::{DecisionRow, FlowRow, SeriesRow, SwapRow};
use crate::scenario::{Buffer, Condition, FlowGroup, Objective, RateSource, Scenario};
use crate::selectors;
use crate::{schemes, traces};
use ccp_datapath::sim::rng::Rng;

#[cfg(feature = "kernel")]
pub mod kernel;
mod sim_model;
pub(crate) use sim_model::sim_model;

pub(crate) const MSS_BYTES: u32 = 1448;
pub(crate) const INIT_CWND_PKTS: u32 = 10;
/// Throughput floor used in the reward so a starved flow has a finite (very low) reward.
const MIN_TPUT_MBPS: f64 = 1e-3;

/// How to run.
#[derive(Debug, Clone, Default)]
pub struct RunOptions {
    /// Worker threads (0: one per core).
    pub jobs: usize,
    /// Keep jobs `i` with `i % n == k`: `(k, n)`.
    pub shard: Option<(usize, usize)>,
    /// Run only this seed instead of the scenario's.
    pub seed: Option<u64>,
    /// Run only these schemes instead of the scenario's.
    pub schemes: Option<Vec<String>>,
    /// Show a progress line on a terminal.
    pub progress: bool,
    /// Real time: pace runs to the wall clock and use the external agent bound to
    /// `/tmp/ccp/<name>` instead of a lock-step one (results then depend on scheduling).
    pub realtime_agent: Option<String>,
    /// Where the flows run.
    pub datapath: DatapathKind,
}

/// Where a run's flows run.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum DatapathKind {
    /// The simulator (deterministic, faster than real time).
    #[default]
    Sim,
    /// Real kernel TCP through the network-namespace testbed, one run at a time in real time
    /// (cargo feature `kernel`, Linux, root; see the module docs).
    Kernel,
}

/// The scenario cannot be run as asked.
#[derive(Debug, Error)]
pub enum RunError {
    /// A scheme name nobody knows.
    #[error("unknown scheme `{0}` (see `ccp-eval list`)")]
    UnknownScheme(String),
    /// A learned selector or algorithm without usable models.
    #[error("{0}: {1}")]
    Models(String, String),
    /// `--datapath kernel` in a build without the `kernel` feature.
    #[error("--datapath kernel needs a ccp-eval built with `--features kernel`")]
    NoKernel,
    /// A malformed shard.
    #[error("bad shard {0}/{1}: need 0 <= I < N")]
    BadShard(usize, usize),
    /// `--realtime` with no live agent at the named socket: every CCP flow would run the
    /// datapath's fallback rule under the scheme's name.
    #[error(
        "no agent is listening at {0} (start one, e.g. `ccp-eval agent --name <name>`, or drop \
         --realtime)"
    )]
    NoAgent(String),
}

/// One run to do.
#[derive(Debug, Clone)]
pub struct Job {
    /// Position in the full (unsharded) plan.
    pub index: usize,
    /// Condition index in the scenario.
    pub condition: usize,
    /// Scheme under test.
    pub scheme: String,
    /// Seed.
    pub seed: u64,
}

/// Everything a scenario run produced.
#[derive(Debug, Default)]
pub struct RunOutput {
    /// One per flow per run, in plan order.
    pub rows: Vec<FlowRow>,
    /// Time series (if the scenario asks for them).
    pub series: Vec<SeriesRow>,
    /// Every selector swap.
    pub swaps: Vec<SwapRow>,
    /// The selectors' explained decisions ([`DecisionRow`]).
    pub decisions: Vec<DecisionRow>,
    /// Runs done.
    pub runs: usize,
    /// Runs that failed.
    pub failed: usize,
    /// Simulated packets (for speed figures).
    pub packets: u64,
}

/// The jobs of a scenario under `opts`, after checking every scheme name.
pub fn plan(scenario: &Scenario, opts: &RunOptions) -> Result<Vec<Job>, RunError> {
    let schemes: Vec<String> = match (&opts.schemes, &scenario.schemes) {
        (Some(s), _) | (None, Some(s)) => s.clone(),
        (None, None) => schemes::defaults()
            .iter()
            .map(|s| (*s).to_string())
            .collect(),
    };
    // The scenario's own list is not checked when `--schemes` replaces it.
    for s in schemes.iter().chain(scenario.traffic_schemes().iter()) {
        if schemes::resolve(s).is_none() {
            return Err(RunError::UnknownScheme(s.clone()));
        }
        // A scheme that cannot run as meant (a learned model missing) says so up front.
        if let Some(e) = selectors::unavailable(s) {
            return Err(RunError::Models(s.clone(), e));
        }
    }
    if opts.datapath == DatapathKind::Kernel && cfg!(not(feature = "kernel")) {
        return Err(RunError::NoKernel);
    }
    if let Some((k, n)) = opts.shard
        && (n == 0 || k >= n)
    {
        return Err(RunError::BadShard(k, n));
    }
    if let Some(name) = &opts.realtime_agent {
        let path = std::path::Path::new("/tmp/ccp").join(name);
        let probe = std::os::unix::net::UnixDatagram::unbound()
            .and_then(|s| s.connect(&path))
            .is_ok();
        if !probe {
            return Err(RunError::NoAgent(path.display().to_string()));
        }
    }
    let seeds = opts
        .seed
        .map_or_else(|| scenario.seeds.clone(), |s| vec![s]);
    let mut jobs = Vec::new();
    for c in 0..scenario.conditions.len() {
        for scheme in &schemes {
            for &seed in &seeds {
                let index = jobs.len();
                jobs.push(Job {
                    index,
                    condition: c,
                    scheme: scheme.clone(),
                    seed,
                });
            }
        }
    }
    if let Some((k, n)) = opts.shard {
        jobs.retain(|j| j.index % n == k);
    }
    Ok(jobs)
}

/// Runs the jobs on worker threads; results come back in plan order.
pub fn run(scenario: &Scenario, jobs: &[Job], opts: &RunOptions) -> RunOutput {
    // Kernel runs share one testbed machine and run in real time: one at a time.
    let workers = if opts.datapath == DatapathKind::Kernel {
        1
    } else if opts.jobs == 0 {
        std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
    } else {
        opts.jobs
    }
    .min(jobs.len().max(1));
    let next = AtomicUsize::new(0);
    let done = AtomicUsize::new(0);
    let slots: Mutex<Vec<Option<JobOutput>>> = Mutex::new(vec![None; jobs.len()]);
    let started = Instant::now();
    let show = opts.progress && std::io::stderr().is_terminal();
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| {
                loop {
                    let i = next.fetch_add(1, Ordering::Relaxed);
                    let Some(job) = jobs.get(i) else { break };
                    let out = run_job(scenario, job, opts);
                    if let Ok(mut v) = slots.lock() {
                        v[i] = Some(out);
                    }
                    let n = done.fetch_add(1, Ordering::Relaxed) + 1;
                    if show {
                        progress(n, jobs.len(), started);
                    }
                }
            });
        }
    });
    if show {
        eprintln!();
    }
    let mut out = RunOutput::default();
    let slots = slots
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for o in slots.into_iter().flatten() {
        out.runs += 1;
        out.failed += usize::from(o.failed);
        out.packets += o.packets;
        out.rows.extend(o.rows);
        out.series.extend(o.series);
        out.swaps.extend(o.swaps);
        out.decisions.extend(o.decisions);
    }
    out
}

fn progress(done: usize, total: usize, started: Instant) {
    let elapsed = started.elapsed().as_secs_f64();
    let eta = elapsed / done as f64 * (total - done) as f64;
    eprint!("\r[{done}/{total}] {elapsed:.0}s elapsed, ETA {eta:.0}s   ");
}

#[derive(Debug, Clone, Default)]
struct JobOutput {
    rows: Vec<FlowRow>,
    series: Vec<SeriesRow>,
    swaps: Vec<SwapRow>,
    decisions: Vec<DecisionRow>,
    failed: bool,
    packets: u64,
}

/// Runs one job; a failure or panic becomes failed rows.
fn run_job(scenario: &Scenario, job: &Job, opts: &RunOptions) -> JobOutput {
    let cond = &scenario.conditions[job.condition];
    let attempt = catch_unwind(AssertUnwindSafe(|| match opts.datapath {
        DatapathKind::Sim => simulate(scenario, cond, job, opts),
        #[cfg(feature = "kernel")]
        DatapathKind::Kernel => kernel::execute(scenario, cond, job),
        #[cfg(not(feature = "kernel"))]
        DatapathKind::Kernel => Err(RunError::NoKernel.to_string()),
    }));
    let err = match attempt {
        Ok(Ok(out)) => return out,
        Ok(Err(e)) => e,
        Err(panic) => {
            let msg = panic
                .downcast_ref::<&str>()
                .map(|s| (*s).to_string())
                .or_else(|| panic.downcast_ref::<String>().cloned())
                .unwrap_or_else(|| "unknown panic".into());
            format!("panic: {msg}")
        }
    };
    let ctx = RowCtx {
        scenario,
        cond,
        job,
        jain: 0.0,
        capacity_bps: 0,
        buffer_bytes: 0,
    };
    let objectives = flow_objectives(scenario, cond, &job.scheme);
    let rows = flow_specs(scenario, cond, &job.scheme, 0, job.seed)
        .iter()
        .enumerate()
        .map(|(i, (role, name, spec))| {
            let mut r = ctx.row(i, role, name, spec);
            r.objective = objectives.get(i).copied().unwrap_or_default().name().into();
            r.status = format!("failed: {}", err.replace(['\n', ','], " "));
            r
        })
        .collect();
    JobOutput {
        rows,
        series: Vec::new(),
        swaps: Vec::new(),
        decisions: Vec::new(),
        failed: true,
        packets: 0,
    }
}

/// A full-size frame on the wire: an MSS of payload and its headers. Buffers are counted in
/// these (`buffer_pkts`).
pub const FRAME_BYTES: u64 = MSS_BYTES as u64 + ccp_datapath::sim::WIRE_OVERHEAD_BYTES as u64;
/// The smallest bottleneck buffer, bytes: two full-size frames. The simulator's buffer holds
/// the frame being serialized too, so this is one frame on the wire and one waiting, what a
/// kernel qdisc limited to one frame gives (the frame in service has left the qdisc). Smaller
/// buffers (TCP-RL's grid has 1 Mbit/s x 10 ms x 1 BDP = 1,250 bytes; `buffer_pkts = 1`) are
/// raised to it, and `results.csv` shows the buffer used (`docs/eval.md`).
pub const MIN_BUFFER_BYTES: u64 = 2 * FRAME_BYTES;

/// The bottleneck of a condition at its start, and its mean rate in bit/s.
pub fn link_for(cond: &Condition) -> (LinkSpec, u64) {
    let rate = match &cond.rate {
        RateSource::Constant(mbps) => LinkRate::Constant {
            bps: (mbps * 1e6) as u64,
        },
        RateSource::TraceFile(_, trace) => LinkRate::Trace(trace.clone()),
        RateSource::Cellular(spec) => LinkRate::Trace(traces::cellular(spec)),
    };
    let bps = rate.mean_bps();
    let bdp_bytes = bps as f64 / 8.0 * cond.rtt_ms / 1000.0;
    let buffer_bytes = match cond.buffer {
        Buffer::Bdp(x) => (bdp_bytes * x) as u64,
        Buffer::Bytes(b) => b,
        Buffer::Packets(p) => p.saturating_mul(FRAME_BYTES),
    }
    .max(MIN_BUFFER_BYTES);
    (
        LinkSpec {
            rate,
            buffer_bytes,
            loss: cond.loss,
        },
        bps,
    )
}

/// Every flow of a run in `cond`: (role, scheme name, spec). Flows of a group with web-like
/// sizes draw each size from the web-search mix with a stream of the run's `seed` (so every
/// scheme sees the same sizes in the same run).
pub(crate) fn flow_specs(
    scenario: &Scenario,
    cond: &Condition,
    scheme: &str,
    one_way_delay_ns: u64,
    seed: u64,
) -> Vec<(&'static str, String, FlowSpec)> {
    let mut out = Vec::new();
    let mut sizes = Rng::derive(seed, WEB_SIZE_STREAM);
    let mut add = |role: &'static str, g: &FlowGroup, name: &str| {
        let Some(s) = schemes::resolve(name) else {
            return;
        };
        for k in 0..g.count {
            let start = g.start_s + g.stagger_s * k as f64;
            let size_bytes = if g.web_sizes {
                Some(u64::from(flow_size_pkts(&mut sizes)) * u64::from(MSS_BYTES))
            } else {
                g.size_bytes
            };
            out.push((
                role,
                name.to_string(),
                FlowSpec {
                    scheme: s.clone(),
                    start_ns: (start * 1e9) as u64,
                    size_bytes,
                    one_way_delay_ns,
                    mss_bytes: MSS_BYTES,
                    init_cwnd_bytes: INIT_CWND_PKTS * MSS_BYTES,
                    on_off_ns: g
                        .on_off_s
                        .map(|(on, off)| ((on * 1e9) as u64, (off * 1e9) as u64)),
                },
            ));
        }
    };
    for g in scenario.flows_of(cond) {
        add("main", g, g.scheme.as_deref().unwrap_or(scheme));
    }
    for g in scenario.cross_of(cond) {
        add("cross", g, g.scheme.as_deref().unwrap_or(scheme));
    }
    out
}

/// The random stream web-like flow sizes are drawn from.
const WEB_SIZE_STREAM: u64 = 0x5745_4253;

/// The objective of every flow of [`flow_specs`], in the same order (flows of a scheme the
/// registry does not know are left out of both).
pub(crate) fn flow_objectives(
    scenario: &Scenario,
    cond: &Condition,
    scheme: &str,
) -> Vec<Objective> {
    let flows = scenario.flows_of(cond).iter();
    let cross = scenario.cross_of(cond).iter();
    flows
        .map(|g| (g, g.scheme.as_deref().unwrap_or(scheme)))
        .chain(cross.map(|g| (g, g.scheme.as_deref().unwrap_or(scheme))))
        .filter(|(_, name)| schemes::resolve(name).is_some())
        .flat_map(|(g, _)| std::iter::repeat_n(g.objective, g.count))
        .collect()
}

/// A job's network run: the spec both datapaths run, each flow's (role, scheme name, spec),
/// and the bottleneck's mean rate at the start, bit/s.
struct Planned {
    spec: NetworkSpec,
    flows: Vec<(&'static str, String, FlowSpec)>,
    capacity_bps: u64,
}

/// What a job runs, in the one vocabulary of [`ccp_datapath::netem`].
fn plan_network(scenario: &Scenario, cond: &Condition, job: &Job) -> Planned {
    let (link, capacity_bps) = link_for(cond);
    let owd = (cond.rtt_ms * 1e6 / 2.0) as u64;
    let flows = flow_specs(scenario, cond, &job.scheme, owd, job.seed);
    let spec = NetworkSpec {
        seed: job.seed,
        duration_ns: (scenario.duration_s * 1e9) as u64,
        link,
        flows: flows.iter().map(|(_, _, f)| f.clone()).collect(),
        changes: path_changes(cond),
        ack_aggregation_ns: (cond.ack_aggregation_ms * 1e6) as u64,
        sample_interval_ns: scenario.series_interval_ms * 1_000_000,
    };
    Planned {
        spec,
        flows,
        capacity_bps,
    }
}

impl Planned {
    /// Whether any flow needs an agent.
    fn needs_agent(&self) -> bool {
        self.spec
            .flows
            .iter()
            .any(|f| matches!(f.scheme, Scheme::Ccp { .. }))
    }

    /// Runs the spec on `network` and turns the result into the job's rows.
    fn run_on<N: Network>(
        self,
        network: N,
        scenario: &Scenario,
        cond: &Condition,
        job: &Job,
        selectors: Option<&selectors::RunSelectors>,
    ) -> Result<JobOutput, String> {
        let first_rate = self.spec.link.rate.clone();
        let buffer_bytes = self.spec.link.buffer_bytes;
        let duration_ns = self.spec.duration_ns;
        let result = network.run(self.spec).map_err(|e| e.to_string())?;
        let (swaps, decisions) = selectors
            .map(|s| {
                s.keep_samples(&cond.id, job.seed);
                let events = s.log.events();
                (
                    swap_rows(&events, scenario, cond, job),
                    decision_rows(&events, scenario, cond, job),
                )
            })
            .unwrap_or_default();
        Ok(job_output(
            scenario,
            cond,
            job,
            &Finished {
                flows: &self.flows,
                results: &result.flows,
                duration_ns,
                capacity_bps: self.capacity_bps,
                first_rate: &first_rate,
                buffer_bytes,
            },
            (swaps, decisions),
            result.link_packets,
        ))
    }
}

/// The port the selectors see: the simulator opens every flow to port 80, so the selectors get
/// the port of the flows under test instead (the one their groups share, if they share one).
pub(crate) fn flows_port(scenario: &Scenario, cond: &Condition) -> Option<u16> {
    let mut ports = scenario.flows_of(cond).iter().map(|g| g.port);
    ports.next().filter(|p| ports.all(|q| q == *p))
}

/// Runs a job in the simulator: virtual time with a lock-step agent, or real time with the
/// external agent of `--realtime`.
fn simulate(
    scenario: &Scenario,
    cond: &Condition,
    job: &Job,
    opts: &RunOptions,
) -> Result<JobOutput, String> {
    let planned = plan_network(scenario, cond, job);
    if let Some(agent_name) = &opts.realtime_agent {
        let own = format!("ccp-eval-{}-{}", std::process::id(), job.index);
        let transport =
            UnixTransport::bind(&own, agent_name).map_err(|e| format!("bind {own}: {e}"))?;
        return planned.run_on(RealtimeSimulator::new(transport), scenario, cond, job, None);
    }
    let (agent, selectors) = planned
        .needs_agent()
        .then(|| schemes::agent_for(flows_port(scenario, cond)))
        .unzip();
    planned.run_on(
        Simulator::new(agent).with_model(sim_model()),
        scenario,
        cond,
        job,
        selectors.as_ref(),
    )
}

/// A finished run's flows, from either datapath: what rows and series are made of.
struct Finished<'a> {
    flows: &'a [(&'static str, String, FlowSpec)],
    results: &'a [FlowResult],
    duration_ns: u64,
    capacity_bps: u64,
    /// The bottleneck's rate at the start (a trace's capacity is counted in each flow's
    /// window).
    first_rate: &'a LinkRate,
    buffer_bytes: u64,
}

/// Rows (one per flow) and series rows of a finished run.
fn job_output(
    scenario: &Scenario,
    cond: &Condition,
    job: &Job,
    f: &Finished<'_>,
    (swaps, decisions): (Vec<SwapRow>, Vec<DecisionRow>),
    packets: u64,
) -> JobOutput {
    let main_tputs: Vec<f64> = f
        .flows
        .iter()
        .zip(f.results)
        .filter(|((role, _, _), _)| *role == "main")
        .map(|(_, r)| r.throughput_bps(f.duration_ns))
        .collect();
    let ctx = RowCtx {
        scenario,
        cond,
        job,
        jain: jain(&main_tputs),
        capacity_bps: f.capacity_bps,
        buffer_bytes: f.buffer_bytes,
    };
    let mut out = JobOutput {
        swaps,
        decisions,
        packets,
        ..JobOutput::default()
    };
    let objectives = flow_objectives(scenario, cond, &job.scheme);
    for (i, ((role, name, spec), r)) in f.flows.iter().zip(f.results).enumerate() {
        let capacity = mean_capacity_bps(
            cond,
            f.first_rate,
            r.start_ns,
            r.completion_ns.unwrap_or(f.duration_ns),
        );
        let mut row = ctx.row(i, role, name, spec);
        row.objective = objectives.get(i).copied().unwrap_or_default().name().into();
        fill_metrics(&mut row, r, f.duration_ns, capacity);
        if let Some(why) = suspect(spec, r, &row, f.duration_ns) {
            row.status = why;
        }
        out.rows.push(row);
        let mut last = (r.start_ns, 0u64);
        for s in &r.series {
            let dt = s.t_ns.saturating_sub(last.0);
            let tput = if dt == 0 {
                0.0
            } else {
                s.delivered_bytes.saturating_sub(last.1) as f64 * 8.0 / dt as f64 * 1e3
            };
            out.series.push(SeriesRow {
                scenario: scenario.name.clone(),
                condition: cond.id.clone(),
                scheme: job.scheme.clone(),
                seed: job.seed,
                flow: i,
                t_s: s.t_ns as f64 / 1e9,
                cwnd_pkts: f64::from(s.cwnd_bytes) / f64::from(spec.mss_bytes),
                throughput_mbps: tput,
            });
            last = (s.t_ns, s.delivered_bytes);
        }
    }
    score_rows(&mut out.rows, &objectives, f.duration_ns);
    out
}

/// Fills every row's `score` by its objective ([`Objective`]); the fair share of
/// [`Objective::Friendly`] is the mean goodput of the run's flows that run to the end.
fn score_rows(rows: &mut [FlowRow], objectives: &[Objective], duration_ns: u64) {
    let long: Vec<f64> = rows
        .iter()
        .filter(|r| r.size_bytes.is_none())
        .map(|r| r.throughput_mbps)
        .collect();
    let fair = if long.is_empty() {
        None
    } else {
        Some(long.iter().sum::<f64>() / long.len() as f64)
    };
    let end_s = duration_ns as f64 / 1e9;
    for (row, o) in rows.iter_mut().zip(objectives) {
        row.score = Some(score(row, *o, fair, end_s));
    }
}

/// One flow's score under `objective` (see [`Objective`]); `fair` is the run's fair share,
/// Mbit/s, `end_s` the run's end.
pub fn score(row: &FlowRow, objective: Objective, fair: Option<f64>, end_s: f64) -> f64 {
    let tput = row.throughput_mbps.max(MIN_TPUT_MBPS);
    let rtt = if row.mean_rtt_ms > 0.0 {
        row.mean_rtt_ms
    } else {
        1.0
    };
    match objective {
        Objective::Reward => (tput / rtt).ln(),
        Objective::Throughput => tput.ln(),
        Objective::Delay => {
            let p95 = if row.p95_rtt_ms > 0.0 {
                row.p95_rtt_ms
            } else {
                rtt
            };
            tput.ln() - 2.0 * p95.ln()
        }
        Objective::Friendly => {
            let f = fair.unwrap_or(tput).max(MIN_TPUT_MBPS);
            (tput.min(f * f / tput) / rtt).ln()
        }
        Objective::Fct => {
            let fct = row.fct_s.unwrap_or(end_s - row.start_s).max(MIN_FCT_S);
            -fct.ln()
        }
    }
}

/// FCT floor in scores, s (a flow cannot finish in no time).
const MIN_FCT_S: f64 = 1e-6;

/// The condition's phases as the simulator's path changes.
pub fn path_changes(cond: &Condition) -> Vec<PathChange> {
    cond.phases
        .iter()
        .map(|p| PathChange {
            at_ns: (p.at_s * 1e9) as u64,
            rate: p.bw_mbps.map(|b| LinkRate::Constant {
                bps: (b * 1e6) as u64,
            }),
            one_way_delay_ns: p.rtt_ms.map(|r| (r * 1e6 / 2.0) as u64),
            loss: p.loss,
            buffer_bytes: None,
        })
        .collect()
}

/// The run and an event's flow, time and candidates (`names`: the candidates by index) as a
/// `swaps.csv` row; a `decisions.csv` row leads with the same columns.
fn event_row(
    e: &Event,
    names: &[&str],
    scenario: &Scenario,
    cond: &Condition,
    job: &Job,
) -> SwapRow {
    let name = |i: usize| names.get(i).copied().unwrap_or("?").to_string();
    SwapRow {
        scenario: scenario.name.clone(),
        condition: cond.id.clone(),
        scheme: job.scheme.clone(),
        seed: job.seed,
        sock_id: e.sock_id,
        t_s: e.time_us as f64 / 1e6,
        from: name(e.from),
        to: name(e.to),
    }
}

/// The run's selector swaps and path-change re-seats (of its selector log's `events`) as rows.
fn swap_rows(events: &[Event], scenario: &Scenario, cond: &Condition, job: &Job) -> Vec<SwapRow> {
    let names = selectors::candidate_names();
    // A path change or a drain re-seats the active candidate with one CHANGE_PROG, as a swap
    // does: it is a row with `from == to`, and counts as a swap.
    events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::Swap { .. } | EventKind::PathChange { .. } | EventKind::Drain { .. }
            )
        })
        .map(|e| event_row(e, &names, scenario, cond, job))
        .collect()
}

/// The run's explained selector decisions as rows: per flow its first explained decision and
/// every later one that asked for a switch it had not just asked for ([`DecisionRow`]).
fn decision_rows(
    events: &[Event],
    scenario: &Scenario,
    cond: &Condition,
    job: &Job,
) -> Vec<DecisionRow> {
    let names = selectors::candidate_names();
    let joined = |v: &[f64]| {
        v.iter()
            .map(|x| format!("{x:.6}"))
            .collect::<Vec<_>>()
            .join(";")
    };
    let named = |v: &[f64]| {
        v.iter()
            .enumerate()
            .map(|(i, x)| format!("{}={x:.6}", names.get(i).copied().unwrap_or("?")))
            .collect::<Vec<_>>()
            .join(";")
    };
    // Per flow, the switch it asked for on its last explained decision (`None`: it stayed): a
    // policy asks again on every report until the selector makes the switch, and one row says
    // it.
    let mut asked: std::collections::HashMap<u32, Option<(usize, usize)>> =
        std::collections::HashMap::new();
    let mut rows = Vec::new();
    for e in events {
        let EventKind::Decision {
            explanation: Some(x),
        } = &e.kind
        else {
            continue;
        };
        let ask = (e.to != e.from).then_some((e.from, e.to));
        let keep = match asked.insert(e.sock_id, ask) {
            // The flow's first explained decision.
            None => true,
            // A switch it had not asked for on its last decision.
            Some(last) => ask.is_some() && ask != last,
        };
        if keep {
            rows.push(DecisionRow::explaining(
                event_row(e, &names, scenario, cond, job),
                x.by,
                joined(&x.features),
                named(&x.scores),
            ));
        }
    }
    rows
}

/// Capacity averaged over `[start, end)`, bits per second: the first rate (a trace's own
/// delivery opportunities in that window, not its mean over its period) and then the
/// condition's phases.
fn mean_capacity_bps(cond: &Condition, first: &LinkRate, start_ns: u64, end_ns: u64) -> f64 {
    if end_ns <= start_ns {
        return first.mean_bps() as f64;
    }
    let mut segments: Vec<(u64, Option<f64>)> = vec![(0, None)];
    let mut phases = cond.phases.clone();
    phases.sort_by(|a, b| a.at_s.total_cmp(&b.at_s));
    for p in &phases {
        if let Some(b) = p.bw_mbps {
            segments.push(((p.at_s * 1e9) as u64, Some(b * 1e6)));
        }
    }
    let mut bits = 0.0;
    for (i, &(t, bps)) in segments.iter().enumerate() {
        let next = segments.get(i + 1).map_or(u64::MAX, |p| p.0);
        let lo = t.max(start_ns);
        let hi = next.min(end_ns);
        if hi <= lo {
            continue;
        }
        bits += match (bps, first) {
            (Some(bps), _) => bps * (hi - lo) as f64 / 1e9,
            (None, LinkRate::Trace(trace)) => trace.capacity_bits_between(lo, hi) as f64,
            (None, LinkRate::Constant { bps }) => *bps as f64 * (hi - lo) as f64 / 1e9,
        };
    }
    bits * 1e9 / (end_ns - start_ns) as f64
}

/// What every row of one run shares.
struct RowCtx<'a> {
    scenario: &'a Scenario,
    cond: &'a Condition,
    job: &'a Job,
    jain: f64,
    capacity_bps: u64,
    buffer_bytes: u64,
}

impl RowCtx<'_> {
    /// A row for flow `flow` with its identity filled in and its metrics zero.
    fn row(&self, flow: usize, role: &str, flow_scheme: &str, spec: &FlowSpec) -> FlowRow {
        FlowRow {
            scenario: self.scenario.name.clone(),
            env: self.cond.env.clone(),
            condition: self.cond.id.clone(),
            bw_mbps: self.capacity_bps as f64 / 1e6,
            rtt_ms: self.cond.rtt_ms,
            loss: self.cond.loss,
            buffer_bytes: self.buffer_bytes,
            scheme: self.job.scheme.clone(),
            seed: self.job.seed,
            flow,
            role: role.to_string(),
            flow_scheme: flow_scheme.to_string(),
            size_bytes: spec.size_bytes,
            start_s: spec.start_ns as f64 / 1e9,
            throughput_mbps: 0.0,
            utilization: 0.0,
            mean_rtt_ms: 0.0,
            p95_rtt_ms: 0.0,
            p95_srtt_ms: 0.0,
            mean_qdelay_ms: 0.0,
            p95_qdelay_ms: 0.0,
            loss_rate: 0.0,
            fct_s: None,
            reward: 0.0,
            power: 0.0,
            jain: self.jain,
            retransmits: 0,
            timeouts: 0,
            fallback_s: 0.0,
            takeovers: 0,
            objective: Objective::Reward.name().into(),
            score: None,
            status: "ok".into(),
        }
    }
}

fn fill_metrics(row: &mut FlowRow, r: &FlowResult, duration_ns: u64, capacity_bps: f64) {
    let tput = r.throughput_bps(duration_ns) / 1e6;
    row.throughput_mbps = tput;
    row.utilization = if capacity_bps > 0.0 {
        tput * 1e6 / capacity_bps
    } else {
        0.0
    };
    row.mean_rtt_ms = r.mean_rtt_us() / 1e3;
    let p95_ms = |samples: &[u32]| {
        percentile_unsorted(&mut samples.to_vec(), 950).map_or(0.0, |us| f64::from(us) / 1e3)
    };
    row.p95_rtt_ms = p95_ms(&r.rtt_samples_us);
    row.p95_srtt_ms = p95_ms(&r.srtt_samples_us);
    row.mean_qdelay_ms = r.mean_queue_delay_us() / 1e3;
    row.p95_qdelay_ms = p95_ms(&r.queue_delay_samples_us);
    row.loss_rate = if r.packets_sent == 0 {
        0.0
    } else {
        r.packets_dropped as f64 / r.packets_sent as f64
    };
    row.fct_s = r
        .completion_ns
        .map(|c| c.saturating_sub(r.start_ns) as f64 / 1e9);
    let rtt_ms = if row.mean_rtt_ms > 0.0 {
        row.mean_rtt_ms
    } else {
        1.0
    };
    row.reward = (tput.max(MIN_TPUT_MBPS) / rtt_ms).ln();
    row.power = tput / (rtt_ms / 1e3);
    row.retransmits = r.retransmits;
    row.timeouts = r.timeouts;
    row.fallback_s = r.fallback_ns as f64 / 1e9;
    row.takeovers = r.takeovers;
}

/// Why a finished flow's row must not count as a result of its scheme, if it must not: its
/// scheme never controlled it, it delivered nothing, or its metrics are impossible.
fn suspect(spec: &FlowSpec, r: &FlowResult, row: &FlowRow, duration_ns: u64) -> Option<String> {
    if row.utilization > 1.0 + 1e-9 || !row.utilization.is_finite() {
        return Some(format!(
            "invalid: utilization {:.4} > 1 (goodput {:.3} Mbit/s)",
            row.utilization, row.throughput_mbps
        ));
    }
    if matches!(spec.scheme, Scheme::Ccp { .. }) && r.agent_acks == 0 && r.fallback_acks > 0 {
        return Some(format!(
            "no-control: no agent program ever controlled this flow ({} ACKs, {:.1} s on the              datapath's fallback rule)",
            r.fallback_acks, row.fallback_s
        ));
    }
    if r.delivered_bytes == 0 && r.start_ns < duration_ns {
        return Some(format!(
            "no-delivery: nothing delivered in {:.1} s ({} packets sent, {} dropped: a dead              link or a starved flow)",
            duration_ns.saturating_sub(r.start_ns) as f64 / 1e9,
            r.packets_sent,
            r.packets_dropped
        ));
    }
    None
}

/// Jain's fairness index; 1 for zero or one flow.
pub fn jain(xs: &[f64]) -> f64 {
    let s: f64 = xs.iter().sum();
    let s2: f64 = xs.iter().map(|x| x * x).sum();
    if xs.len() < 2 || s2 == 0.0 {
        1.0
    } else {
        s * s / (xs.len() as f64 * s2)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn jain_index() {
        assert!((jain(&[1.0, 1.0]) - 1.0).abs() < 1e-12);
        assert!((jain(&[1.0, 0.0]) - 0.5).abs() < 1e-12);
    }
}
