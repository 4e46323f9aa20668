//! LP-TCP's state at report granularity: the per-report analogue of the paper's 55 per-packet
//! features (Kong, Zang & Ma, `NetAI`'18, §3.1), and the version of that schema a model names.
//!
//! The paper computes its state for each packet about to be sent: the window, the packet's
//! position in it, and for three signals (ACK inter-arrival time, packet inter-send time, RTT)
//! an EWMA, the last 8 samples and the minimum, with the series' ratios to their minimum. A CCP
//! agent sees one report per RTT (at once on a loss), so the state here is taken per report,
//! from what a report carries:
//!
//! | paper (per packet)              | here (per report)                                           |
//! |---------------------------------|-------------------------------------------------------------|
//! | cwnd                            | `cwnd_pkts`, the window in segments                         |
//! | position of the packet in cwnd  | `position`, bytes in flight / window at the last ACK        |
//! | ACK inter-arrival time          | report interval / segments acknowledged in it (in order and SACKed), µs |
//! | packet inter-send time          | MSS / the datapath's sending-rate sample, µs                |
//! | RTT                             | the latest RTT sample, µs                                   |
//!
//! Per signal: the EWMA (gain 1/8), the flow's minimum, the last 8 samples (newest first) and
//! their 8 ratios to the minimum: 18 features, 56 with the window and position (the paper
//! counts 55; its exact list is not given, so the one here is ours). A signal with no sample
//! yet reads 0 (ratios 1).

/// Version of the feature schema: bump it with any change to [`FEATURE_NAMES`] or how a
/// feature is computed, so an older model file is refused instead of misread.
pub const SCHEMA_VERSION: u32 = 1;

/// Samples kept per signal (the paper's 8-sample series).
pub const SERIES: usize = 8;

/// Features per signal: EWMA, minimum, the series and its ratios to the minimum.
const PER_SIGNAL: usize = 2 + 2 * SERIES;

/// Number of features: window, position, three signals.
pub const N_FEATURES: usize = 2 + 3 * PER_SIGNAL;

/// EWMA gain of every signal (RFC 6298's 1/8).
const EWMA_GAIN: f64 = 1.0 / 8.0;

/// The features' names, in the order of [`FeatureTracker::features`].
pub const FEATURE_NAMES: [&str; N_FEATURES] = [
    "cwnd_pkts",
    "position",
    "ack_ia_ewma_us",
    "ack_ia_min_us",
    "ack_ia_0_us",
    "ack_ia_1_us",
    "ack_ia_2_us",
    "ack_ia_3_us",
    "ack_ia_4_us",
    "ack_ia_5_us",
    "ack_ia_6_us",
    "ack_ia_7_us",
    "ack_ia_0_ratio",
    "ack_ia_1_ratio",
    "ack_ia_2_ratio",
    "ack_ia_3_ratio",
    "ack_ia_4_ratio",
    "ack_ia_5_ratio",
    "ack_ia_6_ratio",
    "ack_ia_7_ratio",
    "send_ia_ewma_us",
    "send_ia_min_us",
    "send_ia_0_us",
    "send_ia_1_us",
    "send_ia_2_us",
    "send_ia_3_us",
    "send_ia_4_us",
    "send_ia_5_us",
    "send_ia_6_us",
    "send_ia_7_us",
    "send_ia_0_ratio",
    "send_ia_1_ratio",
    "send_ia_2_ratio",
    "send_ia_3_ratio",
    "send_ia_4_ratio",
    "send_ia_5_ratio",
    "send_ia_6_ratio",
    "send_ia_7_ratio",
    "rtt_ewma_us",
    "rtt_min_us",
    "rtt_0_us",
    "rtt_1_us",
    "rtt_2_us",
    "rtt_3_us",
    "rtt_4_us",
    "rtt_5_us",
    "rtt_6_us",
    "rtt_7_us",
    "rtt_0_ratio",
    "rtt_1_ratio",
    "rtt_2_ratio",
    "rtt_3_ratio",
    "rtt_4_ratio",
    "rtt_5_ratio",
    "rtt_6_ratio",
    "rtt_7_ratio",
];

/// One signal's EWMA, minimum and last [`SERIES`] samples.
#[derive(Debug, Clone, Default)]
struct Signal {
    ewma: f64,
    min: f64,
    /// Newest first; 0 where there is no sample yet.
    series: [f64; SERIES],
    seen: bool,
}

impl Signal {
    fn push(&mut self, x: f64) {
        if !x.is_finite() || x <= 0.0 {
            return;
        }
        if self.seen {
            self.ewma += EWMA_GAIN * (x - self.ewma);
            self.min = self.min.min(x);
        } else {
            self.ewma = x;
            self.min = x;
            self.seen = true;
        }
        self.series.rotate_right(1);
        self.series[0] = x;
    }

