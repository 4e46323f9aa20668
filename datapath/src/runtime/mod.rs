//! The datapath half of CCP, in Rust, wire-compatible with libccp.
//!
//! A [`Datapath`] holds the programs the agent installed and one [`connection`] per flow.
//! The embedding datapath (the simulator, the eBPF loader, a userspace transport) calls
//! [`Datapath::invoke`] on every ACK with the flow's [`Primitives`] and applies the returned
//! [`Actions`] (cwnd, pacing rate); it calls [`Datapath::poll`] whenever it can, to take in the
//! agent's messages and run timers. Time comes from an injected [`Clock`], so the same runtime
//! runs in virtual time and in real time.
//!
//! Start reading at [`Datapath`]; the wire format is in [`wire`], programs in [`program`], the
//! VM in [`vm`], the agent-less window rule in [`fallback`], transports in [`transport`] and
//! [`shm`].
//!
//! # Beyond libccp
//! - **Fallback that fires.** If the agent does not answer within
//!   [`DatapathConfig::agent_timeout_ns`] after the datapath sent it something (or cannot be
//!   reached at all), every flow runs [`fallback::RenoFallback`] and keeps sending. READY and
//!   CREATE are re-sent with exponential backoff; when the agent answers, it takes each flow
//!   back from the flow's current window (CREATE carries it as the initial window).
//! - **Typed errors, no undefined behaviour.** Bad messages, out-of-range registers, unknown
//!   programs and connections are rejected with a [`RuntimeError`], logged and counted in
//!   [`Stats`]; the message is dropped, flows keep running.
//! - **A full agent queue is not a deadlock.** Sends that would block are queued (bounded) and
//!   retried on the next send or poll; overflow drops the oldest message and counts it.

pub mod clock;
pub mod connection;
mod datapath;
pub mod fallback;
pub mod program;
pub mod shm;
pub mod transport;
pub mod vm;
pub mod wire;

#[cfg(test)]
mod tests;

pub use clock::{Clock, ManualClock, MonotonicClock};
pub use datapath::Datapath;
pub use shm::ShmTransport;
pub use transport::{ChannelTransport, NoAgent, Transport, UnixTransport};

use thiserror::Error;

/// The per-ACK measurements a datapath gives the runtime (libccp `struct ccp_primitives`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Primitives {
    /// Newly acked in-order bytes.
    pub bytes_acked: u32,
    /// Newly acked in-order packets.
    pub packets_acked: u32,
    /// Out-of-order (SACKed) bytes.
    pub bytes_misordered: u32,
    /// Out-of-order (SACKed) packets.
    pub packets_misordered: u32,
    /// ECN-marked bytes.
    pub ecn_bytes: u32,
    /// ECN-marked packets.
    pub ecn_packets: u32,
    /// Packets newly detected lost.
    pub lost_pkts_sample: u32,
    /// A retransmission timeout happened.
    pub was_timeout: bool,
    /// Latest RTT sample, µs (0: none).
    pub rtt_sample_us: u64,
    /// Sending rate sample, bytes/s.
    pub rate_outgoing: u64,
    /// Delivery rate sample, bytes/s.
    pub rate_incoming: u64,
    /// Bytes in flight.
    pub bytes_in_flight: u32,
    /// Packets in flight.
    pub packets_in_flight: u32,
    /// The flow's current congestion window, bytes.
    pub snd_cwnd: u32,
    /// The flow's current pacing rate, bytes/s.
    pub snd_rate: u64,
    /// Bytes queued by the application and not yet sent.
    pub bytes_pending: u32,
}

/// What the datapath must apply after an invocation.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Actions {
    /// New congestion window, bytes.
    pub cwnd_bytes: Option<u32>,
    /// The window before the program ran on this ACK, bytes: the agent's staged update, or
    /// `None` if none came. It differs from [`Self::cwnd_bytes`] only when the program itself
    /// wrote `Cwnd`. A datapath that runs programs after the ACK's transmissions (the eBPF
    /// one: the fold runs in user space on the ACK's record) sends this ACK's segments at this
    /// window and the program's from the next ACK.
    pub agent_cwnd_bytes: Option<u32>,
    /// New pacing rate, bytes/s.
    pub rate_bytes_per_sec: Option<u32>,
    /// Who decided: the agent's program or the built-in fallback rule.
    pub control: Control,
    /// The program faulted on this ACK (the flow continues; see [`vm::VmError`]).
    pub fault: Option<vm::VmError>,
    /// This invocation sent the agent a report (MEASURE).
    pub reported: bool,
}

/// Who controls a flow right now.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum Control {
    /// An agent-installed program.
    Agent,
    /// The built-in fallback rule (no agent, agent silent, or no program yet).
    #[default]
    Fallback,
}

/// What a new flow tells the agent (libccp `struct ccp_datapath_info`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FlowInfo {
    /// Initial congestion window, bytes.
    pub init_cwnd_bytes: u32,
    /// Maximum segment size, bytes.
    pub mss_bytes: u32,
    /// Source IPv4 address.
    pub src_ip: u32,
    /// Source port.
    pub src_port: u32,
    /// Destination IPv4 address.
    pub dst_ip: u32,
    /// Destination port.
    pub dst_port: u32,
    /// Algorithm to ask the agent for (portus picks its default when `None`).
    pub alg: Option<String>,
}

