//! The shared core of the window-based, loss-driven algorithms (Reno, Cubic, Vegas, Westwood+,
//! Illinois), and their window arithmetic.
//!
//! [`WindowCore`] is one flow of such an algorithm: the state all of them keep
//! ([`WindowState`]: window, slow-start threshold, MSS, smoothed and minimum RTT, the recovery
//! episode, the last loss, whether the first slow start is still on) and the report path they
//! share, while a [`WindowRule`] holds what makes each one itself (quinn-proto's controller
//! shape; neqo's `ClassicCongestionControl` over a `WindowAdjustment`). Per report:
//!
//! 1. time, the RTT estimator and the delivery rate advance, then the rule samples the report
//!    ([`WindowRule::on_measurement`]);
//! 2. outside recovery ([`crate::recovery`]), and if the rule lets the report
//!    ([`WindowRule::grows_on`]), the acknowledged bytes grow the window
//!    ([`WindowRule::on_ack`]: by default slow start up to `ssthresh`, RFC 5681 §3.1 with
//!    RFC 3465 byte counting, and the rest to [`WindowRule::on_ack_in_avoidance`]);
//! 3. a timeout sets `ssthresh` by the rule's decrease ([`WindowRule::ssthresh_on_congestion`]),
//!    drops the window to the loss window and starts slow start over
//!    ([`WindowRule::on_timeout`]); otherwise a loss outside recovery sets `ssthresh` the same
//!    way, lowers the window ([`WindowRule::on_recovery_start`]: to `ssthresh` by default) and
//!    enters recovery. Either ends the first slow start; a loss inside recovery only records
//!    its time.
//!
//! A handoff is adopted the same way by all (once the first slow start is over, the flow
//! continues in avoidance from the handed-over window) and exported the same way
//! ([`WindowRule::handoff`] may put a rule's own estimate in). All of them install one program,
//! per-RTT reports that come at once on a loss, and clear pacing; with
//! [`WindowCore::with_ack_clock`] they install that program's ACK-clocked twin
//! ([`PER_RTT_URGENT_CLOCKED`]: slow start and the first answer to a loss in the datapath),
//! and take the window from the reports while the datapath slow-starts.
//!
//! Windows are counted in one of two [`WindowUnit`]s: [`Segments`] (fractional, `f64`; Cubic,
//! Vegas, Westwood+, Illinois), floored at 2 segments and capped at 2^32 - 1 bytes with no NaN
//! escaping, or [`Bytes`] (`u32`; Reno).

use std::fmt::Debug;

use crate::api::{Algorithm, Control, FlowStart, Handoff, Measurement, Pacing};
use crate::programs::{PER_RTT_URGENT, PER_RTT_URGENT_CLOCKED, ProgramSpec};
use crate::recovery::Recovery;
use crate::rtt::RttEstimator;

/// Programs every window-based algorithm installs.
pub(crate) static PROGRAMS: [&ProgramSpec; 2] = [&PER_RTT_URGENT, &PER_RTT_URGENT_CLOCKED];

/// Smallest window, segments (the suite's floor; RFC 5681's loss window is 1).
pub const MIN_CWND_SEGMENTS: f64 = 2.0;

/// What makes one window-based algorithm itself; [`WindowCore`] runs the rest.
pub trait WindowRule: Debug + Clone + Send {
    /// The unit the window is counted in.
    type Unit: WindowUnit;

    /// Name the algorithm is registered under.
    const NAME: &'static str;

    /// Whether only a loss sets this rule's slow-start threshold (the loss-based rules: RFC
    /// 5681 §3.1 starts `ssthresh` arbitrarily high and lowers it on congestion). Such a rule
    /// taking over a flow whose predecessor left its first slow start without a loss (on a
    /// delay or bandwidth estimate: Copa, BBR, Vegas, Vivace) keeps slow-starting from the
    /// handed-over window. A handoff still in its first slow start is taken as it is, with
    /// its threshold (C2TCP restarts its Cubic so, towards a threshold it set).
    const SLOW_START_UNTIL_LOSS: bool = false;

    /// Resets the rule for a flow taken over from `h` (`w` has adopted it already).
    fn adopt(&mut self, w: &WindowState<Self::Unit>, h: &Handoff);

