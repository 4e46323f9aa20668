//! A real-network testbed on one machine: three network namespaces, a bottleneck link we
//! shape ourselves, and our own bulk TCP traffic with per-flow measurements.
//!
//! # Topology
//! ```text
//!  sender ns                  router ns                          receiver ns
//!  snd0 10.77.0.1 ==veth== rtr-snd [relay] rtr-rcv(htb+bfifo) ==veth== rcv0 10.77.0.2
//! ```
//! Namespaces are named `ccptb-<pid>-<n>-{snd,rtr,rcv}` (`<pid>` is the creating process, `<n>`
//! counts testbeds within it). The router has no addresses: our relay (`relay.rs`) moves
//! Ethernet frames between its two interfaces through `AF_PACKET` sockets, so sender and
//! receiver share one /24 and reach each other with static neighbour entries (no ARP).
//!
//! # The link ([`LinkConfig`])
//! - **Bandwidth and buffer** ([`Bandwidth::Rate`]): an `htb` class with a `bfifo` leaf of
//!   `buffer_bytes` on the router's egress toward the receiver (the data direction). Rates
//!   count whole Ethernet frames (14-byte header included, no preamble), like the kernel's
//!   qdiscs, so one TCP flow's goodput tops out at 1448/1514 of the rate.
//! - **Propagation delay and random loss**: the relay holds each frame for the one-way delay
//!   of its direction (FIFO, so frames never reorder) and drops data-carrying TCP segments of
//!   the data direction with probability `loss` from a seeded generator
//!   ([`crate::sim::rng::Rng`]), the simulator's stream: same seed, same dropped segments.
//! - **A mahimahi trace** ([`Bandwidth::Trace`], parsed by [`crate::sim::Trace`]): instead of
//!   `htb`, the relay drains its own drop-tail queue of `buffer_bytes` at the trace's delivery
//!   opportunities, each worth [`TRACE_OPPORTUNITY_BYTES`] of IP packet, unused bytes wasted
//!   and packets spanning opportunities as in mahimahi's link queue.
//! - The ACK direction is delayed, never shaped or dropped.
//!
//! Timing: each relay direction sleeps until its next frame is due (`ppoll` with a 1 µs timer
//! slack) in `SCHED_FIFO` when allowed ([`TestbedConfig::realtime_relay`]), so a busy machine
//! rarely holds a frame past its due time; [`DirectionStats::late_frames`] and
//! [`DirectionStats::max_lateness`] say how often and how far it did.
//!
//! [`Testbed::set_link`] changes any of this during a run (a path change mid-flow): new rates
//! apply at once, new delays to frames arriving from then on.
//!
//! # As a network ([`KernelNetwork`])
//! The simulator's run description ([`crate::netem::NetworkSpec`]) runs here unchanged behind
//! the same trait ([`crate::netem::Network`]) and gives the same result type: `ccp-eval run
//! --datapath kernel` is the simulator's runner with this network in its place.
//!
//! # Traffic ([`transfer`])
//! [`Testbed::start`] runs [`FlowSpec`]s: each flow is a TCP connection from the sender
//! namespace to a sink in the receiver namespace with its own congestion control (set with
//! `TCP_CONGESTION` before `connect`, plus an optional [`SocketHook`]), start offset and length
//! (a duration or a byte count). [`Run::wait`] gives a [`FlowResult`] per flow: bytes and
//! goodput at the receiver, and the sender's `TCP_INFO` every 10 ms (RTT percentiles, min RTT,
//! retransmission rate, a 100 ms time series).
//!
//! # Lifetime
//! Dropping the [`Testbed`] stops the relay and deletes its namespaces (and so its veths).
//! [`Testbed::new`] first deletes namespaces left by processes that died without dropping
//! theirs ([`cleanup_stale`]).
//!
//! Needs root (`CAP_SYS_ADMIN` and `CAP_NET_ADMIN`) and iproute2 (`ip`, `tc`);
//! [`TestbedError::is_unavailable`] tells a caller to skip rather than fail.

mod netns;
mod network;
mod qdisc;
mod relay;
pub mod transfer;