/// Datapath-wide settings.
#[derive(Debug, Clone)]
pub struct DatapathConfig {
    /// Id sent in READY.
    pub id: u32,
    /// Program table size (ccp-kernel uses 10; portus's suite must fit in 9 for libccp).
    pub max_programs: usize,
    /// Connection table size.
    pub max_connections: usize,
    /// Silence after a send before the agent is taken for gone, ns. Must exceed the longest
    /// time the agent's algorithms legitimately go without sending anything.
    pub agent_timeout_ns: u64,
    /// First retry interval for READY/CREATE, ns.
    pub retry_initial_ns: u64,
    /// Retry interval ceiling, ns.
    pub retry_max_ns: u64,
    /// Most messages held while the agent's queue is full.
    pub max_queued_msgs: usize,
    /// Decoder limits.
    pub limits: wire::DecodeLimits,
    /// What a window or rate register above `u32::MAX` becomes when handed to the datapath.
    pub wide_values: WideValues,
}

/// How a 64-bit `Cwnd` or `Rate` register becomes the 32-bit window or rate a datapath applies.
///
/// libccp (and ccp-kernel) store both as `u32` and cut the register's value to its low 32 bits,
/// so a program or an agent update of 2^32 bytes becomes a window of 0 and the flow stalls.
/// The runtime saturates by default; [`WideValues::Truncate`] is libccp's behaviour, kept for
/// the bit-for-bit conformance test against libccp (`tests/conformance/`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum WideValues {
    /// Values above `u32::MAX` become `u32::MAX` (the default).
    #[default]
    Saturate,
    /// Values keep their low 32 bits, as libccp's `uint32_t` fields do.
    Truncate,
}

impl WideValues {
    /// The 32-bit value a datapath applies for register value `v`.
    #[must_use]
    pub fn narrow(self, v: u64) -> u32 {
        match self {
            Self::Saturate => u32::try_from(v).unwrap_or(u32::MAX),
            // Truncation is the point of this mode (libccp's assignment to `uint32_t`).
            #[allow(clippy::cast_possible_truncation)]
            Self::Truncate => v as u32,
        }
    }
}

impl Default for DatapathConfig {
    fn default() -> Self {
        Self {
            id: 0,
            max_programs: 10,
            max_connections: 1024,
            agent_timeout_ns: 500_000_000,
            retry_initial_ns: 100_000_000,
            retry_max_ns: 2_000_000_000,
            max_queued_msgs: 1024,
            limits: wire::DecodeLimits::default(),
            wide_values: WideValues::Saturate,
        }
    }
}

/// Counters a datapath keeps; cheap to read at any time.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stats {
    /// Agent messages handled.
    pub msgs_received: u64,
    /// Agent messages rejected (malformed, over limits, unknown flow or program).
    pub msgs_rejected: u64,
    /// MEASURE reports sent.
    pub reports_sent: u64,
    /// READY messages sent.
    pub readies_sent: u64,
    /// CREATE messages sent.
    pub creates_sent: u64,
    /// Sends that found the agent's queue full (queued and retried).
    pub sends_full: u64,
    /// Sends that found no agent.
    pub sends_failed: u64,
    /// Queued messages dropped because the queue overflowed or the agent vanished.
    pub msgs_dropped: u64,
    /// Program faults (see [`vm::VmError`]).
    pub vm_faults: u64,
    /// Times the datapath entered fallback.
    pub fallback_entries: u64,
    /// Times the agent came back after a fallback.
    pub agent_recoveries: u64,
    /// ACKs handled by the fallback rule.
    pub fallback_acks: u64,
}

/// Errors from the runtime. None of them stops a flow.
#[derive(Debug, Error)]
pub enum RuntimeError {
    /// A message could not be decoded.
    #[error("bad message from agent: {0}")]
    Decode(#[from] wire::DecodeError),
    /// An INSTALL did not validate.
    #[error("bad program {uid}: {source}")]
    Program {
        /// Program uid.
        uid: u32,
        /// What was wrong.
        source: program::ProgramError,
    },
    /// The program table is full.
    #[error("program table full ({max} programs); program {uid} not installed")]
    ProgramTableFull {
        /// Program uid.
        uid: u32,
        /// Table size.
        max: usize,
    },
    /// CHANGE_PROG named a program that is not installed.
    #[error("flow {sid}: unknown program {uid}")]
    UnknownProgram {
        /// Flow.
        sid: u32,
        /// Program uid.
        uid: u32,
    },
    /// A message or call named a flow that does not exist.
    #[error("unknown flow {0}")]
    UnknownConnection(u32),
    /// The connection table is full.
    #[error("connection table full ({0} flows)")]
    ConnectionTableFull(usize),
    /// An update targets a register that cannot be updated.
    #[error("flow {sid}: cannot update register type {reg_type} index {index}")]
    BadUpdate {
        /// Flow.
        sid: u32,
        /// Register type byte.
        reg_type: u8,
        /// Register index.
        index: u32,
    },
    /// Receiving from the agent failed.
    #[error(transparent)]
    Recv(#[from] transport::RecvError),
}
