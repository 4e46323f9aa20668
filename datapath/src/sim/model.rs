//! Which TCP behaviours the simulator models: each can be switched off to get the simulator's
//! earlier behaviour (for comparisons; `docs/calibration.md` shows what each one changes).

use super::recovery::RecoveryModel;

/// [`TcpModel::ccp_record_delay_ns`]'s default, ns: delays uniform in 0-200 µs have the median
/// of the testbed's ring-buffer-to-bridge delay, 95-109 µs (`docs/benchmarks.md` §10), and
/// `docs/calibration.md` checks the spread against the bridge's trace.
pub const CCP_RECORD_DELAY_NS: u64 = 200_000;

/// The simulator's TCP and bottleneck behaviours. [`TcpModel::default`] is the Linux-like one
/// (what the kernel testbed does); [`TcpModel::legacy`] is the simulator before
/// 2026-11-25.
// One switch per modelled behaviour, each independent of the others.
#[allow(clippy::struct_excessive_bools)]
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct TcpModel {
    /// Linux's delayed ACKs at the receiver ([`super::receiver`]: quick-ack mode, an ACK per
    /// two full segments, the 40 ms delayed-ACK timer, immediate ACKs for out-of-order data).
    /// Off: every packet is acknowledged on arrival.
    pub delayed_ack: bool,
    /// Loss recovery of the built-in congestion controls ([`super::recovery`]).
    pub recovery: RecoveryModel,
    /// An `htb`-like token burst on constant-rate bottlenecks, of the testbed's depth
    /// ([`super::link::htb_burst_bytes`]: 1 ms at the rate, at least two full frames). Off:
    /// every frame is serialized at the rate, idle link or not.
    pub link_burst: bool,
    /// Linux's retransmission timeout: `srtt + max(4 rttvar, 200 ms)` (the floor applies to
    /// the variance term, `__tcp_set_rto`). Off: `max(srtt + 4 rttvar, 200 ms)`.
    pub linux_rto: bool,
    /// RACK-TLP loss detection as Linux's ([`super::rack`], RFC 8985): the reordering window
    /// and timer, the tail loss probe. Off: RFC 9002's packet (3) and time (9/8 RTT)
    /// thresholds, checked on ACKs only, and no probe.
    pub rack_tlp: bool,
    /// CCP flows: the largest delay, ns, between an ACK and the CCP runtime handling its
    /// measurements, as the kernel datapath's BPF ring buffer and bridge add one (each ACK's
    /// delay is drawn uniformly from `0..=` this, from the run's seed; the runtime's clock
    /// never goes back, so records read late are handled in a batch). Datapath programs see
    /// it in `Micros`; the agent's answers apply from the next ACK either way. 0: every ACK
    /// is handled at its own time, exactly (the simulator's earlier behaviour); a program
    /// that reports when `Micros` exceeds the last RTT sample then meets exact ties on a path
    /// whose RTT does not vary and reports a round late.
    pub ccp_record_delay_ns: u64,
    /// CCP flows: the datapath runs its programs inside its ACK processing, as ccp-kernel
    /// does (`cong_control` before the kernel sends what the ACK allows), so a window a
    /// program writes itself (in its fold) applies on the ACK that ran it. Off, the default:
    /// as on this project's eBPF datapath, whose programs run on the ACK's record after the
    /// kernel has sent what the ACK allowed, such a window applies from the next ACK.
    pub ccp_inline_programs: bool,
    /// The receiver's window ([`super::rwnd`]: Linux's receive-buffer autotuning), with the
    /// buffer growing to at most this many bytes (`tcp_rmem[2]`; the kernel testbed's is
    /// [`RMEM_MAX_BYTES`]). 0, the default: no receive window, only the congestion window
    /// holds a sender back. Opt-in until Copa's start-up on lossy long paths agrees with the
    /// kernel's with it (`docs/calibration.md`, "The receive window").
    pub rmem_max_bytes: u64,
    /// SACK compression at the receiver, as Linux's (default since 4.20; [`super::receiver`]:
    /// after three duplicate ACKs at one `rcv_nxt`, ACKs for out-of-order data wait up to
    /// 1 ms, or RTT/20, and leave as one). Off: every out-of-order segment is acknowledged at
    /// once (the simulator before 2026-11-29).
    pub sack_compression: bool,
}

/// [`TcpModel::rmem_max_bytes`]'s default: the kernel testbed's `tcp_rmem[2]`
/// (`DEFAULT_SOCKET_BUFFER_MAX_BYTES` of its testbed module), 32 MiB.
pub const RMEM_MAX_BYTES: u64 = 32 << 20;

impl Default for TcpModel {
    fn default() -> Self {
        Self {
            delayed_ack: true,
            recovery: RecoveryModel::Linux,
            link_burst: true,
            linux_rto: true,
            rack_tlp: true,
            ccp_record_delay_ns: CCP_RECORD_DELAY_NS,
            ccp_inline_programs: false,
            rmem_max_bytes: 0,
            sack_compression: true,
        }
    }
}

impl TcpModel {
    /// [`TcpModel::default`] with the kernel testbed's receivers: a receive window whose buffer
    /// autotunes up to [`RMEM_MAX_BYTES`].
    pub fn with_receive_window() -> Self {
        Self {
            rmem_max_bytes: RMEM_MAX_BYTES,
            ..Self::default()
        }
    }

    /// The simulator's model before delayed ACKs, Linux recovery, the token burst, Linux's
    /// RTO, RACK-TLP, SACK compression and the CCP datapath's timing: every packet
    /// acknowledged at once, the time-based one-cut-per-RTT loss response, plain
    /// serialization, `max(srtt + 4 rttvar, 200 ms)`, RFC 9002 thresholds, every CCP record
    /// handled at its ACK's time and a program's window on its own ACK.
    pub fn legacy() -> Self {
        Self {
            delayed_ack: false,
            recovery: RecoveryModel::TimeBased,
            link_burst: false,
            linux_rto: false,
            rack_tlp: false,
            ccp_record_delay_ns: 0,
            ccp_inline_programs: true,
            rmem_max_bytes: 0,
            sack_compression: false,
        }
    }
}
