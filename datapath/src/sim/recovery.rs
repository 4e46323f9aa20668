//! Linux's loss recovery around the built-in congestion controls (`native-reno`,
//! `native-cubic` and cross traffic), with [`RecoveryModel::Linux`] (the default).
//!
//! The kernel, not the congestion control, runs recovery (`tcp_fastretrans_alert`,
//! `tcp_cong_control`); the congestion control gives a slow-start threshold once per
//! recovery (`ssthresh`) and grows the window outside it (`cong_avoid`). This module is that
//! state machine:
//! - **Open -> Recovery** when an ACK marks packets lost (the sender's RACK-like detection,
//!   [`super::tcp`]): `ssthresh` from the congestion control, `prior_cwnd` = the window,
//!   `high_seq` = the next new segment (`snd_nxt`).
//! - **Sequence-based, one reduction per recovery** (RFC 6582 §3.2 step 4, Linux's
//!   `high_seq`): further losses before the cumulative ACK passes `high_seq` do not reduce
//!   again; when it passes, recovery ends with `cwnd = ssthresh` (`tcp_end_cwnd_reduction`).
//! - **Proportional Rate Reduction** (RFC 6937, as `tcp_cwnd_reduction` in Linux 6.x): on each
//!   ACK in recovery, with `pipe` the packets in flight, `delta = ssthresh - pipe`; if
//!   `delta < 0`, `sndcnt = ceil(ssthresh * prr_delivered / prior_cwnd) - prr_out`; otherwise
//!   (slow-start reduction bound) `sndcnt = min(delta, max(prr_delivered - prr_out,
//!   newly_delivered) + 1 if the ACK advanced snd_una with no new loss)`; at least one segment
//!   while nothing was sent yet (the fast retransmit); `cwnd = pipe + sndcnt`.
//! - **Open/Recovery -> Loss** on a retransmission timeout (`tcp_enter_loss`): `ssthresh`
//!   from the congestion control when the flow was in Open (not again within a recovery or a
//!   loss episode), `cwnd = 1`, `high_seq = snd_nxt`; slow start in Loss; back to Open when
//!   `high_seq` is acknowledged.
//!
//! [`RecoveryModel::TimeBased`] keeps the simulator's earlier rule: the congestion control
//! cuts on every loss signal at most once per smoothed RTT and sets the window at once.
//!
//! Outside recovery the window grows by the packets an ACK newly delivers (`acked_sacked`,
//! each packet once) and only on ACKs that advance `snd_una` (`tcp_may_raise_cwnd`).
//!
//! Left out: the `Disorder` and `CWR` states (no ECN), undo (`tcp_try_undo_*`, F-RTO and
//! D-SACK based: spurious retransmissions are not detected), and `tcp_is_cwnd_limited` (flows
//! here are window-limited whenever they have data).

use super::cubic::BuiltinCubic;
use super::tcp::AckOutcome;

/// How the built-in congestion controls recover from loss.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum RecoveryModel {
    /// Linux: sequence-based recovery (one reduction until `high_seq` is acknowledged) with
    /// Proportional Rate Reduction (RFC 6937).
    #[default]
    Linux,
    /// The earlier model: a loss signal cuts the window at once, at most once per smoothed RTT.
    TimeBased,
}

/// Linux's congestion-control state (`icsk_ca_state`), the states modelled.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum CaState {
    /// No recovery.
    Open = 0,
    /// Fast recovery after packets were marked lost.
    Recovery = 3,
    /// After a retransmission timeout.
    Loss = 4,
}

/// Linux Reno (`tcp_reno_cong_avoid`, `tcp_reno_ssthresh`), in segments.
#[derive(Debug, Clone)]
pub struct LinuxReno {
    cwnd: f64,
    ssthresh: f64,
}

impl LinuxReno {
    /// A fresh flow with an initial window of `init_cwnd` segments.
    pub fn new(init_cwnd: f64) -> Self {
        Self {
            cwnd: init_cwnd.max(1.0),
            ssthresh: f64::INFINITY,
        }
    }

    /// `tcp_slow_start` to `ssthresh`, the rest by `tcp_cong_avoid_ai` (one segment per
    /// window acknowledged).
    fn cong_avoid(&mut self, acked: f64) -> f64 {
        let mut acked = acked;
        if self.cwnd < self.ssthresh {
            let grow = acked.min(self.ssthresh - self.cwnd);
            self.cwnd += grow;
            acked -= grow;
        }
        if acked > 0.0 {
            self.cwnd += acked / self.cwnd.floor().max(1.0);
        }
        self.cwnd
    }