use std::io;
use std::net::Ipv4Addr;
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use thiserror::Error;

use crate::sim::LinkRate;
pub use crate::sim::Trace;
pub use network::{KernelNetwork, KernelNetworkError};
pub use relay::{DirectionStats, LATE_AFTER};
pub use transfer::{
    Amount, FlowResult, FlowSpec, InfoSample, Run, SeriesPoint, SocketHook, loss_state_entries,
};

use netns::NetNs;
use relay::{DirParams, Relay};

/// Prefix of every namespace a testbed creates (`ccptb-<pid>-<n>-<role>`).
pub const NS_PREFIX: &str = "ccptb";
/// The sender's address (`snd0` in the sender namespace).
pub const SENDER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 1);
/// The receiver's address (`rcv0` in the receiver namespace).
pub const RECEIVER_ADDR: Ipv4Addr = Ipv4Addr::new(10, 77, 0, 2);
/// Bytes of IP packet one mahimahi delivery opportunity carries (mahimahi's `PACKET_SIZE`).
pub const TRACE_OPPORTUNITY_BYTES: u32 = 1504;
/// The largest Ethernet frame on the testbed's links (1500-byte MTU plus the 14-byte header).
pub const MAX_FRAME_BYTES: u64 = 1514;
/// Default maximum of `tcp_rmem` / `tcp_wmem` in the sender and receiver namespaces: a
/// window well above 100 Mbit/s x 200 ms (2.5 MB) after the kernel's overhead share.
pub const DEFAULT_SOCKET_BUFFER_MAX_BYTES: u64 = 32 << 20;

const SENDER_IF: &str = "snd0";
const RECEIVER_IF: &str = "rcv0";
const ROUTER_SENDER_IF: &str = "rtr-snd";
const ROUTER_RECEIVER_IF: &str = "rtr-rcv";
const SENDER_MAC: &str = "02:cc:7b:00:00:01";
const RECEIVER_MAC: &str = "02:cc:7b:00:00:02";
const SUBNET_PREFIX_LEN: u8 = 24;
/// Longest one-way delay accepted (a typo guard, not a limit of the relay).
const MAX_DELAY: Duration = Duration::from_secs(10);

/// Counts testbeds created by this process (the `<n>` of the namespace names).
static NEXT_ID: AtomicU32 = AtomicU32::new(0);

/// Why the testbed could not be built or run.
#[derive(Debug, Error)]
pub enum TestbedError {
    /// The process is not root.
    #[error("the testbed needs root (network namespaces, qdiscs, raw sockets); euid is {euid}")]
    NotRoot {
        /// The effective uid.
        euid: u32,
    },
    /// A tool the testbed runs is not installed.
    #[error("`{tool}` is not installed (iproute2 provides it): {source}")]
    ToolMissing {
        /// The program.
        tool: &'static str,
        /// Why it could not be started.
        source: io::Error,
    },
    /// A command exited with an error.
    #[error("`{command}` failed ({status}): {stderr}")]
    Command {
        /// The command line.
        command: String,
        /// Its exit status.
        status: String,
        /// What it wrote to stderr.
        stderr: String,
    },
    /// A system call failed.
    #[error("{step} ({target}): {source}")]
    Os {
        /// What was being done.
        step: &'static str,
        /// What it was done to (a namespace, an interface, a flow, a file).
        target: String,
        /// The error.
        source: io::Error,
    },
    /// A configuration value is out of range.
    #[error("invalid testbed configuration: {field} {reason}")]
    Invalid {
        /// The offending field.
        field: &'static str,
        /// What is wrong with it.
        reason: String,
    },
    /// `tc` printed something we could not read.
    #[error("could not read {what} from `tc` output: {output}")]
    Parse {
        /// What was looked for.
        what: &'static str,
        /// The output.
        output: String,
    },
    /// A relay thread stopped on an error: the link no longer forwards.
    #[error("the relay stopped: {0}")]
    RelayStopped(String),
    /// A testbed thread panicked.
    #[error("testbed thread `{0}` panicked")]
    ThreadPanicked(String),
}

