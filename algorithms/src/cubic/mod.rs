//! Cubic (RFC 9438), with its Reno-friendly region and fast convergence, per report; by
//! default as Linux's `tcp_cubic` computes it ([`CubicVariant::Linux`], [`linux`]).
//!
//! Model (windows in segments, time in seconds):
//! - Window growth in congestion avoidance (RFC 9438 §4.2, eq. 1 and 2):
//!   `W_cubic(t) = C (t - K)^3 + W_max`, `K = cbrt((W_max - cwnd_epoch) / C)`, where `t` runs
//!   from the start of the epoch and `cwnd_epoch` is the window then.
//! - Multiplicative decrease (§4.6): `ssthresh = cwnd = max(beta * cwnd, 2)`, once per
//!   recovery ([`crate::recovery`]: until twice the window at the reduction is acked in order).
//! - Fast convergence (§4.7): on a loss below the previous `W_max`,
//!   `W_max = cwnd * (1 + beta) / 2`, else `W_max = cwnd`.
//! - Timeout (§4.8): `ssthresh = beta * cwnd`, the window goes back to the loss window and
//!   slow start begins; the epoch restarts when avoidance resumes.
//! - Slow start below `ssthresh` (RFC 5681, byte counting).
//!
//! The two variants differ in how a report's acknowledgements grow the window:
//! - [`CubicVariant::Linux`] (default; [`linux`]): Linux's `bictcp_update` and
//!   `tcp_cong_avoid_ai` replayed ACK by ACK over the report, in whole segments: the cubic
//!   target one minimum RTT ahead, at most 1 segment per 2 acknowledged (`cnt >= 2`), 5 % per
//!   RTT before any loss; the Reno estimate counts one segment per `cwnd x 15/8` acknowledged
//!   (`beta_scale`, an increase of 0.533 per RTT that never becomes 1) and, when it is ahead,
//!   the window closes the gap by `(W_est - cwnd) / cwnd` per acknowledged segment instead of
//!   jumping to it; the epoch starts at the first acknowledgement after recovery; a timeout
//!   forgets `W_max` (`bictcp_reset`).
//! - [`CubicVariant::Rfc9438`]: each report moves the window towards
//!   `target = W_cubic(t + SRTT)`, clamped to `[cwnd, 1.5 cwnd]`, by
//!   `(target - cwnd) * acked / cwnd`; the Reno-friendly estimate (§4.3, eq. 4) grows by
//!   `alpha_cubic * acked / cwnd` with `alpha_cubic = 3 (1 - beta) / (1 + beta)`, raised to 1
//!   once `W_est >= cwnd_prior`, and the window is `W_est` whenever `W_cubic(t) < W_est`; the
//!   epoch starts at the reduction. Under random loss the window lives in the Reno-friendly
//!   region, and the jump to `W_est` plus the increase of 1 made this variant deliver about
//!   18 % more than Linux at 1 % loss (issue 14's kernel comparison).
//!
//! Defaults: `C = 0.4`, `beta = 0.7` (§4.6), fast convergence on, no pacing (the rate is
//! explicitly cleared on activation), the datapath's initial window.
//!
//! Simplified: reports come once per RTT (or at once on a loss); the Linux variant spreads a
//! report's acknowledgements evenly over the time since the previous report and recomputes
//! `cnt` on each (Linux does so at most once per jiffy); `HyStart` / `HyStart++` (§4.10) and
//! the spurious-congestion undo (§4.9) are not implemented; the loss window is 2 segments (the
//! suite's floor), not 1. A handoff outside slow start starts a new epoch with `W_max = cwnd`
//! (the convex, probing region).

use crate::api::{Algorithm, AlgorithmConfig, FlowStart, Handoff};
use crate::programs::ProgramSpec;
use crate::window::{self, Segments, WindowCore, WindowRule, WindowState};

pub mod linux;
#[cfg(test)]
mod tests;

use linux::LinuxCubic;

/// RFC 9438 §5.1: `C = 0.4` (segments / s^3).
pub const C: f64 = 0.4;
/// RFC 9438 §4.6: multiplicative decrease factor.
pub const BETA_CUBIC: f64 = 0.7;
/// RFC 9438 §4.3: additive increase of the Reno-friendly estimate, `3 (1 - beta) / (1 + beta)`.
pub const ALPHA_CUBIC: f64 = 3.0 * (1.0 - BETA_CUBIC) / (1.0 + BETA_CUBIC);
pub use crate::window::MIN_CWND_SEGMENTS;

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
    /// Whose arithmetic grows the window (Linux's recommended: what kernel Cubic does).
    pub variant: CubicVariant,
    /// Lets the window follow the ACK clock in the datapath between reports: slow start and
    /// the first answer to a loss there (off by default; [`WindowCore::with_ack_clock`]).
    pub ack_clock: bool,
}