    /// Samples a report, after the core's RTT and delivery-rate updates and before growth.
    fn on_measurement(&mut self, _w: &WindowState<Self::Unit>, _m: &Measurement) {}

    /// Whether a report's acknowledged bytes grow the window outside recovery (all do, by
    /// default).
    fn grows_on(&self, _m: &Measurement) -> bool {
        true
    }

    /// Growth outside recovery for `acked_bytes` acknowledged in order at `now_us`. By default
    /// slow start up to `ssthresh` ([`WindowUnit::slow_start`]), then whatever is left, if
    /// anything, to [`Self::on_ack_in_avoidance`].
    fn on_ack(&mut self, w: &mut WindowState<Self::Unit>, acked_bytes: u64, now_us: u64) {
        let acked = w.slow_start(Self::Unit::acked(acked_bytes, w.mss_bytes));
        if acked > <Self::Unit as WindowUnit>::Acked::default() {
            self.on_ack_in_avoidance(w, acked, now_us);
        }
    }

    /// Congestion avoidance for what slow start left of an acknowledgement (more than nothing).
    /// Called by the default [`Self::on_ack`] only; a rule that replaces it need not have one.
    fn on_ack_in_avoidance(
        &mut self,
        _w: &mut WindowState<Self::Unit>,
        _acked: <Self::Unit as WindowUnit>::Acked,
        _now_us: u64,
    ) {
    }

    /// The multiplicative decrease: `ssthresh` after a loss outside recovery or a timeout, from
    /// the window at that moment.
    fn ssthresh_on_congestion(
        &mut self,
        w: &WindowState<Self::Unit>,
    ) -> <Self::Unit as WindowUnit>::Window;

    /// The window on entering recovery at `now_us`, once `ssthresh` is set: `ssthresh`, by
    /// default.
    fn on_recovery_start(&mut self, w: &mut WindowState<Self::Unit>, _now_us: u64) {
        w.cwnd = w.ssthresh;
    }

    /// After a timeout has set `ssthresh` and put the window at the loss window.
    fn on_timeout(&mut self, _w: &mut WindowState<Self::Unit>) {}

    /// Adjusts the handoff the core exports (e.g. with a rule's own RTT or rate estimate).
    fn handoff(&self, _w: &WindowState<Self::Unit>, _h: &mut Handoff) {}
}

/// How a window is counted: the arithmetic that depends on the unit.
pub trait WindowUnit: Debug + Clone + Copy + Send + 'static {
    /// A window or threshold.
    type Window: Copy + PartialOrd + Debug + Send;
    /// Acknowledged data.
    type Acked: Copy + PartialOrd + Default + Debug;

    /// The window and threshold a flow adopts from `h`: once the first slow start is over, the
    /// flow continues in avoidance from the handed-over window.
    fn adopt(h: &Handoff, mss_bytes: u32) -> (Self::Window, Self::Window);

    /// The loss window: 2 segments, the suite's floor (RFC 5681 says 1).
    fn loss_window(mss_bytes: u32) -> Self::Window;

    /// `bytes` acknowledged, in this unit.
    fn acked(bytes: u64, mss_bytes: u32) -> Self::Acked;

    /// Slow start (RFC 5681 §3.1 with RFC 3465 byte counting): below `ssthresh`, `cwnd` grows by
    /// what was acknowledged, up to `ssthresh`. Returns what is left.
    fn slow_start(
        cwnd: &mut Self::Window,
        ssthresh: Self::Window,
        acked: Self::Acked,
        mss_bytes: u32,
    ) -> Self::Acked;

    /// A window as bytes for the datapath.
    fn cwnd_bytes(cwnd: Self::Window, mss_bytes: u32) -> u32;

    /// A threshold as bytes for a handoff (`u32::MAX`: none).
    fn ssthresh_bytes(ssthresh: Self::Window, mss_bytes: u32) -> u32;

    /// The bytes a window holds (the data outstanding at a reduction).
    fn window_bytes(cwnd: Self::Window, mss_bytes: u32) -> u64;

    /// A window the datapath reports, in bytes, in this unit (floored and capped as any).
    fn from_bytes(bytes: u64, mss_bytes: u32) -> Self::Window;
}

/// Windows in fractional segments (`f64`), within [2, (2^32 - 1) / MSS]; an infinite
/// threshold is none.
#[derive(Debug, Clone, Copy)]
pub struct Segments;

