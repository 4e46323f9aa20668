//! What the first seconds of a flow show about its path: the probe's features.
//!
//! The flow runs on its start candidate while [`ProbeStats`] folds its reports; at the end of
//! the probe window ([`ProbeWindow`]) the features describe the path as that candidate met it:
//! the base RTT, how far and how steadily the queue grew (a deep buffer, a competing
//! loss-based flow), how steady the delivery rate is (a cellular link), and how much was lost
//! and how (random loss shows as loss at a low RTT ratio).

use ccp_algorithms::Measurement;
use ccp_algorithms::rtt::lower_min;
use serde::{Deserialize, Serialize};

/// The probe's features, in model-input order.
pub const FEATURE_NAMES: [&str; N_FEATURES] = [
    "min_rtt_ms",
    "rtt_ratio_mean",
    "rtt_ratio_max",
    "rtt_ratio_last",
    "rtt_cv",
    "rate_max_mbps",
    "rate_mean_mbps",
    "rate_last_mbps",
    "rate_cv",
    "loss_per_kpkt",
    "timeouts",
    "rtt_ratio_drained",
];

/// Number of features.
pub const N_FEATURES: usize = 12;

/// Where the features the policy's rules read (not only its models) are in [`FEATURE_NAMES`]
/// (checked by tests): `min_rtt_ms`, `rtt_ratio_max`, `rtt_ratio_last`, `rtt_cv`,
/// `rate_max_mbps`, `rate_mean_mbps`, `loss_per_kpkt`, `rtt_ratio_drained`.
pub(crate) const MIN_RTT: usize = 0;
pub(crate) const RTT_RATIO_MAX: usize = 2;
pub(crate) const RTT_RATIO_LAST: usize = 3;
pub(crate) const RTT_CV: usize = 4;
pub(crate) const RATE_MAX: usize = 5;
pub(crate) const RATE_MEAN: usize = 6;
pub(crate) const LOSS: usize = 9;
pub(crate) const DRAINED: usize = N_FEATURES - 1;

/// Version of the feature schema; model files name the version they were trained on.
/// 2: `rtt_ratio_drained` added.
pub const FEATURE_SCHEMA_VERSION: u32 = 2;

/// The span, in minimum RTTs, over which `rtt_ratio_drained` looks for a drained queue: Copa
/// drains its own queue about every 5 RTTs (Arun & Balakrishnan, NSDI 2018, §2.2, which uses
/// the same test to detect buffer-filling competitors), so a queue that did not empty within
/// this span is somebody else's.
pub const DRAIN_RTTS: u64 = 5;

/// Reports at the start of a flow left out of the variability statistics: slow start doubles
/// the rate every round, which says nothing about the path's own variability.
pub const WARMUP_REPORTS: u64 = 4;

/// When the probe ends: at the first report at least `min_ms` after the flow's first report
/// and at least `rtts` minimum RTTs after it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeWindow {
    /// Shortest probe, ms.
    pub min_ms: u64,
    /// Shortest probe in minimum RTTs.
    pub rtts: u32,
}

impl Default for ProbeWindow {
    /// 1.5 s and 10 RTTs: past slow start and its overshoot on the paths of `selection-bench`
    /// (up to 150 ms of RTT), a few cellular rate swings, and still under a tenth of a 30-s flow.
    fn default() -> Self {
        Self {
            min_ms: 1_500,
            rtts: 10,
        }
    }
}

/// Running mean and variance (Welford).
#[derive(Debug, Clone, Copy, Default)]
struct Moments {
    n: f64,
    mean: f64,
    m2: f64,
}

impl Moments {
    fn push(&mut self, x: f64) {
        self.n += 1.0;
        let d = x - self.mean;
        self.mean += d / self.n;
        self.m2 += d * (x - self.mean);
    }

    /// Coefficient of variation (0 with fewer than two samples or a zero mean).
    fn cv(&self) -> f64 {
        if self.n < 2.0 || self.mean <= 0.0 {
            0.0
        } else {
            (self.m2 / self.n).max(0.0).sqrt() / self.mean
        }
    }
}

/// Folds a flow's reports into the probe's features.
#[derive(Debug, Clone)]
pub struct ProbeStats {
    mss_bytes: u64,
    first_us: Option<u64>,
    last_us: Option<u64>,
    reports: u64,
    min_rtt_us: u64,
    rtt_sum_us: f64,
    rtt_samples: f64,
    rtt_max_us: u64,
    rtt_last_us: u64,
    rtt: Moments,
    rate: Moments,
    rate_max: f64,
    rate_last: f64,
    delivered_bytes: u64,
    lost_pkts: u64,
    timeouts: u64,
    /// (report time, the report's smallest RTT sample), newest last, over the last
    /// [`DRAIN_RTTS`] minimum RTTs.
    recent_min: std::collections::VecDeque<(u64, u64)>,
}

