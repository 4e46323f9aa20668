//! Cubic (RFC 9438), with its Reno-friendly region and fast convergence, per report.
//!
//! Model (windows in segments, time in seconds):
//! - Window growth in congestion avoidance (RFC 9438 §4.2, eq. 1 and 2):
//!   `W_cubic(t) = C (t - K)^3 + W_max`, `K = cbrt((W_max - cwnd_epoch) / C)`, where `t` runs
//!   from the start of the epoch (the last window reduction) and `cwnd_epoch` is the window
//!   then. Each report moves the window towards `target = W_cubic(t + RTT)`, clamped to
//!   `[cwnd, 1.5 cwnd]` (§4.2): `cwnd += (target - cwnd) * acked / cwnd`.
//! - Reno-friendly region (§4.3, eq. 4): `W_est += alpha_cubic * acked / cwnd` with
//!   `alpha_cubic = 3 (1 - beta) / (1 + beta)`, raised to 1 once `W_est >= cwnd_prior`; when
//!   `W_cubic(t) < W_est` the window is `W_est`.
//! - Multiplicative decrease (§4.6): `ssthresh = cwnd = max(beta * cwnd, 2)`, once per
//!   recovery ([`crate::recovery`]: until twice the window at the reduction is acked in order).
//! - Fast convergence (§4.7): on a loss below the previous `W_max`,
//!   `W_max = cwnd * (1 + beta) / 2`, else `W_max = cwnd`.
//! - Timeout (§4.8): `ssthresh = beta * cwnd`, the window goes back to the loss window and
//!   slow start begins; the epoch restarts when avoidance resumes.
//! - Slow start below `ssthresh` (RFC 5681, byte counting).
//!
//! Defaults: `C = 0.4`, `beta = 0.7` (§4.6), fast convergence on, no pacing (the rate is
//! explicitly cleared on activation), the datapath's initial window.
//!
//! Simplified: reports come once per RTT (or at once on a loss), so growth is applied per
//! report rather than per ACK; the epoch starts at the reduction, not at the first ACK after
//! recovery (the window is held during recovery); `HyStart++` (§4.10)
//! and the spurious-congestion undo (§4.9) are not implemented; the loss window is 2 segments
//! (the suite's floor), not 1. A handoff outside slow start starts a new epoch with
//! `W_max = cwnd` (the convex, probing region).

use crate::api::{Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing};
use crate::programs::{PER_RTT_URGENT, ProgramSpec};
use crate::recovery::Recovery;
use crate::rtt::RttEstimator;
use crate::window;

#[cfg(test)]
mod tests;

/// RFC 9438 §5.1: `C = 0.4` (segments / s^3).
pub const C: f64 = 0.4;
/// RFC 9438 §4.6: multiplicative decrease factor.
pub const BETA_CUBIC: f64 = 0.7;
/// RFC 9438 §4.3: additive increase of the Reno-friendly estimate, `3 (1 - beta) / (1 + beta)`.
pub const ALPHA_CUBIC: f64 = 3.0 * (1.0 - BETA_CUBIC) / (1.0 + BETA_CUBIC);
pub use crate::window::MIN_CWND_SEGMENTS;

/// Programs Cubic installs.
static PROGRAMS: [&ProgramSpec; 1] = [&PER_RTT_URGENT];

/// Cubic's configuration and factory.
#[derive(Debug, Clone, Copy)]
pub struct CubicConfig {
    /// `C`, segments / s^3 (RFC 9438 recommends 0.4).
    pub c: f64,
    /// `beta_cubic` (RFC 9438 recommends 0.7).
    pub beta: f64,
    /// Fast convergence (§4.7; recommended on).
    pub fast_convergence: bool,
    /// The Reno-friendly region (§4.3; recommended on).
    pub reno_friendly: bool,
}

impl Default for CubicConfig {
    fn default() -> Self {
        Self {
            c: C,
            beta: BETA_CUBIC,
            fast_convergence: true,
            reno_friendly: true,
        }
    }
}

impl CubicConfig {
    /// Sets `C` (0.4 recommended; must be positive).
    #[must_use]
    pub fn c(mut self, c: f64) -> Self {
        self.c = c;
        self
    }

    /// Sets `beta_cubic` (0.7 recommended; in (0, 1)).
    #[must_use]
    pub fn beta(mut self, beta: f64) -> Self {
        self.beta = beta;
        self
    }

    /// Turns fast convergence on or off (on recommended).
    #[must_use]
    pub fn fast_convergence(mut self, on: bool) -> Self {
        self.fast_convergence = on;
        self
    }

    /// Turns the Reno-friendly region on or off (on recommended).
    #[must_use]
    pub fn reno_friendly(mut self, on: bool) -> Self {
        self.reno_friendly = on;
        self
    }

