//! TCP Westwood+ (Mascolo, Casetti, Gerla, Sanadidi & Wang, "TCP Westwood: Bandwidth
//! Estimation for Enhanced Transport over Wireless Links", ACM MOBICOM 2001; the per-RTT sampling
//! of Westwood+ from Grieco & Mascolo, "Performance evaluation and comparison of Westwood+,
//! New Reno, and Vegas TCP congestion control", CCR 34(2), 2004), following Linux
//! `tcp_westwood.c`, per report.
//!
//! Model:
//! - Bandwidth samples (Westwood+, Grieco & Mascolo §2): the bytes acknowledged over an interval
//!   of at least `max(RTT, 50 ms)` divided by its length, `b_k = d_k / Δ_k`.
//! - Filter (Linux `westwood_filter`): `bw_ns = 7/8 bw_ns + 1/8 b_k`,
//!   `BWE = 7/8 BWE + 1/8 bw_ns`; the first sample sets both.
//! - After three duplicate ACKs (a loss; Mascolo et al. §2 pseudo code):
//!   `ssthresh = max(BWE * RTTmin / MSS, 2)`; `if cwnd > ssthresh { cwnd = ssthresh }`.
//!   Once per recovery ([`crate::recovery`]), with no growth during recovery.
//! - After a timeout: `ssthresh = max(BWE * RTTmin / MSS, 2)`, `cwnd = 2` (the suite's floor;
//!   the paper says 1) and slow start.
//! - Otherwise Reno growth: slow start below `ssthresh`, then one segment per window acked.
//! - Without a bandwidth estimate or an RTT yet, a loss falls back to Reno's halving.
//!
//! Defaults: a 50 ms minimum sampling interval (Linux `TCP_WESTWOOD_RTT_MIN`), the filter gains
//! above, the datapath's initial window, no pacing (the rate is explicitly cleared on
//! activation).
//!
//! Simplified: the acknowledged bytes come from the per-RTT report's in-order count, so the
//! dupack/SACK accounting of Linux's `westwood_acked_count` is not needed (data acknowledged
//! out of order is counted when the hole fills); growth is applied per report rather than per
//! ACK. Linux sets `cwnd = ssthresh` after recovery even when that raises the window; this
//! follows the paper (and ns-2) and only lowers it. `RTTmin` is the flow's minimum RTT. A
//! handoff seeds `BWE` from its delivery-rate estimate.

use crate::api::{Algorithm, AlgorithmConfig, FlowStart, Handoff, Measurement};
use crate::programs::ProgramSpec;
use crate::window::{self, Segments, WindowCore, WindowRule, WindowState};

/// Linux `TCP_WESTWOOD_RTT_MIN`: shortest bandwidth sampling interval, µs.
pub const MIN_SAMPLE_INTERVAL_US: u64 = 50_000;
pub use crate::window::MIN_CWND_SEGMENTS;

/// Westwood+'s configuration and factory.
#[derive(Debug, Clone, Copy)]
pub struct WestwoodConfig {
    /// Shortest bandwidth sampling interval, µs (50 ms recommended, as Linux).
    pub min_sample_interval_us: u64,
}

impl Default for WestwoodConfig {
    fn default() -> Self {
        Self {
            min_sample_interval_us: MIN_SAMPLE_INTERVAL_US,
        }
    }
}

impl WestwoodConfig {
    /// Sets the shortest bandwidth sampling interval (50 ms recommended).
    #[must_use]
    pub fn min_sample_interval_us(mut self, us: u64) -> Self {
        self.min_sample_interval_us = us;
        self
    }
}

impl AlgorithmConfig for WestwoodConfig {
    const NAME: &'static str = "westwood";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(Westwood::new(*self, start))
    }
}

/// Linux `westwood_do_filter`: `7/8 a + 1/8 b`.
pub fn filter(a: f64, b: f64) -> f64 {
    (7.0 * a + b) / 8.0
}

/// Westwood+'s bandwidth estimator (per-RTT samples, two-stage 1/8 filter).
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct BandwidthEstimator {
    /// Start of the current sampling interval, µs (`None`: not started).
    interval_start_us: Option<u64>,
    /// Bytes acknowledged in the current interval.
    acked_bytes: u64,
    /// First filter stage, bytes/s.
    bw_ns: f64,
    /// `BWE`, bytes/s (0: no estimate).
    bwe: f64,
}

impl BandwidthEstimator {
    /// Continues from a delivery-rate estimate, bytes/s (0: none).
    pub fn seeded(rate_bytes_per_sec: u64) -> Self {
        let r = rate_bytes_per_sec as f64;
        Self {
            bw_ns: r,
            bwe: r,
            ..Self::default()
        }
    }

