//! PCC Vivace (Dong, Meng, Zarchy, Godfrey, Schapira, "PCC Vivace: Online-Learning Congestion
//! Control", NSDI 2018): rate-based gradient ascent on a utility function, measured over
//! monitor intervals (MIs).
//!
//! Model (§2 and §3 of the paper; rates `x` in Mbit/s as there):
//! - Utility of one MI sent at rate `x` (§2.1, Vivace-latency):
//!   `u(x) = x^t - b * x * d(RTT)/dT - c * x * L`, `t = 0.9`, `b = 900`, `c = 11.35`, where
//!   `d(RTT)/dT` is the RTT gradient over the MI (seconds per second) and `L` its loss rate.
//!   RTT gradients smaller in magnitude than a tolerance (0.01) count as 0 (this
//!   implementation's filter against measurement noise).
//! - Starting phase (§3): the rate doubles every MI while the utility grows; at the first drop
//!   it returns to the rate of the best MI and starts probing.
//! - Probing (§3.1): two MIs at `r (1 + eps)` and `r (1 - eps)` (`eps = 0.05`, in a random
//!   order from the flow's seed), then the gradient
//!   `gamma = (u(r1) - u(r2)) / (r1 - r2)` (utility per Mbit/s).
//! - Step (§3.2): `dr = m(tau) * theta * gamma`, `theta = 1` Mbit/s per unit of gradient, with
//!   the confidence amplifier `m(tau) = tau`, `tau` the number of consecutive steps in the same
//!   direction (1 after a change of direction).
//! - Dynamic change boundary (§3.2): `|dr| <= omega_k * r`, `omega_k = omega_0 + k * delta`,
//!   `omega_0 = 0.05`, `delta = 0.1` in the paper ([`PAPER_DELTA`]), 0.02 by default here;
//!   `k` grows by one each consecutive time the step is clipped, and returns to 0 when a step
//!   fits or the direction changes.
//! - The window is only a cap: `cwnd = 2 * rate * sRTT`; the pacing rate is the rate.
//! - A timeout halves the rate and the window and restarts probing.
//!
//! ```text
//!   Starting --(utility drops: back to best rate)--> Probing: MI r(1+eps), MI r(1-eps)
//!                                                      ^          | both results in:
//!                                                      +-- step --+ r += clip(m theta gamma)
//! ```
//!
//! Defaults ([`VivaceConfig::default`]): the paper's `t`, `b`, `c`, `eps`, `omega_0`;
//! `theta = 1`; `delta = 0.02`; program [`PER_RTT`] (no urgent loss reports: losses are part of
//! the MI).
//!
//! Simplified:
//! - Reports arrive once per RTT, so one report is one MI. The ACKs of a report were sent one
//!   report interval earlier, so the results of an MI arrive with the report after next (a
//!   pipeline of two MIs); MIs between a decision and its results are sent at the base rate,
//!   and results of MIs sent before a phase change are discarded.
//! - The RTT gradient of an MI is the change of the report's latest RTT over the MI's
//!   duration, not a linear regression over every sample of the MI.
//! - Each step is made from a fresh probe pair (the paper's "moving" phase, which keeps stepping
//!   while the utility improves, is folded into the amplifier, which grows while successive
//!   probe pairs agree on the direction).
//! - A step is taken only when the probe pair's gradient has the sign of the previous pair's
//!   (two agreeing trials, as PCC's randomized controlled trials): with per-RTT reports an MI's
//!   results are coarse, and a competing flow's probing moves the shared RTT.
//! - `delta = 0.02` instead of 0.1: with the paper's value, runs of clipped steps grow the
//!   boundary so fast that two flows on a 1-BDP buffer swap the link back and forth (Jain 0.79
//!   over the last 10 s of 60 s in the simulator, 0.53 without the agreement rule above)
//!   instead of converging (1.00 with 0.02; 0.99 over the last 10 s of 30 s).
//! - The loss rate is `lost / (lost + acknowledged + SACKed)` packets of the report.
//! - On leaving the starting phase the rate is the best MI's, but no more than the latest
//!   delivery-rate sample (with results two MIs late, the best MI may be past the capacity).
//! - Adopting a handoff outside the first slow start goes straight to probing from the
//!   handed-over delivery rate (or `cwnd / sRTT`); the window stays within a factor of two of
//!   the handed-over one for the first sRTT.