impl WindowUnit for Segments {
    type Window = f64;
    type Acked = f64;

    fn adopt(h: &Handoff, mss_bytes: u32) -> (f64, f64) {
        let cwnd = clamp(segments(u64::from(h.cwnd_bytes), mss_bytes), mss_bytes);
        let ssthresh = ssthresh_from_bytes(h.ssthresh_bytes, mss_bytes);
        let ssthresh = if h.in_first_slow_start {
            ssthresh
        } else {
            ssthresh.min(cwnd)
        };
        (cwnd, ssthresh)
    }

    fn loss_window(_mss_bytes: u32) -> f64 {
        MIN_CWND_SEGMENTS
    }

    fn acked(bytes: u64, mss_bytes: u32) -> f64 {
        segments(bytes, mss_bytes)
    }

    fn slow_start(cwnd: &mut f64, ssthresh: f64, mut acked: f64, mss_bytes: u32) -> f64 {
        if *cwnd < ssthresh {
            let grow = acked.min(ssthresh - *cwnd);
            *cwnd = clamp(*cwnd + grow, mss_bytes);
            acked -= grow;
        }
        acked
    }

    fn cwnd_bytes(cwnd: f64, mss_bytes: u32) -> u32 {
        bytes(cwnd, mss_bytes)
    }

    fn ssthresh_bytes(ssthresh: f64, mss_bytes: u32) -> u32 {
        ssthresh_to_bytes(ssthresh, mss_bytes)
    }

    fn window_bytes(cwnd: f64, mss_bytes: u32) -> u64 {
        (cwnd * f64::from(mss_bytes)) as u64
    }

    fn from_bytes(bytes: u64, mss_bytes: u32) -> f64 {
        clamp(segments(bytes, mss_bytes), mss_bytes)
    }
}

/// Windows in whole bytes (`u32`), at least 2 MSS (saturating); `u32::MAX` as a threshold is
/// none.
#[derive(Debug, Clone, Copy)]
pub struct Bytes;

impl WindowUnit for Bytes {
    type Window = u32;
    type Acked = u64;

    fn adopt(h: &Handoff, mss_bytes: u32) -> (u32, u32) {
        let cwnd = h.cwnd_bytes.max(Self::loss_window(mss_bytes));
        let ssthresh = if h.in_first_slow_start {
            h.ssthresh_bytes
        } else {
            h.ssthresh_bytes.min(cwnd)
        };
        (cwnd, ssthresh)
    }

    fn loss_window(mss_bytes: u32) -> u32 {
        mss_bytes.saturating_mul(MIN_CWND_SEGMENTS as u32)
    }

    fn acked(bytes: u64, _mss_bytes: u32) -> u64 {
        bytes
    }

    fn slow_start(cwnd: &mut u32, ssthresh: u32, mut acked: u64, _mss_bytes: u32) -> u64 {
        if *cwnd < ssthresh {
            let room = u64::from(ssthresh - *cwnd);
            let grow = acked.min(room);
            *cwnd = clamp_u32(u64::from(*cwnd) + grow);
            acked -= grow;
        }
        acked
    }

    fn cwnd_bytes(cwnd: u32, _mss_bytes: u32) -> u32 {
        cwnd
    }

    fn ssthresh_bytes(ssthresh: u32, _mss_bytes: u32) -> u32 {
        ssthresh
    }

    fn window_bytes(cwnd: u32, _mss_bytes: u32) -> u64 {
        u64::from(cwnd)
    }

    fn from_bytes(bytes: u64, mss_bytes: u32) -> u32 {
        clamp_u32(bytes).max(Self::loss_window(mss_bytes))
    }
}

/// The state every window-based algorithm keeps, handed to its [`WindowRule`]'s hooks.
#[derive(Debug, Clone)]
pub struct WindowState<U: WindowUnit> {
    /// Segment size, bytes (at least 1).
    pub(crate) mss_bytes: u32,
    /// Congestion window.
    pub(crate) cwnd: U::Window,
    /// Slow-start threshold.
    pub(crate) ssthresh: U::Window,
    pub(crate) recovery: Recovery,
    pub(crate) last_loss_us: Option<u64>,
    pub(crate) in_first_slow_start: bool,
    pub(crate) rtt: RttEstimator,
    /// Latest delivery-rate sample, bytes/s (0: none).
    pub(crate) delivery_rate_bytes_per_sec: u64,
    /// Latest report time, µs.
    pub(crate) now_us: u64,
}

