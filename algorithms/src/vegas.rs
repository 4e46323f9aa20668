//! TCP Vegas (Brakmo & Peterson, "TCP Vegas: End to End Congestion Avoidance on a Global
//! Internet", IEEE JSAC 13(8), 1995), following Linux `tcp_vegas.c`, per report.
//!
//! Model (windows in segments):
//! - `BaseRTT` is the smallest RTT seen on the flow (§3.2 of the paper).
//! - Once per RTT, with `RTT` the smallest sample of that RTT (Linux's `minRTT`):
//!   `diff = cwnd (RTT - BaseRTT) / RTT` packets, i.e. `(Expected - Actual) * BaseRTT` with
//!   `Expected = cwnd / BaseRTT`, `Actual = cwnd / RTT` (§3.2). In avoidance:
//!   `diff < alpha` → `cwnd += 1`; `diff > beta` → `cwnd -= 1` (and `ssthresh = cwnd - 1`, as
//!   Linux); otherwise unchanged.
//! - Slow start (§3.3): grow by the bytes acked while `diff <= gamma`; once `diff > gamma`,
//!   `cwnd = min(cwnd, target + 1)` with `target = cwnd BaseRTT / RTT` and
//!   `ssthresh = min(ssthresh, cwnd - 1)`, which ends slow start. Here `RTT` is the report's
//!   latest sample and `target` is also capped by `Actual * BaseRTT`, with `Actual` the bytes
//!   acknowledged over the period divided by its length (see below).
//! - Loss: Reno (Linux's `tcp_reno_ssthresh`): `ssthresh = cwnd = max(cwnd / 2, 2)`, once per
//!   recovery ([`crate::recovery`]), no growth during recovery. Timeout: `ssthresh =
//!   max(cwnd / 2, 2)`, `cwnd = 2` and slow start.
//!
//! Defaults: `alpha = 2`, `beta = 4`, `gamma = 1` packets (Linux's module parameters), the
//! datapath's initial window, no pacing (the rate is explicitly cleared on activation).
//!
//! Simplified: reports come once per RTT (or at once on a loss), so the per-RTT step runs on
//! the first report at least one `BaseRTT` after the previous step rather than on the ACK that
//! passes `beg_snd_nxt`; Linux's "fewer than 3 RTT samples → Reno" rule is dropped (a report
//! carries the interval's minimum); slow start grows every RTT (Linux), not every other RTT
//! (the paper); the slow-start test uses the latest RTT sample of the round instead of its
//! minimum, because with one report per RTT the minimum only shows the queue of the round
//! before, so slow start would overshoot by another doubling (measured: 88 packets on a
//! 44-packet path, then 4 s of draining at one packet per RTT). The paper's `diff` divides by `RTT` (as here); Linux divides by `BaseRTT`,
//! which makes its thresholds slightly tighter. The paper's fine-grained retransmission
//! timer is the datapath's business. A handoff carries its min RTT into `BaseRTT`; outside
//! slow start the flow continues in avoidance at the handed-over window.

use crate::api::{Algorithm, AlgorithmConfig, FlowStart, Handoff, Measurement};
use crate::programs::ProgramSpec;
use crate::window::{self, Segments, WindowCore, WindowRule, WindowState};

/// Linux `tcp_vegas` `alpha`: fewest packets kept queued, packets.
pub const ALPHA_PKTS: f64 = 2.0;
/// Linux `tcp_vegas` `beta`: most packets kept queued, packets.
pub const BETA_PKTS: f64 = 4.0;
/// Linux `tcp_vegas` `gamma`: slow-start exit threshold, packets (§3.3 of the paper).
pub const GAMMA_PKTS: f64 = 1.0;
pub use crate::window::MIN_CWND_SEGMENTS;

/// Vegas's configuration and factory.
#[derive(Debug, Clone, Copy)]
pub struct VegasConfig {
    /// `alpha`, packets (2 recommended).
    pub alpha_pkts: f64,
    /// `beta`, packets (4 recommended; at least `alpha`).
    pub beta_pkts: f64,
    /// `gamma`, packets (1 recommended).
    pub gamma_pkts: f64,
}

impl Default for VegasConfig {
    fn default() -> Self {
        Self {
            alpha_pkts: ALPHA_PKTS,
            beta_pkts: BETA_PKTS,
            gamma_pkts: GAMMA_PKTS,
        }
    }
}

impl VegasConfig {
    /// Sets `alpha` (2 packets recommended).
    #[must_use]
    pub fn alpha_pkts(mut self, alpha: f64) -> Self {
        self.alpha_pkts = alpha;
        self
    }

