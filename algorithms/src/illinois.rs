//! TCP-Illinois (Liu, Başar & Srikant, "TCP-Illinois: A Loss and Delay-Based Congestion
//! Control Algorithm for High-Speed Networks", VALUETOOLS 2006), following Linux
//! `tcp_illinois.c`, per report.
//!
//! Model (windows in segments, delays in µs):
//! - Delay statistics: `base_rtt` = smallest RTT, `max_rtt` = largest RTT, `dm = max_rtt -
//!   base_rtt`; once per RTT, `da` = the RTT's average RTT minus `base_rtt` (§3).
//! - Additive increase `alpha = f1(da)` (§3, eq. 3; Linux `alpha()`), with `d1 = dm / 100`:
//!   `alpha = alpha_max` while `da <= d1`, else
//!   `alpha = k1 / (k2 + da)`, `k1 = (dm - d1) alpha_min alpha_max / (alpha_max - alpha_min)`,
//!   `k2 = (dm - d1) alpha_min / (alpha_max - alpha_min) - d1`, which runs from `alpha_max`
//!   at `da = d1` to `alpha_min` at `da = dm`. After delay rose above `d1`, `alpha` returns to
//!   `alpha_max` only after `theta = 5` RTTs in a row with `da <= d1`.
//! - Multiplicative decrease `beta = f2(da)` (§3, eq. 4; Linux `beta()`), with `d2 = dm / 10`,
//!   `d3 = 8 dm / 10`: `beta_min` for `da <= d2`, `beta_max` for `da >= d3`, and linear between:
//!   `beta = k3 + k4 da`, `k3 = (beta_min d3 - beta_max d2) / (d3 - d2)`,
//!   `k4 = (beta_max - beta_min) / (d3 - d2)`.
//! - Below `win_thresh = 15` segments, `alpha = 1`, `beta = 1/2` (Reno; §3 "low-speed").
//! - Avoidance: `cwnd += alpha / cwnd` per segment acked (`alpha` per RTT); slow start below
//!   `ssthresh`. Loss: `ssthresh = cwnd = max((1 - beta) cwnd, 2)`, once per recovery
//!   ([`crate::recovery`]), no growth during recovery. Timeout: `ssthresh = max((1 - beta) cwnd,
//!   2)`, `cwnd = 2`, slow start, and `alpha`, `beta` and the delay averages reset (Linux
//!   `tcp_illinois_state` on `TCP_CA_Loss`).
//!
//! Defaults (Linux and §4 of the paper): `alpha_max = 10`, `alpha_min = 0.3`,
//! `beta_min = 1/8`, `beta_max = 1/2`, `win_thresh = 15`, `theta = 5`; no pacing (the rate is
//! explicitly cleared on activation).
//!
//! Simplified: the per-RTT average delay averages the latest RTT sample of each report in the
//! RTT (Linux averages every ACK's sample); growth is applied per report; Linux's fixed-point
//! arithmetic (`ALPHA_SHIFT = 7`, `BETA_SHIFT = 6`) is done in floating point; the
//! "cwnd-limited" check is left out. A handoff carries its min RTT into `base_rtt` and its
//! smoothed RTT into `max_rtt`; it starts with `alpha = 1`, `beta = 1/2`.

use crate::api::{Algorithm, AlgorithmConfig, FlowStart, Handoff, Measurement};
use crate::programs::ProgramSpec;
use crate::window::{self, Segments, WindowCore, WindowRule, WindowState};

/// Largest additive increase, segments per RTT (paper §4, Linux `ALPHA_MAX`).
pub const ALPHA_MAX: f64 = 10.0;
/// Smallest additive increase, segments per RTT (paper §4, Linux `ALPHA_MIN`).
pub const ALPHA_MIN: f64 = 0.3;
/// Additive increase below `win_thresh` (Linux `ALPHA_BASE`).
pub const ALPHA_BASE: f64 = 1.0;
/// Smallest decrease factor (paper §4, Linux `BETA_MIN`).
pub const BETA_MIN: f64 = 0.125;
/// Largest decrease factor (paper §4, Linux `BETA_MAX`).
pub const BETA_MAX: f64 = 0.5;
/// Decrease factor below `win_thresh` (Linux `BETA_BASE`).
pub const BETA_BASE: f64 = 0.5;
/// Window below which Illinois behaves as Reno, segments (Linux `win_thresh`).
pub const WIN_THRESH_SEGMENTS: f64 = 15.0;
/// Low-delay RTTs needed before `alpha` returns to `alpha_max` (Linux `theta`).
pub const THETA: u32 = 5;
pub use crate::window::MIN_CWND_SEGMENTS;