use std::collections::VecDeque;

use crate::api::{
    Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing, SplitMix64,
};
use crate::programs::{PER_RTT, ProgramSpec};
use crate::rtt::RttEstimator;

/// §2.1: exponent of the throughput reward, `t`.
pub const T: f64 = 0.9;
/// §2.1: latency-gradient penalty, `b`.
pub const B: f64 = 900.0;
/// §2.1: loss penalty, `c`.
pub const C: f64 = 11.35;
/// §3.1: probing step, `epsilon`.
pub const EPSILON: f64 = 0.05;
/// §3.2: conversion from utility gradient to rate change, `theta` (Mbit/s per unit gradient).
pub const THETA: f64 = 1.0;
/// §3.2: initial change boundary, `omega_0`.
pub const OMEGA_0: f64 = 0.05;
/// §3.2: growth of the change boundary, `delta`, as the paper sets it.
pub const PAPER_DELTA: f64 = 0.1;
/// Growth of the change boundary used by default: smaller than the paper's (see the module doc).
pub const DELTA: f64 = 0.02;
/// RTT gradients below this in magnitude count as 0 (noise filter).
pub const RTT_GRADIENT_TOLERANCE: f64 = 0.01;
/// Results of an MI arrive this many reports after it started (see the module doc).
pub const RESULT_LAG_MIS: usize = 2;
/// RTT assumed before any sample, µs.
const DEFAULT_RTT_US: u64 = 100_000;
/// Slowest rate, bytes/s (0.1 Mbit/s).
const MIN_RATE_BYTES_PER_SEC: f64 = 12_500.0;
/// Fastest rate, bytes/s (the datapath's rate is a u32, and `u32::MAX` means unpaced).
const MAX_RATE_BYTES_PER_SEC: f64 = (u32::MAX - 1) as f64;
/// RTTs above this are treated as this, µs (keeps the arithmetic finite).
const MAX_RTT_US: u64 = 60_000_000;

/// Programs Vivace installs.
static PROGRAMS: [&ProgramSpec; 1] = [&PER_RTT];

/// Vivace's configuration and factory.
#[derive(Debug, Clone, Copy)]
pub struct VivaceConfig {
    /// Throughput exponent `t` (0.9 recommended; in (0, 1)).
    pub t: f64,
    /// Latency-gradient penalty `b` (900 recommended; non-negative).
    pub b: f64,
    /// Loss penalty `c` (11.35 recommended; non-negative).
    pub c: f64,
    /// Probing step `epsilon` (0.05 recommended; in (0, 0.5)).
    pub epsilon: f64,
    /// `theta`, Mbit/s per unit of utility gradient (1 recommended; positive).
    pub theta: f64,
    /// `omega_0` (0.05 recommended; positive).
    pub omega_0: f64,
    /// `delta` (0.1 recommended; non-negative).
    pub delta: f64,
    /// RTT-gradient tolerance (0.01 recommended; non-negative).
    pub rtt_gradient_tolerance: f64,
}

impl Default for VivaceConfig {
    fn default() -> Self {
        Self {
            t: T,
            b: B,
            c: C,
            epsilon: EPSILON,
            theta: THETA,
            omega_0: OMEGA_0,
            delta: DELTA,
            rtt_gradient_tolerance: RTT_GRADIENT_TOLERANCE,
        }
    }
}

impl VivaceConfig {
    /// Sets the latency penalty `b` (900 recommended).
    #[must_use]
    pub fn b(mut self, b: f64) -> Self {
        self.b = b;
        self
    }

    /// Sets the loss penalty `c` (11.35 recommended).
    #[must_use]
    pub fn c(mut self, c: f64) -> Self {
        self.c = c;
        self
    }

    /// Sets the probing step `epsilon` (0.05 recommended).
    #[must_use]
    pub fn epsilon(mut self, epsilon: f64) -> Self {
        self.epsilon = epsilon;
        self
    }

