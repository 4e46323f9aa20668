//! The end-to-end demo behind `make run`: a portus agent (Reno of `ccp-algorithms`) and our
//! datapath runtime exchange CCP messages over unix datagram sockets while a synthetic flow
//! plays ACKs in real time. Midway the agent is killed (the flow falls back and keeps its
//! window moving), then a new agent starts on the same socket and takes the flow back.

use std::fmt;
use std::sync::atomic::Ordering;
use std::time::{Duration, Instant};

use ccp_algorithms::{AlgorithmConfig, Ccp, RenoConfig};
use ccp_datapath::agent::{self, SyntheticFlow, demo_config};
use ccp_datapath::runtime::{Datapath, MonotonicClock, RuntimeError, UnixTransport};

const MSS_BYTES: u32 = 1448;
const INIT_CWND_BYTES: u32 = 10 * MSS_BYTES;

/// Why the demo could not run.
#[derive(Debug)]
pub enum DemoError {
    /// The agent could not start (e.g. `/tmp/ccp` not writable).
    Agent(String),
    /// The datapath socket could not be bound.
    Bind(std::io::Error),
    /// The runtime refused an operation.
    Runtime(RuntimeError),
    /// A phase did not reach its goal in time.
    Stalled(&'static str),
}

impl fmt::Display for DemoError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            DemoError::Agent(e) => write!(f, "could not start the portus agent: {e}"),
            DemoError::Bind(e) => write!(f, "could not bind the datapath socket: {e}"),
            DemoError::Runtime(e) => write!(f, "datapath runtime error: {e}"),
            DemoError::Stalled(what) => write!(f, "stalled: {what}"),
        }
    }
}

impl std::error::Error for DemoError {}

impl From<RuntimeError> for DemoError {
    fn from(e: RuntimeError) -> Self {
        DemoError::Runtime(e)
    }
}

/// One line of the demo's story.
#[derive(Debug, Clone)]
pub struct Phase {
    /// What happened.
    pub name: &'static str,
    /// Wall time the phase took.
    pub elapsed: Duration,
    /// Window at the end of the phase, bytes.
    pub cwnd_bytes: u32,
    /// Reports the agent handled in this phase.
    pub reports: u64,
    /// ACKs the agent's program handled in this phase.
    pub agent_acks: u64,
    /// ACKs the fallback rule handled in this phase.
    pub fallback_acks: u64,
}

/// Runs the demo; returns its phases. Socket names carry the process id so runs do not clash.
pub fn run() -> Result<Vec<Phase>, DemoError> {
    let pid = std::process::id();
    let agent_name = format!("demo-agent-{pid}");
    let alg = Ccp::new(RenoConfig::default());
    let counters = alg.counters();
    let agent1 = agent::spawn_unix_agent(alg, &agent_name)
        .map_err(|e| DemoError::Agent(format!("{e:?}")))?;
    let transport =
        UnixTransport::bind(&format!("demo-dp-{pid}"), &agent_name).map_err(DemoError::Bind)?;
    let mut dp = Datapath::new(demo_config(), transport, MonotonicClock::new());
    let mut flow = SyntheticFlow::start(&mut dp, RenoConfig::NAME, MSS_BYTES, INIT_CWND_BYTES)?;
    let mut rec = Recorder::new();

    let wait = Duration::from_secs(5);
    if !flow.run_until(&mut dp, wait, |_, f| f.agent_acks > 0)? {
        return Err(DemoError::Stalled("the agent never took the flow"));
    }
    flow.run(&mut dp, 500)?;
    rec.close(
        "agent 1 controls the flow",
        &flow,
        counters.reports.load(Ordering::Relaxed),
    );

    agent1.kill();
    // The agent thread exits within its 1 s receive timeout; the result is not needed.
    let _ = agent1.wait();
    rec.started = Instant::now();
    if !flow.run_until(&mut dp, wait, |dp, _| dp.in_fallback())? {
        return Err(DemoError::Stalled(
            "the datapath never noticed the agent was gone",
        ));
    }
    rec.close(
        "agent killed, not yet noticed",
        &flow,
        counters.reports.load(Ordering::Relaxed),
    );
    flow.run(&mut dp, 500)?;
    rec.close(
        "fallback rule keeps it moving",
        &flow,
        counters.reports.load(Ordering::Relaxed),
    );

    let alg2 = Ccp::new(RenoConfig::default());
    let counters2 = alg2.counters();
    let agent2 = agent::spawn_unix_agent(alg2, &agent_name)
        .map_err(|e| DemoError::Agent(format!("{e:?}")))?;
    rec.reports_mark = 0;
    let back = flow.run_until(&mut dp, wait, |dp, _| {
        !dp.in_fallback() && counters2.reports.load(Ordering::Relaxed) > 0
    })?;
    if !back {
        return Err(DemoError::Stalled(
            "the restarted agent never took the flow back",
        ));
    }
    flow.run(&mut dp, 500)?;
    rec.close(
        "agent 2 took the flow back",
        &flow,
        counters2.reports.load(Ordering::Relaxed),
    );

    dp.close_flow(flow.sid)?;
    agent2.kill();
    let _ = agent2.wait();
    let s = dp.stats();
    println!(
        "datapath: {} reports sent, {} agent messages, {} READY and {} CREATE sent, {} fallback \
         entries, {} recoveries, {} messages rejected",
        s.reports_sent,
        s.msgs_received,
        s.readies_sent,
        s.creates_sent,
        s.fallback_entries,
        s.agent_recoveries,
        s.msgs_rejected
    );
    Ok(rec.phases)
}

/// Cuts the demo into phases.
struct Recorder {
    phases: Vec<Phase>,
    started: Instant,
    reports_mark: u64,
    agent_mark: u64,
    fallback_mark: u64,
}

impl Recorder {
    fn new() -> Self {
        Self {
            phases: Vec::new(),
            started: Instant::now(),
            reports_mark: 0,
            agent_mark: 0,
            fallback_mark: 0,
        }
    }

    fn close(&mut self, name: &'static str, flow: &SyntheticFlow, reports: u64) {
        self.phases.push(Phase {
            name,
            elapsed: self.started.elapsed(),
            cwnd_bytes: flow.cwnd_bytes,
            reports: reports - self.reports_mark,
            agent_acks: flow.agent_acks - self.agent_mark,
            fallback_acks: flow.fallback_acks - self.fallback_mark,
        });
        self.started = Instant::now();
        self.reports_mark = reports;
        self.agent_mark = flow.agent_acks;
        self.fallback_mark = flow.fallback_acks;
    }
}