/// Illinois's configuration and factory.
#[derive(Debug, Clone, Copy)]
pub struct IllinoisConfig {
    /// `alpha_max`, segments per RTT (10 recommended).
    pub alpha_max: f64,
    /// `alpha_min`, segments per RTT (0.3 recommended).
    pub alpha_min: f64,
    /// `beta_min` (1/8 recommended).
    pub beta_min: f64,
    /// `beta_max` (1/2 recommended).
    pub beta_max: f64,
    /// `win_thresh`, segments (15 recommended).
    pub win_thresh_segments: f64,
    /// `theta`, RTTs (5 recommended).
    pub theta: u32,
}

impl Default for IllinoisConfig {
    fn default() -> Self {
        Self {
            alpha_max: ALPHA_MAX,
            alpha_min: ALPHA_MIN,
            beta_min: BETA_MIN,
            beta_max: BETA_MAX,
            win_thresh_segments: WIN_THRESH_SEGMENTS,
            theta: THETA,
        }
    }
}

impl IllinoisConfig {
    /// Sets `alpha_max` and `alpha_min` (10 and 0.3 recommended; `0 < min < max`).
    #[must_use]
    pub fn alpha(mut self, min: f64, max: f64) -> Self {
        self.alpha_min = min;
        self.alpha_max = max;
        self
    }

    /// Sets `beta_min` and `beta_max` (1/8 and 1/2 recommended; `0 < min <= max < 1`).
    #[must_use]
    pub fn beta(mut self, min: f64, max: f64) -> Self {
        self.beta_min = min;
        self.beta_max = max;
        self
    }

    /// Sets `win_thresh` (15 segments recommended).
    #[must_use]
    pub fn win_thresh_segments(mut self, w: f64) -> Self {
        self.win_thresh_segments = w;
        self
    }

    /// The parameters with out-of-range values replaced by the defaults.
    fn sanitized(self) -> Self {
        let d = Self::default();
        let alpha_ok = self.alpha_min.is_finite()
            && self.alpha_max.is_finite()
            && self.alpha_min > 0.0
            && self.alpha_min < self.alpha_max;
        let beta_ok = self.beta_min > 0.0 && self.beta_min <= self.beta_max && self.beta_max < 1.0;
        Self {
            alpha_max: if alpha_ok {
                self.alpha_max
            } else {
                d.alpha_max
            },
            alpha_min: if alpha_ok {
                self.alpha_min
            } else {
                d.alpha_min
            },
            beta_min: if beta_ok { self.beta_min } else { d.beta_min },
            beta_max: if beta_ok { self.beta_max } else { d.beta_max },
            win_thresh_segments: if self.win_thresh_segments.is_finite()
                && self.win_thresh_segments >= 0.0
            {
                self.win_thresh_segments
            } else {
                d.win_thresh_segments
            },
            theta: self.theta,
        }
    }

    /// `alpha = f1(da)` on the decreasing branch (§3 eq. 3, Linux `alpha()` past `d1`).
    pub fn alpha_curve(&self, da_us: f64, dm_us: f64) -> f64 {
        let d1 = dm_us / 100.0;
        if da_us <= d1 {
            return self.alpha_max;
        }
        let (dm, da) = (dm_us - d1, da_us - d1);
        let a =
            self.alpha_max * dm / (dm + da * (self.alpha_max - self.alpha_min) / self.alpha_min);
        if a.is_nan() {
            self.alpha_min
        } else {
            a.clamp(self.alpha_min, self.alpha_max)
        }
    }