impl TestbedError {
    pub(crate) fn os(
        step: &'static str,
        target: impl Into<String>,
    ) -> impl FnOnce(io::Error) -> Self {
        let target = target.into();
        move |source| Self::Os {
            step,
            target,
            source,
        }
    }

    pub(crate) fn invalid(field: &'static str, reason: impl Into<String>) -> Self {
        Self::Invalid {
            field,
            reason: reason.into(),
        }
    }

    /// The machine does not let us build a testbed (not root, no permission for network
    /// namespaces or raw sockets, iproute2 missing): callers should skip rather than fail.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::NotRoot { .. } | Self::ToolMissing { .. } => true,
            Self::Command { stderr, .. } => {
                stderr.contains("Operation not permitted") || stderr.contains("Permission denied")
            }
            Self::Os { source, .. } => source.kind() == io::ErrorKind::PermissionDenied,
            Self::Invalid { .. }
            | Self::Parse { .. }
            | Self::RelayStopped(_)
            | Self::ThreadPanicked(_) => false,
        }
    }
}

/// How fast the data direction drains.
#[derive(Debug, Clone, PartialEq)]
pub enum Bandwidth {
    /// No shaping: as fast as the relay forwards.
    Unlimited,
    /// A constant rate (`htb` + `bfifo`), bits per second of Ethernet frames.
    Rate {
        /// Bits per second.
        bps: u64,
    },
    /// A mahimahi trace replayed by the relay (wrapping at its last timestamp).
    Trace(Trace),
}

impl Bandwidth {
    /// Mean rate in bits per second (of Ethernet frames for [`Bandwidth::Rate`], of IP packets
    /// for a trace), `None` when unlimited.
    pub fn mean_bps(&self) -> Option<u64> {
        match self {
            Self::Unlimited => None,
            Self::Rate { bps } => Some(*bps),
            Self::Trace(t) => Some(trace_mean_bps(t)),
        }
    }
}

impl From<LinkRate> for Bandwidth {
    /// The simulator's link rate on the testbed. A trace keeps its opportunities, but each one
    /// carries [`TRACE_OPPORTUNITY_BYTES`] here and [`crate::netem::TRACE_MTU_BYTES`] in
    /// the simulator.
    fn from(rate: LinkRate) -> Self {
        match rate {
            LinkRate::Constant { bps } => Self::Rate { bps },
            LinkRate::Trace(t) => Self::Trace(t),
        }
    }
}

/// Mean rate of a trace at [`TRACE_OPPORTUNITY_BYTES`] per opportunity, bits per second.
pub fn trace_mean_bps(trace: &Trace) -> u64 {
    let per_period_bits =
        trace.opportunities_ns.len() as u128 * u128::from(TRACE_OPPORTUNITY_BYTES) * 8;
    (per_period_bits * 1_000_000_000 / u128::from(trace.period_ns.max(1))) as u64
}

/// The emulated path: bandwidth, buffer, one-way delays and random loss.
#[derive(Debug, Clone, PartialEq)]
pub struct LinkConfig {
    /// Bottleneck rate (data direction only).
    pub bandwidth: Bandwidth,
    /// One-way delay of the data direction (sender to receiver).
    pub data_delay: Duration,
    /// One-way delay of the ACK direction (receiver to sender).
    pub ack_delay: Duration,
    /// Bottleneck buffer, bytes of Ethernet frames (ignored when unlimited).
    pub buffer_bytes: u64,
    /// Probability of dropping a data-direction frame, in [0, 1).
    pub loss: f64,
}

impl LinkConfig {
    /// A link of `bandwidth` and round-trip propagation delay `rtt` (half each way), a buffer
    /// of one bandwidth-delay product (at least two full frames; 1 MiB when unlimited) and no
    /// loss.
    pub fn new(bandwidth: Bandwidth, rtt: Duration) -> Self {
        let mut link = Self {
            bandwidth,
            data_delay: rtt / 2,
            ack_delay: rtt.saturating_sub(rtt / 2),
            buffer_bytes: 1 << 20,
            loss: 0.0,
        };
        if let Some(bdp) = link.bdp_bytes() {
            link.buffer_bytes = bdp.max(2 * MAX_FRAME_BYTES);
        }
        link
    }

