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

use crate::api::{Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, Pacing};
use crate::programs::{PER_RTT_URGENT, ProgramSpec};
use crate::recovery::Recovery;
use crate::rtt::RttEstimator;
use crate::window;

/// Linux `TCP_WESTWOOD_RTT_MIN`: shortest bandwidth sampling interval, µs.
pub const MIN_SAMPLE_INTERVAL_US: u64 = 50_000;
pub use crate::window::MIN_CWND_SEGMENTS;

/// Programs Westwood+ installs.
static PROGRAMS: [&ProgramSpec; 1] = [&PER_RTT_URGENT];

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
        &PROGRAMS
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

/// Westwood+'s per-flow state.
#[derive(Debug, Clone)]
pub struct Westwood {
    cfg: WestwoodConfig,
    mss_bytes: u32,
    /// Window, segments.
    cwnd: f64,
    /// Slow-start threshold, segments.
    ssthresh: f64,
    bw: BandwidthEstimator,
    recovery: Recovery,
    last_loss_us: Option<u64>,
    in_first_slow_start: bool,
    rtt: RttEstimator,
    delivery_rate_bytes_per_sec: u64,
    now_us: u64,
}

impl Westwood {
    /// A new flow with the initial window of `start`.
    pub fn new(cfg: WestwoodConfig, start: &FlowStart) -> Self {
        let mut w = Self {
            cfg,
            mss_bytes: start.mss_bytes.max(1),
            cwnd: MIN_CWND_SEGMENTS,
            ssthresh: f64::INFINITY,
            bw: BandwidthEstimator::default(),
            recovery: Recovery::default(),
            last_loss_us: None,
            in_first_slow_start: true,
            rtt: RttEstimator::default(),
            delivery_rate_bytes_per_sec: 0,
            now_us: 0,
        };
        w.adopt(&Handoff::flow_start(start));
        w
    }

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
        self.bw = BandwidthEstimator::seeded(h.delivery_rate_bytes_per_sec);
        self.recovery = Recovery::default();
        self.last_loss_us = h.last_loss_us;
        self.rtt = RttEstimator::from_handoff(h.srtt_us, h.min_rtt_us);
        self.delivery_rate_bytes_per_sec = h.delivery_rate_bytes_per_sec;
    }

    /// `max(BWE * RTTmin / MSS, 2)` segments, or `None` without an estimate or an RTT.
    pub fn bw_rtt_min_segments(&self) -> Option<f64> {
        let bwe = self.bw.bwe_bytes_per_sec();
        let rtt_min_s = self.rtt.min_rtt_us() as f64 / 1e6;
        if bwe <= 0.0 || rtt_min_s <= 0.0 || !bwe.is_finite() {
            return None;
        }
        Some(self.clamp(bwe * rtt_min_s / f64::from(self.mss_bytes)))
    }

    /// The loss threshold: `BWE * RTTmin`, or Reno's half window without an estimate.
    fn loss_ssthresh(&self) -> f64 {
        self.bw_rtt_min_segments()
            .unwrap_or_else(|| self.clamp(self.cwnd / 2.0))
    }

    /// Reno growth for `acked` segments (RFC 5681 §3.1, byte counting).
    fn on_acked(&mut self, mut acked: f64) {
        if self.cwnd < self.ssthresh {
            let grow = acked.min(self.ssthresh - self.cwnd);
            self.cwnd = self.clamp(self.cwnd + grow);
            acked -= grow;
        }
        if acked > 0.0 {
            self.cwnd = self.clamp(self.cwnd + acked / self.cwnd);
        }
    }

    /// A loss at `now_us` (three duplicate ACKs in the paper): once per recovery.
    pub fn on_loss(&mut self, now_us: u64) {
        self.last_loss_us = Some(now_us);
        if self.recovery.active(now_us) {
            return;
        }
        self.in_first_slow_start = false;
        let window_bytes = (self.cwnd * f64::from(self.mss_bytes)) as u64;
        self.ssthresh = self.loss_ssthresh();
        if self.cwnd > self.ssthresh {
            self.cwnd = self.ssthresh;
        }
        self.recovery
            .enter(now_us, self.rtt.srtt_us(), window_bytes);
    }

    /// A retransmission timeout at `now_us`: `ssthresh = BWE * RTTmin`, back to 2 segments.
    pub fn on_timeout(&mut self, now_us: u64) {
        self.last_loss_us = Some(now_us);
        self.in_first_slow_start = false;
        self.ssthresh = self.loss_ssthresh();
        self.cwnd = MIN_CWND_SEGMENTS;
        self.recovery.clear();
    }

    /// Window, segments.
    pub fn cwnd_segments(&self) -> f64 {
        self.cwnd
    }

    /// Slow-start threshold, segments (infinite before the first loss).
    pub fn ssthresh_segments(&self) -> f64 {
        self.ssthresh
    }

    /// `BWE`, bytes/s (0: none yet).
    pub fn bwe_bytes_per_sec(&self) -> f64 {
        self.bw.bwe_bytes_per_sec()
    }

    fn cwnd_u32(&self) -> u32 {
        window::bytes(self.cwnd, self.mss_bytes)
    }
}

impl Algorithm for Westwood {
    fn name(&self) -> &'static str {
        WestwoodConfig::NAME
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
        let interval = self
            .rtt
            .srtt_us()
            .max(self.cfg.min_sample_interval_us)
            .max(1);
        self.bw.on_acked(now, m.acked_bytes, interval);
        let in_recovery = self.recovery.holding(now);
        self.recovery.on_acked(m.acked_bytes);
        if !in_recovery {
            self.on_acked(self.segments(m.acked_bytes));
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
        let bwe = self.bw.bwe_bytes_per_sec();
        Handoff {
            now_us: self.now_us,
            cwnd_bytes: self.cwnd_u32(),
            ssthresh_bytes,
            pacing: Pacing::Unpaced,
            srtt_us: self.rtt.srtt_us(),
            min_rtt_us: self.rtt.min_rtt_us(),
            // Saturating float-to-int cast.
            delivery_rate_bytes_per_sec: if bwe > 0.0 {
                bwe as u64
            } else {
                self.delivery_rate_bytes_per_sec
            },
            last_loss_us: self.last_loss_us,
            in_first_slow_start: self.in_first_slow_start,
        }
    }

    fn cwnd_bytes(&self) -> u32 {
        self.cwnd_u32()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const MSS: u32 = 1000;

    fn westwood(iw_segments: u32) -> Westwood {
        Westwood::new(
            WestwoodConfig::default(),
            &FlowStart {
                sock_id: 1,
                mss_bytes: MSS,
                init_cwnd_bytes: iw_segments * MSS,
                seed: 0,
            },
        )
    }

    fn report(now_us: u64, acked_bytes: u64, rtt_us: u64) -> Measurement {
        Measurement {
            now_us,
            acked_bytes,
            rtt_us,
            min_rtt_us: rtt_us,
            ..Measurement::default()
        }
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
        w.rtt.on_sample(50_000, 50_000);
        w.bw = BandwidthEstimator::seeded(500_000);
        w.on_loss(100_000);
        assert!((w.ssthresh_segments() - 25.0).abs() < 1e-9);
        assert!((w.cwnd_segments() - 25.0).abs() < 1e-9);
    }

    #[test]
    fn loss_never_raises_the_window() {
        let mut w = westwood(10);
        w.rtt.on_sample(50_000, 50_000);
        w.bw = BandwidthEstimator::seeded(500_000);
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
        w.rtt.on_sample(50_000, 50_000);
        w.bw = BandwidthEstimator::seeded(500_000);
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
        w.ssthresh = 20.0;
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