/// Whose congestion-avoidance arithmetic Cubic follows (see the module doc).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum CubicVariant {
    /// Linux's `tcp_cubic` (`bictcp_update`, `tcp_friendliness`), ACK by ACK in whole
    /// segments.
    #[default]
    Linux,
    /// RFC 9438's equations, once per report, in fractional segments.
    Rfc9438,
}

impl Default for CubicConfig {
    fn default() -> Self {
        Self {
            c: C,
            beta: BETA_CUBIC,
            fast_convergence: true,
            reno_friendly: true,
            variant: CubicVariant::Linux,
            ack_clock: false,
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

    /// Chooses Linux's arithmetic or RFC 9438's (Linux recommended).
    #[must_use]
    pub fn variant(mut self, variant: CubicVariant) -> Self {
        self.variant = variant;
        self
    }

    /// Lets the window follow the ACK clock in the datapath between reports
    /// ([`WindowCore::with_ack_clock`]; off by default).
    #[must_use]
    pub fn ack_clock(mut self, on: bool) -> Self {
        self.ack_clock = on;
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
        &window::PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Cubic::new(*self, start))
    }
}

/// Cubic with its window following the ACK clock in the datapath ([`CubicConfig::ack_clock`]):
/// the registry's variant `cubic-ackclock` (`docs/algorithms.md`, "The ACK clock in the
/// datapath").
#[derive(Debug, Clone, Copy, Default)]
pub struct CubicAckClockConfig(pub CubicConfig);

impl AlgorithmConfig for CubicAckClockConfig {
    const NAME: &'static str = "cubic-ackclock";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Cubic::new(self.0.ack_clock(true), start).registered_as(Self::NAME))
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

/// Cubic's per-flow state: the window core (in segments) with [`CubicRule`].
pub type Cubic = WindowCore<CubicRule>;

/// What Cubic adds to the window core: the epoch, `W_max` and the Reno-friendly estimate.
#[derive(Debug, Clone)]
pub struct CubicRule {
    cfg: CubicConfig,
    /// `W_max` of the last reduction, segments (0: none yet).
    w_max: f64,
    /// Window just before the last reduction, segments.
    cwnd_prior: f64,
    /// Reno-friendly estimate, segments.
    w_est: f64,
    epoch: Option<Epoch>,
    /// Linux's per-ACK state ([`CubicVariant::Linux`]).
    linux: LinuxCubic,
}

impl Cubic {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: CubicConfig, start: &FlowStart) -> Self {
        let rule = CubicRule {
            cfg: cfg.sanitized(),
            w_max: 0.0,
            cwnd_prior: 0.0,
            w_est: 0.0,
            epoch: None,
            linux: LinuxCubic::default(),
        };
        WindowCore::with_rule(rule, start).with_ack_clock(cfg.ack_clock)
    }

    /// `K = cbrt((W_max - cwnd_epoch) / C)` (§4.2 eq. 2), seconds; 0 above `W_max`.
    pub fn k_seconds(&self, w_max: f64, cwnd_epoch: f64) -> f64 {
        self.rule.k_seconds(w_max, cwnd_epoch)
    }

    /// `W_cubic(t) = C (t - K)^3 + W_max` (§4.2 eq. 1), segments.
    pub fn w_cubic(&self, t_s: f64, k_s: f64, w_max: f64) -> f64 {
        self.rule.w_cubic(t_s, k_s, w_max)
    }

    /// `W_max` of the current epoch, segments.
    pub fn w_max_segments(&self) -> f64 {
        match self.rule.cfg.variant {
            CubicVariant::Linux => f64::from(self.rule.linux.last_max_cwnd),
            CubicVariant::Rfc9438 => self.rule.w_max,
        }
    }

    /// Linux's per-ACK state (meaningful with [`CubicVariant::Linux`]).
    pub fn linux_state(&self) -> &LinuxCubic {
        &self.rule.linux
    }
}

impl CubicRule {
    fn k_seconds(&self, w_max: f64, cwnd_epoch: f64) -> f64 {
        ((w_max - cwnd_epoch).max(0.0) / self.cfg.c).cbrt()
    }

    fn w_cubic(&self, t_s: f64, k_s: f64, w_max: f64) -> f64 {
        self.cfg.c * (t_s - k_s).powi(3) + w_max
    }