    /// Counts `acked` bytes at `now_us`; closes the interval once it spans `interval_us`.
    pub fn on_acked(&mut self, now_us: u64, acked: u64, interval_us: u64) {
        let Some(start) = self.interval_start_us else {
            self.interval_start_us = Some(now_us);
            self.acked_bytes = 0;
            return;
        };
        self.acked_bytes = self.acked_bytes.saturating_add(acked);
        let delta_us = now_us.saturating_sub(start);
        if delta_us == 0 || delta_us < interval_us {
            return;
        }
        let sample = self.acked_bytes as f64 * 1e6 / delta_us as f64;
        if self.bwe <= 0.0 && self.bw_ns <= 0.0 {
            self.bw_ns = sample;
            self.bwe = sample;
        } else {
            self.bw_ns = filter(self.bw_ns, sample);
            self.bwe = filter(self.bwe, self.bw_ns);
        }
        self.interval_start_us = Some(now_us);
        self.acked_bytes = 0;
    }

    /// `BWE`, bytes/s (0: none yet).
    pub fn bwe_bytes_per_sec(&self) -> f64 {
        self.bwe
    }
}

/// Westwood+'s per-flow state: the window core (in segments) with [`WestwoodRule`].
pub type Westwood = WindowCore<WestwoodRule>;

/// What Westwood+ adds to the window core: the bandwidth estimate behind `ssthresh`.
#[derive(Debug, Clone)]
pub struct WestwoodRule {
    cfg: WestwoodConfig,
    bw: BandwidthEstimator,
}

impl Westwood {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: WestwoodConfig, start: &FlowStart) -> Self {
        let rule = WestwoodRule {
            cfg,
            bw: BandwidthEstimator::default(),
        };
        WindowCore::with_rule(rule, start)
    }

    /// `max(BWE * RTTmin / MSS, 2)` segments, or `None` without an estimate or an RTT.
    pub fn bw_rtt_min_segments(&self) -> Option<f64> {
        self.rule.bw_rtt_min_segments(&self.state)
    }

    /// `BWE`, bytes/s (0: none yet).
    pub fn bwe_bytes_per_sec(&self) -> f64 {
        self.rule.bw.bwe_bytes_per_sec()
    }
}

impl WestwoodRule {
    fn bw_rtt_min_segments(&self, w: &WindowState<Segments>) -> Option<f64> {
        let bwe = self.bw.bwe_bytes_per_sec();
        let rtt_min_s = w.rtt.min_rtt_us() as f64 / 1e6;
        if bwe <= 0.0 || rtt_min_s <= 0.0 || !bwe.is_finite() {
            return None;
        }
        Some(w.clamp(bwe * rtt_min_s / f64::from(w.mss_bytes)))
    }
}

impl WindowRule for WestwoodRule {
    type Unit = Segments;

    const NAME: &'static str = WestwoodConfig::NAME;
    const SLOW_START_UNTIL_LOSS: bool = true;

    fn adopt(&mut self, _w: &WindowState<Segments>, h: &Handoff) {
        self.bw = BandwidthEstimator::seeded(h.delivery_rate_bytes_per_sec);
    }

    /// Bandwidth samples over at least `max(SRTT, 50 ms)`.
    fn on_measurement(&mut self, w: &WindowState<Segments>, m: &Measurement) {
        let interval = w.rtt.srtt_us().max(self.cfg.min_sample_interval_us).max(1);
        self.bw.on_acked(w.now_us, m.acked_bytes, interval);
    }

    /// Reno: one segment per window acknowledged (RFC 5681 §3.1, byte counting).
    fn on_ack_in_avoidance(&mut self, w: &mut WindowState<Segments>, acked: f64, _now_us: u64) {
        w.cwnd = w.clamp(w.cwnd + acked / w.cwnd);
    }

    /// `BWE * RTTmin`, or Reno's half window without an estimate, on a loss and a timeout.
    fn ssthresh_on_congestion(&mut self, w: &WindowState<Segments>) -> f64 {
        self.bw_rtt_min_segments(w)
            .unwrap_or_else(|| w.clamp(w.cwnd / 2.0))
    }

    /// `if cwnd > ssthresh { cwnd = ssthresh }`: a loss never raises the window.
    fn on_recovery_start(&mut self, w: &mut WindowState<Segments>, _now_us: u64) {
        if w.cwnd > w.ssthresh {
            w.cwnd = w.ssthresh;
        }
    }

