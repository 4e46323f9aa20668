//! Generated cellular link traces, in mahimahi format.
//!
//! The model: the link rate is log-normal and moves as a first-order autoregressive process
//! in the log domain every 20 ms (correlation 0.9, so fades last a few hundred ms), with
//! occasional outages (on average every 10 s, lasting 100-500 ms, rate 5 % of normal) like
//! the handovers and deep fades in LTE traces. The series is scaled so its mean is exactly
//! `mean_mbps`, then turned into 1500-byte delivery opportunities per millisecond, carrying
//! fractions over. Same seed, same trace.

use ccp_datapath::sim::Trace;
use ccp_datapath::sim::rng::Rng;
use serde::Deserialize;

/// Parameters of a generated trace.
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct CellularSpec {
    /// Seed.
    pub seed: u64,
    /// Mean rate, Mbit/s.
    pub mean_mbps: f64,
    /// Trace period, s (it repeats after that).
    #[serde(default = "default_period")]
    pub period_s: f64,
    /// Standard deviation of the log rate.
    #[serde(default = "default_sigma")]
    pub sigma: f64,
}

/// Smallest mean rate, Mbit/s.
pub const MIN_MEAN_MBPS: f64 = 0.01;
/// Largest mean rate, Mbit/s.
pub const MAX_MEAN_MBPS: f64 = 10_000.0;
/// Shortest period, s.
pub const MIN_PERIOD_S: f64 = 1.0;
/// Longest period, s (an hour; the trace repeats after it).
pub const MAX_PERIOD_S: f64 = 3_600.0;
/// Largest standard deviation of the log rate.
pub const MAX_SIGMA: f64 = 3.0;
/// Most delivery opportunities in one trace (generated or read from a file), 8 bytes each.
pub const MAX_OPPORTUNITIES: u64 = 10_000_000;

impl CellularSpec {
    /// How many delivery opportunities [`cellular`] generates (the rate series is scaled to
    /// `mean_mbps` exactly, so this is mean rate x period over 1500-byte packets, give or take
    /// one), computed without generating anything.
    pub fn opportunities(&self) -> f64 {
        let period_ms = (self.period_s.max(1.0) * 1000.0).floor();
        self.mean_mbps * 1e6 * period_ms / 1000.0 / (1500.0 * 8.0)
    }
}

fn default_period() -> f64 {
    60.0
}

fn default_sigma() -> f64 {
    0.6
}

const STEP_MS: usize = 20;
const PHI: f64 = 0.9;

fn normal(rng: &mut Rng) -> f64 {
    // Box-Muller.
    let u1 = rng.next_f64().max(f64::MIN_POSITIVE);
    let u2 = rng.next_f64();
    (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
}

/// Generates the trace.
pub fn cellular(spec: &CellularSpec) -> Trace {
    let mut rng = Rng::derive(spec.seed, 0xce11);
    let period_ms = (spec.period_s.max(1.0) * 1000.0) as usize;
    let steps = period_ms.div_ceil(STEP_MS);
    let mut x = 0.0;
    let mut outage_left = 0usize;
    let mut rates: Vec<f64> = Vec::with_capacity(steps);
    for _ in 0..steps {
        x = PHI * x + spec.sigma * (1.0 - PHI * PHI).sqrt() * normal(&mut rng);
        if outage_left == 0 && rng.chance(STEP_MS as f64 / 10_000.0) {
            outage_left = (100 + (rng.next_u64() % 400) as usize) / STEP_MS;
        }
        let r = x.exp() * if outage_left > 0 { 0.05 } else { 1.0 };
        outage_left = outage_left.saturating_sub(1);
        rates.push(r);
    }
    let mean = rates.iter().sum::<f64>() / rates.len() as f64;
    let scale = spec.mean_mbps / mean;
    let mut ops = Vec::new();
    let mut carry = 0.0;
    for ms in 0..period_ms {
        let mbps = rates[ms / STEP_MS] * scale;
        carry += mbps * 1e6 / 1000.0 / (1500.0 * 8.0);
        while carry >= 1.0 {
            ops.push(ms as u64 * 1_000_000);
            carry -= 1.0;
        }
    }
    if ops.is_empty() {
        ops.push(0);
    }
    Trace {
        opportunities_ns: ops,
        period_ns: period_ms as u64 * 1_000_000,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn mean_rate_is_as_asked_and_rate_varies() {
        let spec = CellularSpec {
            seed: 3,
            mean_mbps: 12.0,
            period_s: 60.0,
            sigma: 0.6,
        };
        let t = cellular(&spec);
        let mean = t.mean_bps() as f64 / 1e6;
        assert!((mean - 12.0).abs() < 0.2, "{mean}");
        // Rates over 1 s windows differ by more than a factor of 2 somewhere.
        let per_s: Vec<usize> = (0..60u64)
            .map(|s| {
                t.opportunities_ns
                    .iter()
                    .filter(|&&o| o / 1_000_000_000 == s)
                    .count()
            })
            .collect();
        let (lo, hi) = (per_s.iter().min().unwrap(), per_s.iter().max().unwrap());
        assert!(*hi > 2 * *lo, "{lo}..{hi}");
        assert_eq!(cellular(&spec), t);
    }

    #[test]
    fn opportunity_count_is_known_before_generating() {
        for (mean_mbps, period_s) in [(12.0, 60.0), (0.5, 1.0), (300.0, 10.0), (24.0, 1.5)] {
            let spec = CellularSpec {
                seed: 7,
                mean_mbps,
                period_s,
                sigma: 0.6,
            };
            let n = cellular(&spec).opportunities_ns.len() as f64;
            let want = spec.opportunities();
            assert!(
                (n - want).abs() <= 1.0 + want * 1e-9,
                "{mean_mbps} x {period_s}: {n} vs {want}"
            );
        }
    }
}