    /// `beta = f2(da)` (§3 eq. 4, Linux `beta()`).
    pub fn beta_curve(&self, da_us: f64, dm_us: f64) -> f64 {
        let d2 = dm_us / 10.0;
        let d3 = 8.0 * dm_us / 10.0;
        if da_us <= d2 {
            return self.beta_min;
        }
        if da_us >= d3 || d3 <= d2 {
            return self.beta_max;
        }
        let b = (self.beta_min * d3 - self.beta_max * d2 + (self.beta_max - self.beta_min) * da_us)
            / (d3 - d2);
        b.clamp(self.beta_min, self.beta_max)
    }
}

impl AlgorithmConfig for IllinoisConfig {
    const NAME: &'static str = "illinois";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Illinois::new(*self, start))
    }
}

/// Illinois's per-flow state: the window core (in segments) with [`IllinoisRule`].
pub type Illinois = WindowCore<IllinoisRule>;

/// What Illinois adds to the window core: the delay statistics behind `alpha` and `beta`.
#[derive(Debug, Clone)]
pub struct IllinoisRule {
    cfg: IllinoisConfig,
    alpha: f64,
    beta: f64,
    /// Smallest RTT, µs (0: none yet).
    base_rtt_us: u64,
    /// Largest RTT, µs.
    max_rtt_us: u64,
    /// Sum and count of the current RTT's samples.
    sum_rtt_us: f64,
    cnt_rtt: u32,
    /// Consecutive low-delay RTTs since delay last rose above `d1`.
    rtt_low: u32,
    /// Whether delay has risen above `d1` since `alpha` was last `alpha_max`.
    rtt_above: bool,
    /// Start of the current per-RTT period, µs.
    period_start_us: u64,
}

impl Illinois {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: IllinoisConfig, start: &FlowStart) -> Self {
        let rule = IllinoisRule {
            cfg: cfg.sanitized(),
            alpha: ALPHA_BASE,
            beta: BETA_BASE,
            base_rtt_us: 0,
            max_rtt_us: 0,
            sum_rtt_us: 0.0,
            cnt_rtt: 0,
            rtt_low: 0,
            rtt_above: false,
            period_start_us: 0,
        };
        WindowCore::with_rule(rule, start)
    }

    /// Linux `alpha()`: the curve, with the `theta` wait before returning to `alpha_max`.
    pub fn next_alpha(&mut self, da_us: f64, dm_us: f64) -> f64 {
        self.rule.next_alpha(da_us, dm_us)
    }

    /// Current `(alpha, beta)`.
    pub fn alpha_beta(&self) -> (f64, f64) {
        (self.rule.alpha, self.rule.beta)
    }
}

impl IllinoisRule {
    /// Linux `tcp_illinois_state(TCP_CA_Loss)`: base `alpha`/`beta`, fresh averages.
    fn reset_delay_state(&mut self) {
        self.alpha = ALPHA_BASE;
        self.beta = BETA_BASE;
        self.rtt_low = 0;
        self.rtt_above = false;
        self.sum_rtt_us = 0.0;
        self.cnt_rtt = 0;
    }

    fn on_rtt_sample(&mut self, rtt_us: u64, min_rtt_us: u64) {
        for s in [rtt_us, min_rtt_us] {
            if s > 0 && (self.base_rtt_us == 0 || s < self.base_rtt_us) {
                self.base_rtt_us = s;
            }
        }
        if rtt_us > 0 {
            self.max_rtt_us = self.max_rtt_us.max(rtt_us);
            self.sum_rtt_us += rtt_us as f64;
            self.cnt_rtt = self.cnt_rtt.saturating_add(1);
        }
    }

    fn next_alpha(&mut self, da_us: f64, dm_us: f64) -> f64 {
        if da_us <= dm_us / 100.0 {
            if !self.rtt_above {
                return self.cfg.alpha_max;
            }
            self.rtt_low += 1;
            if self.rtt_low < self.cfg.theta {
                return self.alpha;
            }
            self.rtt_low = 0;
            self.rtt_above = false;
            return self.cfg.alpha_max;
        }
        self.rtt_above = true;
        self.cfg.alpha_curve(da_us, dm_us)
    }