impl ProbeStats {
    /// The flow's segment size, bytes (at least 1).
    pub fn mss_bytes(&self) -> u64 {
        self.mss_bytes
    }

    /// Statistics of a flow of `mss_bytes` segments.
    pub fn new(mss_bytes: u32) -> Self {
        Self {
            mss_bytes: u64::from(mss_bytes.max(1)),
            first_us: None,
            last_us: None,
            reports: 0,
            min_rtt_us: 0,
            rtt_sum_us: 0.0,
            rtt_samples: 0.0,
            rtt_max_us: 0,
            rtt_last_us: 0,
            rtt: Moments::default(),
            rate: Moments::default(),
            rate_max: 0.0,
            rate_last: 0.0,
            delivered_bytes: 0,
            lost_pkts: 0,
            timeouts: 0,
            recent_min: std::collections::VecDeque::new(),
        }
    }

    /// Adds one report at datapath time `now_us`.
    pub fn push(&mut self, m: &Measurement, now_us: u64) {
        self.reports += 1;
        let delivered = m.acked_bytes.saturating_add(m.sacked_bytes);
        self.delivered_bytes = self.delivered_bytes.saturating_add(delivered);
        self.lost_pkts = self.lost_pkts.saturating_add(m.lost_pkts);
        self.timeouts += u64::from(m.timeout);
        self.min_rtt_us = lower_min(self.min_rtt_us, [m.min_rtt_us, m.rtt_us]);
        let warm = self.reports > WARMUP_REPORTS;
        if m.rtt_us > 0 {
            self.rtt_sum_us += m.rtt_us as f64;
            self.rtt_samples += 1.0;
            self.rtt_max_us = self.rtt_max_us.max(m.rtt_us);
            self.rtt_last_us = m.rtt_us;
            if warm {
                self.rtt.push(m.rtt_us as f64);
            }
        }
        // The interval's delivery rate needs the previous report's time; the first report only
        // starts the clock.
        if let Some(last) = self.last_us
            && now_us > last
        {
            let rate = delivered as f64 * 8.0 / (now_us - last) as f64; // Mbit/s
            self.rate_max = self.rate_max.max(rate);
            self.rate_last = rate;
            if warm {
                self.rate.push(rate);
            }
        }
        let sample = lower_min(0, [m.min_rtt_us, m.rtt_us]);
        if sample > 0 {
            self.recent_min.push_back((now_us, sample));
        }
        let span = DRAIN_RTTS.saturating_mul(self.min_rtt_us);
        while self
            .recent_min
            .front()
            .is_some_and(|&(t, _)| now_us.saturating_sub(t) > span)
        {
            self.recent_min.pop_front();
        }
        self.first_us.get_or_insert(now_us);
        self.last_us = Some(now_us.max(self.last_us.unwrap_or(0)));
    }

    /// Time from the first report to the last, µs.
    pub fn elapsed_us(&self) -> u64 {
        match (self.first_us, self.last_us) {
            (Some(a), Some(b)) => b.saturating_sub(a),
            _ => 0,
        }
    }

    /// The smallest RTT seen, µs (0: none yet).
    pub fn min_rtt_us(&self) -> u64 {
        self.min_rtt_us
    }

    /// Reports folded so far.
    pub fn reports(&self) -> u64 {
        self.reports
    }

    /// Whether `window` has passed (never before an RTT sample).
    pub fn done(&self, window: &ProbeWindow) -> bool {
        if self.min_rtt_us == 0 {
            return false;
        }
        let need = (window.min_ms.saturating_mul(1_000))
            .max(u64::from(window.rtts).saturating_mul(self.min_rtt_us));
        self.elapsed_us() >= need
    }

