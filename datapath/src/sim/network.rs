//! The dumbbell network and its event loop.
//!
//! N senders share one bottleneck; each flow has its own one-way propagation delay, applied
//! after the bottleneck and again on the ACK path (in order: a flow's ACKs never overtake each
//! other). Receivers acknowledge as [`super::receiver`] decides (Linux's delayed ACKs by
//! default); the receiver's decisions are taken when a packet leaves the bottleneck, shifted
//! by the one-way delay, so a delivered packet costs no event of its own. CCP flows run through one [`Datapath`] runtime (virtual-time clock) whose agent, if
//! any, runs in lock-step ([`super::lockstep`]); built-in flows run a fixed window or the
//! runtime's Reno rule with no agent.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, VecDeque};

use thiserror::Error;

pub use super::ack_trace::TRACE_DIR_ENV;
use super::ack_trace::{self, trace_file};
use super::cubic::BuiltinCubic;
use super::link::{Admit, Bottleneck, LinkPacket, WIRE_OVERHEAD_BYTES, htb_burst_bytes};
use super::lockstep::{LockstepAgent, LockstepError};
use super::model::TcpModel;
use super::receiver::{AckDecision, Receiver};
use super::recovery::{LinuxCc, LinuxReno, LinuxTcp, RecoveryModel, SenderView};
use super::rng::Rng;
use super::tcp::{MIN_RTO_NS, Sender, TimerEvent};
use crate::netem::{
    FlowResult, FlowSpec, LinkRate, LinkSpec, Network, NetworkResult, NetworkSpec, PathChange,
    SRTT_SAMPLE_INTERVAL_NS, Sample, Scheme,
};
use crate::runtime::fallback::RenoFallback;
use crate::runtime::transport::{NoAgent, RecvError, SendError, Transport, UnixTransport};
use crate::runtime::{
    Control as RuntimeControl, Datapath, DatapathConfig, FlowInfo, ManualClock, RuntimeError,
};

/// The simulator's name for a [`NetworkResult`].
pub type SimResult = NetworkResult;

/// A whole run in the simulator: a [`NetworkSpec`]'s fields and the simulator's own.
#[derive(Debug, Clone)]
pub struct SimConfig {
    /// Seed of every random choice.
    pub seed: u64,
    /// Virtual duration, ns.
    pub duration_ns: u64,
    /// The bottleneck.
    pub link: LinkSpec,
    /// The flows.
    pub flows: Vec<FlowSpec>,
    /// Changes of the path over time, in any order.
    pub changes: Vec<PathChange>,
    /// Delay between a report reaching the agent and its answer reaching the datapath, ns.
    pub agent_latency_ns: u64,
    /// ACK aggregation: ACKs reach senders only at multiples of this interval, in bursts, as
    /// on Wi-Fi and cellular links, ns (0: every ACK on its own).
    pub ack_aggregation_ns: u64,
    /// Interval of the per-flow time series, ns (0: none).
    pub sample_interval_ns: u64,
    /// Datapath runtime settings.
    pub datapath: DatapathConfig,
}

impl SimConfig {
    /// `spec` with the simulator's settings: an agent answering after `agent_latency_ns`,
    /// the datapath runtime's `datapath`.
    pub fn from_spec(spec: NetworkSpec, agent_latency_ns: u64, datapath: DatapathConfig) -> Self {
        Self {
            seed: spec.seed,
            duration_ns: spec.duration_ns,
            link: spec.link,
            flows: spec.flows,
            changes: spec.changes,
            agent_latency_ns,
            ack_aggregation_ns: spec.ack_aggregation_ns,
            sample_interval_ns: spec.sample_interval_ns,
            datapath,
        }
    }
}

/// The simulator as a [`Network`]: virtual time, CCP flows driven by a portus agent in
/// lock-step ([`LockstepAgent`]); a run depends on its seed only.
pub struct Simulator {
    agent: Option<LockstepAgent>,
    agent_latency_ns: u64,
    datapath: DatapathConfig,
    model: TcpModel,
}

impl Simulator {
    /// A simulator whose CCP flows `agent` drives (required if any flow uses [`Scheme::Ccp`]),
    /// answering at once, with the runtime's default settings.
    pub fn new(agent: Option<LockstepAgent>) -> Self {
        Self {
            agent,
            agent_latency_ns: 0,
            datapath: DatapathConfig::default(),
            model: TcpModel::default(),
        }
    }