    /// The handoff's delivery rate is `BWE` once there is one.
    fn handoff(&self, _w: &WindowState<Segments>, h: &mut Handoff) {
        let bwe = self.bw.bwe_bytes_per_sec();
        if bwe > 0.0 {
            // Saturating float-to-int cast.
            h.delivery_rate_bytes_per_sec = bwe as u64;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{report, start};
    use crate::api::Pacing;

    const MSS: u32 = 1000;

    fn westwood(iw_segments: u32) -> Westwood {
        Westwood::new(WestwoodConfig::default(), &start(MSS, iw_segments))
    }

    #[test]
    fn the_filter_weighs_the_old_value_by_seven_eighths() {
        assert!((filter(800.0, 0.0) - 700.0).abs() < 1e-9);
        assert!((filter(0.0, 800.0) - 100.0).abs() < 1e-9);
    }

    #[test]
    fn samples_span_at_least_the_interval_and_the_first_sets_the_estimate() {
        // Grieco & Mascolo §2: one sample per RTT, b_k = d_k / Δ_k.
        let mut b = BandwidthEstimator::default();
        b.on_acked(0, 999, 50_000);
        assert!(
            b.bwe_bytes_per_sec().abs() < f64::EPSILON,
            "opens the interval"
        );
        b.on_acked(30_000, 30_000, 50_000);
        assert!(
            b.bwe_bytes_per_sec().abs() < f64::EPSILON,
            "interval too short"
        );
        b.on_acked(60_000, 30_000, 50_000);
        assert!((b.bwe_bytes_per_sec() - 1e6).abs() < 1e-6);
        // Second sample of 2 MB/s: bw_ns = 1.125 MB/s, BWE = 7/8 + 1.125/8 MB/s.
        b.on_acked(120_000, 120_000, 50_000);
        let bw_ns = filter(1e6, 2e6);
        assert!((b.bwe_bytes_per_sec() - filter(1e6, bw_ns)).abs() < 1e-6);
    }

    #[test]
    fn loss_sets_ssthresh_to_bwe_times_rtt_min_and_lowers_cwnd_to_it() {
        // Mascolo et al. §2: ssthresh = BWE RTTmin / seg_size; cwnd = min(cwnd, ssthresh).
        let mut w = westwood(60);
        w.state.rtt.on_sample(50_000, 50_000);
        w.rule.bw = BandwidthEstimator::seeded(500_000);
        w.on_loss(100_000);
        assert!((w.ssthresh_segments() - 25.0).abs() < 1e-9);
        assert!((w.cwnd_segments() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn loss_never_raises_the_window() {
        let mut w = westwood(10);
        w.state.rtt.on_sample(50_000, 50_000);
        w.rule.bw = BandwidthEstimator::seeded(500_000);
        w.on_loss(100_000);
        assert!((w.cwnd_segments() - 10.0).abs() < 1e-9);
        assert!((w.ssthresh_segments() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn without_an_estimate_a_loss_halves_the_window() {
        let mut w = westwood(40);
        w.on_loss(100_000);
        assert!((w.cwnd_segments() - 20.0).abs() < 1e-9);
    }

    #[test]
    fn timeout_keeps_the_estimate_as_ssthresh_and_restarts_from_two_segments() {
        let mut w = westwood(60);
        w.state.rtt.on_sample(50_000, 50_000);
        w.rule.bw = BandwidthEstimator::seeded(500_000);
        w.on_report(&Measurement {
            timeout: true,
            ..report(100_000, 0, 50_000)
        });
        assert!((w.cwnd_segments() - 2.0).abs() < 1e-9);
        assert!((w.ssthresh_segments() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn growth_is_reno() {
        let mut w = westwood(10);
        w.on_report(&report(50_000, 10_000, 50_000));
        assert!((w.cwnd_segments() - 20.0).abs() < 1e-9, "slow start");
        w.state.ssthresh = 20.0;
        w.on_report(&report(100_000, 20_000, 50_000));
        assert!(
            (w.cwnd_segments() - 21.0).abs() < 1e-9,
            "one segment per window"
        );
    }

    #[test]
    fn adopting_a_handoff_seeds_the_estimate_and_continues_in_avoidance() {
        let mut w = westwood(10);
        let h = Handoff {
            cwnd_bytes: 50_000,
            in_first_slow_start: false,
            last_loss_us: Some(0),
            min_rtt_us: 50_000,
            srtt_us: 50_000,
            delivery_rate_bytes_per_sec: 1_000_000,
            ..Handoff::flow_start(&FlowStart {
                sock_id: 1,
                mss_bytes: MSS,
                init_cwnd_bytes: 10 * MSS,
                seed: 0,
            })
        };
        let c = w.activate(&h);
        assert_eq!(c.cwnd_bytes, Some(50_000));
        assert_eq!(c.pacing, Some(Pacing::Unpaced));
        assert!((w.bwe_bytes_per_sec() - 1e6).abs() < 1e-6);
        w.on_report(&report(50_000, 50_000, 50_000));
        assert_eq!(w.cwnd_bytes(), 51_000);
    }
}