    /// The features, in [`FEATURE_NAMES`] order; every value is finite and >= 0.
    pub fn features(&self) -> [f64; N_FEATURES] {
        let min = self.min_rtt_us as f64;
        let ratio = |x: f64| if min > 0.0 { x / min } else { 0.0 };
        let mean_rtt = if self.rtt_samples > 0.0 {
            self.rtt_sum_us / self.rtt_samples
        } else {
            0.0
        };
        let elapsed = self.elapsed_us() as f64;
        let rate_mean = if elapsed > 0.0 {
            self.delivered_bytes as f64 * 8.0 / elapsed
        } else {
            0.0
        };
        let delivered_pkts = (self.delivered_bytes / self.mss_bytes).max(1) as f64;
        let drained = self.recent_min.iter().map(|&(_, r)| r).min().unwrap_or(0);
        let f = [
            min / 1_000.0,
            ratio(mean_rtt),
            ratio(self.rtt_max_us as f64),
            ratio(self.rtt_last_us as f64),
            self.rtt.cv(),
            self.rate_max,
            rate_mean,
            self.rate_last,
            self.rate.cv(),
            1_000.0 * self.lost_pkts as f64 / delivered_pkts,
            self.timeouts as f64,
            ratio(drained as f64),
        ];
        f.map(|x| if x.is_finite() { x.max(0.0) } else { 0.0 })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn report(now_us: u64, rtt_us: u64, acked: u64, lost: u64) -> Measurement {
        Measurement {
            now_us,
            acked_bytes: acked,
            lost_pkts: lost,
            rtt_us,
            min_rtt_us: rtt_us,
            ..Measurement::default()
        }
    }

    #[test]
    fn a_steady_path_has_no_variability_and_its_own_rate() {
        // 10 Mbit/s, 50 ms: 62,500 bytes per 50-ms report, RTT steady.
        let mut s = ProbeStats::new(1_250);
        for i in 0..40u64 {
            let now = 50_000 * (i + 1);
            s.push(&report(now, 50_000, 62_500, 0), now);
        }
        let f = s.features();
        assert!((f[0] - 50.0).abs() < 1e-9, "min RTT {}", f[0]);
        assert!((f[1] - 1.0).abs() < 1e-9 && (f[2] - 1.0).abs() < 1e-9);
        assert!(f[4].abs() < 1e-9, "rtt cv {}", f[4]);
        assert!((f[5] - 10.0).abs() < 1e-9, "max rate {}", f[5]);
        assert!((f[7] - 10.0).abs() < 1e-9);
        assert!(f[8].abs() < 1e-9, "rate cv {}", f[8]);
        // 40 reports of 62,500 bytes over 39 intervals: the first report starts the clock.
        assert!((f[6] - 40.0 * 62_500.0 * 8.0 / (39.0 * 50_000.0)).abs() < 1e-9);
        assert!(f[9].abs() < 1e-12);
    }

    #[test]
    fn a_growing_queue_and_loss_show() {
        let mut s = ProbeStats::new(1_000);
        for i in 0..20u64 {
            let now = 100_000 * (i + 1);
            // RTT grows from 100 to 290 ms; 2 losses per 1,000-packet report.
            s.push(&report(now, 100_000 + 10_000 * i, 1_000_000, 2), now);
        }
        let f = s.features();
        assert!((f[2] - 2.9).abs() < 1e-9 && (f[3] - 2.9).abs() < 1e-9);
        assert!(f[1] > 1.9 && f[1] < 2.0, "mean ratio {}", f[1]);
        assert!(f[4] > 0.1, "rtt cv {}", f[4]);
        assert!((f[9] - 2.0).abs() < 1e-9, "loss per kpkt {}", f[9]);
        // The queue never drained in the last 5 minimum RTTs (0.5 s): its smallest RTT there
        // is 240 ms, 2.4 times the base.
        assert!((f[11] - 2.4).abs() < 1e-9, "drained {}", f[11]);
    }

    #[test]
    fn a_queue_that_drains_is_not_a_standing_one() {
        let mut s = ProbeStats::new(1_000);
        // 100 ms of base RTT; a queue of 150 ms that empties every fourth report (400 ms).
        for i in 0..20u64 {
            let now = 100_000 * (i + 1);
            let rtt = if i % 4 == 3 { 100_000 } else { 250_000 };
            s.push(&report(now, rtt, 1_000_000, 0), now);
        }
        let f = s.features();
        assert!((f[11] - 1.0).abs() < 1e-9, "drained {}", f[11]);
        assert!(f[1] > 1.5, "mean ratio {}", f[1]);
    }

    #[test]
    fn the_window_ends_after_both_its_time_and_its_rtts() {
        let w = ProbeWindow {
            min_ms: 1_000,
            rtts: 10,
        };
        // 200-ms RTT: 10 RTTs (2 s) is the longer of the two.
        let mut s = ProbeStats::new(1_448);
        assert!(!s.done(&w));
        for i in 0..=10u64 {
            let now = 1_000 + 200_000 * i;
            s.push(&report(now, 200_000, 10_000, 0), now);
            assert_eq!(s.done(&w), i >= 10, "after {i} reports");
        }
        // 20-ms RTT: the second is the longer.
        let mut s = ProbeStats::new(1_448);
        for i in 0..=50u64 {
            let now = 20_000 * i;
            s.push(&report(now, 20_000, 10_000, 0), now);
            assert_eq!(s.done(&w), i >= 50, "after {i} reports");
        }
    }

    #[test]
    fn hostile_reports_give_finite_features() {
        let mut s = ProbeStats::new(0);
        assert!(s.features().iter().all(|x| x.is_finite() && *x >= 0.0));
        for (now, m) in [
            (0, report(0, 0, u64::MAX, u64::MAX)),
            (0, report(0, u64::MAX, u64::MAX, 0)),
            (5, report(5, 1, 0, 0)),
            (3, report(3, 7, 9, 1)),
        ] {
            s.push(&m, now);
            assert!(s.features().iter().all(|x| x.is_finite() && *x >= 0.0));
        }
        assert!(!s.done(&ProbeWindow::default()));
    }
}
