//! C2TCP (Abbasloo, Li, Xu, Chao, "Cellular Controlled Delay TCP (C2TCP)", IFIP Networking
//! 2018): a target-delay layer on top of [`Cubic`].
//!
//! Model (Algorithm 1 of the paper, a `CoDel`-like state machine at the sender):
//! - `Target = alpha * minRTT` (the paper's `setpoint`; `alpha = 2` here) and
//!   `Interval = 100 ms`.
//! - **Good** state: the minimum RTT seen in the last report is below `Target`. The watch is
//!   cleared (`first_time = true`, `N = 1`) and Cubic runs untouched.
//! - **Potentially bad**: the first report at or above `Target` arms the watch:
//!   `next = now + Interval`.
//! - **Bad**: a report at or above `Target` after `next`:
//!   `next = now + Interval / sqrt(N)`, `N += 1`, and `cwnd = 1` packet with `ssthresh`
//!   unchanged, so the flow slow-starts back to `ssthresh` once the queue has drained. As in
//!   `CoDel`, a standing queue is hit more and more often (`Interval / sqrt(N)`).
//!
//! ```text
//!          rtt < Target                rtt >= Target               now > next
//!  Good ------------------> Good  ---------------------> Watch ------------------> Bad
//!   ^                                                     |  ^ next = now + I/sqrt(N) |
//!   +-------------------- rtt < Target -------------------+  +------ cwnd = 1 --------+
//! ```
//!
//! Defaults ([`C2tcpConfig::default`]): `alpha = 2`, `Interval = 100 ms`, Cubic underneath with
//! RFC 9438's arithmetic (`C = 0.4`, `beta = 0.7`, [`CubicVariant::Rfc9438`]), unpaced, program
//! [`PER_RTT_URGENT`]. Not Linux's arithmetic (Cubic's default): a reduction here restarts
//! Cubic through a handoff, which with Linux's arithmetic forgets `W_max` and holds growth at
//! 5 % per RTT until the next loss (utilization 0.82 instead of 0.93 on a 10-BDP buffer at
//! 20 Mbit/s), while the paper's kernel patch only sets `snd_cwnd` and keeps Cubic's state.
//!
//! Simplified:
//! - Reports arrive once per RTT (or at once on a loss), so the rule is applied per report, not
//!   per ACK, and its condition uses the report's minimum RTT (the smallest sample of that
//!   interval, which is the paper's "minimum RTT over the last interval"). At most one reduction
//!   happens per report.
//! - The suite's smallest window is 2 segments, so "cwnd = 1" is 2 segments.
//! - The reduction is applied by handing Cubic its own state back with the window at 2 segments
//!   and `ssthresh` unchanged; this also ends Cubic's epoch, so when the window climbs back past
//!   `ssthresh` a new epoch starts from there with `W_max` = the window then (convex growth).
//! - The paper's extra normalized increase in the good state (`cwnd += Target / rtt` per
//!   window) is left out: growth in the good state is plain Cubic.
//! - After a reduction, the ACKs of the data that was in flight then (the report's
//!   `inflight`) do not grow the window (Linux grows a window only when the flow is limited by
//!   it; per-report byte counting would otherwise restore the old window in one report), and
//!   losses among that data are not passed to Cubic: the reduction already answered that
//!   congestion (one response per window of data, as in `NewReno`), and a Cubic reduction from
//!   a 2-segment window would pin `ssthresh` at 2 segments.
//! - A reduction during the first slow start (no `ssthresh` yet) sets `ssthresh` to the
//!   estimated BDP (delivery rate x min RTT): the Linux Cubic under the paper's C2TCP leaves
//!   its first slow start early with `HyStart`, which this suite's Cubic does not implement;
//!   without it every good period would slow-start unbounded and overshoot the target by
//!   several BDPs before the next check (reports come once per RTT).
//! - No reduction is made during the first smoothed RTT after a handoff (the window stays
//!   within a factor of two of the handed-over one).