    /// The TCP behaviours to model (default: Linux's, [`TcpModel::default`]).
    #[must_use]
    pub fn with_model(mut self, model: TcpModel) -> Self {
        self.model = model;
        self
    }

    /// The agent's answers reach the datapath `ns` after the report left it.
    #[must_use]
    pub fn with_agent_latency_ns(mut self, ns: u64) -> Self {
        self.agent_latency_ns = ns;
        self
    }

    /// The datapath runtime's settings.
    #[must_use]
    pub fn with_datapath(mut self, datapath: DatapathConfig) -> Self {
        self.datapath = datapath;
        self
    }
}

impl Network for Simulator {
    type Error = SimError;

    fn run(self, spec: NetworkSpec) -> Result<NetworkResult, SimError> {
        let cfg = SimConfig::from_spec(spec, self.agent_latency_ns, self.datapath);
        Simulation::new(cfg, self.agent)?
            .with_model(self.model)
            .run()
    }
}

/// Why a run failed.
#[derive(Debug, Error)]
pub enum SimError {
    /// A CCP flow with no agent to control it.
    #[error("flow {0} uses a CCP scheme but the simulation has no agent")]
    NoAgent(usize),
    /// The lock-step agent failed.
    #[error(transparent)]
    Agent(#[from] LockstepError),
    /// The datapath runtime refused an operation.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A flow runs a kernel-only scheme, which the simulator has no model of.
    #[error("the simulator has no model of the kernel's `{0}`: run it on the kernel datapath")]
    KernelOnly(String),
}

/// The datapath runtime's transport inside the simulator.
pub enum SimTransport {
    /// Messages for the lock-step agent, taken by [`super::lockstep`].
    Outbox(VecDeque<Vec<u8>>),
    /// An external agent over a unix socket (real-time mode).
    Unix(UnixTransport),
    /// No agent.
    None(NoAgent),
}

impl Transport for SimTransport {
    fn send(&mut self, msg: &[u8]) -> Result<(), SendError> {
        match self {
            SimTransport::Outbox(q) => {
                q.push_back(msg.to_vec());
                Ok(())
            }
            SimTransport::Unix(u) => u.send(msg),
            SimTransport::None(n) => n.send(msg),
        }
    }