    /// The parameters with out-of-range values replaced by the defaults.
    fn sanitized(self) -> Self {
        let d = Self::default();
        Self {
            c: if self.c.is_finite() && self.c > 0.0 {
                self.c
            } else {
                d.c
            },
            beta: if self.beta > 0.0 && self.beta < 1.0 {
                self.beta
            } else {
                d.beta
            },
            ..self
        }
    }
}

impl AlgorithmConfig for CubicConfig {
    const NAME: &'static str = "cubic";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Cubic::new(*self, start))
    }
}

/// One congestion-avoidance epoch (§4.2).
#[derive(Debug, Clone, Copy, PartialEq)]
struct Epoch {
    start_us: u64,
    /// `K`, seconds.
    k_s: f64,
    /// `W_max`, segments.
    w_max: f64,
}

/// Cubic's per-flow state.
#[derive(Debug, Clone)]
pub struct Cubic {
    cfg: CubicConfig,
    mss_bytes: u32,
    /// Window, segments.
    cwnd: f64,
    /// Slow-start threshold, segments.
    ssthresh: f64,
    /// `W_max` of the last reduction, segments (0: none yet).
    w_max: f64,
    /// Window just before the last reduction, segments.
    cwnd_prior: f64,
    /// Reno-friendly estimate, segments.
    w_est: f64,
    epoch: Option<Epoch>,
    recovery: Recovery,
    last_loss_us: Option<u64>,
    in_first_slow_start: bool,
    rtt: RttEstimator,
    delivery_rate_bytes_per_sec: u64,
    now_us: u64,
}

impl Cubic {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: CubicConfig, start: &FlowStart) -> Self {
        let mut c = Self {
            cfg: cfg.sanitized(),
            mss_bytes: start.mss_bytes.max(1),
            cwnd: MIN_CWND_SEGMENTS,
            ssthresh: f64::INFINITY,
            w_max: 0.0,
            cwnd_prior: 0.0,
            w_est: 0.0,
            epoch: None,
            recovery: Recovery::default(),
            last_loss_us: None,
            in_first_slow_start: true,
            rtt: RttEstimator::default(),
            delivery_rate_bytes_per_sec: 0,
            now_us: 0,
        };
        c.adopt(&Handoff::flow_start(start));
        c
    }

    /// Largest window, segments.
    fn clamp(&self, w: f64) -> f64 {
        window::clamp(w, self.mss_bytes)
    }

    fn segments(&self, bytes: u64) -> f64 {
        window::segments(bytes, self.mss_bytes)
    }

    fn adopt(&mut self, h: &Handoff) {
        self.now_us = h.now_us;
        (self.cwnd, self.ssthresh) = window::adopt(h, self.mss_bytes);
        self.in_first_slow_start = h.in_first_slow_start;
        self.w_max = 0.0;
        self.cwnd_prior = self.cwnd;
        self.epoch = None;
        self.recovery = Recovery::default();
        self.last_loss_us = h.last_loss_us;
        self.rtt = RttEstimator::from_handoff(h.srtt_us, h.min_rtt_us);
        self.delivery_rate_bytes_per_sec = h.delivery_rate_bytes_per_sec;
    }

    /// `K = cbrt((W_max - cwnd_epoch) / C)` (§4.2 eq. 2), seconds; 0 above `W_max`.
    pub fn k_seconds(&self, w_max: f64, cwnd_epoch: f64) -> f64 {
        ((w_max - cwnd_epoch).max(0.0) / self.cfg.c).cbrt()
    }

    /// `W_cubic(t) = C (t - K)^3 + W_max` (§4.2 eq. 1), segments.
    pub fn w_cubic(&self, t_s: f64, k_s: f64, w_max: f64) -> f64 {
        self.cfg.c * (t_s - k_s).powi(3) + w_max
    }

    /// Starts an epoch at `now_us` from the current window (§4.2).
    fn start_epoch(&mut self, now_us: u64) {
        if self.cwnd >= self.w_max {
            self.w_max = self.cwnd;
        }
        self.epoch = Some(Epoch {
            start_us: now_us,
            k_s: self.k_seconds(self.w_max, self.cwnd),
            w_max: self.w_max,
        });
        self.w_est = self.cwnd;
    }

    /// Congestion avoidance for `acked` segments at `now_us` (§4.2, §4.3).
    fn avoid(&mut self, acked: f64, now_us: u64) {
        if self.epoch.is_none() {
            self.start_epoch(now_us);
        }
        let Some(e) = self.epoch else {
            return;
        };
        let t_s = now_us.saturating_sub(e.start_us) as f64 / 1e6;
        let rtt_s = self.rtt.srtt_us() as f64 / 1e6;
        let share = (acked / self.cwnd).min(1.0);
        let target = self
            .w_cubic(t_s + rtt_s, e.k_s, e.w_max)
            .clamp(self.cwnd, 1.5 * self.cwnd);
        let mut next = self.cwnd + (target - self.cwnd) * share;
        if self.cfg.reno_friendly {
            // §4.3: alpha_cubic until W_est reaches the window before the last reduction.
            let alpha = if self.w_est >= self.cwnd_prior {
                1.0
            } else {
                3.0 * (1.0 - self.cfg.beta) / (1.0 + self.cfg.beta)
            };
            self.w_est += alpha * share;
            if self.w_cubic(t_s, e.k_s, e.w_max) < self.w_est {
                next = next.max(self.w_est);
            }
        }
        self.cwnd = self.clamp(next);
    }

    /// The §4.6/§4.7 reduction shared by loss and timeout: returns the new `ssthresh`.
    fn reduce(&mut self, now_us: u64) -> f64 {
        self.last_loss_us = Some(now_us);
        self.in_first_slow_start = false;
        self.cwnd_prior = self.cwnd;
        self.w_max = if self.cfg.fast_convergence && self.cwnd < self.w_max {
            self.cwnd * (1.0 + self.cfg.beta) / 2.0
        } else {
            self.cwnd
        };
        self.ssthresh = self.clamp(self.cwnd * self.cfg.beta);
        self.ssthresh
    }

    /// A loss at `now_us`: one reduction per recovery (§4.6, §4.7).
    pub fn on_loss(&mut self, now_us: u64) {
        if self.recovery.active(now_us) {
            self.last_loss_us = Some(now_us);
            return;
        }
        let window_bytes = (self.cwnd * f64::from(self.mss_bytes)) as u64;
        self.cwnd = self.reduce(now_us);
        self.recovery
            .enter(now_us, self.rtt.srtt_us(), window_bytes);
        self.start_epoch(now_us);
    }

    /// A retransmission timeout at `now_us` (§4.8): back to the loss window and slow start.
    pub fn on_timeout(&mut self, now_us: u64) {
        self.reduce(now_us);
        self.cwnd = MIN_CWND_SEGMENTS;
        self.epoch = None;
        self.recovery.clear();
    }

    /// Window, segments.
    pub fn cwnd_segments(&self) -> f64 {
        self.cwnd
    }

    /// Slow-start threshold, segments (infinite before the first reduction).
    pub fn ssthresh_segments(&self) -> f64 {
        self.ssthresh
    }

    /// `W_max` of the current epoch, segments.
    pub fn w_max_segments(&self) -> f64 {
        self.w_max
    }

    fn cwnd_u32(&self) -> u32 {
        window::bytes(self.cwnd, self.mss_bytes)
    }
}