use crate::api::{Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing};
use crate::cubic::{Cubic, CubicConfig, CubicVariant};
use crate::programs::{PER_RTT_URGENT, ProgramSpec};

/// The paper's setting: `Target = 2 x minRTT`.
pub const ALPHA: f64 = 2.0;
/// The paper's interval, µs (100 ms, as `CoDel`).
pub const INTERVAL_US: u64 = 100_000;

/// Programs C2TCP installs (Cubic's).
static PROGRAMS: [&ProgramSpec; 1] = [&PER_RTT_URGENT];

/// C2TCP's configuration and factory.
#[derive(Debug, Clone, Copy)]
pub struct C2tcpConfig {
    /// `Target = alpha x minRTT` (2 recommended; must be at least 1).
    pub alpha: f64,
    /// The watch interval, µs (100 ms recommended; must be positive).
    pub interval_us: u64,
    /// The Cubic underneath.
    pub cubic: CubicConfig,
}

impl Default for C2tcpConfig {
    fn default() -> Self {
        Self {
            alpha: ALPHA,
            interval_us: INTERVAL_US,
            cubic: CubicConfig::default().variant(CubicVariant::Rfc9438),
        }
    }
}

impl C2tcpConfig {
    /// Sets `alpha` (2 recommended; values below 1 or not finite fall back to 2).
    #[must_use]
    pub fn alpha(mut self, alpha: f64) -> Self {
        self.alpha = alpha;
        self
    }

    /// Sets the interval, µs (100 000 recommended; 0 falls back to it).
    #[must_use]
    pub fn interval_us(mut self, interval_us: u64) -> Self {
        self.interval_us = interval_us;
        self
    }

    /// Sets the Cubic underneath (defaults recommended).
    #[must_use]
    pub fn cubic(mut self, cubic: CubicConfig) -> Self {
        self.cubic = cubic;
        self
    }

    fn sanitized(self) -> Self {
        Self {
            alpha: if self.alpha.is_finite() && self.alpha >= 1.0 {
                self.alpha
            } else {
                ALPHA
            },
            interval_us: if self.interval_us == 0 {
                INTERVAL_US
            } else {
                self.interval_us
            },
            cubic: self.cubic,
        }
    }
}

impl AlgorithmConfig for C2tcpConfig {
    const NAME: &'static str = "c2tcp";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(C2tcp::new(*self, start))
    }
}

/// What one report says about the path (Algorithm 1's three branches).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Condition {
    /// Below target: Cubic runs untouched.
    Good,
    /// At or above target, the watch is running.
    Watching,
    /// At or above target for a whole (shrinking) interval: the window goes to its minimum.
    Bad,
}

/// The `CoDel`-like watch of Algorithm 1 (`first_time`, `next_time`, `N`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Watch {
    /// `next_time`, µs; `None` is the paper's `first_time = true`.
    next_us: Option<u64>,
    /// `N`: reductions in this bad period plus one.
    count: u32,
}

impl Watch {
    /// Classifies one report whose interval saw `rtt_us` as its smallest RTT at `now_us`.
    pub fn on_sample(
        &mut self,
        now_us: u64,
        rtt_us: u64,
        target_us: u64,
        interval_us: u64,
    ) -> Condition {
        if rtt_us < target_us {
            *self = Self::default();
            return Condition::Good;
        }
        match self.next_us {
            None => {
                self.next_us = Some(now_us.saturating_add(interval_us));
                self.count = 1;
                Condition::Watching
            }
            Some(next) if now_us > next => {
                self.next_us =
                    Some(now_us.saturating_add(next_interval_us(interval_us, self.count)));
                self.count = self.count.saturating_add(1);
                Condition::Bad
            }
            Some(_) => Condition::Watching,
        }
    }

    /// `N`, the `CoDel` count (0 when the watch is idle).
    pub fn count(&self) -> u32 {
        self.count
    }