impl<U: WindowUnit> WindowState<U> {
    /// A flow with segment size `mss_bytes` taken over from `h`, with no recovery under way.
    fn adopted(mss_bytes: u32, h: &Handoff) -> Self {
        let (cwnd, ssthresh) = U::adopt(h, mss_bytes);
        Self {
            mss_bytes,
            cwnd,
            ssthresh,
            recovery: Recovery::default(),
            last_loss_us: h.last_loss_us,
            in_first_slow_start: h.in_first_slow_start,
            rtt: RttEstimator::from_handoff(h.srtt_us, h.min_rtt_us),
            delivery_rate_bytes_per_sec: h.delivery_rate_bytes_per_sec,
            now_us: h.now_us,
        }
    }

    /// Slow start for `acked` ([`WindowUnit::slow_start`]); returns what is left.
    pub(crate) fn slow_start(&mut self, acked: U::Acked) -> U::Acked {
        U::slow_start(&mut self.cwnd, self.ssthresh, acked, self.mss_bytes)
    }

    /// The window as bytes for the datapath.
    fn cwnd_bytes(&self) -> u32 {
        U::cwnd_bytes(self.cwnd, self.mss_bytes)
    }
}

impl WindowState<Segments> {
    /// `w` segments within [2, max] ([`clamp`]).
    pub(crate) fn clamp(&self, w: f64) -> f64 {
        clamp(w, self.mss_bytes)
    }

    /// Bytes as fractional segments.
    pub(crate) fn segments(&self, bytes: u64) -> f64 {
        segments(bytes, self.mss_bytes)
    }
}

/// One flow of a window-based algorithm: the shared state and report path, and the rule `R`.
#[derive(Debug, Clone)]
pub struct WindowCore<R: WindowRule> {
    pub(crate) state: WindowState<R::Unit>,
    pub(crate) rule: R,
    /// Whether the window follows the ACK clock in the datapath ([`Self::with_ack_clock`]).
    ack_clock: bool,
    /// Whether the datapath runs it now: the window is the datapath's, reported.
    slow_start_in_datapath: bool,
    /// The registry name, when it is not the rule's (a variant's: `cubic-ackclock`).
    registered_as: Option<&'static str>,
}

impl<R: WindowRule> WindowCore<R> {
    /// A new flow of `rule` with the initial window of `start`.
    pub fn with_rule(rule: R, start: &FlowStart) -> Self {
        let h = Handoff::flow_start(start);
        let mut core = Self {
            state: WindowState::adopted(start.mss_bytes.max(1), &h),
            rule,
            ack_clock: false,
            slow_start_in_datapath: false,
            registered_as: None,
        };
        core.rule.adopt(&core.state, &h);
        core
    }

    /// Lets the window follow the ACK clock in the datapath between reports
    /// ([`PER_RTT_URGENT_CLOCKED`]; off by default):
    /// - the flow's program carries `ssthresh`; below it the datapath grows the window on
    ///   every ACK (up to it, or until a loss or timeout) while the agent takes the window
    ///   each report carries and writes none; a timeout installs the program again with the
    ///   new threshold, so the slow start after it runs in the datapath too;
    /// - on a loss the datapath holds the window at what is in flight until the agent's
    ///   answer sets it.
    ///
    /// What it gains, and how that depends on when the datapath applies a program's window,
    /// is in `docs/algorithms/ack-clock.md`.
    #[must_use]
    pub fn with_ack_clock(mut self, on: bool) -> Self {
        self.ack_clock = on;
        self
    }

    /// The flow of a registry variant named `name` ([`crate::registry::Registry::variants`]).
    #[must_use]
    pub(crate) fn registered_as(mut self, name: &'static str) -> Self {
        self.registered_as = Some(name);
        self
    }

    /// Whether the datapath is running a slow start now.
    pub fn slow_start_in_datapath(&self) -> bool {
        self.slow_start_in_datapath
    }