    /// A constant-rate link: `rate_bps` bits per second, round trip `rtt`, 1 BDP of buffer.
    pub fn constant(rate_bps: u64, rtt: Duration) -> Self {
        Self::new(Bandwidth::Rate { bps: rate_bps }, rtt)
    }

    /// A link replaying a mahimahi trace, round trip `rtt`, 1 BDP (at the trace's mean) of
    /// buffer.
    pub fn trace(trace: Trace, rtt: Duration) -> Self {
        Self::new(Bandwidth::Trace(trace), rtt)
    }

    /// An unshaped link with round trip `rtt`.
    pub fn unlimited(rtt: Duration) -> Self {
        Self::new(Bandwidth::Unlimited, rtt)
    }

    /// Sets the buffer in bytes.
    #[must_use]
    pub fn with_buffer_bytes(mut self, bytes: u64) -> Self {
        self.buffer_bytes = bytes;
        self
    }

    /// Sets the buffer to `multiple` bandwidth-delay products (at least two full frames);
    /// no effect when unlimited.
    #[must_use]
    pub fn with_buffer_bdp(mut self, multiple: f64) -> Self {
        if let Some(bdp) = self.bdp_bytes() {
            self.buffer_bytes = ((bdp as f64 * multiple) as u64).max(2 * MAX_FRAME_BYTES);
        }
        self
    }

    /// Sets the random loss probability of the data direction.
    #[must_use]
    pub fn with_loss(mut self, loss: f64) -> Self {
        self.loss = loss;
        self
    }

    /// Sets the one-way delays of each direction.
    #[must_use]
    pub fn with_delays(mut self, data: Duration, ack: Duration) -> Self {
        self.data_delay = data;
        self.ack_delay = ack;
        self
    }

    /// Round-trip propagation delay (both one-way delays).
    pub fn rtt(&self) -> Duration {
        self.data_delay + self.ack_delay
    }

    /// Bandwidth-delay product at the mean rate, bytes; `None` when unlimited.
    pub fn bdp_bytes(&self) -> Option<u64> {
        let bps = self.bandwidth.mean_bps()?;
        Some((u128::from(bps) * self.rtt().as_nanos() / 8_000_000_000) as u64)
    }

    fn validate(&self) -> Result<(), TestbedError> {
        if !(0.0..1.0).contains(&self.loss) {
            return Err(TestbedError::invalid(
                "loss",
                format!("must be in [0, 1), got {}", self.loss),
            ));
        }
        for (field, d) in [
            ("data_delay", self.data_delay),
            ("ack_delay", self.ack_delay),
        ] {
            if d > MAX_DELAY {
                return Err(TestbedError::invalid(
                    field,
                    format!("must be at most {MAX_DELAY:?}, got {d:?}"),
                ));
            }
        }
        match &self.bandwidth {
            Bandwidth::Unlimited => return Ok(()),
            Bandwidth::Rate { bps } if *bps < 8_000 => {
                return Err(TestbedError::invalid(
                    "bandwidth",
                    format!("must be at least 8000 bit/s, got {bps}"),
                ));
            }
            Bandwidth::Rate { .. } => {}
            Bandwidth::Trace(t) => {
                if t.opportunities_ns.is_empty() || t.period_ns == 0 {
                    return Err(TestbedError::invalid(
                        "bandwidth",
                        "trace has no delivery opportunities",
                    ));
                }
            }
        }
        if self.buffer_bytes < MAX_FRAME_BYTES {
            return Err(TestbedError::invalid(
                "buffer_bytes",
                format!(
                    "must hold at least one full frame ({MAX_FRAME_BYTES} bytes), got {}",
                    self.buffer_bytes
                ),
            ));
        }
        Ok(())
    }
}