    fn try_recv(&mut self, buf: &mut [u8]) -> Result<Option<usize>, RecvError> {
        match self {
            // The lock-step agent's answers are delivered by the simulation, not polled.
            SimTransport::Outbox(_) => Ok(None),
            SimTransport::Unix(u) => u.try_recv(buf),
            SimTransport::None(n) => n.try_recv(buf),
        }
    }
}

#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
enum Ev {
    Start(usize),
    Depart,
    Ack { flow: usize },
    DelayedAck { flow: usize },
    SrttSample,
    Rto(usize),
    Wake(usize),
    AgentAnswers,
    Sample,
    Change(usize),
    AppToggle(usize),
}

enum Control {
    Ccp { sid: u32 },
    Reno(RenoFallback),
    Cubic(BuiltinCubic),
    Linux(LinuxTcp),
    Fixed,
}

struct FlowState {
    spec: FlowSpec,
    sender: Sender,
    control: Control,
    started: bool,
    done: bool,
    rto_event_at: Option<u64>,
    wake_at: Option<u64>,
    result: FlowResult,
    /// CCP flows: who handled the last ACK (`None` before the first).
    under_agent: Option<bool>,
    /// CCP flows: time of the last ACK.
    last_ack_ns: Option<u64>,
    receiver: Receiver,
    /// Packets the receiver got since its last ACK.
    rx_pending: Vec<u64>,
    /// ACKs on their way back: the packets each covers (`ack_counts` says how many of
    /// `ack_pns` belong to each, oldest first).
    ack_pns: VecDeque<u64>,
    ack_counts: VecDeque<u32>,
    /// The receive window's right edge each ACK on its way back advertises, in segments
    /// (empty without a receive window).
    ack_edges: VecDeque<u64>,
    /// When the latest ACK reaches the sender, ns (ACKs keep their order).
    last_ack_arrival_ns: u64,
    /// Scratch for the packets of the ACK being processed.
    ack_scratch: Vec<u64>,
}

impl FlowState {
    /// Accounts one ACK of a CCP flow to the agent or to the fallback rule.
    fn note_control(&mut self, control: RuntimeControl, now_ns: u64) {
        let r = &mut self.result;
        match control {
            RuntimeControl::Agent => {
                if self.under_agent != Some(true) {
                    r.takeovers += 1;
                }
                r.agent_acks += 1;
                self.under_agent = Some(true);
            }
            RuntimeControl::Fallback => {
                let since = self.last_ack_ns.unwrap_or(r.start_ns);
                r.fallback_ns += now_ns.saturating_sub(since);
                r.fallback_acks += 1;
                self.under_agent = Some(false);
            }
        }
        self.last_ack_ns = Some(now_ns);
    }
}

/// A simulation ready to run.
pub struct Simulation {
    cfg: SimConfig,
    /// The lock-step agent, until the run starts it.
    agent: Option<LockstepAgent>,
    now: u64,
    seq: u64,
    queue: BinaryHeap<Reverse<(u64, u64, Ev)>>,
    link: Bottleneck,
    flows: Vec<FlowState>,
    dp: Datapath<SimTransport, ManualClock>,
    clock: ManualClock,
    /// Agent answers waiting for their delivery time.
    answers: VecDeque<(u64, Vec<u8>)>,
    result: SimResult,
    model: TcpModel,
    /// Per-ACK CSV trace ([`TRACE_DIR_ENV`]), if asked for.
    trace: Option<Box<dyn std::io::Write + Send>>,
    /// Draws the CCP record delays ([`TcpModel::ccp_record_delay_ns`]).
    record_delay_rng: Rng,
}

/// The random stream of the CCP record delays (the link's is 1).
const RECORD_DELAY_STREAM: u64 = 2;

impl Simulation {
    /// Builds a run; `agent` drives the CCP flows (required if any flow uses [`Scheme::Ccp`]).
    pub fn new(cfg: SimConfig, agent: Option<LockstepAgent>) -> Result<Self, SimError> {
        if agent.is_none()
            && let Some(i) = cfg
                .flows
                .iter()
                .position(|f| matches!(f.scheme, Scheme::Ccp { .. }))
        {
            return Err(SimError::NoAgent(i));
        }
        if let Some(cca) = cfg.flows.iter().find_map(|f| match &f.scheme {
            Scheme::Kernel { cca } => Some(cca.clone()),
            _ => None,
        }) {
            return Err(SimError::KernelOnly(cca));
        }
        let transport = match agent {
            Some(_) => SimTransport::Outbox(VecDeque::new()),
            None => SimTransport::None(NoAgent),
        };
        let mut sim = Self::build(cfg, transport);
        sim.agent = agent;
        Ok(sim)
    }

    /// Builds a run whose CCP flows talk to an external agent over a unix socket; the caller
    /// paces it ([`super::realtime`]).
    pub(crate) fn with_unix_agent(cfg: SimConfig, transport: UnixTransport) -> Self {
        Self::build(cfg, SimTransport::Unix(transport))
    }

    /// Switches TCP behaviours (the default is [`TcpModel::default`], Linux's); call before
    /// the run.
    #[must_use]
    pub fn with_model(mut self, model: TcpModel) -> Self {
        self.model = model;
        self.link
            .set_burst(match (&self.cfg.link.rate, model.link_burst) {
                (LinkRate::Constant { bps }, true) => htb_burst_bytes(*bps),
                _ => 0,
            });
        for fl in &mut self.flows {
            fl.receiver = new_receiver(&fl.spec, model);
            init_rwnd(&mut fl.sender, &mut fl.receiver);
            fl.sender.linux_rto = model.linux_rto;
            fl.sender.rack_tlp = model.rack_tlp;
        }
        self
    }

    /// The TCP behaviours this run models.
    pub fn model(&self) -> TcpModel {
        self.model
    }