    /// Sets the boundary growth `delta` (0.02 recommended here; the paper's is 0.1).
    #[must_use]
    pub fn delta(mut self, delta: f64) -> Self {
        self.delta = delta;
        self
    }

    /// Sets the initial boundary `omega_0` (0.05 recommended).
    #[must_use]
    pub fn omega_0(mut self, omega_0: f64) -> Self {
        self.omega_0 = omega_0;
        self
    }

    /// Sets `theta` (1 recommended).
    #[must_use]
    pub fn theta(mut self, theta: f64) -> Self {
        self.theta = theta;
        self
    }

    /// The parameters with out-of-range values replaced by the defaults.
    fn sanitized(self) -> Self {
        let d = Self::default();
        let pick = |v: f64, ok: bool, default: f64| if v.is_finite() && ok { v } else { default };
        Self {
            t: pick(self.t, self.t > 0.0 && self.t < 1.0, d.t),
            b: pick(self.b, self.b >= 0.0, d.b),
            c: pick(self.c, self.c >= 0.0, d.c),
            epsilon: pick(
                self.epsilon,
                self.epsilon > 0.0 && self.epsilon < 0.5,
                d.epsilon,
            ),
            theta: pick(self.theta, self.theta > 0.0, d.theta),
            omega_0: pick(self.omega_0, self.omega_0 > 0.0, d.omega_0),
            delta: pick(self.delta, self.delta >= 0.0, d.delta),
            rtt_gradient_tolerance: pick(
                self.rtt_gradient_tolerance,
                self.rtt_gradient_tolerance >= 0.0,
                d.rtt_gradient_tolerance,
            ),
        }
    }

    /// `u(x) = x^t - b x dRTT/dT - c x L` (§2.1), `x` in Mbit/s.
    pub fn utility(&self, x_mbps: f64, rtt_gradient: f64, loss_rate: f64) -> f64 {
        let g = if rtt_gradient.abs() < self.rtt_gradient_tolerance {
            0.0
        } else {
            rtt_gradient
        };
        x_mbps.max(0.0).powf(self.t) - self.b * x_mbps * g - self.c * x_mbps * loss_rate
    }

    /// `gamma = (u1 - u2) / (r1 - r2)` (§3.1), utility per Mbit/s (0 for equal rates).
    pub fn gradient(r1_mbps: f64, u1: f64, r2_mbps: f64, u2: f64) -> f64 {
        let dr = r1_mbps - r2_mbps;
        if dr.abs() < 1e-12 {
            0.0
        } else {
            (u1 - u2) / dr
        }
    }

    /// `omega_k = omega_0 + k delta` (§3.2).
    pub fn boundary(&self, k: u32) -> f64 {
        self.omega_0 + f64::from(k) * self.delta
    }
}

impl AlgorithmConfig for VivaceConfig {
    const NAME: &'static str = "vivace";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Vivace::new(*self, start))
    }
}

/// The amplifier and the change boundary of §3.2, across steps.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Stepper {
    /// `tau`: consecutive steps in the current direction.
    tau: u32,
    /// `k` of the boundary `omega_k`.
    k: u32,
    /// Direction of the last step (+1, -1; 0: none yet).
    direction: i8,
}

impl Stepper {
    /// The rate change, Mbit/s, for gradient `gamma` at rate `r_mbps` (§3.2):
    /// `m(tau) theta gamma`, clipped to `omega_k r`.
    pub fn step(&mut self, cfg: &VivaceConfig, gamma: f64, r_mbps: f64) -> f64 {
        if !gamma.is_finite() || gamma == 0.0 {
            return 0.0;
        }
        let direction: i8 = if gamma > 0.0 { 1 } else { -1 };
        if direction == self.direction {
            self.tau = self.tau.saturating_add(1);
        } else {
            self.direction = direction;
            self.tau = 1;
            self.k = 0;
        }
        let dr = f64::from(self.tau) * cfg.theta * gamma;
        let bound = cfg.boundary(self.k) * r_mbps;
        if dr.abs() > bound {
            self.k = self.k.saturating_add(1);
            bound.copysign(dr)
        } else {
            self.k = 0;
            dr
        }
    }