    /// When the next reduction may happen, µs (`None`: the watch is idle).
    pub fn next_us(&self) -> Option<u64> {
        self.next_us
    }
}

/// `Interval / sqrt(N)`, µs (`N` at least 1).
pub fn next_interval_us(interval_us: u64, count: u32) -> u64 {
    (interval_us as f64 / f64::from(count.max(1)).sqrt()) as u64
}

/// `Target = alpha x minRTT`, µs.
pub fn target_us(alpha: f64, min_rtt_us: u64) -> u64 {
    (alpha * min_rtt_us as f64).min(u64::MAX as f64) as u64
}

/// The bandwidth-delay product, bytes (`None`: no rate or RTT yet).
pub fn bdp_bytes(delivery_rate_bytes_per_sec: u64, min_rtt_us: u64) -> Option<u32> {
    if delivery_rate_bytes_per_sec == 0 || min_rtt_us == 0 {
        return None;
    }
    let bdp = delivery_rate_bytes_per_sec as f64 * min_rtt_us as f64 / 1e6;
    Some(bdp.min(f64::from(u32::MAX - 1)) as u32)
}

/// C2TCP's per-flow state.
#[derive(Debug, Clone)]
pub struct C2tcp {
    cfg: C2tcpConfig,
    cubic: Cubic,
    mss_bytes: u32,
    watch: Watch,
    /// No reduction before this time (one smoothed RTT after an activation), µs.
    quiet_until_us: u64,
    /// The flow left its first slow start (Cubic is told otherwise after a reduction).
    left_first_slow_start: bool,
    reductions: u64,
    /// Bytes in flight at the last reduction not yet acknowledged.
    drain_bytes: u64,
    now_us: u64,
}

impl C2tcp {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: C2tcpConfig, start: &FlowStart) -> Self {
        let cfg = cfg.sanitized();
        let mut c = Self {
            cfg,
            cubic: Cubic::new(cfg.cubic, start),
            mss_bytes: start.mss_bytes.max(1),
            watch: Watch::default(),
            quiet_until_us: 0,
            left_first_slow_start: false,
            reductions: 0,
            drain_bytes: 0,
            now_us: 0,
        };
        c.adopt(&Handoff::flow_start(start));
        c
    }

    fn adopt(&mut self, h: &Handoff) {
        let _ = self.cubic.activate(h);
        self.left_first_slow_start = !h.in_first_slow_start;
        self.watch = Watch::default();
        self.drain_bytes = 0;
        self.now_us = h.now_us;
        self.quiet_until_us = h.now_us.saturating_add(h.srtt_us.min(10_000_000));
    }

    /// The current target, µs (0: no RTT sample yet).
    pub fn target_us(&self) -> u64 {
        target_us(self.cfg.alpha, self.cubic.handoff().min_rtt_us)
    }

    /// Reductions to the minimum window so far.
    pub fn reductions(&self) -> u64 {
        self.reductions
    }

    /// The Cubic underneath.
    pub fn cubic(&self) -> &Cubic {
        &self.cubic
    }

    /// The bad state: the window goes to its minimum with `ssthresh` unchanged.
    fn reduce(&mut self) {
        let mut h = self.cubic.handoff();
        self.left_first_slow_start |= !h.in_first_slow_start;
        if h.ssthresh_bytes == u32::MAX {
            // Still in the first slow start: stand in for the `HyStart` exit of the Linux Cubic
            // the paper builds on, at the estimated BDP (delivery rate x min RTT).
            h.ssthresh_bytes = bdp_bytes(h.delivery_rate_bytes_per_sec, h.min_rtt_us)
                .unwrap_or(h.cwnd_bytes / 2)
                .max(self.mss_bytes.saturating_mul(2));
        }
        h.cwnd_bytes = self.mss_bytes.saturating_mul(2);
        // Keep `ssthresh` as it is: Cubic would clamp it to the window for a flow that left
        // its first slow start, and C2TCP slow-starts back to it.
        h.in_first_slow_start = true;
        let _ = self.cubic.activate(&h);
        self.reductions += 1;
    }
}