/// Everything [`Testbed::new`] needs.
#[derive(Debug, Clone, PartialEq)]
pub struct TestbedConfig {
    /// The initial link.
    pub link: LinkConfig,
    /// Seed of the relay's loss generator (each direction derives its own stream).
    pub seed: u64,
    /// Maximum of `tcp_rmem` and `tcp_wmem` in the sender and receiver namespaces, bytes.
    pub socket_buffer_max_bytes: u64,
    /// Run the relay threads with real-time priority (`SCHED_FIFO`), so other work on the
    /// machine cannot hold frames past their due time (default on; if the system refuses, the
    /// relay runs at normal priority and [`DirectionStats::realtime`] says so).
    pub realtime_relay: bool,
}

impl TestbedConfig {
    /// A testbed with `link`, seed 1 and [`DEFAULT_SOCKET_BUFFER_MAX_BYTES`].
    pub fn new(link: LinkConfig) -> Self {
        Self {
            link,
            seed: 1,
            socket_buffer_max_bytes: DEFAULT_SOCKET_BUFFER_MAX_BYTES,
            realtime_relay: true,
        }
    }

    /// Sets the loss generator's seed.
    #[must_use]
    pub fn with_seed(mut self, seed: u64) -> Self {
        self.seed = seed;
        self
    }

    /// Sets whether the relay threads ask for real-time priority.
    #[must_use]
    pub fn with_realtime_relay(mut self, realtime: bool) -> Self {
        self.realtime_relay = realtime;
        self
    }

    /// Sets the socket buffer maximum (`tcp_rmem` / `tcp_wmem`).
    #[must_use]
    pub fn with_socket_buffer_max_bytes(mut self, bytes: u64) -> Self {
        self.socket_buffer_max_bytes = bytes;
        self
    }
}

/// One of the testbed's three namespaces.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Role {
    /// Where flows start ([`SENDER_ADDR`]).
    Sender,
    /// Where the relay and the shaper run.
    Router,
    /// Where the sinks listen ([`RECEIVER_ADDR`]).
    Receiver,
}

impl Role {
    fn suffix(self) -> &'static str {
        match self {
            Self::Sender => "snd",
            Self::Router => "rtr",
            Self::Receiver => "rcv",
        }
    }
}

/// Counters of the emulated link since the testbed was created.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct LinkStats {
    /// The relay's data direction (sender to receiver).
    pub data: DirectionStats,
    /// The relay's ACK direction (receiver to sender).
    pub ack: DirectionStats,
    /// Frames the `htb` bottleneck's `bfifo` dropped (buffer full).
    pub qdisc_drops: u64,
}

impl LinkStats {
    /// Data-direction frames dropped because the bottleneck buffer was full (`bfifo` or the
    /// relay's trace queue).
    pub fn queue_drops(&self) -> u64 {
        self.qdisc_drops + self.data.queue_drops
    }

    /// Fraction of data-direction frames the relay dropped at random.
    pub fn random_drop_fraction(&self) -> f64 {
        if self.data.frames_in == 0 {
            0.0
        } else {
            self.data.random_drops as f64 / self.data.frames_in as f64
        }
    }
}

/// What is installed on the link right now.
#[derive(Debug)]
struct LinkState {
    config: LinkConfig,
    /// `htb` is installed on the router's egress toward the receiver.
    shaped: bool,
    /// `bfifo` drops counted by shapers removed since.
    qdisc_drops_before: u64,
}

/// Three namespaces, a shaped and delayed path between them, and traffic on demand. See the
/// module documentation.
#[derive(Debug)]
pub struct Testbed {
    // Drop order matters: the relay's sockets close before the namespaces go.
    relay: Relay,
    link: Mutex<LinkState>,
    sender: NetNs,
    router: NetNs,
    receiver: NetNs,
}