    fn build(cfg: SimConfig, transport: SimTransport) -> Self {
        let clock = ManualClock::new(0);
        let dp = Datapath::new(cfg.datapath.clone(), transport, clock.clone());
        let model = TcpModel::default();
        let mut link = Bottleneck::new(
            cfg.link.rate.clone(),
            cfg.link.buffer_bytes,
            cfg.link.loss,
            Rng::derive(cfg.seed, 1),
        );
        if let LinkRate::Constant { bps } = cfg.link.rate
            && model.link_burst
        {
            link.set_burst(htb_burst_bytes(bps));
        }
        let mut flows = cfg
            .flows
            .iter()
            .map(|spec| FlowState {
                sender: {
                    let mut s = Sender::new(spec.mss_bytes, spec.init_cwnd_bytes, spec.size_bytes);
                    s.linux_rto = model.linux_rto;
                    s.rack_tlp = model.rack_tlp;
                    s
                },
                control: Control::Fixed,
                started: false,
                done: false,
                rto_event_at: None,
                wake_at: None,
                result: FlowResult {
                    start_ns: spec.start_ns,
                    ..FlowResult::default()
                },
                under_agent: None,
                last_ack_ns: None,
                receiver: new_receiver(spec, model),
                rx_pending: Vec::new(),
                ack_pns: VecDeque::new(),
                ack_counts: VecDeque::new(),
                ack_edges: VecDeque::new(),
                last_ack_arrival_ns: 0,
                ack_scratch: Vec::new(),
                spec: spec.clone(),
            })
            .collect::<Vec<_>>();
        for fl in &mut flows {
            init_rwnd(&mut fl.sender, &mut fl.receiver);
        }
        let mut sim = Self {
            agent: None,
            now: 0,
            seq: 0,
            queue: BinaryHeap::new(),
            link,
            flows,
            dp,
            clock,
            answers: VecDeque::new(),
            result: SimResult::default(),
            model,
            trace: trace_file(&cfg),
            record_delay_rng: Rng::derive(cfg.seed, RECORD_DELAY_STREAM),
            cfg,
        };
        for (i, f) in sim.cfg.flows.iter().enumerate() {
            sim.queue
                .push(Reverse((f.start_ns, i as u64, Ev::Start(i))));
        }
        sim.seq = sim.cfg.flows.len() as u64;
        for i in 0..sim.cfg.changes.len() {
            sim.schedule(sim.cfg.changes[i].at_ns, Ev::Change(i));
        }
        if sim.cfg.sample_interval_ns > 0 {
            sim.schedule(0, Ev::Sample);
        }
        sim.schedule(SRTT_SAMPLE_INTERVAL_NS, Ev::SrttSample);
        sim
    }

    fn schedule(&mut self, t: u64, ev: Ev) {
        self.seq += 1;
        self.queue.push(Reverse((t, self.seq, ev)));
    }

    /// Runs to the configured duration and returns what happened.
    pub fn run(mut self) -> Result<SimResult, SimError> {
        if let Some(agent) = self.agent.take() {
            return agent.run(self);
        }
        while self.step()? {}
        Ok(self.finish())
    }

    /// Processes the next event; `false` once the run is over.
    pub(crate) fn step(&mut self) -> Result<bool, SimError> {
        let Some(Reverse((t, _, ev))) = self.queue.pop() else {
            return Ok(false);
        };
        if t > self.cfg.duration_ns {
            return Ok(false);
        }
        self.now = t;
        self.clock.set_ns(t);
        self.result.events += 1;
        match ev {
            Ev::Start(f) => self.start_flow(f)?,
            Ev::Depart => self.depart(),
            Ev::Ack { flow } => self.ack(flow)?,
            Ev::DelayedAck { flow } => self.delayed_ack_timer(flow),
            Ev::SrttSample => self.srtt_sample(),
            Ev::Rto(f) => self.rto(f),
            Ev::Wake(f) => {
                self.flows[f].wake_at = None;
                self.pump(f);
            }
            Ev::AgentAnswers => self.deliver_answers(),
            Ev::Sample => self.sample(),
            Ev::Change(i) => self.change_path(i),
            Ev::AppToggle(f) => self.app_toggle(f),
        }
        Ok(true)
    }

    /// The per-flow results of a finished run.
    pub(crate) fn finish(mut self) -> SimResult {
        self.result.duration_ns = self.cfg.duration_ns;
        self.result.flows = self
            .flows
            .into_iter()
            .map(|mut f| {
                f.result.packets_lost = f.sender.lost_pkts;
                f.result.retransmits = f.sender.retransmits;
                f.result.timeouts = f.sender.timeouts;
                f.result.delivered_bytes = f.sender.delivered_bytes();
                f.result.min_rtt_ns = f.sender.min_rtt_ns;
                f.result
            })
            .collect();
        self.result
    }

    /// The next message for the lock-step agent, if any.
    pub(crate) fn take_outbound(&mut self) -> Option<Vec<u8>> {
        match self.dp.transport_mut() {
            SimTransport::Outbox(q) => q.pop_front(),
            _ => None,
        }
    }