    /// `tcp_reno_ssthresh`: half the window, at least 2.
    fn ssthresh_on_loss(&mut self) -> f64 {
        self.ssthresh = (self.cwnd.floor() / 2.0).floor().max(2.0);
        self.ssthresh
    }
}

/// A built-in congestion control as Linux's `tcp_congestion_ops` see it.
#[derive(Debug, Clone)]
pub enum LinuxCc {
    /// `reno`.
    Reno(LinuxReno),
    /// `cubic` (with `HyStart`).
    Cubic(BuiltinCubic),
}

impl LinuxCc {
    fn cwnd(&self) -> f64 {
        match self {
            LinuxCc::Reno(r) => r.cwnd,
            LinuxCc::Cubic(c) => c.cwnd_segments(),
        }
    }

    fn set_cwnd(&mut self, cwnd: f64) {
        match self {
            LinuxCc::Reno(r) => r.cwnd = cwnd.max(1.0),
            LinuxCc::Cubic(c) => c.set_cwnd_segments(cwnd),
        }
    }

    fn ssthresh(&self) -> f64 {
        match self {
            LinuxCc::Reno(r) => r.ssthresh,
            LinuxCc::Cubic(c) => c.ssthresh_segments(),
        }
    }

    fn ssthresh_on_loss(&mut self) -> f64 {
        match self {
            LinuxCc::Reno(r) => r.ssthresh_on_loss(),
            LinuxCc::Cubic(c) => c.ssthresh_on_loss(),
        }
    }

    fn cong_avoid(&mut self, out: &AckOutcome, acked: f64, now_ns: u64) {
        match self {
            LinuxCc::Reno(r) => {
                r.cong_avoid(acked);
            }
            LinuxCc::Cubic(c) => {
                c.cong_avoid(&out.prims, acked, now_ns);
            }
        }
    }
}

/// What the sender looks like after an ACK, for the recovery state machine.
#[derive(Debug, Clone, Copy, Default)]
pub struct SenderView {
    /// Lowest segment not yet acknowledged (`snd_una`).
    pub snd_una: u64,
    /// Next new segment (`snd_nxt`).
    pub snd_nxt: u64,
    /// Packets in flight (Linux's `tcp_packets_in_flight`: sent, not acknowledged, not
    /// marked lost).
    pub pipe: u64,
    /// Packets sent so far (new and retransmitted).
    pub sent_total: u64,
}

/// Proportional Rate Reduction's state for one recovery episode.
#[derive(Debug, Clone, Copy, Default)]
pub struct Prr {
    /// `ssthresh`, segments.
    pub ssthresh: u64,
    /// The window when recovery began (`prior_cwnd`, RFC 6937's `RecoverFS`), segments.
    pub prior_cwnd: u64,
    /// Segments delivered during recovery.
    pub delivered: u64,
    /// Segments sent during recovery.
    pub out: u64,
}

impl Prr {
    /// One ACK in recovery (`tcp_cwnd_reduction`): `newly_delivered` segments acknowledged or
    /// SACKed by it, `newly_lost` marked lost by it, `una_advanced` if it moved `snd_una`,
    /// `pipe` packets in flight after it. Returns the window, segments (`None`: an ACK that
    /// delivered nothing leaves the window alone).
    pub fn on_ack(
        &mut self,
        newly_delivered: u64,
        newly_lost: u64,
        una_advanced: bool,
        pipe: u64,
    ) -> Option<u64> {
        if newly_delivered == 0 || self.prior_cwnd == 0 {
            return None;
        }
        self.delivered += newly_delivered;
        let sndcnt = if pipe > self.ssthresh {
            (self.ssthresh * self.delivered)
                .div_ceil(self.prior_cwnd)
                .saturating_sub(self.out)
        } else {
            let delta = self.ssthresh - pipe;
            let mut n = self.delivered.saturating_sub(self.out).max(newly_delivered);
            if una_advanced && newly_lost == 0 {
                n += 1;
            }
            n.min(delta)
        };
        let sndcnt = sndcnt.max(u64::from(self.out == 0));
        Some(pipe + sndcnt)
    }
}

/// Linux's recovery around one built-in congestion control.
#[derive(Debug, Clone)]
pub struct LinuxTcp {
    cc: LinuxCc,
    mss: u32,
    state: CaState,
    high_seq: u64,
    prr: Prr,
    /// `sent_total` when recovery began.
    sent_at_recovery: u64,
}

