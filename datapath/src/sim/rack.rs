//! RACK-TLP loss detection (RFC 8985) as Linux implements it, for the simulated sender
//! ([`super::tcp::Sender`] with [`super::TcpModel::rack_tlp`], the default).
//!
//! - **RACK** (`net/ipv4/tcp_recovery.c`): every packet newly acknowledged or SACKed advances
//!   `RACK.xmit_ts` to its send time if it was sent later than the one before
//!   (`tcp_rack_advance`), and `RACK.rtt` is the RTT of the last one (in sequence order:
//!   SACKed ones first, then the cumulatively acknowledged ones, as `tcp_sacktag_write_queue`
//!   runs before `tcp_clean_rtx_queue`). On an ACK that advanced `RACK.xmit_ts`, a packet
//!   still in flight that was sent before it is lost once `RACK.rtt + reo_wnd` has passed
//!   since it was sent (`tcp_rack_detect_loss`); for the others the reordering timer is armed
//!   at the latest such expiry, rounded up to jiffies, plus `TCP_TIMEOUT_MIN`
//!   (`tcp_rack_mark_lost`), and when it fires the same test marks them lost
//!   (`tcp_rack_reo_timeout`).
//! - **The reordering window** (`tcp_rack_reo_wnd`): 0 in recovery or after a timeout, and
//!   while at least `tcp_reordering` (3) segments are SACKed; otherwise `min_rtt / 4`, at most
//!   `srtt` (RFC 8985 §6.2 step 4). The simulator's paths never reorder, so the window is
//!   never widened by D-SACKs (`reo_wnd_steps` stays 1).
//! - **TLP** (`tcp_schedule_loss_probe`, `tcp_send_loss_probe`; RFC 8985 §7): in the Open
//!   state with data in flight, a probe timeout of `2 srtt` rounded up to jiffies, plus
//!   `TCP_TIMEOUT_MIN` (plus the 200 ms minimum RTO instead when one packet is in flight, for
//!   the receiver's delayed ACK), never later than the RTO; it is re-armed on every ACK that
//!   acknowledges data and every send of new data. When it fires, one new segment goes out
//!   beyond the window if there is one, else the last segment is sent again; then the RTO
//!   is armed. At most one probe is outstanding (`tlp_high_seq`), until the cumulative ACK
//!   reaches what was sent when it left.
//!
//! Linux keeps one timer for the RTO, the probe and the reordering timeout
//! (`icsk_retransmit_timer`): an armed reordering timer replaces the others until it fires.
//!
//! Losses the reordering timer marks are not part of any ACK's loss sample: Linux counts an
//! ACK's `rate_sample.losses` from the losses marked while it is processed, and the timer
//! runs between ACKs. A congestion control with `cong_control` (the BPF datapath `ccp`)
//! therefore never hears of them; the simulated CCP datapath reports the same.
//!
//! Left out: the CWR reduction Linux makes when a probe that retransmitted data turns out to
//! have repaired a loss (`tcp_process_tlp_ack`), D-SACK-driven widening of the reordering
//! window, and the RACK timestamp's jiffy granularity.

/// One jiffy at the testbed kernel's `CONFIG_HZ` (250), ns.
pub const JIFFY_NS: u64 = 4_000_000;
/// `TCP_TIMEOUT_MIN`: two jiffies, ns.
pub const TIMEOUT_MIN_NS: u64 = 2 * JIFFY_NS;
/// `sysctl_tcp_reordering`'s default: SACKed segments that make the reordering window 0.
pub const REORDERING: u32 = 3;

/// `ns` rounded up to whole jiffies (`usecs_to_jiffies`).
pub fn jiffies_ceil(ns: u64) -> u64 {
    ns.div_ceil(JIFFY_NS) * JIFFY_NS
}

/// `tcp_rack_reo_wnd` with no reordering seen: 0 in recovery (or after a timeout) and while
/// `sacked_out >= 3`, else `min_rtt / 4` at most `srtt`, ns.
pub fn reo_wnd_ns(min_rtt_ns: u64, srtt_ns: u64, sacked_out: u32, in_recovery: bool) -> u64 {
    if in_recovery || sacked_out >= REORDERING {
        0
    } else {
        (min_rtt_ns / 4).min(srtt_ns)
    }
}

/// The reordering timer's delay for a packet `remaining_ns` from expiry (`tcp_rack_mark_lost`:
/// jiffies rounded up, plus `TCP_TIMEOUT_MIN`), ns.
pub fn reo_timer_ns(remaining_ns: u64) -> u64 {
    jiffies_ceil(remaining_ns) + TIMEOUT_MIN_NS
}

/// `tcp_schedule_loss_probe`'s timeout with `packets_out` packets outstanding, before the cap
/// at the RTO, ns: `2 srtt` (in jiffies) plus `TCP_TIMEOUT_MIN`, or plus the minimum RTO when
/// one packet is out; the initial RTO before the first RTT sample.
pub fn pto_ns(srtt_ns: u64, packets_out: u32, min_rto_ns: u64, initial_rto_ns: u64) -> u64 {
    if srtt_ns == 0 {
        return initial_rto_ns;
    }
    jiffies_ceil(2 * srtt_ns)
        + if packets_out == 1 {
            min_rto_ns
        } else {
            TIMEOUT_MIN_NS
        }
}