    /// An answer from the lock-step agent: delivered now, or after the modelled latency.
    pub(crate) fn agent_answer(&mut self, msg: Vec<u8>) {
        if self.cfg.agent_latency_ns == 0 {
            self.dp.recv_msgs(&msg);
        } else {
            let due = self.now + self.cfg.agent_latency_ns;
            self.answers.push_back((due, msg));
            self.schedule(due, Ev::AgentAnswers);
        }
    }

    /// When the next event is due, ns (`None`: no event left).
    pub(crate) fn next_event_ns(&self) -> Option<u64> {
        self.queue.peek().map(|Reverse((t, _, _))| *t)
    }

    /// Takes in whatever an external agent sent (real-time mode).
    pub(crate) fn poll_agent(&mut self) {
        self.dp.poll();
    }

    fn deliver_answers(&mut self) {
        while self
            .answers
            .front()
            .is_some_and(|(due, _)| *due <= self.now)
        {
            if let Some((_, m)) = self.answers.pop_front() {
                self.dp.recv_msgs(&m);
            }
        }
    }

    fn start_flow(&mut self, f: usize) -> Result<(), SimError> {
        let spec = &self.flows[f].spec;
        let control = match &spec.scheme {
            Scheme::Ccp { alg } => {
                let info = FlowInfo {
                    init_cwnd_bytes: spec.init_cwnd_bytes,
                    mss_bytes: spec.mss_bytes,
                    src_ip: 0x0a00_0001,
                    // The run's seed varies the source port, so algorithms that draw from a
                    // seed derived from the flow identity differ between seeds.
                    src_port: 10_000 + (self.cfg.seed % 50_000) as u32 + f as u32,
                    dst_ip: 0x0a00_0002,
                    dst_port: 80,
                    alg: Some(alg.clone()),
                };
                Control::Ccp {
                    sid: self.dp.create_flow(info)?,
                }
            }
            Scheme::Reno | Scheme::Cubic if self.model.recovery == RecoveryModel::Linux => {
                let cc = if spec.scheme == Scheme::Reno {
                    LinuxCc::Reno(LinuxReno::new(
                        f64::from(spec.init_cwnd_bytes) / f64::from(spec.mss_bytes.max(1)),
                    ))
                } else {
                    LinuxCc::Cubic(BuiltinCubic::new(spec.mss_bytes, spec.init_cwnd_bytes))
                };
                Control::Linux(LinuxTcp::new(cc, spec.mss_bytes))
            }
            Scheme::Reno => Control::Reno(RenoFallback::new(spec.mss_bytes)),
            Scheme::Cubic => {
                Control::Cubic(BuiltinCubic::new(spec.mss_bytes, spec.init_cwnd_bytes))
            }
            Scheme::Fixed { cwnd_bytes } => {
                self.flows[f].sender.cwnd_bytes = *cwnd_bytes;
                Control::Fixed
            }
            Scheme::Kernel { cca } => return Err(SimError::KernelOnly(cca.clone())),
        };
        self.flows[f].control = control;
        self.flows[f].started = true;
        if let Some((on, _)) = self.flows[f].spec.on_off_ns {
            self.schedule(self.now + on.max(1), Ev::AppToggle(f));
        }
        self.pump(f);
        Ok(())
    }

    /// Sends whatever the window and pacing allow.
    fn pump(&mut self, f: usize) {
        loop {
            let fl = &mut self.flows[f];
            if fl.done || !fl.started {
                return;
            }
            match fl.sender.send_time(self.now) {
                Some(t) if t <= self.now => {
                    let Some((pn, bytes)) = fl.sender.send(self.now) else {
                        return;
                    };
                    let seg = fl.sender.seg_of(pn).unwrap_or_default();
                    fl.result.packets_sent += 1;
                    self.result.link_packets += 1;
                    let p = LinkPacket {
                        flow: f,
                        pn,
                        seg,
                        bytes: bytes + WIRE_OVERHEAD_BYTES,
                        enqueued_ns: self.now,
                    };
                    match self.link.offer(p, self.now) {
                        (Admit::Queued, Some(end)) => self.schedule(end, Ev::Depart),
                        (Admit::Queued, None) => {}
                        (Admit::TailDrop, _) => {
                            self.result.tail_drops += 1;
                            self.flows[f].result.packets_dropped += 1;
                        }
                        (Admit::RandomLoss, _) => {
                            self.result.random_drops += 1;
                            self.flows[f].result.packets_dropped += 1;
                        }
                    }
                    self.arm_rto(f);
                }
                Some(t) => {
                    if fl.wake_at.is_none_or(|w| w > t) {
                        fl.wake_at = Some(t);
                        self.schedule(t, Ev::Wake(f));
                    }
                    return;
                }
                None => return,
            }
        }
    }

