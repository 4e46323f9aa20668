//! What a network run gives back, per flow and overall.

/// One point of a flow's time series.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sample {
    /// Time, ns.
    pub t_ns: u64,
    /// Window, bytes.
    pub cwnd_bytes: u32,
    /// Bytes delivered so far.
    pub delivered_bytes: u64,
}

/// Interval of [`FlowResult::srtt_samples_us`], ns (the testbed's `TCP_INFO` interval).
pub const SRTT_SAMPLE_INTERVAL_NS: u64 = 10_000_000;

/// What happened to one flow.
#[derive(Debug, Clone, Default)]
pub struct FlowResult {
    /// Start time, ns.
    pub start_ns: u64,
    /// When its last byte was delivered, ns (finite flows).
    pub completion_ns: Option<u64>,
    /// Bytes delivered to the receiver.
    pub delivered_bytes: u64,
    /// Packets sent (retransmissions included).
    pub packets_sent: u64,
    /// Packets the bottleneck dropped (tail drop and random loss).
    pub packets_dropped: u64,
    /// Packets the sender declared lost.
    pub packets_lost: u64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// Every RTT sample, µs: one per ACK (Linux's `seq_rtt`: the oldest packet the ACK newly
    /// acknowledges, so it carries the receiver's ACK delay).
    pub rtt_samples_us: Vec<u32>,
    /// The sender's smoothed RTT (RFC 6298, gain 1/8) every [`SRTT_SAMPLE_INTERVAL_NS`] while
    /// the flow runs, µs: what the kernel testbed records (`tcpi_rtt` every 10 ms).
    pub srtt_samples_us: Vec<u32>,
    /// Time each delivered packet spent in the bottleneck queue before its service, µs.
    pub queue_delay_samples_us: Vec<u32>,
    /// Smallest RTT seen, ns.
    pub min_rtt_ns: u64,
    /// Time series (see [`super::NetworkSpec::sample_interval_ns`]).
    pub series: Vec<Sample>,
    /// ACKs on which a program fault stopped the flow's invocation.
    pub vm_faults: u64,
    /// CCP flows: ACKs an agent's program handled.
    pub agent_acks: u64,
    /// CCP flows: ACKs the datapath's built-in fallback rule handled (no agent, agent silent,
    /// or no program installed yet).
    pub fallback_acks: u64,
    /// CCP flows: time under the fallback rule, ns: from the flow's start (or its last ACK)
    /// to each ACK the fallback rule handled.
    pub fallback_ns: u64,
    /// CCP flows: times an agent took control from the fallback rule (1 for a flow the agent
    /// controlled from its first ACK to its last; more after an agent died and came back).
    pub takeovers: u64,
}

impl FlowResult {
    /// Mean goodput over the flow's active time, bits per second.
    pub fn throughput_bps(&self, end_ns: u64) -> f64 {
        let end = self.completion_ns.unwrap_or(end_ns);
        let secs = end.saturating_sub(self.start_ns) as f64 / 1e9;
        if secs <= 0.0 {
            0.0
        } else {
            self.delivered_bytes as f64 * 8.0 / secs
        }
    }

    /// Mean RTT, µs.
    pub fn mean_rtt_us(&self) -> f64 {
        mean(&self.rtt_samples_us)
    }

    /// Mean queueing delay, µs.
    pub fn mean_queue_delay_us(&self) -> f64 {
        mean(&self.queue_delay_samples_us)
    }
}

fn mean(v: &[u32]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().map(|&x| f64::from(x)).sum::<f64>() / v.len() as f64
    }
}

/// What happened in a run. Counters a network does not keep are 0.
#[derive(Debug, Clone, Default)]
pub struct NetworkResult {
    /// Per flow, in configuration order.
    pub flows: Vec<FlowResult>,
    /// Time run, ns.
    pub duration_ns: u64,
    /// Events processed (the simulator).
    pub events: u64,
    /// Packets offered to the bottleneck.
    pub link_packets: u64,
    /// Tail drops.
    pub tail_drops: u64,
    /// Random losses.
    pub random_drops: u64,
}