impl LinuxTcp {
    /// Wraps `cc` for a flow with segments of `mss_bytes`.
    pub fn new(cc: LinuxCc, mss_bytes: u32) -> Self {
        Self {
            cc,
            mss: mss_bytes.max(1),
            state: CaState::Open,
            high_seq: 0,
            prr: Prr::default(),
            sent_at_recovery: 0,
        }
    }

    /// The congestion state.
    pub fn state(&self) -> CaState {
        self.state
    }

    /// The window, bytes (whole segments, as Linux's `snd_cwnd`).
    pub fn cwnd_bytes(&self) -> u32 {
        let pkts = self.cc.cwnd().floor().max(1.0);
        (pkts * f64::from(self.mss)).min(f64::from(u32::MAX)) as u32
    }

    /// One ACK (after the sender processed it); returns the window, bytes.
    pub fn on_ack(&mut self, out: &AckOutcome, v: SenderView, now_ns: u64) -> u32 {
        let p = &out.prims;
        // `acked_sacked`: each packet once, when it is first acknowledged or SACKed.
        let delivered = u64::from(out.delivered_pkts);
        let lost = u64::from(p.lost_pkts_sample);
        // Recovery or Loss ends once `high_seq` is acknowledged.
        if self.state != CaState::Open && v.snd_una >= self.high_seq {
            if self.state == CaState::Recovery && self.cc.ssthresh().is_finite() {
                let ss = self.cc.ssthresh();
                self.cc.set_cwnd(ss);
            }
            self.state = CaState::Open;
        }
        if self.state == CaState::Open && lost > 0 {
            self.enter_recovery(v);
        }
        if self.state == CaState::Recovery {
            self.prr.out = v.sent_total - self.sent_at_recovery;
            if let Some(c) = self
                .prr
                .on_ack(delivered, lost, p.packets_acked > 0, v.pipe)
            {
                self.cc.set_cwnd(c as f64);
            }
        } else if delivered > 0 && p.packets_acked > 0 {
            // `tcp_may_raise_cwnd`: grow only on an ACK that advances `snd_una`.
            self.cc.cong_avoid(out, delivered as f64, now_ns);
        }
        self.cwnd_bytes()
    }

    /// RACK's reordering timer marked `lost` packets between ACKs (`tcp_rack_reo_timeout`):
    /// from Open, recovery starts as on an ACK, and PRR runs once as Linux calls
    /// `tcp_cwnd_reduction(sk, 1, lost, 0)`. Returns the window, bytes.
    pub fn on_timer_losses(&mut self, v: SenderView, lost: u64) -> u32 {
        if self.state == CaState::Open {
            self.enter_recovery(v);
        }
        if self.state == CaState::Recovery {
            self.prr.out = v.sent_total - self.sent_at_recovery;
            if let Some(c) = self.prr.on_ack(1, lost, false, v.pipe) {
                self.cc.set_cwnd(c as f64);
            }
        }
        self.cwnd_bytes()
    }

    fn enter_recovery(&mut self, v: SenderView) {
        self.prr = Prr {
            ssthresh: self.cc.ssthresh_on_loss() as u64,
            prior_cwnd: self.cc.cwnd().floor().max(1.0) as u64,
            delivered: 0,
            out: 0,
        };
        self.sent_at_recovery = v.sent_total;
        self.high_seq = v.snd_nxt;
        self.state = CaState::Recovery;
    }

