//! The simulated TCP receiver: when it acknowledges.
//!
//! With delayed ACKs on ([`crate::sim::TcpModel::delayed_ack`], the default) it follows Linux's
//! receiver (`net/ipv4/tcp_input.c`: `tcp_event_data_recv`, `__tcp_ack_snd_check`,
//! `tcp_send_delayed_ack`; RFC 1122 §4.2.3.2 and RFC 5681 §4.2 state the rule it implements):
//! - **Quick-ack mode**: the first data of a connection, and data after the receiver was idle
//!   longer than its RTO, make the next `min(rcv_wnd / (2 MSS), 16)` ACKs immediate
//!   (`tcp_incr_quickack` with `TCP_MAX_QUICKACKS`; the initial 64 KiB window gives 16).
//! - **Every second full segment**: in-order data is acknowledged at once when more than one
//!   full segment is unacknowledged (`rcv_nxt - rcv_wup > rcv_mss`).
//! - **Out-of-order data** is acknowledged at once, each segment, while the out-of-order queue
//!   is not empty, and so is the segment that fills the last hole; a duplicate segment enters
//!   quick-ack mode (`tcp_data_queue`'s `out_of_window` path).
//! - **SACK compression** ([`Receiver::with_sack_compression`],
//!   [`crate::sim::TcpModel::sack_compression`], on by default as in Linux since 4.20;
//!   `__tcp_ack_snd_check`): the first three ACKs for out-of-order data at one
//!   `rcv_nxt` leave at once (the sender's duplicate-ACK threshold), later ones wait for a
//!   timer of `min(tcp_comp_sack_delay_ns, RTT / 20)` (1 ms on paths longer than 20 ms) or
//!   for the 44th held back (`tcp_comp_sack_nr`), and one ACK then covers them all. Data that
//!   advances `rcv_nxt` is acknowledged at once as before. Left out: the timer's 100 µs slack.
//! - **Otherwise a delayed-ACK timer** of `ato`: `ato` starts at `TCP_ATO_MIN` (40 ms) and
//!   follows the inter-arrival time `m` as Linux estimates it (`m <= 20 ms`: `ato/2 + 20 ms`;
//!   `m < ato`: `ato/2 + m`, at most the RTO); a timer already running keeps its earlier expiry,
//!   and fires at once when it would expire within `ato/4` anyway.
//!
//! With a receive window ([`Receiver::with_window`], [`crate::sim::TcpModel::rmem_max_bytes`],
//! opt-in) every ACK carries the right edge Linux would advertise ([`super::rwnd`]: the window
//! and the receive-buffer autotuning).
//!
//! Left out: `pingpong` (interactive) mode, and jiffy rounding of the timer.
//!
//! With delayed ACKs off every segment is acknowledged on arrival (the simulator's earlier
//! behaviour).

use std::collections::BTreeSet;

use super::rwnd::RecvWindow;

/// `TCP_ATO_MIN` = `TCP_DELACK_MIN`: HZ/25, ns.
pub const ATO_MIN_NS: u64 = 40_000_000;
/// `TCP_MAX_QUICKACKS`.
pub const MAX_QUICKACKS: u32 = 16;
/// Linux's initial receive window with default `tcp_rmem` (64 KiB), bytes: it bounds the
/// quick-ack count at `rcv_wnd / (2 MSS)`.
const INITIAL_RCV_WND_BYTES: u64 = 65_535;
/// `net.ipv4.tcp_comp_sack_delay_ns`'s default: the longest a compressed SACK waits, ns.
pub const COMP_SACK_DELAY_NS: u64 = 1_000_000;
/// `net.ipv4.tcp_comp_sack_nr`'s default: at most this many ACKs are held back in a row.
pub const COMP_SACK_NR: u32 = 44;
/// `TCP_FASTRETRANS_THRESH`: duplicate ACKs sent at once before compression starts.
const FASTRETRANS_THRESH: u32 = 3;

/// What the receiver does with a segment that just arrived.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum AckDecision {
    /// Send an ACK now (covering everything received since the last one).
    Now,
    /// Wait: the delayed-ACK timer runs out at this time, ns (receiver clock).
    Delay(u64),
    /// Wait for the timer already armed, which runs out no later.
    Pending,
}