    fn arm_rto(&mut self, f: usize) {
        let fl = &mut self.flows[f];
        if let Some(d) = fl.sender.timer_deadline_ns()
            && fl.rto_event_at.is_none_or(|at| at > d)
        {
            fl.rto_event_at = Some(d);
            self.schedule(d, Ev::Rto(f));
        }
    }

    fn depart(&mut self) {
        let (p, next) = self.link.depart(self.now);
        if let Some(end) = next {
            self.schedule(end, Ev::Depart);
        }
        let Some(p) = p else { return };
        let fl = &mut self.flows[p.flow];
        let sojourn = self.now.saturating_sub(p.enqueued_ns);
        fl.result
            .queue_delay_samples_us
            .push((sojourn / 1_000).min(u64::from(u32::MAX)) as u32);
        // The receiver's decision, taken now for the packet's arrival one delay later.
        let owd = fl.spec.one_way_delay_ns;
        let arrival = self.now + owd;
        fl.rx_pending.push(p.pn);
        // The receiver's RTT sample (timestamp echo): the packet's way here and an ACK's back.
        let rtt_sample = arrival.saturating_sub(p.enqueued_ns) + owd;
        match fl.receiver.on_segment_rtt(p.seg, arrival, rtt_sample) {
            AckDecision::Now => self.send_ack(p.flow, arrival),
            AckDecision::Pending => {}
            AckDecision::Delay(deadline) => {
                self.schedule(
                    deadline.saturating_sub(owd),
                    Ev::DelayedAck { flow: p.flow },
                );
            }
        }
    }

    /// The receiver of flow `f` acknowledges at `rx_ns` (its clock: one delay after the
    /// bottleneck) everything it got since its last ACK.
    fn send_ack(&mut self, f: usize, rx_ns: u64) {
        let fl = &mut self.flows[f];
        fl.receiver.ack_sent();
        if fl.rx_pending.is_empty() {
            return;
        }
        let mut ack_at = rx_ns + fl.spec.one_way_delay_ns;
        let agg = self.cfg.ack_aggregation_ns;
        if agg > 0 {
            ack_at = ack_at.div_ceil(agg) * agg;
        }
        ack_at = ack_at.max(fl.last_ack_arrival_ns);
        fl.last_ack_arrival_ns = ack_at;
        fl.ack_counts.push_back(fl.rx_pending.len() as u32);
        fl.ack_pns.extend(fl.rx_pending.drain(..));
        if let Some(edge) = fl.receiver.advertise_segs() {
            fl.ack_edges.push_back(edge);
        }
        self.schedule(ack_at, Ev::Ack { flow: f });
    }

    /// A delayed-ACK timer event of flow `f` (stale ones, for a timer since re-armed or
    /// stopped, do nothing).
    fn delayed_ack_timer(&mut self, f: usize) {
        let fl = &self.flows[f];
        let owd = fl.spec.one_way_delay_ns;
        if let Some(t) = fl.receiver.timer_ns()
            && t <= self.now + owd
        {
            self.send_ack(f, t);
        }
    }

    fn srtt_sample(&mut self) {
        for fl in self.flows.iter_mut().filter(|f| f.started && !f.done) {
            let srtt = fl.sender.srtt_ns();
            if srtt > 0 {
                fl.result
                    .srtt_samples_us
                    .push((srtt / 1_000).min(u64::from(u32::MAX)) as u32);
            }
        }
        // Once every flow has ended there is nothing left to sample: a finite flow's run then
        // ends with its last event instead of ticking on to the configured duration.
        if self.flows.iter().any(|f| !f.done) {
            self.schedule(self.now + SRTT_SAMPLE_INTERVAL_NS, Ev::SrttSample);
        }
    }