impl Algorithm for C2tcp {
    fn name(&self) -> &'static str {
        C2tcpConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.adopt(handoff);
        Control::cwnd(self.cubic.cwnd_bytes())
            .with_pacing(Pacing::Unpaced)
            .with_program(&PER_RTT_URGENT)
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        self.now_us = self.now_us.max(m.now_us);
        let now = self.now_us;
        // Data sent before a reduction is still being acknowledged: the flow is not limited
        // by its window, so those ACKs do not grow it, and losses among that data belong to
        // the congestion the reduction already answered (one response per window of data).
        let mut fed = *m;
        if self.drain_bytes > 0 && !m.timeout {
            let used = m.acked_bytes.min(self.drain_bytes);
            self.drain_bytes -= used;
            fed.acked_bytes -= used;
            fed.lost_pkts = 0;
        }
        if m.timeout {
            self.drain_bytes = 0;
        }
        let _ = self.cubic.on_report(&fed);
        let sample_us = if m.min_rtt_us > 0 {
            m.min_rtt_us
        } else {
            m.rtt_us
        };
        let target = self.target_us();
        if sample_us > 0 && target > 0 && !m.timeout {
            let cond = self
                .watch
                .on_sample(now, sample_us, target, self.cfg.interval_us);
            if cond == Condition::Bad && now >= self.quiet_until_us {
                self.reduce();
                self.drain_bytes = m.inflight_bytes.max(self.drain_bytes);
            }
        }
        Control::cwnd(self.cubic.cwnd_bytes())
    }

    fn handoff(&self) -> Handoff {
        let mut h = self.cubic.handoff();
        h.in_first_slow_start &= !self.left_first_slow_start;
        h.now_us = self.now_us;
        h
    }

    fn cwnd_bytes(&self) -> u32 {
        self.cubic.cwnd_bytes()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn c2tcp() -> C2tcp {
        C2tcp::new(
            C2tcpConfig::default(),
            &FlowStart {
                sock_id: 1,
                mss_bytes: MSS,
                init_cwnd_bytes: 10 * MSS,
                seed: 0,
            },
        )
    }

    fn report(now_us: u64, acked_segments: u64, rtt_us: u64) -> Measurement {
        Measurement {
            now_us,
            acked_bytes: acked_segments * u64::from(MSS),
            rtt_us,
            min_rtt_us: rtt_us,
            ..Measurement::default()
        }
    }

    #[test]
    fn the_target_is_alpha_times_the_minimum_rtt() {
        // §3 of the paper: setpoint = alpha x minRTT.
        assert_eq!(target_us(2.0, 50_000), 100_000);
        assert_eq!(target_us(1.5, 40_000), 60_000);
        assert_eq!(target_us(2.0, 0), 0);
    }

    #[test]
    fn the_next_check_shrinks_as_interval_over_sqrt_count() {
        // Algorithm 1: next_time = now + Interval / sqrt(N).
        assert_eq!(next_interval_us(100_000, 1), 100_000);
        assert_eq!(next_interval_us(100_000, 4), 50_000);
        assert_eq!(next_interval_us(100_000, 2), 70_710);
        assert_eq!(next_interval_us(100_000, 0), 100_000);
    }

    #[test]
    fn a_delay_above_target_for_a_whole_interval_is_bad() {
        // Algorithm 1: first time above target arms the watch; after Interval it is bad.
        let mut w = Watch::default();
        let (t, i) = (100_000, 100_000);
        assert_eq!(w.on_sample(0, 120_000, t, i), Condition::Watching);
        assert_eq!(w.next_us(), Some(100_000));
        assert_eq!(w.on_sample(50_000, 120_000, t, i), Condition::Watching);
        assert_eq!(
            w.on_sample(100_000, 120_000, t, i),
            Condition::Watching,
            "not after next yet"
        );
        assert_eq!(w.on_sample(100_001, 120_000, t, i), Condition::Bad);
        assert_eq!(w.count(), 2);
        assert_eq!(w.next_us(), Some(200_001));
        // Second reduction: Interval / sqrt(2) later.
        assert_eq!(w.on_sample(200_002, 120_000, t, i), Condition::Bad);
        assert_eq!(w.next_us(), Some(200_002 + 70_710));
        assert_eq!(w.count(), 3);
    }

    #[test]
    fn one_sample_below_target_resets_the_watch() {
        // Algorithm 1: rtt < Target -> first_time = true, N = 1 (good).
        let mut w = Watch::default();
        w.on_sample(0, 120_000, 100_000, 100_000);
        w.on_sample(200_000, 120_000, 100_000, 100_000);
        assert_eq!(
            w.on_sample(210_000, 99_999, 100_000, 100_000),
            Condition::Good
        );
        assert_eq!((w.next_us(), w.count()), (None, 0));
        assert_eq!(
            w.on_sample(400_000, 120_000, 100_000, 100_000),
            Condition::Watching,
            "a new bad period starts with a full interval"
        );
    }

    #[test]
    fn the_bad_state_drops_the_window_and_keeps_ssthresh() {
        let mut c = c2tcp();
        c.activate(&Handoff::flow_start(&FlowStart {
            sock_id: 1,
            mss_bytes: MSS,
            init_cwnd_bytes: 10 * MSS,
            seed: 0,
        }));
        // min RTT 50 ms: target 100 ms. A loss sets ssthresh.
        c.on_report(&report(50_000, 10, 50_000));
        c.on_report(&Measurement {
            lost_pkts: 1,
            ..report(100_000, 10, 60_000)
        });
        let ssthresh = c.cubic().ssthresh_segments();
        assert!(ssthresh.is_finite());
        let mut now = 200_000;
        // Recovery ends; the window grows in the good state.
        for _ in 0..20 {
            now += 60_000;
            c.on_report(&report(now, 30, 60_000));
        }
        assert_eq!(c.reductions(), 0);
        let before = c.cwnd_bytes();
        assert!(before > 4 * MSS);
        now += 60_000;
        c.on_report(&report(now, 30, 150_000));
        assert_eq!(
            c.reductions(),
            0,
            "first report above target only arms the watch"
        );
        now += 150_000;
        let control = c.on_report(&report(now, 30, 150_000));
        assert_eq!(c.reductions(), 1);
        assert_eq!(control.cwnd_bytes, Some(2 * MSS));
        assert!(
            (c.cubic().ssthresh_segments() - ssthresh).abs() < 1e-9,
            "ssthresh unchanged"
        );
        assert!(!c.handoff().in_first_slow_start);
        // Back below target: slow start towards ssthresh.
        now += 50_000;
        c.on_report(&report(now, 2, 50_000));
        assert_eq!(c.cwnd_bytes(), 4 * MSS);
    }

    #[test]
    fn no_reduction_in_the_first_rtt_after_a_handoff() {
        let mut c = c2tcp();
        let h = Handoff {
            now_us: 1_000_000,
            cwnd_bytes: 50 * MSS,
            ssthresh_bytes: 40 * MSS,
            pacing: Pacing::Unpaced,
            srtt_us: 300_000,
            min_rtt_us: 50_000,
            delivery_rate_bytes_per_sec: 0,
            last_loss_us: Some(900_000),
            in_first_slow_start: false,
        };
        c.activate(&h);
        c.on_report(&report(1_050_000, 0, 200_000));
        c.on_report(&report(1_200_000, 0, 200_000));
        assert_eq!(c.reductions(), 0);
        assert_eq!(c.cwnd_bytes(), 50 * MSS);
        c.on_report(&report(1_400_000, 0, 200_000));
        assert_eq!(c.reductions(), 1);
    }
}