/// Per-flow receiver state.
#[derive(Debug, Clone)]
pub struct Receiver {
    delayed: bool,
    mss: u64,
    /// Next in-order segment expected.
    rcv_nxt: u64,
    /// Segments received beyond `rcv_nxt`.
    ofo: BTreeSet<u64>,
    /// In-order segments received since the last ACK (Linux's `rcv_nxt - rcv_wup`, in
    /// segments).
    unacked_in_order: u64,
    /// Remaining immediate ACKs of quick-ack mode.
    quick: u32,
    /// Delayed-ACK timeout estimate, ns (0 before the first data).
    ato_ns: u64,
    /// Arrival time of the last in-order data, ns.
    lrcvtime_ns: u64,
    /// When the delayed-ACK timer runs out, if armed.
    timer_ns: Option<u64>,
    /// The receiver's retransmission timeout (idle test and `ato` bound), ns.
    rto_ns: u64,
    /// The receive window, if modelled.
    window: Option<RecvWindow>,
    /// SACK compression's timer delay, ns, if modelled.
    comp_sack_delay_ns: Option<u64>,
    /// ACKs held back since the last one sent (`compressed_ack`).
    compressed: u32,
    /// `rcv_nxt` the duplicate-ACK count is for (`compressed_ack_rcv_nxt`), and the count.
    comp_rcv_nxt: u64,
    dup_acks: u32,
}

impl Receiver {
    /// A receiver for segments of `mss_bytes`; `delayed`: Linux's delayed ACKs (else every
    /// segment is acknowledged at once); `rto_ns`: the receiver's own RTO (Linux: from the
    /// handshake's RTT, at least 200 ms above it).
    pub fn new(mss_bytes: u32, delayed: bool, rto_ns: u64) -> Self {
        Self {
            delayed,
            mss: u64::from(mss_bytes.max(1)),
            rcv_nxt: 0,
            ofo: BTreeSet::new(),
            unacked_in_order: 0,
            quick: 0,
            ato_ns: 0,
            lrcvtime_ns: 0,
            timer_ns: None,
            rto_ns,
            window: None,
            comp_sack_delay_ns: None,
            compressed: 0,
            comp_rcv_nxt: 0,
            dup_acks: 0,
        }
    }

    /// The same receiver compressing SACKs as Linux's does, on a connection whose RTT (the
    /// handshake's, Linux's `srtt` of a receiver that sends no data) is `rtt_ns`.
    #[must_use]
    pub fn with_sack_compression(mut self, rtt_ns: u64) -> Self {
        self.comp_sack_delay_ns = Some(COMP_SACK_DELAY_NS.min(rtt_ns / 20));
        self
    }

    /// The same receiver advertising a receive window whose buffer may grow to
    /// `rmem_max_bytes` (`tcp_rmem[2]`).
    #[must_use]
    pub fn with_window(mut self, rmem_max_bytes: u64) -> Self {
        self.window = Some(RecvWindow::new(self.mss as u32, rmem_max_bytes));
        self
    }

    /// The right edge of the receive window an ACK sent now advertises, in whole segments
    /// (`None`: no window modelled).
    pub fn advertise_segs(&mut self) -> Option<u64> {
        let (nxt, ofo, mss) = (self.rcv_nxt, self.ofo.len() as u64, self.mss);
        self.window
            .as_mut()
            .map(|w| w.advertise(nxt * mss, ofo) / mss)
    }

    /// Updates the receive window for segment `seg` that just arrived at `now_ns`, sent
    /// `rtt_sample_ns` after the ACK it would echo; `prev_nxt`: `rcv_nxt` before it.
    fn window_on_segment(&mut self, prev_nxt: u64, now_ns: u64, rtt_sample_ns: u64) {
        let Some(w) = self.window.as_mut() else {
            return;
        };
        let ofo_end = self.ofo.last().map_or(self.rcv_nxt, |&s| s + 1);
        w.on_segment(
            now_ns,
            rtt_sample_ns,
            self.rcv_nxt > prev_nxt,
            self.rcv_nxt * self.mss,
            self.ofo.len() as u64,
            ofo_end * self.mss,
        );
    }

    /// When the armed delayed-ACK timer runs out, ns.
    pub fn timer_ns(&self) -> Option<u64> {
        self.timer_ns
    }

    /// Next in-order segment expected.
    pub fn rcv_nxt(&self) -> u64 {
        self.rcv_nxt
    }

    fn incr_quickack(&mut self) {
        let q = (INITIAL_RCV_WND_BYTES / (2 * self.mss)).clamp(2, u64::from(MAX_QUICKACKS)) as u32;
        self.quick = self.quick.max(q);
    }