    fn ack(&mut self, f: usize) -> Result<(), SimError> {
        let now = self.now;
        let fl = &mut self.flows[f];
        let n = fl.ack_counts.pop_front().unwrap_or(0) as usize;
        let mut pns = std::mem::take(&mut fl.ack_scratch);
        pns.clear();
        pns.extend(fl.ack_pns.drain(..n.min(fl.ack_pns.len())));
        if let Some(edge) = fl.ack_edges.pop_front() {
            fl.sender.set_rwnd_edge_seg(edge);
        }
        if fl.done {
            fl.ack_scratch = pns;
            return Ok(());
        }
        let out = fl.sender.on_ack_many(&pns, now);
        fl.ack_scratch = pns;
        if out.rtt_ns > 0 {
            fl.result
                .rtt_samples_us
                .push((out.rtt_ns / 1_000).min(u64::from(u32::MAX)) as u32);
        }
        if let Some(trace) = self.trace.as_mut() {
            trace_ack(trace.as_mut(), fl, &out, now, f);
        }
        let mut program_cwnd = None;
        match &mut fl.control {
            Control::Ccp { sid } => {
                let sid = *sid;
                let max_delay = self.model.ccp_record_delay_ns;
                if max_delay > 0 {
                    // The runtime's clock never goes back: a record that waited longer than
                    // the next one's delay is handled with it.
                    let delay = self.record_delay_rng.next_u64() % (max_delay + 1);
                    self.clock.set_ns(now + delay);
                }
                let mut a = self.dp.invoke(sid, &out.prims)?;
                let fl = &mut self.flows[f];
                fl.note_control(a.control, now);
                if !self.model.ccp_inline_programs
                    && a.control == RuntimeControl::Agent
                    && a.cwnd_bytes != a.agent_cwnd_bytes.or(Some(out.prims.snd_cwnd))
                {
                    // The program wrote `Cwnd` on this ACK. As on the eBPF datapath, whose
                    // programs run on the ACK's record after the kernel has sent what the
                    // ACK allowed, this ACK sends at the window from before and the
                    // program's applies from the next one.
                    program_cwnd = a.cwnd_bytes;
                    a.cwnd_bytes = a.agent_cwnd_bytes;
                }
                if let Some(c) = a.cwnd_bytes {
                    set_ccp_cwnd(fl, c, self.trace.as_mut(), now, f);
                }
                if let Some(r) = a.rate_bytes_per_sec {
                    // u32::MAX is how an algorithm says "unpaced" (Rate = 0 is ignored).
                    fl.sender.pacing_bytes_per_sec = if r == u32::MAX {
                        None
                    } else {
                        Some(u64::from(r))
                    };
                }
                if a.fault.is_some() {
                    fl.result.vm_faults += 1;
                }
                if out.completed {
                    fl.done = true;
                    fl.result.completion_ns = Some(now);
                    self.dp.close_flow(sid)?;
                }
            }
            Control::Reno(reno) => {
                fl.sender.cwnd_bytes = reno.on_ack(&out.prims, now);
            }
            Control::Cubic(cubic) => {
                fl.sender.cwnd_bytes = cubic.on_ack(&out.prims, now);
            }
            Control::Linux(tcp) => {
                let view = sender_view(&fl.sender);
                fl.sender.cwnd_bytes = tcp.on_ack(&out, view, now);
            }
            Control::Fixed => {}
        }
        let fl = &mut self.flows[f];
        if out.completed && fl.result.completion_ns.is_none() {
            fl.done = true;
            fl.result.completion_ns = Some(now);
        }
        self.pump(f);
        // The ACK re-armed the sender's timer (a loss probe at 2 x srtt where the unsent
        // initial window had the initial RTO's 1 s, RACK's reordering timer): its event must
        // be scheduled even when the ACK sent nothing.
        self.arm_rto(f);
        if let Some(c) = program_cwnd {
            set_ccp_cwnd(&mut self.flows[f], c, self.trace.as_mut(), now, f);
        }
        Ok(())
    }

    /// A timer event of flow `f`: the sender's RTO, loss probe or reordering timer.
    fn rto(&mut self, f: usize) {
        let fl = &mut self.flows[f];
        // An event superseded by an earlier one ([`Self::arm_rto`]) is stale: the current
        // one re-arms the timer, so acting on both would keep duplicates alive forever.
        if fl.rto_event_at != Some(self.now) {
            return;
        }
        fl.rto_event_at = None;
        if fl.done {
            return;
        }
        match fl.sender.on_timer(self.now) {
            Some(TimerEvent::Rto) => {
                if let Control::Linux(tcp) = &mut fl.control {
                    let view = sender_view(&fl.sender);
                    fl.sender.cwnd_bytes = tcp.on_timeout(view, self.now);
                }
            }
            Some(TimerEvent::Reorder(lost)) if lost > 0 => {
                // tcp_rack_reo_timeout: recovery starts; no ACK carries these losses.
                if let Control::Linux(tcp) = &mut fl.control {
                    let view = sender_view(&fl.sender);
                    fl.sender.cwnd_bytes = tcp.on_timer_losses(view, u64::from(lost));
                }
            }
            Some(_) | None => {}
        }
        self.arm_rto(f);
        self.pump(f);
    }