    /// `m(tau)`, the confidence amplifier.
    pub fn amplifier(&self) -> u32 {
        self.tau.max(1)
    }

    /// `k` of the current boundary.
    pub fn k(&self) -> u32 {
        self.k
    }
}

/// What an MI was sent for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum MiKind {
    /// A doubling of the starting phase.
    Start,
    /// One MI of the current probe pair (0: the first sent).
    Probe(u8),
    /// At the base rate, waiting for results; also MIs from before a phase change.
    Ignore,
}

/// One monitor interval in flight.
#[derive(Debug, Clone, Copy, PartialEq)]
struct Mi {
    rate: f64,
    kind: MiKind,
}

/// Where the state machine is.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Phase {
    /// Doubling; the best evaluated (rate, utility) so far.
    Starting { best: Option<(f64, f64)> },
    /// A probe pair is out (results so far), or one is to be sent (`sent` < 2).
    Probing {
        sent: u8,
        up_first: bool,
        results: [Option<(f64, f64)>; 2],
    },
}

/// Vivace's per-flow state.
#[derive(Debug, Clone)]
pub struct Vivace {
    cfg: VivaceConfig,
    mss_bytes: u32,
    /// Base rate, bytes/s.
    rate: f64,
    /// Rate of the MI being sent, bytes/s.
    sending_rate: f64,
    phase: Phase,
    stepper: Stepper,
    pending: VecDeque<Mi>,
    rtt: RttEstimator,
    /// Minimum RTT of the previous report and its time (for the RTT gradient), µs.
    prev_rtt: Option<(u64, u64)>,
    cwnd_bytes: u32,
    /// The window stays within this range until `settle_until_us` (after a handoff).
    settle: (u32, u32),
    settle_until_us: u64,
    rng: SplitMix64,
    last_loss_us: Option<u64>,
    in_first_slow_start: bool,
    delivery_rate_bytes_per_sec: u64,
    last_utility: Option<f64>,
    /// Gradient of the previous probe pair (0: none).
    prev_gamma: f64,
    now_us: u64,
}