    /// `tcp_event_data_recv`: the `ato` estimate and quick-ack mode on idle.
    fn event_data_recv(&mut self, now_ns: u64) {
        if self.ato_ns == 0 {
            self.incr_quickack();
            self.ato_ns = ATO_MIN_NS;
        } else {
            let m = now_ns.saturating_sub(self.lrcvtime_ns);
            if m <= ATO_MIN_NS / 2 {
                self.ato_ns = self.ato_ns / 2 + ATO_MIN_NS / 2;
            } else if m < self.ato_ns {
                self.ato_ns = (self.ato_ns / 2 + m).min(self.rto_ns);
            } else if m > self.rto_ns {
                self.incr_quickack();
            }
        }
        self.lrcvtime_ns = now_ns;
    }

    /// Segment `seg` arrives at `now_ns`.
    pub fn on_segment(&mut self, seg: u64, now_ns: u64) -> AckDecision {
        self.on_segment_rtt(seg, now_ns, 0)
    }

    /// Segment `seg` arrives at `now_ns`, `rtt_sample_ns` after the receiver sent the ACK it
    /// echoes (the receiver's RTT sample, for its window's autotuning).
    pub fn on_segment_rtt(&mut self, seg: u64, now_ns: u64, rtt_sample_ns: u64) -> AckDecision {
        if self.window.is_none() {
            return self.decide(seg, now_ns);
        }
        let prev_nxt = self.rcv_nxt;
        let fresh = seg >= self.rcv_nxt && !self.ofo.contains(&seg);
        let decision = self.decide(seg, now_ns);
        if fresh {
            self.window_on_segment(prev_nxt, now_ns, rtt_sample_ns);
        }
        decision
    }

    fn decide(&mut self, seg: u64, now_ns: u64) -> AckDecision {
        if !self.delayed {
            if seg == self.rcv_nxt {
                self.rcv_nxt += 1;
                while self.ofo.remove(&self.rcv_nxt) {
                    self.rcv_nxt += 1;
                }
            } else if seg > self.rcv_nxt {
                self.ofo.insert(seg);
            }
            return AckDecision::Now;
        }
        if seg < self.rcv_nxt || self.ofo.contains(&seg) {
            // A duplicate (a spurious retransmission): D-SACK it at once, quick-ack mode.
            self.incr_quickack();
            return AckDecision::Now;
        }
        if seg > self.rcv_nxt {
            self.ofo.insert(seg);
            return self.ofo_ack(now_ns);
        }
        // In order.
        self.event_data_recv(now_ns);
        let had_ofo = !self.ofo.is_empty();
        self.rcv_nxt += 1;
        self.unacked_in_order += 1;
        while self.ofo.remove(&self.rcv_nxt) {
            self.rcv_nxt += 1;
            self.unacked_in_order += 1;
        }
        if had_ofo || self.unacked_in_order >= 2 || self.quick > 0 {
            return AckDecision::Now;
        }
        // tcp_send_delayed_ack (ato = TCP_ATO_MIN in bulk transfer: no max_ato clamp).
        let mut deadline = now_ns + self.ato_ns;
        if let Some(t) = self.timer_ns {
            if t <= now_ns + self.ato_ns / 4 {
                return AckDecision::Now;
            }
            deadline = deadline.min(t);
        }
        self.timer_ns = Some(deadline);
        AckDecision::Delay(deadline)
    }

    /// When an out-of-order segment is acknowledged (`__tcp_ack_snd_check` with a non-empty
    /// out-of-order queue).
    fn ofo_ack(&mut self, now_ns: u64) -> AckDecision {
        let Some(delay) = self.comp_sack_delay_ns else {
            return AckDecision::Now;
        };
        if self.unacked_in_order >= 2 || self.quick > 0 || self.compressed >= COMP_SACK_NR {
            return AckDecision::Now;
        }
        if self.comp_rcv_nxt != self.rcv_nxt {
            self.comp_rcv_nxt = self.rcv_nxt;
            self.dup_acks = 0;
        }
        if self.dup_acks < FASTRETRANS_THRESH {
            self.dup_acks += 1;
            return AckDecision::Now;
        }
        self.compressed += 1;
        match self.timer_ns {
            Some(t) if t <= now_ns + delay => AckDecision::Pending,
            _ => {
                let deadline = now_ns + delay;
                self.timer_ns = Some(deadline);
                AckDecision::Delay(deadline)
            }
        }
    }