    /// A retransmission timeout fired (the sender marked everything lost); returns the window,
    /// bytes.
    pub fn on_timeout(&mut self, v: SenderView, now_ns: u64) -> u32 {
        let cut = self.state == CaState::Open;
        match &mut self.cc {
            LinuxCc::Reno(r) => {
                if cut {
                    r.ssthresh_on_loss();
                }
                r.cwnd = 1.0;
            }
            LinuxCc::Cubic(c) => c.on_timeout(cut, now_ns, v.pipe * u64::from(self.mss)),
        }
        self.high_seq = v.snd_nxt;
        self.state = CaState::Loss;
        self.cwnd_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// RFC 6937 §5, first example (one segment lost from a flight of 20, `ssthresh` = 10,
    /// every ACK delivering one segment), without limited transmit: the ACK that starts
    /// recovery sends the retransmission; while `pipe` is above `ssthresh`, PRR has sent
    /// `ceil(prr_delivered x 10 / 20)` in all (one segment per two ACKs); then it holds `pipe`
    /// at `ssthresh` until recovery ends.
    #[test]
    fn prr_single_loss_sends_in_proportion_and_ends_at_ssthresh() {
        let mut prr = Prr {
            ssthresh: 10,
            prior_cwnd: 20,
            ..Prr::default()
        };
        // Segments 0..19 in flight; ACKs 1 and 2 SACK segments 1 and 2 (nothing sent); ACK 3
        // SACKs segment 3 and marks segment 0 lost.
        let mut pipe: u64 = 20 - 2 - 1;
        let mut sends = Vec::new();
        for k in 1..=17u64 {
            pipe -= 1;
            let above = pipe > 10;
            let cwnd = prr.on_ack(1, 0, false, pipe).expect("delivered");
            let n = cwnd - pipe;
            prr.out += n;
            pipe += n;
            sends.push(n);
            if above {
                assert_eq!(prr.out, (k * 10).div_ceil(20), "ACK {k}");
            }
            assert!(pipe >= 10, "never below ssthresh");
        }
        assert_eq!(sends[..4], [1, 0, 1, 0], "R, then every second ACK");
        assert_eq!(pipe, 10, "pipe = ssthresh when recovery ends");
    }

    /// RFC 6937 §5, second example (a burst of losses leaves `pipe` far below `ssthresh`):
    /// the slow-start reduction bound sends what was delivered plus one segment per ACK that
    /// advances `snd_una` (Linux's PRR-SSRB), never past `ssthresh`.
    #[test]
    fn prr_after_a_burst_of_losses_slow_starts_to_ssthresh() {
        let mut prr = Prr {
            ssthresh: 10,
            prior_cwnd: 20,
            ..Prr::default()
        };
        let mut pipe: u64 = 4;
        let mut sends = Vec::new();
        while pipe < 10 {
            pipe -= 1;
            let cwnd = prr.on_ack(1, 0, true, pipe).expect("delivered");
            let n = cwnd - pipe;
            prr.out += n;
            pipe += n;
            sends.push(n);
        }
        assert_eq!(sends, [2, 2, 2, 2, 2, 2], "delivered + 1 per ACK");
        assert_eq!(pipe, 10);
        // A new loss on the ACK: no extra segment.
        pipe -= 1;
        let cwnd = prr.on_ack(1, 1, true, pipe).expect("delivered");
        assert_eq!(cwnd, 10);
    }

    fn ack(acked: u32, sacked: u32, lost: u32) -> AckOutcome {
        let mut out = AckOutcome::default();
        out.prims.packets_acked = acked;
        out.prims.packets_misordered = sacked;
        out.prims.lost_pkts_sample = lost;
        out.delivered_pkts = acked + sacked;
        out
    }

    /// RFC 6582 §3.2 / Linux `high_seq`: losses found before the recovery point is
    /// acknowledged belong to the same episode and do not reduce the window again; recovery
    /// ends with `cwnd = ssthresh`, and a loss after it starts a new episode.
    #[test]
    fn one_reduction_per_recovery_episode_by_sequence() {
        let mut t = LinuxTcp::new(LinuxCc::Reno(LinuxReno::new(100.0)), 1000);
        if let LinuxCc::Reno(r) = &mut t.cc {
            r.ssthresh = 50.0; // congestion avoidance
        }
        let mut v = SenderView {
            snd_una: 0,
            snd_nxt: 100,
            pipe: 100,
            sent_total: 100,
        };
        // A loss: recovery to high_seq = 100 with ssthresh 50.
        v.pipe = 96;
        t.on_ack(&ack(0, 3, 1), v, 0);
        assert_eq!(t.state(), CaState::Recovery);
        assert_eq!(t.prr.ssthresh, 50);
        // Three more losses in the same window, much later than an RTT: no new reduction.
        for i in 0..3u64 {
            v.pipe = 90 - 4 * i;
            t.on_ack(&ack(0, 3, 1), v, 1_000_000_000 * (i + 1));
            assert_eq!(t.prr.ssthresh, 50, "still the first episode");
        }
        // The recovery point is acknowledged: back to Open at ssthresh.
        v.snd_una = 100;
        v.snd_nxt = 140;
        v.pipe = 40;
        let cwnd = t.on_ack(&ack(20, 0, 0), v, 5_000_000_000);
        assert_eq!(t.state(), CaState::Open);
        assert!(
            (50_000..51_000).contains(&cwnd),
            "cwnd = ssthresh, then CA: {cwnd}"
        );
        // A new loss: a second episode, half of 50.
        v.pipe = 38;
        t.on_ack(&ack(0, 1, 1), v, 5_000_000_001);
        assert_eq!(t.state(), CaState::Recovery);
        assert_eq!(t.prr.ssthresh, 25);
    }
}