    /// Linux `update_params`: once per RTT, from the RTT's average delay, for window `cwnd`.
    fn update_params(&mut self, cwnd: f64) {
        if cwnd < self.cfg.win_thresh_segments {
            self.alpha = ALPHA_BASE;
            self.beta = BETA_BASE;
        } else if self.cnt_rtt > 0 && self.base_rtt_us > 0 {
            let base = self.base_rtt_us as f64;
            let dm = (self.max_rtt_us as f64 - base).max(0.0);
            let avg = self.sum_rtt_us / f64::from(self.cnt_rtt);
            let da = (avg - base).clamp(0.0, dm);
            self.alpha = self.next_alpha(da, dm);
            self.beta = self.cfg.beta_curve(da, dm);
        }
        self.sum_rtt_us = 0.0;
        self.cnt_rtt = 0;
    }
}

impl WindowRule for IllinoisRule {
    type Unit = Segments;

    const NAME: &'static str = IllinoisConfig::NAME;
    const SLOW_START_UNTIL_LOSS: bool = true;

    fn adopt(&mut self, _w: &WindowState<Segments>, h: &Handoff) {
        self.base_rtt_us = h.min_rtt_us;
        self.max_rtt_us = h.srtt_us.max(h.min_rtt_us);
        self.reset_delay_state();
        self.period_start_us = h.now_us;
    }

    /// The delay statistics, and `alpha`/`beta` once per RTT.
    fn on_measurement(&mut self, w: &WindowState<Segments>, m: &Measurement) {
        self.on_rtt_sample(m.rtt_us, m.min_rtt_us);
        if self.base_rtt_us > 0 && w.now_us.saturating_sub(self.period_start_us) >= self.base_rtt_us
        {
            self.period_start_us = w.now_us;
            self.update_params(w.cwnd);
        }
    }

    /// `alpha` segments per window acknowledged.
    fn on_ack_in_avoidance(&mut self, w: &mut WindowState<Segments>, acked: f64, _now_us: u64) {
        w.cwnd = w.clamp(w.cwnd + self.alpha * acked / w.cwnd);
    }

    /// `max((1 - beta) cwnd, 2)` (Linux `tcp_illinois_ssthresh`), on a loss and a timeout.
    fn ssthresh_on_congestion(&mut self, w: &WindowState<Segments>) -> f64 {
        w.clamp(w.cwnd * (1.0 - self.beta))
    }

    /// Base `alpha`/`beta` after a timeout.
    fn on_timeout(&mut self, _w: &mut WindowState<Segments>) {
        self.reset_delay_state();
    }