    /// An ACK leaves now (immediate or on the timer): resets the counters
    /// (`tcp_event_ack_sent`, `tcp_dec_quickack_mode`).
    pub fn ack_sent(&mut self) {
        self.unacked_in_order = 0;
        self.compressed = 0;
        self.timer_ns = None;
        if self.quick > 0 {
            self.quick -= 1;
            if self.quick == 0 {
                self.ato_ns = ATO_MIN_NS;
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MS: u64 = 1_000_000;

    #[test]
    fn quick_acks_then_every_second_segment() {
        let mut r = Receiver::new(1448, true, 300 * MS);
        // 64 KiB / (2 x 1448) = 22, capped at 16 immediate ACKs.
        for seg in 0..16 {
            assert_eq!(r.on_segment(seg, seg * MS), AckDecision::Now, "seg {seg}");
            r.ack_sent();
        }
        // Then one ACK per two segments.
        assert_eq!(r.on_segment(16, 16 * MS), AckDecision::Delay(56 * MS));
        assert_eq!(r.on_segment(17, 17 * MS), AckDecision::Now);
        r.ack_sent();
        assert_eq!(r.timer_ns(), None);
    }

    #[test]
    fn sack_compression_holds_back_sacks_after_three_duplicates() {
        // A 100-ms path: the timer is min(1 ms, 100 ms / 20) = 1 ms.
        let mut r = Receiver::new(1448, true, 300 * MS).with_sack_compression(100 * MS);
        r.quick = 0;
        r.ato_ns = ATO_MIN_NS;
        let us = MS / 1000;
        // Segment 0 lost; 1-3 are the three duplicate ACKs the sender's threshold needs.
        for seg in 1..=3 {
            assert_eq!(r.on_segment(seg, seg * us), AckDecision::Now, "seg {seg}");
            r.ack_sent();
        }
        // The fourth waits for the 1-ms timer, later ones for the same timer.
        assert_eq!(r.on_segment(4, 4 * us), AckDecision::Delay(MS + 4 * us));
        for seg in 5..=10 {
            assert_eq!(
                r.on_segment(seg, seg * us),
                AckDecision::Pending,
                "seg {seg}"
            );
        }
        assert_eq!(r.timer_ns(), Some(MS + 4 * us));
        r.ack_sent();
        // At most 44 in a row are held back: the 45th out-of-order segment is acknowledged.
        assert!(matches!(r.on_segment(11, 2 * MS), AckDecision::Delay(_)));
        for seg in 12..11 + u64::from(COMP_SACK_NR) {
            assert_eq!(r.on_segment(seg, 2 * MS), AckDecision::Pending, "seg {seg}");
        }
        assert_eq!(
            r.on_segment(11 + u64::from(COMP_SACK_NR), 2 * MS),
            AckDecision::Now
        );
        r.ack_sent();
        // The hole fills: an ACK at once; a new hole behind it gets three immediate ACKs again.
        assert_eq!(r.on_segment(0, 3 * MS), AckDecision::Now);
        r.ack_sent();
        let next = r.rcv_nxt();
        for k in 1..=3 {
            assert_eq!(r.on_segment(next + k, 4 * MS), AckDecision::Now, "dup {k}");
            r.ack_sent();
        }
        assert!(matches!(
            r.on_segment(next + 4, 4 * MS),
            AckDecision::Delay(_)
        ));
    }

    #[test]
    fn sack_compression_waits_a_twentieth_of_a_short_rtt() {
        let mut r = Receiver::new(1448, true, 300 * MS).with_sack_compression(10 * MS);
        r.quick = 0;
        r.ato_ns = ATO_MIN_NS;
        for seg in 1..=3 {
            assert_eq!(r.on_segment(seg, 0), AckDecision::Now);
            r.ack_sent();
        }
        assert_eq!(r.on_segment(4, 0), AckDecision::Delay(MS / 2));
    }

    #[test]
    fn out_of_order_is_acked_at_once_and_the_hole_fill_too() {
        let mut r = Receiver::new(1448, true, 300 * MS);
        r.quick = 0;
        r.ato_ns = ATO_MIN_NS;
        assert_eq!(r.on_segment(1, 0), AckDecision::Now);
        assert_eq!(r.on_segment(2, MS), AckDecision::Now);
        assert_eq!(r.on_segment(0, 2 * MS), AckDecision::Now);
        assert_eq!(r.rcv_nxt(), 3);
        r.ack_sent();
        assert_eq!(r.on_segment(1, 3 * MS), AckDecision::Now, "duplicate");
    }
}