impl Vivace {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: VivaceConfig, start: &FlowStart) -> Self {
        let mut v = Self {
            cfg: cfg.sanitized(),
            mss_bytes: start.mss_bytes.max(1),
            rate: MIN_RATE_BYTES_PER_SEC,
            sending_rate: MIN_RATE_BYTES_PER_SEC,
            phase: Phase::Starting { best: None },
            stepper: Stepper::default(),
            pending: VecDeque::new(),
            rtt: RttEstimator::default(),
            prev_rtt: None,
            cwnd_bytes: start.mss_bytes.max(1).saturating_mul(2),
            settle: (0, u32::MAX),
            settle_until_us: 0,
            rng: SplitMix64::new(start.seed ^ SplitMix64::GAMMA),
            last_loss_us: None,
            in_first_slow_start: true,
            delivery_rate_bytes_per_sec: 0,
            last_utility: None,
            prev_gamma: 0.0,
            now_us: 0,
        };
        v.adopt(&Handoff::flow_start(start));
        v
    }

    fn min_cwnd(&self) -> u32 {
        self.mss_bytes.saturating_mul(2)
    }

    fn clamp_rate(r: f64) -> f64 {
        if r.is_nan() {
            return MIN_RATE_BYTES_PER_SEC;
        }
        r.clamp(MIN_RATE_BYTES_PER_SEC, MAX_RATE_BYTES_PER_SEC)
    }

    fn rtt_for_cap_us(&self) -> u64 {
        match self.rtt.srtt_us() {
            0 => DEFAULT_RTT_US,
            s => s.min(MAX_RTT_US),
        }
    }

    fn adopt(&mut self, h: &Handoff) {
        self.now_us = h.now_us;
        self.rtt =
            RttEstimator::from_handoff(h.srtt_us.min(MAX_RTT_US), h.min_rtt_us.min(MAX_RTT_US));
        self.delivery_rate_bytes_per_sec = h.delivery_rate_bytes_per_sec;
        self.last_loss_us = h.last_loss_us;
        self.in_first_slow_start = h.in_first_slow_start;
        let cwnd = h.cwnd_bytes.max(self.min_cwnd());
        let from_window = f64::from(cwnd) * 1e6 / self.rtt_for_cap_us() as f64;
        let rate = if h.delivery_rate_bytes_per_sec > 0 {
            h.delivery_rate_bytes_per_sec as f64
        } else if let Pacing::BytesPerSec(r) = h.pacing
            && h.srtt_us > 0
        {
            f64::from(r).min(from_window)
        } else {
            from_window
        };
        self.rate = Self::clamp_rate(rate);
        self.sending_rate = self.rate;
        self.pending.clear();
        self.prev_rtt = None;
        self.stepper = Stepper::default();
        self.last_utility = None;
        self.prev_gamma = 0.0;
        self.phase = if h.in_first_slow_start {
            Phase::Starting { best: None }
        } else {
            self.new_probe_phase()
        };
        self.settle = (
            (cwnd / 2).max(self.min_cwnd()),
            cwnd.saturating_mul(2).max(self.min_cwnd()),
        );
        self.settle_until_us = h.now_us.saturating_add(h.srtt_us.min(MAX_RTT_US));
        self.update_cwnd();
        // The first MI.
        self.start_mi();
    }

    fn new_probe_phase(&mut self) -> Phase {
        Phase::Probing {
            sent: 0,
            up_first: self.rng.next_u64() & 1 == 1,
            results: [None, None],
        }
    }

    /// Chooses the next MI's rate from the phase and queues it.
    fn start_mi(&mut self) {
        let eps = self.cfg.epsilon;
        let (rate, kind) = match &mut self.phase {
            Phase::Starting { .. } => (self.sending_rate, MiKind::Start),
            Phase::Probing { sent, up_first, .. } if *sent < 2 => {
                let up = (*sent == 0) == *up_first;
                let i = *sent;
                *sent += 1;
                let f = if up { 1.0 + eps } else { 1.0 - eps };
                (self.rate * f, MiKind::Probe(i))
            }
            Phase::Probing { .. } => (self.rate, MiKind::Ignore),
        };
        self.sending_rate = Self::clamp_rate(rate);
        self.pending.push_back(Mi {
            rate: self.sending_rate,
            kind,
        });
    }

    /// Marks the MIs still in flight as not counting (a phase change).
    fn forget_pending(&mut self) {
        for mi in &mut self.pending {
            mi.kind = MiKind::Ignore;
        }
    }

    /// Uses the results of `mi` (utility `u`).
    fn on_result(&mut self, mi: Mi, u: f64) {
        match (&mut self.phase, mi.kind) {
            (Phase::Starting { best }, MiKind::Start) => match *best {
                Some((best_rate, best_u)) if u < best_u => {
                    // §3: the utility dropped: back to the best rate, start probing.
                    // The path delivered no more than its delivery rate: the best MI's rate
                    // may be one doubling past it (results arrive two MIs late).
                    let delivered = match self.delivery_rate_bytes_per_sec {
                        0 => f64::INFINITY,
                        d => d as f64,
                    };
                    self.rate = Self::clamp_rate(best_rate.min(delivered));
                    self.forget_pending();
                    self.phase = self.new_probe_phase();
                }
                _ => *best = Some((mi.rate, u)),
            },
            (Phase::Probing { results, .. }, MiKind::Probe(i)) => {
                results[usize::from(i.min(1))] = Some((mi.rate, u));
                if let [Some((r1, u1)), Some((r2, u2))] = *results {
                    let to_mbps = 8.0 / 1e6;
                    let gamma = VivaceConfig::gradient(r1 * to_mbps, u1, r2 * to_mbps, u2);
                    let r_mbps = self.rate * to_mbps;
                    if gamma * self.prev_gamma > 0.0 {
                        let dr = self.stepper.step(&self.cfg, gamma, r_mbps);
                        self.rate = Self::clamp_rate((r_mbps + dr) / to_mbps);
                    }
                    self.prev_gamma = gamma;
                    self.phase = self.new_probe_phase();
                }
            }
            _ => {}
        }
    }

    fn update_cwnd(&mut self) {
        let cap = 2.0 * self.rate.max(self.sending_rate) * self.rtt_for_cap_us() as f64 / 1e6;
        let mut cwnd = cap.clamp(f64::from(self.min_cwnd()), f64::from(u32::MAX)) as u32;
        if self.now_us < self.settle_until_us {
            cwnd = cwnd.clamp(self.settle.0, self.settle.1);
        }
        self.cwnd_bytes = cwnd.max(self.min_cwnd());
    }

    fn on_timeout(&mut self, now_us: u64) {
        let before = self.cwnd_bytes;
        self.last_loss_us = Some(now_us);
        self.in_first_slow_start = false;
        self.rate = Self::clamp_rate(self.rate.min(self.sending_rate) / 2.0);
        self.sending_rate = self.rate;
        self.forget_pending();
        self.stepper = Stepper::default();
        self.phase = self.new_probe_phase();
        self.settle_until_us = 0;
        self.update_cwnd();
        self.cwnd_bytes = self.cwnd_bytes.min(before / 2).max(self.min_cwnd());
    }

    /// Base rate, bytes/s.
    pub fn rate_bytes_per_sec(&self) -> f64 {
        self.rate
    }

    /// Rate of the MI being sent, bytes/s.
    pub fn sending_rate_bytes_per_sec(&self) -> f64 {
        self.sending_rate
    }

    /// Whether the starting phase is still on.
    pub fn starting(&self) -> bool {
        matches!(self.phase, Phase::Starting { .. })
    }

    /// The utility of the last evaluated MI.
    pub fn last_utility(&self) -> Option<f64> {
        self.last_utility
    }

    fn pacing(&self) -> Pacing {
        Pacing::BytesPerSec((self.sending_rate as u32).max(1))
    }
}