    /// Starts an epoch at `now_us` from the current window (§4.2).
    fn start_epoch(&mut self, w: &WindowState<Segments>, now_us: u64) {
        if w.cwnd >= self.w_max {
            self.w_max = w.cwnd;
        }
        self.epoch = Some(Epoch {
            start_us: now_us,
            k_s: self.k_seconds(self.w_max, w.cwnd),
            w_max: self.w_max,
        });
        self.w_est = w.cwnd;
    }

    /// Congestion avoidance for `acked` segments at `now_us` (§4.2, §4.3).
    fn avoid(&mut self, w: &mut WindowState<Segments>, acked: f64, now_us: u64) {
        if self.epoch.is_none() {
            self.start_epoch(w, now_us);
        }
        let Some(e) = self.epoch else {
            return;
        };
        let t_s = now_us.saturating_sub(e.start_us) as f64 / 1e6;
        let rtt_s = w.rtt.srtt_us() as f64 / 1e6;
        let share = (acked / w.cwnd).min(1.0);
        let target = self
            .w_cubic(t_s + rtt_s, e.k_s, e.w_max)
            .clamp(w.cwnd, 1.5 * w.cwnd);
        let mut next = w.cwnd + (target - w.cwnd) * share;
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
        w.cwnd = w.clamp(next);
    }
}

impl WindowRule for CubicRule {
    type Unit = Segments;

    const NAME: &'static str = CubicConfig::NAME;
    const SLOW_START_UNTIL_LOSS: bool = true;

    fn adopt(&mut self, w: &WindowState<Segments>, h: &Handoff) {
        self.w_max = 0.0;
        self.cwnd_prior = w.cwnd;
        self.epoch = None;
        self.linux = LinuxCubic::default();
        self.linux.last_report_us = h.now_us;
        if !h.in_first_slow_start {
            // The convex region from the handed-over window, as the RFC variant does (Linux's
            // `W_max = 0` would hold growth at 5 % per RTT until the next loss).
            self.linux.last_max_cwnd = w.cwnd.floor().min(f64::from(u32::MAX)) as u32;
        }
    }

    fn on_ack_in_avoidance(&mut self, w: &mut WindowState<Segments>, acked: f64, now_us: u64) {
        // Slow start may stop short of `ssthresh` (at the largest window, or a rounding step
        // below it); the epoch begins at `ssthresh` only.
        if w.cwnd >= w.ssthresh {
            match self.cfg.variant {
                CubicVariant::Linux => self.linux.avoid(&self.cfg, w, acked, now_us),
                CubicVariant::Rfc9438 => self.avoid(w, acked, now_us),
            }
        }
    }

    fn on_measurement(&mut self, _w: &WindowState<Segments>, m: &crate::api::Measurement) {
        // Linux spreads a report's ACKs over the time since the previous report.
        if m.acked_bytes > 0 {
            self.linux.acks_from_us = self.linux.last_report_us;
            self.linux.last_report_us = self.linux.last_report_us.max(m.now_us);
        }
    }

    /// The §4.6/§4.7 reduction, on a loss and a timeout: `W_max` (with fast convergence) and
    /// `ssthresh = beta * cwnd`.
    fn ssthresh_on_congestion(&mut self, w: &WindowState<Segments>) -> f64 {
        if self.cfg.variant == CubicVariant::Linux {
            return w.clamp(self.linux.recalc_ssthresh(&self.cfg, w.cwnd));
        }
        self.cwnd_prior = w.cwnd;
        self.w_max = if self.cfg.fast_convergence && w.cwnd < self.w_max {
            w.cwnd * (1.0 + self.cfg.beta) / 2.0
        } else {
            w.cwnd
        };
        w.clamp(w.cwnd * self.cfg.beta)
    }

    /// `cwnd = ssthresh` and a new epoch from there (§4.6).
    /// Linux: the epoch starts at the first acknowledgement in avoidance after recovery.
    fn on_recovery_start(&mut self, w: &mut WindowState<Segments>, now_us: u64) {
        w.cwnd = w.ssthresh;
        match self.cfg.variant {
            CubicVariant::Linux => self.linux.on_reduction(),
            CubicVariant::Rfc9438 => self.start_epoch(w, now_us),
        }
    }

    /// §4.8: the epoch restarts when avoidance resumes; Linux also forgets `W_max`
    /// (`bictcp_reset` on entering the Loss state).
    fn on_timeout(&mut self, _w: &mut WindowState<Segments>) {
        self.epoch = None;
        self.linux.on_timeout();
    }
}