impl Testbed {
    /// Builds the namespaces, links and relay, after deleting stale testbeds of dead
    /// processes.
    pub fn new(config: TestbedConfig) -> Result<Self, TestbedError> {
        config.link.validate()?;
        if config.socket_buffer_max_bytes < 1 << 16 {
            return Err(TestbedError::invalid(
                "socket_buffer_max_bytes",
                format!(
                    "must be at least 64 KiB, got {}",
                    config.socket_buffer_max_bytes
                ),
            ));
        }
        // SAFETY: geteuid has no preconditions.
        let euid = unsafe { libc::geteuid() };
        if euid != 0 {
            return Err(TestbedError::NotRoot { euid });
        }
        if let Err(e) = cleanup_stale() {
            tracing::warn!("removing stale testbed namespaces: {e}");
        }
        let id = NEXT_ID.fetch_add(1, Ordering::Relaxed);
        let base = format!("{NS_PREFIX}-{}-{id}", std::process::id());
        let name = |role: Role| format!("{base}-{}", role.suffix());
        // Our names are unique within this process, so one that exists was left by a dead
        // process that had our pid before (`cleanup_stale` spares our own pid).
        let existing = netns::list()?;
        for role in [Role::Sender, Role::Router, Role::Receiver] {
            if existing.contains(&name(role)) {
                netns::delete(&name(role))?;
            }
        }
        // Each namespace deletes itself if a later step fails.
        let sender = NetNs::create(&name(Role::Sender))?;
        let router = NetNs::create(&name(Role::Router))?;
        let receiver = NetNs::create(&name(Role::Receiver))?;
        netns::wire(
            &sender,
            &router,
            &receiver,
            &netns::Wiring {
                sender_if: SENDER_IF,
                receiver_if: RECEIVER_IF,
                router_sender_if: ROUTER_SENDER_IF,
                router_receiver_if: ROUTER_RECEIVER_IF,
                sender_mac: SENDER_MAC,
                receiver_mac: RECEIVER_MAC,
                sender_addr: SENDER_ADDR,
                receiver_addr: RECEIVER_ADDR,
                prefix_len: SUBNET_PREFIX_LEN,
                socket_buffer_max_bytes: config.socket_buffer_max_bytes,
            },
        )?;
        let (data, ack) = relay_params(&config.link);
        let relay = Relay::start(
            &router,
            ROUTER_SENDER_IF,
            ROUTER_RECEIVER_IF,
            data,
            ack,
            config.seed,
            config.realtime_relay,
        )?;
        let testbed = Self {
            relay,
            link: Mutex::new(LinkState {
                config: LinkConfig::unlimited(Duration::ZERO),
                shaped: false,
                qdisc_drops_before: 0,
            }),
            sender,
            router,
            receiver,
        };
        testbed.set_link(config.link)?;
        Ok(testbed)
    }

    /// The namespace names, sender, router, receiver (usable with `ip netns exec`).
    pub fn namespaces(&self) -> [&str; 3] {
        [self.sender.name(), self.router.name(), self.receiver.name()]
    }

    /// The name of one namespace.
    pub fn namespace(&self, role: Role) -> &str {
        self.ns(role).name()
    }

    fn ns(&self, role: Role) -> &NetNs {
        match role {
            Role::Sender => &self.sender,
            Role::Router => &self.router,
            Role::Receiver => &self.receiver,
        }
    }

    /// The link as last set.
    pub fn link(&self) -> LinkConfig {
        self.state().config.clone()
    }

    fn state(&self) -> std::sync::MutexGuard<'_, LinkState> {
        self.link.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Changes the link now, also in the middle of a run: the shaper's rate and buffer, the
    /// relay's delays, loss and trace. Frames already held keep their delay.
    pub fn set_link(&self, link: LinkConfig) -> Result<(), TestbedError> {
        link.validate()?;
        let mut state = self.state();
        let router = self.router.name();
        match &link.bandwidth {
            Bandwidth::Rate { bps } => {
                qdisc::shape(
                    router,
                    ROUTER_RECEIVER_IF,
                    *bps,
                    link.buffer_bytes,
                    !state.shaped,
                )?;
                state.shaped = true;
            }
            Bandwidth::Unlimited | Bandwidth::Trace(_) => {
                if state.shaped {
                    let drops = qdisc::drops(router, ROUTER_RECEIVER_IF)?;
                    qdisc::unshape(router, ROUTER_RECEIVER_IF)?;
                    state.shaped = false;
                    state.qdisc_drops_before += drops;
                }
            }
        }
        let (data, ack) = relay_params(&link);
        self.relay.set(data, ack);
        state.config = link;
        Ok(())
    }