impl Algorithm for Vivace {
    fn name(&self) -> &'static str {
        VivaceConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &PROGRAMS
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.adopt(handoff);
        Control::cwnd(self.cwnd_bytes)
            .with_pacing(self.pacing())
            .with_program(&PER_RTT)
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        let now = self.now_us.max(m.now_us);
        self.now_us = now;
        self.rtt
            .on_sample(m.rtt_us.min(MAX_RTT_US), m.min_rtt_us.min(MAX_RTT_US));
        if m.rate_incoming_bytes_per_sec > 0 {
            self.delivery_rate_bytes_per_sec = m.rate_incoming_bytes_per_sec;
        }
        if m.lost_pkts > 0 {
            self.last_loss_us = Some(now);
        }
        if m.timeout {
            self.on_timeout(now);
            self.start_mi();
            return Control::cwnd(self.cwnd_bytes).with_pacing(self.pacing());
        }
        let acked_pkts =
            m.acked_bytes.saturating_add(m.sacked_bytes) as f64 / f64::from(self.mss_bytes);
        if acked_pkts <= 0.0 && m.lost_pkts == 0 {
            // No ACKs: nothing measured, the MI goes on.
            return Control::cwnd(self.cwnd_bytes);
        }
        // RTT gradient over this report's interval.
        // The latest RTT: the queue at the end of the MI whose ACKs this report carries (the
        // interval's minimum would be the queue at its start, one MI earlier).
        let sample = if m.rtt_us > 0 { m.rtt_us } else { m.min_rtt_us }.min(MAX_RTT_US);
        let gradient = match self.prev_rtt {
            Some((t, r)) if sample > 0 && r > 0 && now > t => {
                (sample as f64 - r as f64) / (now - t) as f64
            }
            _ => 0.0,
        };
        if sample > 0 {
            self.prev_rtt = Some((now, sample));
        }
        let lost = m.lost_pkts as f64;
        let loss_rate = if lost > 0.0 {
            (lost / (lost + acked_pkts)).min(1.0)
        } else {
            0.0
        };
        if self.pending.len() >= RESULT_LAG_MIS
            && let Some(mi) = self.pending.pop_front()
        {
            let u = self.cfg.utility(mi.rate * 8.0 / 1e6, gradient, loss_rate);
            self.last_utility = Some(u);
            self.on_result(mi, u);
        }
        if let Phase::Starting { .. } = self.phase {
            self.sending_rate = Self::clamp_rate(self.sending_rate * 2.0);
            self.rate = self.sending_rate;
        } else {
            self.in_first_slow_start = false;
        }
        self.start_mi();
        self.update_cwnd();
        Control::cwnd(self.cwnd_bytes).with_pacing(self.pacing())
    }

    fn handoff(&self) -> Handoff {
        Handoff {
            now_us: self.now_us,
            cwnd_bytes: self.cwnd_bytes,
            ssthresh_bytes: if self.in_first_slow_start {
                u32::MAX
            } else {
                self.cwnd_bytes
            },
            pacing: self.pacing(),
            srtt_us: self.rtt.srtt_us(),
            min_rtt_us: self.rtt.min_rtt_us(),
            delivery_rate_bytes_per_sec: self.delivery_rate_bytes_per_sec,
            last_loss_us: self.last_loss_us,
            in_first_slow_start: self.in_first_slow_start,
        }
    }

    fn cwnd_bytes(&self) -> u32 {
        self.cwnd_bytes
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn close(a: f64, b: f64, tol: f64) -> bool {
        (a - b).abs() <= tol
    }

    #[test]
    fn utility_rewards_throughput_and_penalizes_delay_growth_and_loss() {
        // §2.1: u(x) = x^0.9 - 900 x dRTT/dT - 11.35 x L.
        let c = VivaceConfig::default();
        assert!(close(c.utility(10.0, 0.0, 0.0), 10f64.powf(0.9), 1e-12));
        assert!(close(
            c.utility(10.0, 0.02, 0.0),
            10f64.powf(0.9) - 900.0 * 10.0 * 0.02,
            1e-9
        ));
        assert!(close(
            c.utility(10.0, 0.0, 0.05),
            10f64.powf(0.9) - 11.35 * 10.0 * 0.05,
            1e-9
        ));
        // A draining queue (negative gradient) is rewarded.
        assert!(c.utility(10.0, -0.02, 0.0) > c.utility(10.0, 0.0, 0.0));
        // Gradients under the tolerance are noise.
        assert!(close(
            c.utility(10.0, 0.005, 0.0),
            c.utility(10.0, 0.0, 0.0),
            0.0
        ));
    }

    #[test]
    fn the_gradient_is_the_slope_between_the_two_probes() {
        // §3.1: gamma = (u1 - u2) / (r1 - r2).
        assert!(close(
            VivaceConfig::gradient(10.5, 8.0, 9.5, 7.0),
            1.0,
            1e-12
        ));
        assert!(close(
            VivaceConfig::gradient(9.5, 7.0, 10.5, 8.0),
            1.0,
            1e-12
        ));
        assert!(close(
            VivaceConfig::gradient(10.0, 1.0, 10.0, 2.0),
            0.0,
            0.0
        ));
    }

    #[test]
    fn the_amplifier_grows_with_consecutive_steps_in_one_direction() {
        // §3.2: dr = m(tau) theta gamma; tau counts same-direction steps.
        let c = VivaceConfig::default();
        let mut s = Stepper::default();
        assert!(close(s.step(&c, 0.1, 100.0), 0.1, 1e-12));
        assert!(close(s.step(&c, 0.1, 100.0), 0.2, 1e-12));
        assert!(close(s.step(&c, 0.1, 100.0), 0.3, 1e-12));
        assert_eq!(s.amplifier(), 3);
        // A change of direction resets it.
        assert!(close(s.step(&c, -0.1, 100.0), -0.1, 1e-12));
        assert_eq!(s.amplifier(), 1);
    }

    #[test]
    fn the_change_boundary_clips_and_widens_while_clipping() {
        // §3.2: |dr| <= omega_k r, omega_k = 0.05 + 0.1 k.
        let c = VivaceConfig::default().delta(PAPER_DELTA);
        assert!(close(c.boundary(0), 0.05, 1e-12));
        assert!(close(c.boundary(2), 0.25, 1e-12));
        let mut s = Stepper::default();
        assert!(close(s.step(&c, -100.0, 10.0), -0.5, 1e-12), "5 % of 10");
        assert_eq!(s.k(), 1);
        assert!(close(s.step(&c, -100.0, 10.0), -1.5, 1e-12), "15 % of 10");
        assert_eq!(s.k(), 2);
        // A step that fits resets k.
        assert!(close(s.step(&c, -0.01, 10.0), -0.03, 1e-12));
        assert_eq!(s.k(), 0);
    }

    fn vivace() -> Vivace {
        let start = FlowStart {
            sock_id: 1,
            mss_bytes: 1000,
            init_cwnd_bytes: 10_000,
            seed: 3,
        };
        let mut v = Vivace::new(VivaceConfig::default(), &start);
        v.activate(&Handoff::flow_start(&start));
        v
    }

    fn report(now_us: u64, rtt_us: u64, lost: u64) -> Measurement {
        Measurement {
            now_us,
            acked_bytes: 50_000,
            lost_pkts: lost,
            rtt_us,
            min_rtt_us: rtt_us,
            ..Measurement::default()
        }
    }

    #[test]
    fn starting_doubles_until_the_utility_drops_then_probes_around_the_best_rate() {
        let mut v = vivace();
        let r0 = v.sending_rate_bytes_per_sec();
        v.on_report(&report(100_000, 100_000, 0));
        assert!(close(v.sending_rate_bytes_per_sec(), 2.0 * r0, 1e-6));
        let mut now = 100_000;
        for _ in 0..4 {
            now += 100_000;
            v.on_report(&report(now, 100_000, 0));
        }
        assert!(v.starting());
        assert!(close(v.sending_rate_bytes_per_sec(), 32.0 * r0, 1e-6));
        // The RTT climbs: the utility of the next evaluated MI drops.
        now += 100_000;
        v.on_report(&report(now, 150_000, 0));
        assert!(!v.starting());
        // The MI evaluated here was sent at 16 r0; the best one before it at 8 r0.
        let base = v.rate_bytes_per_sec();
        assert!(close(base, 8.0 * r0, 1e-6), "{base} vs {r0}");
        let probe = v.sending_rate_bytes_per_sec();
        assert!(close(probe, base * 1.05, 1e-6) || close(probe, base * 0.95, 1e-6));
        assert!(!v.handoff().in_first_slow_start);
    }

    #[test]
    fn probing_on_an_idle_path_raises_the_rate() {
        let mut v = vivace();
        let h = Handoff {
            now_us: 0,
            cwnd_bytes: 125_000,
            ssthresh_bytes: 125_000,
            pacing: Pacing::Unpaced,
            srtt_us: 100_000,
            min_rtt_us: 100_000,
            delivery_rate_bytes_per_sec: 1_250_000,
            last_loss_us: None,
            in_first_slow_start: false,
        };
        v.activate(&h);
        assert!(!v.starting());
        let r0 = v.rate_bytes_per_sec();
        let mut now = 0;
        for _ in 0..12 {
            now += 100_000;
            v.on_report(&report(now, 100_000, 0));
        }
        assert!(v.rate_bytes_per_sec() > r0, "no delay, no loss: rate grows");
        // cwnd = 2 x rate x sRTT.
        let cap = 2.0 * v.rate_bytes_per_sec().max(v.sending_rate_bytes_per_sec()) * 0.1;
        assert!(close(f64::from(v.cwnd_bytes()), cap, 2.0));
    }

    #[test]
    fn a_timeout_halves_rate_and_window() {
        let mut v = vivace();
        for i in 1..5 {
            v.on_report(&report(i * 100_000, 100_000, 0));
        }
        let (rate, cwnd) = (v.rate_bytes_per_sec(), v.cwnd_bytes());
        v.on_report(&Measurement {
            timeout: true,
            ..report(600_000, 100_000, 3)
        });
        assert!(v.rate_bytes_per_sec() <= rate / 2.0 + 1.0);
        assert!(v.cwnd_bytes() <= cwnd / 2);
        assert!(!v.starting());
    }
}