    fn adopt(&mut self, h: &Handoff) {
        let h = &if R::SLOW_START_UNTIL_LOSS && !h.in_first_slow_start && h.last_loss_us.is_none() {
            Handoff {
                ssthresh_bytes: u32::MAX,
                in_first_slow_start: true,
                ..*h
            }
        } else {
            *h
        };
        self.state = WindowState::adopted(self.state.mss_bytes, h);
        self.rule.adopt(&self.state, h);
    }

    /// A loss detected at `now_us`: one reduction per recovery episode (RFC 6582 §3.2).
    pub fn on_loss(&mut self, now_us: u64) {
        let w = &mut self.state;
        w.last_loss_us = Some(now_us);
        if w.recovery.active(now_us) {
            return;
        }
        w.in_first_slow_start = false;
        let window_bytes = R::Unit::window_bytes(w.cwnd, w.mss_bytes);
        w.ssthresh = self.rule.ssthresh_on_congestion(w);
        self.rule.on_recovery_start(w, now_us);
        w.recovery.enter(now_us, w.rtt.srtt_us(), window_bytes);
    }

    /// `control` with [`PER_RTT_URGENT_CLOCKED`] installed, its `ssthresh` the flow's while it is
    /// in slow start (0 otherwise: no growth in the datapath).
    fn ack_clock_control(&mut self, control: Control) -> Control {
        let w = &self.state;
        self.slow_start_in_datapath = w.cwnd < w.ssthresh;
        let ssthresh = if self.slow_start_in_datapath {
            R::Unit::ssthresh_bytes(w.ssthresh, w.mss_bytes)
        } else {
            0
        };
        let mut control = control.with_program(&PER_RTT_URGENT_CLOCKED);
        if let Some(switch) = control.program.as_mut() {
            switch.fields.push(("ssthresh", ssthresh));
        }
        control
    }

    /// A retransmission timeout at `now_us`: back to the loss window and slow start.
    pub fn on_timeout(&mut self, now_us: u64) {
        let w = &mut self.state;
        w.last_loss_us = Some(now_us);
        w.in_first_slow_start = false;
        w.ssthresh = self.rule.ssthresh_on_congestion(w);
        w.cwnd = R::Unit::loss_window(w.mss_bytes);
        self.rule.on_timeout(w);
        w.recovery.clear();
    }
}

impl<R: WindowRule<Unit = Segments>> WindowCore<R> {
    /// Window, segments.
    pub fn cwnd_segments(&self) -> f64 {
        self.state.cwnd
    }

    /// Slow-start threshold, segments (infinite until the first slow start ends).
    pub fn ssthresh_segments(&self) -> f64 {
        self.state.ssthresh
    }
}

impl<R: WindowRule> Algorithm for WindowCore<R> {
    fn name(&self) -> &'static str {
        self.registered_as.unwrap_or(R::NAME)
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.adopt(handoff);
        let control = Control::cwnd(self.state.cwnd_bytes()).with_pacing(Pacing::Unpaced);
        if self.ack_clock {
            self.ack_clock_control(control)
        } else {
            control.with_program(&PER_RTT_URGENT)
        }
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        let w = &mut self.state;
        let now = w.now_us.max(m.now_us);
        w.now_us = now;
        w.rtt.on_sample(m.rtt_us, m.min_rtt_us);
        if m.rate_incoming_bytes_per_sec > 0 {
            w.delivery_rate_bytes_per_sec = m.rate_incoming_bytes_per_sec;
        }
        if self.slow_start_in_datapath && !m.timeout && m.cwnd_bytes > 0 {
            // The datapath grew the window ACK by ACK up to this report (and stops on the ACK
            // that carries a loss). A timeout's report carries the window the timeout left
            // (one segment); the threshold is set from the one before, as Linux's
            // `tcp_enter_loss` does.
            w.cwnd = R::Unit::from_bytes(m.cwnd_bytes, w.mss_bytes);
        }
        self.rule.on_measurement(w, m);
        let in_recovery = w.recovery.holding(now);
        w.recovery.on_acked(m.acked_bytes);
        if !in_recovery && !self.slow_start_in_datapath && self.rule.grows_on(m) {
            self.rule.on_ack(w, m.acked_bytes, now);
        }
        if m.timeout {
            self.on_timeout(now);
            if self.ack_clock {
                // The datapath stopped on the timeout; slow start again, there, to the new
                // threshold.
                return self.ack_clock_control(Control::cwnd(self.state.cwnd_bytes()));
            }
        } else if m.lost_pkts > 0 {
            self.slow_start_in_datapath = false;
            self.on_loss(now);
        } else if self.slow_start_in_datapath && self.state.cwnd >= self.state.ssthresh {
            // The datapath stopped at the threshold; avoidance is the agent's.
            self.slow_start_in_datapath = false;
        }
        if self.slow_start_in_datapath {
            return Control::none();
        }
        Control::cwnd(self.state.cwnd_bytes())
    }

    fn handoff(&self) -> Handoff {
        let w = &self.state;
        let mut h = Handoff {
            now_us: w.now_us,
            cwnd_bytes: w.cwnd_bytes(),
            ssthresh_bytes: R::Unit::ssthresh_bytes(w.ssthresh, w.mss_bytes),
            pacing: Pacing::Unpaced,
            srtt_us: w.rtt.srtt_us(),
            min_rtt_us: w.rtt.min_rtt_us(),
            delivery_rate_bytes_per_sec: w.delivery_rate_bytes_per_sec,
            last_loss_us: w.last_loss_us,
            in_first_slow_start: w.in_first_slow_start,
        };
        self.rule.handoff(w, &mut h);
        h
    }

    fn cwnd_bytes(&self) -> u32 {
        self.state.cwnd_bytes()
    }
}