/// RACK's per-connection state (`tp->rack`).
#[derive(Debug, Clone, Copy, Default)]
pub struct Rack {
    /// Send time of the most recently sent packet delivered so far (`RACK.xmit_ts`), ns.
    xmit_ns: u64,
    /// Its packet number (orders packets sent at the same time; `RACK.end_seq`).
    pn: Option<u64>,
    /// RTT of the last packet delivered (`RACK.rtt`), ns.
    rtt_ns: u64,
    /// Advanced since the last detection (`tp->rack.advanced`).
    advanced: bool,
}

impl Rack {
    /// A delivered packet, sent at `sent_ns` as packet `pn`, at `now_ns` (`tcp_rack_advance`).
    pub fn advance(&mut self, sent_ns: u64, pn: u64, now_ns: u64) {
        self.advanced = true;
        self.rtt_ns = now_ns.saturating_sub(sent_ns);
        let later = match self.pn {
            None => true,
            Some(p) => sent_ns > self.xmit_ns || (sent_ns == self.xmit_ns && pn > p),
        };
        if later {
            self.xmit_ns = sent_ns;
            self.pn = Some(pn);
        }
    }

    /// Sets `RACK.rtt` to the last delivered packet's RTT in Linux's processing order, ns.
    pub fn set_rtt_ns(&mut self, rtt_ns: u64) {
        self.rtt_ns = rtt_ns;
    }

    /// Whether detection should run (and clears the flag), as `tcp_rack_mark_lost`.
    pub fn take_advanced(&mut self) -> bool {
        std::mem::take(&mut self.advanced)
    }

    /// Whether packet `pn`, sent at `sent_ns`, left before the most recently sent delivered
    /// one.
    pub fn sent_before_latest(&self, sent_ns: u64, pn: u64) -> bool {
        match self.pn {
            None => false,
            Some(p) => self.xmit_ns > sent_ns || (self.xmit_ns == sent_ns && p > pn),
        }
    }

    /// How long until a packet sent at `sent_ns` counts as lost with window `reo_wnd_ns`, at
    /// `now_ns` (`tcp_rack_skb_timeout`; 0 or less: lost now), ns.
    pub fn remaining_ns(&self, sent_ns: u64, reo_wnd_ns: u64, now_ns: u64) -> i64 {
        let deadline = sent_ns
            .saturating_add(self.rtt_ns)
            .saturating_add(reo_wnd_ns);
        deadline as i64 - now_ns as i64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    /// RFC 8985 §6.2 step 4 and Linux's `tcp_rack_reo_wnd`: a quarter of the minimum RTT
    /// (capped at srtt) while fewer than three segments are SACKed outside recovery, none
    /// otherwise.
    #[test]
    fn the_reordering_window_is_a_quarter_of_min_rtt_outside_recovery() {
        assert_eq!(reo_wnd_ns(40 * MS, 50 * MS, 1, false), 10 * MS);
        assert_eq!(
            reo_wnd_ns(40 * MS, 5 * MS, 1, false),
            5 * MS,
            "at most srtt"
        );
        assert_eq!(reo_wnd_ns(40 * MS, 50 * MS, 3, false), 0, "DupThresh SACKs");
        assert_eq!(reo_wnd_ns(40 * MS, 50 * MS, 1, true), 0, "in recovery");
    }

    /// RFC 8985 §7.2: PTO = 2 srtt, plus the delayed-ACK allowance when one packet is out
    /// (Linux: the minimum RTO), plus Linux's two-jiffy timer floor otherwise.
    #[test]
    fn the_probe_timeout_is_two_srtt() {
        let (min_rto, init) = (200 * MS, 1000 * MS);
        assert_eq!(pto_ns(20 * MS, 10, min_rto, init), 40 * MS + TIMEOUT_MIN_NS);
        assert_eq!(pto_ns(20 * MS, 1, min_rto, init), 240 * MS);
        assert_eq!(pto_ns(21 * MS, 10, min_rto, init), 44 * MS + TIMEOUT_MIN_NS);
        assert_eq!(pto_ns(0, 10, min_rto, init), init);
    }

    /// RFC 8985 §6.2: a packet sent before the most recently sent delivered one is lost once
    /// `RACK.rtt + reo_wnd` has passed since it was sent.
    #[test]
    fn a_packet_is_lost_one_rack_rtt_plus_the_window_after_it_left() {
        let mut r = Rack::default();
        assert!(!r.sent_before_latest(0, 0), "nothing delivered yet");
        // Packet 1 (sent at 1 ms) is SACKed at 21 ms: RACK.rtt 20 ms.
        r.advance(MS, 1, 21 * MS);
        assert!(r.take_advanced() && !r.take_advanced());
        assert!(r.sent_before_latest(0, 0));
        assert!(!r.sent_before_latest(2 * MS, 2));
        // Packet 0 (sent at 0) with a 5 ms window: lost at 25 ms.
        assert_eq!(r.remaining_ns(0, 5 * MS, 21 * MS), 4 * MS as i64);
        assert_eq!(r.remaining_ns(0, 5 * MS, 25 * MS), 0);
        // A packet delivered later but sent earlier does not move RACK.xmit_ts back.
        r.advance(0, 0, 30 * MS);
        assert!(r.sent_before_latest(MS / 2, 5));
        assert_eq!(r.rtt_ns, 30 * MS, "RACK.rtt is the last delivery's");
    }
}
