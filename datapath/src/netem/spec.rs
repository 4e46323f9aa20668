//! What a network run is: a bottleneck, flows and the path's changes over time.

use super::rate::LinkRate;

/// The bottleneck.
#[derive(Debug, Clone)]
pub struct LinkSpec {
    /// Drain rate.
    pub rate: LinkRate,
    /// Drop-tail buffer, bytes.
    pub buffer_bytes: u64,
    /// Random loss probability on entry.
    pub loss: f64,
}

/// How a flow's window is decided.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Scheme {
    /// The CCP agent's algorithm of this name (through the datapath runtime).
    Ccp {
        /// Algorithm name as registered with portus.
        alg: String,
    },
    /// Built-in Reno with no agent: Linux's `reno` inside Linux's recovery
    /// ([`crate::sim::recovery`]), or the runtime's fallback rule with
    /// [`crate::sim::RecoveryModel::TimeBased`]; on the kernel, its own `reno`.
    Reno,
    /// Built-in Linux-like Cubic with no agent ([`crate::sim::cubic`]; on the kernel, its own `cubic`).
    Cubic,
    /// The kernel's own congestion control of this name (e.g. `bbr`): the testbed only. The
    /// simulator has no model of it and refuses such a flow ([`crate::sim::SimError::KernelOnly`]).
    Kernel {
        /// The kernel's name for it (`net.ipv4.tcp_available_congestion_control`).
        cca: String,
    },
    /// A constant window, bytes.
    Fixed {
        /// Window, bytes.
        cwnd_bytes: u32,
    },
}

/// One flow.
#[derive(Debug, Clone)]
pub struct FlowSpec {
    /// Window control.
    pub scheme: Scheme,
    /// Start time, ns.
    pub start_ns: u64,
    /// Bytes to send (`None`: until the end of the run).
    pub size_bytes: Option<u64>,
    /// One-way propagation delay, ns (the minimum RTT is twice this plus serialization).
    pub one_way_delay_ns: u64,
    /// Segment size, bytes.
    pub mss_bytes: u32,
    /// Initial window, bytes.
    pub init_cwnd_bytes: u32,
    /// Application on/off periods `(on_ns, off_ns)`: during "off" the application gives no new
    /// data (the flow is application-limited; retransmissions still go). `None`: always on.
    pub on_off_ns: Option<(u64, u64)>,
}

impl FlowSpec {
    /// A long-running flow from time 0 with 1448-byte segments and a 10-segment initial window.
    pub fn bulk(scheme: Scheme, one_way_delay_ns: u64) -> Self {
        Self {
            scheme,
            start_ns: 0,
            size_bytes: None,
            one_way_delay_ns,
            mss_bytes: 1448,
            init_cwnd_bytes: 10 * 1448,
            on_off_ns: None,
        }
    }
}

/// A change of the path at a point in time (TCP-RL's changing-path experiment). Fields left
/// `None` keep their value. A new delay applies to packets sent from then on.
#[derive(Debug, Clone, Default)]
pub struct PathChange {
    /// When, ns.
    pub at_ns: u64,
    /// New bottleneck rate.
    pub rate: Option<LinkRate>,
    /// New one-way propagation delay of every flow, ns.
    pub one_way_delay_ns: Option<u64>,
    /// New random loss probability.
    pub loss: Option<f64>,
    /// New buffer size, bytes.
    pub buffer_bytes: Option<u64>,
}

/// A whole network run, whichever [`super::Network`] runs it.
#[derive(Debug, Clone)]
pub struct NetworkSpec {
    /// Seed of every random choice (loss, flow identities).
    pub seed: u64,
    /// Duration, ns.
    pub duration_ns: u64,
    /// The bottleneck at the start.
    pub link: LinkSpec,
    /// The flows.
    pub flows: Vec<FlowSpec>,
    /// Changes of the path over time, in any order.
    pub changes: Vec<PathChange>,
    /// ACK aggregation: ACKs reach senders only at multiples of this interval, in bursts, as
    /// on Wi-Fi and cellular links, ns (0: every ACK on its own).
    pub ack_aggregation_ns: u64,
    /// Interval of the per-flow time series, ns (0: none).
    pub sample_interval_ns: u64,
}
