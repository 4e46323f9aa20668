//! Which TCP behaviours the simulator models: each can be switched off to get the simulator's
//! earlier behaviour (for comparisons; `docs/calibration.md` shows what each one changes).

use super::recovery::RecoveryModel;

/// The simulator's TCP and bottleneck behaviours. [`TcpModel::default`] is the Linux-like one
/// (what the kernel testbed does); [`TcpModel::legacy`] is the simulator before
/// 2026-11-25.
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
}

impl Default for TcpModel {
    fn default() -> Self {
        Self {
            delayed_ack: true,
            recovery: RecoveryModel::Linux,
            link_burst: true,
            linux_rto: true,
        }
    }
}

impl TcpModel {
    /// The simulator's model before delayed ACKs, Linux recovery, the token burst and Linux's
    /// RTO: every packet acknowledged at once, the time-based one-cut-per-RTT loss response,
    /// plain serialization, `max(srtt + 4 rttvar, 200 ms)`.
    pub fn legacy() -> Self {
        Self {
            delayed_ack: false,
            recovery: RecoveryModel::TimeBased,
            link_burst: false,
            linux_rto: false,
        }
    }
}