impl Algorithm for Cubic {
    fn name(&self) -> &'static str {
        CubicConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.adopt(handoff);
        Control::cwnd(self.cwnd_u32())
            .with_pacing(Pacing::Unpaced)
            .with_program(&PER_RTT_URGENT)
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        let now = self.now_us.max(m.now_us);
        self.now_us = now;
        self.rtt.on_sample(m.rtt_us, m.min_rtt_us);
        if m.rate_incoming_bytes_per_sec > 0 {
            self.delivery_rate_bytes_per_sec = m.rate_incoming_bytes_per_sec;
        }
        let in_recovery = self.recovery.holding(now);
        self.recovery.on_acked(m.acked_bytes);
        let mut acked = self.segments(m.acked_bytes);
        if !in_recovery && acked > 0.0 {
            if self.cwnd < self.ssthresh {
                // Slow start (RFC 5681 §3.1); the excess over ssthresh goes to avoidance.
                let grow = acked.min(self.ssthresh - self.cwnd);
                self.cwnd = self.clamp(self.cwnd + grow);
                acked -= grow;
            }
            if acked > 0.0 && self.cwnd >= self.ssthresh {
                self.avoid(acked, now);
            }
        }
        if m.timeout {
            self.on_timeout(now);
        } else if m.lost_pkts > 0 {
            self.on_loss(now);
        }
        Control::cwnd(self.cwnd_u32())
    }

    fn handoff(&self) -> Handoff {
        let ssthresh_bytes = window::ssthresh_to_bytes(self.ssthresh, self.mss_bytes);
        Handoff {
            now_us: self.now_us,
            cwnd_bytes: self.cwnd_u32(),
            ssthresh_bytes,
            pacing: Pacing::Unpaced,
            srtt_us: self.rtt.srtt_us(),
            min_rtt_us: self.rtt.min_rtt_us(),
            delivery_rate_bytes_per_sec: self.delivery_rate_bytes_per_sec,
            last_loss_us: self.last_loss_us,
            in_first_slow_start: self.in_first_slow_start,
        }
    }

    fn cwnd_bytes(&self) -> u32 {
        self.cwnd_u32()
    }
}