    /// The link's counters since creation.
    pub fn stats(&self) -> Result<LinkStats, TestbedError> {
        let (data, ack) = self.relay.stats()?;
        let state = self.state();
        let current = if state.shaped {
            qdisc::drops(self.router.name(), ROUTER_RECEIVER_IF)?
        } else {
            0
        };
        Ok(LinkStats {
            data,
            ack,
            qdisc_drops: state.qdisc_drops_before + current,
        })
    }

    /// Starts `flows` (each at its own offset from now) and returns at once; [`Run::wait`]
    /// collects the results. The link may be changed while they run. A trace's schedule
    /// starts over with the run: the trace's time zero is the run's, as in the simulator.
    pub fn start(&self, flows: &[FlowSpec]) -> Result<Run, TestbedError> {
        let run = transfer::start(&self.sender, &self.receiver, flows)?;
        if matches!(self.state().config.bandwidth, Bandwidth::Trace(_)) {
            self.relay.restart_schedules(run.started());
        }
        Ok(run)
    }

    /// Runs `flows` to the end: [`start`](Self::start) then [`Run::wait`].
    pub fn run(&self, flows: &[FlowSpec]) -> Result<Vec<FlowResult>, TestbedError> {
        self.start(flows)?.wait()
    }

    /// Runs `flows` while changing the link: each `(offset, link)` of `changes` is applied
    /// [`offset`](Duration) after the run starts (in order of offset), then waits for the flows.
    /// A change that fails still lets the flows finish, then fails the run.
    pub fn run_with_changes(
        &self,
        flows: &[FlowSpec],
        changes: &[(Duration, LinkConfig)],
    ) -> Result<Vec<FlowResult>, TestbedError> {
        let mut changes: Vec<&(Duration, LinkConfig)> = changes.iter().collect();
        changes.sort_by_key(|(at, _)| *at);
        for (at, link) in &changes {
            if *at > transfer::MAX_FLOW_TIME {
                return Err(TestbedError::invalid(
                    "changes",
                    format!("offset {at:?} is beyond {:?}", transfer::MAX_FLOW_TIME),
                ));
            }
            link.validate()?;
        }
        let run = self.start(flows)?;
        let mut failed = None;
        for (at, link) in changes {
            std::thread::sleep((run.started() + *at).saturating_duration_since(Instant::now()));
            if let Err(e) = self.set_link(link.clone()) {
                failed = Some(e);
                break;
            }
        }
        let results = run.wait()?;
        match failed {
            Some(e) => Err(e),
            None => Ok(results),
        }
    }

    /// Runs `f` on a fresh thread inside one of the namespaces (sockets it creates belong
    /// there) and returns its value.
    pub fn in_namespace<T: Send>(
        &self,
        role: Role,
        f: impl FnOnce() -> T + Send,
    ) -> Result<T, TestbedError> {
        self.ns(role).run(f)
    }
}

impl Drop for Testbed {
    fn drop(&mut self) {
        // The relay joins its threads and closes its sockets first; then each namespace
        // deletes itself as its field drops.
        self.relay.stop();
    }
}

fn relay_params(link: &LinkConfig) -> (DirParams, DirParams) {
    let trace = match &link.bandwidth {
        Bandwidth::Trace(t) => Some(Arc::new(t.clone())),
        Bandwidth::Unlimited | Bandwidth::Rate { .. } => None,
    };
    (
        DirParams {
            delay: link.data_delay,
            loss: link.loss,
            trace,
            queue_limit_bytes: link.buffer_bytes,
        },
        DirParams {
            delay: link.ack_delay,
            loss: 0.0,
            trace: None,
            queue_limit_bytes: link.buffer_bytes,
        },
    )
}