    fn app_toggle(&mut self, f: usize) {
        let fl = &mut self.flows[f];
        let Some((on, off)) = fl.spec.on_off_ns else {
            return;
        };
        if fl.done {
            return;
        }
        let paused = !fl.sender.app_paused;
        fl.sender.app_paused = paused;
        let next = self.now + if paused { off.max(1) } else { on.max(1) };
        self.schedule(next, Ev::AppToggle(f));
        if !paused {
            self.pump(f);
        }
    }

    fn change_path(&mut self, i: usize) {
        let c = self.cfg.changes[i].clone();
        if let Some(rate) = c.rate {
            self.link.set_rate(rate, self.now);
        }
        if let Some(loss) = c.loss {
            self.link.set_loss(loss);
        }
        if let Some(b) = c.buffer_bytes {
            self.link.set_capacity(b);
        }
        if let Some(d) = c.one_way_delay_ns {
            for fl in &mut self.flows {
                fl.spec.one_way_delay_ns = d;
            }
        }
    }

    fn sample(&mut self) {
        for fl in self.flows.iter_mut().filter(|f| f.started && !f.done) {
            fl.result.series.push(Sample {
                t_ns: self.now,
                cwnd_bytes: fl.sender.cwnd_bytes,
                delivered_bytes: fl.sender.delivered_bytes(),
            });
        }
        self.schedule(self.now + self.cfg.sample_interval_ns, Ev::Sample);
    }
}

/// Sets CCP flow `f`'s window to `cwnd_bytes` (at least one segment), as the agent or the
/// flow's program wrote it, and records a change in the per-ACK trace ([`TRACE_DIR_ENV`]).
fn set_ccp_cwnd(
    fl: &mut FlowState,
    cwnd_bytes: u32,
    trace: Option<&mut Box<dyn std::io::Write + Send>>,
    now: u64,
    f: usize,
) {
    let c = cwnd_bytes.max(fl.sender.mss_bytes());
    if c != fl.sender.cwnd_bytes
        && let Some(t) = trace
    {
        let _ = writeln!(t, "write,{now},{f},,,,,,,{c},,");
    }
    fl.sender.cwnd_bytes = c;
}

/// One ACK of flow `f` in the per-ACK trace ([`TRACE_DIR_ENV`]).
fn trace_ack(
    trace: &mut (dyn std::io::Write + Send),
    fl: &FlowState,
    out: &super::tcp::AckOutcome,
    now: u64,
    f: usize,
) {
    let state = match &fl.control {
        Control::Linux(tcp) => tcp.state() as u8,
        _ if fl.sender.in_recovery() => 3,
        _ => 0,
    };
    ack_trace::write_ack(
        trace,
        now,
        f,
        state,
        out,
        fl.sender.sacked_pkts(),
        fl.sender.cwnd_bytes,
    );
}

/// The sender as the recovery state machine sees it.
fn sender_view(s: &Sender) -> SenderView {
    SenderView {
        snd_una: s.snd_una_seg(),
        snd_nxt: s.snd_nxt_seg(),
        pipe: u64::from(s.inflight_pkts()),
        sent_total: s.sent_total(),
    }
}

/// A flow's receiver under `model`. Its RTO (for the idle test of quick-ack mode and the
/// `ato` bound) is Linux's after a handshake on an empty path: the RTT plus the 200 ms floor.
fn new_receiver(spec: &FlowSpec, model: TcpModel) -> Receiver {
    let r = Receiver::new(
        spec.mss_bytes,
        model.delayed_ack,
        2 * spec.one_way_delay_ns + MIN_RTO_NS,
    );
    let r = if model.sack_compression {
        r.with_sack_compression(2 * spec.one_way_delay_ns)
    } else {
        r
    };
    if model.rmem_max_bytes > 0 {
        r.with_window(model.rmem_max_bytes)
    } else {
        r
    }
}

/// The sender starts with the window the receiver offers in the handshake (none without a
/// receive window).
fn init_rwnd(sender: &mut Sender, receiver: &mut Receiver) {
    sender.reset_rwnd(receiver.advertise_segs());
}