    fn write(&self, out: &mut [f64]) {
        out[0] = self.ewma;
        out[1] = self.min;
        out[2..2 + SERIES].copy_from_slice(&self.series);
        for (k, s) in self.series.iter().enumerate() {
            out[2 + SERIES + k] = if self.min > 0.0 && *s > 0.0 {
                s / self.min
            } else {
                1.0
            };
        }
    }
}

/// Computes the feature vector from a flow's reports.
#[derive(Debug, Clone, Default)]
pub struct FeatureTracker {
    ack_ia: Signal,
    send_ia: Signal,
    rtt: Signal,
    last_now_us: Option<u64>,
    position: f64,
}

impl FeatureTracker {
    /// Takes one report's samples: `now_us`, bytes acknowledged (in order and SACKed) since the
    /// last report, the sending-rate sample (bytes/s, 0: none), the RTT sample (µs, 0: none),
    /// bytes in flight and the window (bytes) at the last ACK, the segment size.
    #[allow(clippy::too_many_arguments)]
    pub fn on_report(
        &mut self,
        now_us: u64,
        acked_bytes: u64,
        rate_out_bytes_per_sec: u64,
        rtt_us: u64,
        inflight_bytes: u64,
        cwnd_bytes: u64,
        mss_bytes: u32,
    ) {
        let mss = f64::from(mss_bytes.max(1));
        if let Some(last) = self.last_now_us
            && now_us > last
        {
            let dt = (now_us - last) as f64;
            let segments = acked_bytes as f64 / mss;
            // No ACK in the interval: at least the interval passed between arrivals.
            self.ack_ia.push(if segments >= 1.0 { dt / segments } else { dt });
        }
        if self.last_now_us.is_none_or(|last| now_us > last) {
            self.last_now_us = Some(now_us);
        }
        if rate_out_bytes_per_sec > 0 {
            self.send_ia.push(mss / rate_out_bytes_per_sec as f64 * 1e6);
        }
        if rtt_us > 0 {
            self.rtt.push(rtt_us as f64);
        }
        self.position = if cwnd_bytes > 0 {
            (inflight_bytes as f64 / cwnd_bytes as f64).min(16.0)
        } else {
            0.0
        };
    }

    /// The feature vector for a window of `cwnd_pkts` segments, in [`FEATURE_NAMES`] order;
    /// every value finite.
    pub fn features(&self, cwnd_pkts: f64) -> [f64; N_FEATURES] {
        let mut f = [0.0; N_FEATURES];
        f[0] = cwnd_pkts;
        f[1] = self.position;
        self.ack_ia.write(&mut f[2..2 + PER_SIGNAL]);
        self.send_ia
            .write(&mut f[2 + PER_SIGNAL..2 + 2 * PER_SIGNAL]);
        self.rtt.write(&mut f[2 + 2 * PER_SIGNAL..]);
        for x in &mut f {
            if !x.is_finite() {
                *x = 0.0;
            }
        }
        f
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_match_the_layout() {
        let mut t = FeatureTracker::default();
        t.on_report(0, 0, 0, 0, 0, 0, 1000);
        t.on_report(100_000, 10_000, 1_000_000, 150_000, 5_000, 10_000, 1000);
        t.on_report(200_000, 20_000, 2_000_000, 160_000, 10_000, 10_000, 1000);
        let f = t.features(10.0);
        let at = |n: &str| f[FEATURE_NAMES.iter().position(|x| *x == n).unwrap()];
        assert!((at("cwnd_pkts") - 10.0).abs() < 1e-9);
        assert!((at("position") - 1.0).abs() < 1e-9);
        // 100 ms over 10 then 20 segments.
        assert!((at("ack_ia_0_us") - 5_000.0).abs() < 1e-9);
        assert!((at("ack_ia_1_us") - 10_000.0).abs() < 1e-9);
        assert!((at("ack_ia_min_us") - 5_000.0).abs() < 1e-9);
        assert!((at("ack_ia_1_ratio") - 2.0).abs() < 1e-9);
        // 1000 bytes at 2 MB/s: 500 µs.
        assert!((at("send_ia_0_us") - 500.0).abs() < 1e-9);
        assert!((at("rtt_0_us") - 160_000.0).abs() < 1e-9);
        assert!((at("rtt_ewma_us") - 151_250.0).abs() < 1e-9);
        assert!((at("rtt_7_ratio") - 1.0).abs() < 1e-9, "no sample: ratio 1");
        assert_eq!(FEATURE_NAMES.len(), 56);
    }

    #[test]
    fn hostile_samples_stay_finite() {
        let mut t = FeatureTracker::default();
        for (now, v) in [(5, u64::MAX), (3, 0), (u64::MAX, u64::MAX), (0, 1)] {
            t.on_report(now, v, v, v, v, v, 0);
        }
        assert!(t.features(f64::NAN).iter().all(|x| x.is_finite()));
    }
}