    /// Sets `beta` (4 packets recommended).
    #[must_use]
    pub fn beta_pkts(mut self, beta: f64) -> Self {
        self.beta_pkts = beta;
        self
    }

    /// Sets `gamma` (1 packet recommended).
    #[must_use]
    pub fn gamma_pkts(mut self, gamma: f64) -> Self {
        self.gamma_pkts = gamma;
        self
    }

    /// The parameters with out-of-range values replaced by the defaults.
    fn sanitized(self) -> Self {
        let d = Self::default();
        let ok = |v: f64| v.is_finite() && v >= 0.0;
        let alpha = if ok(self.alpha_pkts) {
            self.alpha_pkts
        } else {
            d.alpha_pkts
        };
        let beta = if ok(self.beta_pkts) && self.beta_pkts >= alpha {
            self.beta_pkts
        } else {
            alpha.max(d.beta_pkts)
        };
        Self {
            alpha_pkts: alpha,
            beta_pkts: beta,
            gamma_pkts: if ok(self.gamma_pkts) {
                self.gamma_pkts
            } else {
                d.gamma_pkts
            },
        }
    }
}

impl AlgorithmConfig for VegasConfig {
    const NAME: &'static str = "vegas";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Vegas::new(*self, start))
    }
}

/// `diff = cwnd (RTT - BaseRTT) / RTT`, packets (§3.2); 0 without samples.
pub fn diff_pkts(cwnd: f64, rtt_us: u64, base_rtt_us: u64) -> f64 {
    if rtt_us == 0 || base_rtt_us == 0 {
        return 0.0;
    }
    cwnd * rtt_us.saturating_sub(base_rtt_us) as f64 / rtt_us as f64
}

/// `target = cwnd BaseRTT / RTT`, segments: the window that would leave nothing queued.
pub fn target_cwnd(cwnd: f64, rtt_us: u64, base_rtt_us: u64) -> f64 {
    if rtt_us == 0 || base_rtt_us == 0 {
        return cwnd;
    }
    cwnd * base_rtt_us as f64 / rtt_us as f64
}

/// Vegas's per-flow state: the window core (in segments) with [`VegasRule`].
pub type Vegas = WindowCore<VegasRule>;

/// What Vegas adds to the window core: `BaseRTT` and the per-RTT period.
#[derive(Debug, Clone)]
pub struct VegasRule {
    cfg: VegasConfig,
    /// Smallest RTT of the flow, µs (0: none yet).
    base_rtt_us: u64,
    /// Start of the current per-RTT period, µs.
    period_start_us: u64,
    /// Smallest RTT in the current period, µs (0: none yet).
    period_min_rtt_us: u64,
    /// Latest RTT sample, µs (0: none yet).
    last_rtt_us: u64,
    /// Bytes acknowledged in the current period.
    period_acked_bytes: u64,
}

impl Vegas {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: VegasConfig, start: &FlowStart) -> Self {
        let rule = VegasRule {
            cfg: cfg.sanitized(),
            base_rtt_us: 0,
            period_start_us: 0,
            period_min_rtt_us: 0,
            last_rtt_us: 0,
            period_acked_bytes: 0,
        };
        WindowCore::with_rule(rule, start)
    }

    /// The avoidance window after a period with this `diff` (§3.2).
    pub fn avoidance_step(&self, diff: f64) -> f64 {
        self.rule.avoidance_step(self.state.cwnd, diff)
    }

    /// `BaseRTT`, µs (0: none yet).
    pub fn base_rtt_us(&self) -> u64 {
        self.rule.base_rtt_us
    }
}

impl VegasRule {
    /// Takes an RTT sample into `BaseRTT` and the period's minimum.
    fn on_rtt_sample(&mut self, rtt_us: u64) {
        if rtt_us == 0 {
            return;
        }
        if self.base_rtt_us == 0 || rtt_us < self.base_rtt_us {
            self.base_rtt_us = rtt_us;
        }
        if self.period_min_rtt_us == 0 || rtt_us < self.period_min_rtt_us {
            self.period_min_rtt_us = rtt_us;
        }
    }

    /// Ends the per-RTT period at `now_us` if one `BaseRTT` has passed: the period's `diff`
    /// and `Actual * BaseRTT` (segments acknowledged per `BaseRTT` over the period).
    fn end_of_period(&mut self, w: &WindowState<Segments>, now_us: u64) -> Option<(f64, f64)> {
        if self.base_rtt_us == 0 || self.period_min_rtt_us == 0 {
            return None;
        }
        let elapsed_us = now_us.saturating_sub(self.period_start_us);
        if elapsed_us < self.base_rtt_us {
            return None;
        }
        let rtt = self.period_min_rtt_us;
        let actual_window =
            w.segments(self.period_acked_bytes) * self.base_rtt_us as f64 / elapsed_us as f64;
        self.period_start_us = now_us;
        self.period_min_rtt_us = 0;
        self.period_acked_bytes = 0;
        Some((diff_pkts(w.cwnd, rtt, self.base_rtt_us), actual_window))
    }