/// Largest window in segments for segment size `mss_bytes` (2^32 - 1 bytes).
pub(crate) fn max_cwnd(mss_bytes: u32) -> f64 {
    (f64::from(u32::MAX) / f64::from(mss_bytes)).max(MIN_CWND_SEGMENTS)
}

/// `w` segments within [2, max]; NaN becomes the floor.
pub(crate) fn clamp(w: f64, mss_bytes: u32) -> f64 {
    if w.is_nan() {
        return MIN_CWND_SEGMENTS;
    }
    w.clamp(MIN_CWND_SEGMENTS, max_cwnd(mss_bytes))
}

/// Bytes as fractional segments.
pub(crate) fn segments(bytes: u64, mss_bytes: u32) -> f64 {
    bytes as f64 / f64::from(mss_bytes)
}

/// A window in segments as bytes for the datapath, never below 2 segments.
pub(crate) fn bytes(cwnd: f64, mss_bytes: u32) -> u32 {
    let b = (cwnd * f64::from(mss_bytes)).round();
    // Saturating float-to-int cast; `clamp` keeps the window within range already.
    (b as u32).max(mss_bytes.saturating_mul(2))
}

/// A handoff's slow-start threshold (`u32::MAX` bytes: none) as segments (infinite: none).
pub(crate) fn ssthresh_from_bytes(ssthresh_bytes: u32, mss_bytes: u32) -> f64 {
    if ssthresh_bytes == u32::MAX {
        f64::INFINITY
    } else {
        clamp(segments(u64::from(ssthresh_bytes), mss_bytes), mss_bytes)
    }
}

/// A slow-start threshold in segments for a handoff (infinite: `u32::MAX`).
pub(crate) fn ssthresh_to_bytes(ssthresh: f64, mss_bytes: u32) -> u32 {
    if ssthresh.is_finite() {
        (ssthresh * f64::from(mss_bytes)) as u32
    } else {
        u32::MAX
    }
}

/// A byte count as a `u32`, saturating.
pub(crate) fn clamp_u32(v: u64) -> u32 {
    u32::try_from(v).unwrap_or(u32::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn floors_caps_and_nan() {
        assert!((clamp(f64::NAN, 1448) - 2.0).abs() < f64::EPSILON);
        assert!((clamp(0.5, 1448) - 2.0).abs() < f64::EPSILON);
        assert!((clamp(1e12, 1448) - f64::from(u32::MAX) / 1448.0).abs() < 1e-6);
        assert_eq!(bytes(10.0, 1448), 14_480);
        assert_eq!(bytes(0.0, 1448), 2896);
        assert!((segments(2896, 1448) - 2.0).abs() < f64::EPSILON);
        assert!(ssthresh_from_bytes(u32::MAX, 1448).is_infinite());
        assert_eq!(ssthresh_to_bytes(f64::INFINITY, 1448), u32::MAX);
        assert_eq!(
            ssthresh_to_bytes(ssthresh_from_bytes(14_480, 1448), 1448),
            14_480
        );
    }
}