/// Deletes the namespaces of testbeds whose creating process is gone (a crashed or killed
/// run); returns their names. Namespaces of live processes are left alone.
pub fn cleanup_stale() -> Result<Vec<String>, TestbedError> {
    let mut removed = Vec::new();
    let mut first_error = None;
    for name in netns::list()? {
        let Some(pid) = creator_pid(&name) else {
            continue;
        };
        if pid == std::process::id() || netns::process_alive(pid) {
            continue;
        }
        match netns::delete(&name) {
            Ok(()) => removed.push(name),
            Err(e) => {
                tracing::warn!("deleting stale namespace {name}: {e}");
                first_error.get_or_insert(e);
            }
        }
    }
    match first_error {
        Some(e) => Err(e),
        None => Ok(removed),
    }
}

/// The pid in a testbed namespace name `ccptb-<pid>-<n>-<role>`, if `name` is one.
pub fn creator_pid(name: &str) -> Option<u32> {
    let rest = name.strip_prefix(NS_PREFIX)?.strip_prefix('-')?;
    let mut parts = rest.split('-');
    let pid = parts.next()?.parse().ok()?;
    let _id: u32 = parts.next()?.parse().ok()?;
    let role = parts.next()?;
    if parts.next().is_some() || !["snd", "rtr", "rcv"].contains(&role) {
        return None;
    }
    Some(pid)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_testbed_can_be_shared_across_threads() {
        fn send_sync<T: Send + Sync>() {}
        send_sync::<Testbed>();
        send_sync::<Run>();
        send_sync::<FlowSpec>();
    }

    #[test]
    fn missing_permissions_and_tools_are_unavailable_not_broken() {
        let io = |kind| io::Error::from(kind);
        assert!(TestbedError::NotRoot { euid: 1000 }.is_unavailable());
        let missing = TestbedError::ToolMissing {
            tool: "ip",
            source: io(io::ErrorKind::NotFound),
        };
        assert!(missing.is_unavailable());
        let denied = TestbedError::Command {
            command: "ip netns add x".into(),
            status: "exit status: 1".into(),
            stderr: "mount --make-shared /run/netns failed: Operation not permitted".into(),
        };
        assert!(denied.is_unavailable());
        let setns = TestbedError::os("entering the namespace (setns)", "x")(io(
            io::ErrorKind::PermissionDenied,
        ));
        assert!(setns.is_unavailable());
        let busy = TestbedError::Command {
            command: "ip link add".into(),
            status: "exit status: 2".into(),
            stderr: "RTNETLINK answers: File exists".into(),
        };
        assert!(!busy.is_unavailable());
        assert!(!TestbedError::invalid("loss", "must be in [0, 1)").is_unavailable());
        assert!(!TestbedError::RelayStopped("x".into()).is_unavailable());
    }

    #[test]
    fn creator_pid_reads_only_testbed_names() {
        assert_eq!(creator_pid("ccptb-1234-0-snd"), Some(1234));
        assert_eq!(creator_pid("ccptb-77-12-rcv"), Some(77));
        assert_eq!(creator_pid("ccptb-77-12-xyz"), None);
        assert_eq!(creator_pid("ccptb-77-snd"), None);
        assert_eq!(creator_pid("other-77-1-snd"), None);
        assert_eq!(creator_pid("ccptbx-77-1-snd"), None);
        assert_eq!(creator_pid("ccptb-77-1-snd-extra"), None);
    }

    #[test]
    fn link_defaults_split_rtt_and_buffer_one_bdp() {
        let link = LinkConfig::constant(10_000_000, Duration::from_millis(40));
        assert_eq!(link.data_delay, Duration::from_millis(20));
        assert_eq!(link.ack_delay, Duration::from_millis(20));
        assert_eq!(link.buffer_bytes, 50_000);
        assert!(link.validate().is_ok());
        assert!(link.clone().with_loss(1.0).validate().is_err());
        assert!(link.with_buffer_bytes(100).validate().is_err());
    }

    #[test]
    fn trace_rate_counts_mahimahi_opportunities() {
        let text = (1..=1000)
            .map(|ms: u32| ms.to_string())
            .collect::<Vec<_>>()
            .join("\n");
        let trace = Trace::parse("one-per-ms", &text).unwrap();
        assert_eq!(trace_mean_bps(&trace), 12_032_000);
    }
}