    /// The avoidance window from `cwnd` after a period with this `diff` (§3.2).
    fn avoidance_step(&self, cwnd: f64, diff: f64) -> f64 {
        if diff > self.cfg.beta_pkts {
            cwnd - 1.0
        } else if diff < self.cfg.alpha_pkts {
            cwnd + 1.0
        } else {
            cwnd
        }
    }
}

impl WindowRule for VegasRule {
    type Unit = Segments;

    const NAME: &'static str = VegasConfig::NAME;

    fn adopt(&mut self, _w: &WindowState<Segments>, h: &Handoff) {
        self.base_rtt_us = h.min_rtt_us;
        self.period_start_us = h.now_us;
        self.period_min_rtt_us = 0;
        self.last_rtt_us = 0;
        self.period_acked_bytes = 0;
    }

    fn on_measurement(&mut self, _w: &WindowState<Segments>, m: &Measurement) {
        if m.rtt_us > 0 {
            self.last_rtt_us = m.rtt_us;
        }
        self.on_rtt_sample(if m.min_rtt_us > 0 {
            m.min_rtt_us
        } else {
            m.rtt_us
        });
        self.period_acked_bytes = self.period_acked_bytes.saturating_add(m.acked_bytes);
    }

    /// A report with a loss or a timeout does not grow the window.
    fn grows_on(&self, m: &Measurement) -> bool {
        !m.congestion()
    }

    /// Slow start with the `gamma` exit, or the once-per-RTT `alpha`/`beta` step (§3.2, §3.3).
    fn on_ack(&mut self, w: &mut WindowState<Segments>, acked_bytes: u64, now_us: u64) {
        let acked = w.segments(acked_bytes);
        let period = self.end_of_period(w, now_us);
        if w.cwnd < w.ssthresh {
            // The round's latest sample: the period minimum lags a doubling round behind.
            let rtt = self.last_rtt_us;
            if let Some((_, actual_window)) = period
                && diff_pkts(w.cwnd, rtt, self.base_rtt_us) > self.cfg.gamma_pkts
            {
                // §3.3: leave slow start at the window that empties the queue, plus one; the
                // rate actually delivered bounds it too (the window doubled since the sample).
                let mut target = target_cwnd(w.cwnd, rtt, self.base_rtt_us);
                if actual_window > 0.0 {
                    target = target.min(actual_window);
                }
                w.cwnd = w.clamp(w.cwnd.min(target + 1.0));
                w.ssthresh = w.ssthresh.min(w.cwnd - 1.0);
                w.in_first_slow_start = false;
                return;
            }
            w.cwnd = w.clamp((w.cwnd + acked).min(w.ssthresh.max(w.cwnd)));
            return;
        }
        if let Some((diff, _)) = period {
            w.cwnd = w.clamp(self.avoidance_step(w.cwnd, diff));
            if diff > self.cfg.beta_pkts {
                w.ssthresh = w.ssthresh.min(w.cwnd - 1.0);
            }
        }
    }

    /// Reno's halving (Linux's `tcp_reno_ssthresh`), on a loss and a timeout.
    fn ssthresh_on_congestion(&mut self, w: &WindowState<Segments>) -> f64 {
        w.clamp(w.cwnd / 2.0)
    }

    /// The handoff's min RTT is `BaseRTT`.
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

    fn vegas(iw_segments: u32) -> Vegas {
        Vegas::new(VegasConfig::default(), &start(MSS, iw_segments))
    }

    #[test]
    fn diff_is_the_packets_queued_in_the_network() {
        // §3.2: (Expected - Actual) BaseRTT = cwnd (RTT - BaseRTT) / RTT.
        assert!((diff_pkts(40.0, 60_000, 50_000) - 40.0 * 10.0 / 60.0).abs() < 1e-9);
        assert!((target_cwnd(40.0, 60_000, 50_000) - 40.0 * 50.0 / 60.0).abs() < 1e-9);
        assert!(diff_pkts(40.0, 0, 50_000).abs() < f64::EPSILON);
        assert!(
            diff_pkts(40.0, 40_000, 50_000).abs() < f64::EPSILON,
            "RTT below base"
        );
    }