    /// The handoff's min RTT is `base_rtt`.
    fn handoff(&self, _w: &WindowState<Segments>, h: &mut Handoff) {
        h.min_rtt_us = self.base_rtt_us;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{report, start};
    use crate::api::Pacing;

    const MSS: u32 = 1000;

    fn illinois(iw_segments: u32) -> Illinois {
        Illinois::new(IllinoisConfig::default(), &start(MSS, iw_segments))
    }

    fn close(a: f64, b: f64) -> bool {
        (a - b).abs() < 1e-9
    }

    #[test]
    fn alpha_runs_from_alpha_max_at_d1_to_alpha_min_at_dm() {
        // §3 eq. 3: alpha = k1 / (k2 + da).
        let c = IllinoisConfig::default();
        let dm = 50_000.0;
        let d1 = dm / 100.0;
        assert!(close(c.alpha_curve(0.0, dm), ALPHA_MAX));
        assert!(close(c.alpha_curve(d1, dm), ALPHA_MAX));
        assert!(close(c.alpha_curve(dm, dm), ALPHA_MIN));
        let k1 = (dm - d1) * ALPHA_MIN * ALPHA_MAX / (ALPHA_MAX - ALPHA_MIN);
        let k2 = (dm - d1) * ALPHA_MIN / (ALPHA_MAX - ALPHA_MIN) - d1;
        for da in [1_000.0, 5_000.0, 20_000.0, 40_000.0] {
            assert!((c.alpha_curve(da, dm) - k1 / (k2 + da)).abs() < 1e-9);
        }
    }

    #[test]
    fn beta_is_min_below_d2_max_above_d3_and_linear_between() {
        // §3 eq. 4: beta = k3 + k4 da.
        let c = IllinoisConfig::default();
        let dm = 50_000.0;
        let (d2, d3) = (dm / 10.0, 8.0 * dm / 10.0);
        assert!(close(c.beta_curve(d2, dm), BETA_MIN));
        assert!(close(c.beta_curve(d3, dm), BETA_MAX));
        assert!(close(c.beta_curve(dm, dm), BETA_MAX));
        let k3 = (BETA_MIN * d3 - BETA_MAX * d2) / (d3 - d2);
        let k4 = (BETA_MAX - BETA_MIN) / (d3 - d2);
        for da in [6_000.0, 20_000.0, 39_000.0] {
            assert!((c.beta_curve(da, dm) - (k3 + k4 * da)).abs() < 1e-12);
        }
        assert!(close(c.beta_curve(0.0, 0.0), BETA_MIN), "no delay spread");
    }

    #[test]
    fn alpha_waits_theta_low_delay_rtts_before_returning_to_alpha_max() {
        let mut i = illinois(20);
        let dm = 50_000.0;
        assert!(close(i.next_alpha(0.0, dm), ALPHA_MAX), "never above d1");
        let high = i.next_alpha(25_000.0, dm);
        i.rule.alpha = high;
        for _ in 1..THETA {
            assert!(close(i.next_alpha(0.0, dm), high));
        }
        assert!(close(i.next_alpha(0.0, dm), ALPHA_MAX));
    }

    #[test]
    fn parameters_follow_the_average_delay_of_each_rtt() {
        let mut i = illinois(20);
        i.state.ssthresh = 10.0;
        i.on_report(&report(50_000, 0, 50_000));
        i.on_report(&report(150_000, 0, 100_000));
        // The RTT ending at 150 ms averaged 100 ms: da = dm → alpha_min, beta_max.
        let (a, b) = i.alpha_beta();
        assert!(close(a, ALPHA_MIN) && close(b, BETA_MAX), "{a} {b}");
        // Next RTT at base delay: beta_min; alpha waits theta RTTs.
        i.on_report(&report(200_000, 0, 50_000));
        let (a, b) = i.alpha_beta();
        assert!(close(a, ALPHA_MIN) && close(b, BETA_MIN), "{a} {b}");
    }

    #[test]
    fn small_windows_use_reno_parameters() {
        let mut i = illinois(10);
        i.state.ssthresh = 5.0;
        i.on_report(&report(50_000, 0, 50_000));
        i.on_report(&report(150_000, 0, 100_000));
        assert_eq!(i.alpha_beta(), (ALPHA_BASE, BETA_BASE));
    }

    #[test]
    fn avoidance_adds_alpha_per_window_and_loss_keeps_one_minus_beta() {
        let mut i = illinois(20);
        i.state.ssthresh = 10.0;
        i.rule.alpha = 4.0;
        i.rule.beta = 0.25;
        i.rule.on_ack(&mut i.state, 20 * u64::from(MSS), 0);
        assert!(close(i.cwnd_segments(), 24.0));
        i.on_loss(1_000);
        assert!(close(i.cwnd_segments(), 18.0));
        assert!(close(i.ssthresh_segments(), 18.0));
    }

    #[test]
    fn timeout_restarts_from_two_segments_with_base_parameters() {
        let mut i = illinois(40);
        i.rule.alpha = 4.0;
        i.rule.beta = 0.25;
        i.on_timeout(50_000);
        assert!(close(i.cwnd_segments(), 2.0));
        assert!(close(i.ssthresh_segments(), 30.0));
        assert_eq!(i.alpha_beta(), (ALPHA_BASE, BETA_BASE));
    }

    #[test]
    fn adopting_a_handoff_outside_slow_start_continues_in_avoidance() {
        let mut i = illinois(10);
        let h = Handoff {
            cwnd_bytes: 50_000,
            in_first_slow_start: false,
            last_loss_us: Some(0),
            min_rtt_us: 50_000,
            srtt_us: 60_000,
            ..Handoff::flow_start(&FlowStart {
                sock_id: 1,
                mss_bytes: MSS,
                init_cwnd_bytes: 10 * MSS,
                seed: 0,
            })
        };
        let c = i.activate(&h);
        assert_eq!(c.cwnd_bytes, Some(50_000));
        assert_eq!(c.pacing, Some(Pacing::Unpaced));
        i.on_report(&report(50_000, 50_000, 50_000));
        assert!(i.cwnd_bytes() <= 60_000 && i.cwnd_bytes() >= 50_000);
    }
}