    #[test]
    fn base_rtt_is_the_smallest_sample() {
        let mut v = vegas(10);
        v.on_report(&report(50_000, 1_000, 60_000));
        v.on_report(&report(100_000, 1_000, 50_000));
        v.on_report(&report(150_000, 1_000, 70_000));
        assert_eq!(v.base_rtt_us(), 50_000);
    }

    #[test]
    fn slow_start_grows_by_the_bytes_acked_while_diff_is_below_gamma() {
        let mut v = vegas(10);
        v.on_report(&report(50_000, 10_000, 50_000));
        assert!((v.cwnd_segments() - 20.0).abs() < 1e-9);
        // diff = 20 * 2 / 52 < 1: still slow start.
        v.on_report(&report(102_000, 20_000, 52_000));
        assert!((v.cwnd_segments() - 40.0).abs() < 1e-9);
    }

    #[test]
    fn slow_start_ends_at_target_plus_one_once_diff_exceeds_gamma() {
        // §3.3: diff = 40 * 10 / 60 = 6.7 > gamma → cwnd = min(40, 40 * 50/60 + 1).
        let mut v = vegas(40);
        v.on_report(&report(50_000, 0, 50_000));
        v.on_report(&report(110_000, 40_000, 60_000));
        let want = 40.0 * 50.0 / 60.0 + 1.0;
        assert!((v.cwnd_segments() - want).abs() < 1e-9);
        assert!((v.ssthresh_segments() - (want - 1.0)).abs() < 1e-9);
        assert!(!v.handoff().in_first_slow_start);
    }

    #[test]
    fn avoidance_adds_one_below_alpha_removes_one_above_beta_and_holds_between() {
        // §3.2: one packet per RTT.
        let mut v = vegas(30);
        v.state.ssthresh = 10.0;
        v.rule.base_rtt_us = 50_000;
        v.rule.period_start_us = 50_000;
        // diff = 30 * 1 / 51 = 0.6 < alpha.
        v.on_report(&report(101_000, 30_000, 51_000));
        assert!((v.cwnd_segments() - 31.0).abs() < 1e-9);
        // diff = 31 * 5 / 55 = 2.8: between alpha and beta.
        v.on_report(&report(156_000, 31_000, 55_000));
        assert!((v.cwnd_segments() - 31.0).abs() < 1e-9);
        // diff = 31 * 20 / 70 = 8.9 > beta.
        v.on_report(&report(226_000, 31_000, 70_000));
        assert!((v.cwnd_segments() - 30.0).abs() < 1e-9);
    }

    #[test]
    fn the_step_runs_once_per_rtt() {
        let mut v = vegas(30);
        v.state.ssthresh = 10.0;
        v.rule.base_rtt_us = 50_000;
        v.rule.period_start_us = 50_000;
        v.on_report(&report(101_000, 30_000, 51_000));
        v.on_report(&report(120_000, 5_000, 51_000));
        assert!(
            (v.cwnd_segments() - 31.0).abs() < 1e-9,
            "within one BaseRTT"
        );
    }

    #[test]
    fn loss_halves_like_reno_and_timeout_restarts_from_two_segments() {
        let mut v = vegas(40);
        v.on_report(&Measurement {
            lost_pkts: 1,
            ..report(50_000, 0, 50_000)
        });
        assert!((v.cwnd_segments() - 20.0).abs() < 1e-9);
        v.on_report(&Measurement {
            lost_pkts: 1,
            ..report(60_000, 0, 50_000)
        });
        assert!((v.cwnd_segments() - 20.0).abs() < 1e-9, "once per recovery");
        v.on_report(&Measurement {
            timeout: true,
            ..report(70_000, 0, 50_000)
        });
        assert!((v.cwnd_segments() - 2.0).abs() < 1e-9);
        assert!((v.ssthresh_segments() - 10.0).abs() < 1e-9);
    }

    #[test]
    fn adopting_a_handoff_outside_slow_start_continues_in_avoidance() {
        let mut v = vegas(10);
        let h = Handoff {
            cwnd_bytes: 50_000,
            in_first_slow_start: false,
            min_rtt_us: 50_000,
            ..Handoff::flow_start(&FlowStart {
                sock_id: 1,
                mss_bytes: MSS,
                init_cwnd_bytes: 10 * MSS,
                seed: 0,
            })
        };
        let c = v.activate(&h);
        assert_eq!(c.cwnd_bytes, Some(50_000));
        assert_eq!(c.pacing, Some(Pacing::Unpaced));
        assert_eq!(v.base_rtt_us(), 50_000);
        v.on_report(&report(50_000, 50_000, 50_000));
        assert!(v.cwnd_bytes() <= 51_000);
    }
}
