//! Antelope's reward (`PAPERS.md` §2, Eq. 1-3) and its application preference modes.
//!
//! `R = (throughput' - eta * loss) / max(theta * delay', 1)`, normalized as
//! `R^ = R / (pacing_rate_max / delay_min)`, in kbit/s, ms and lost packets per unit, with
//! - `delay' = delay_min` when `delay_min <= delay <= delta * delay_min`, else `delay`; delta
//!   is 2 for a flow's first unit and doubles with every unit, so the reward moves from
//!   delay-sensitive to throughput-sensitive as the flow ages;
//! - `throughput' = zeta * throughput + (1 - zeta) * MAX_RATE`, `MAX_RATE = 2^23 - 1`;
//! - eta = 1 (the paper found 0.5 and 1.5 worse).

use serde::{Deserialize, Serialize};

use super::unit::UnitStats;

/// The kernel's largest pacing value, the throughput' of a delay-sensitive application.
pub const MAX_RATE: f64 = 8_388_607.0;
/// Weight of lost packets against throughput (Antelope's eta).
pub const ETA: f64 = 1.0;
/// delta stops doubling here (2^40: far past any RTT inflation) so it stays finite.
const MAX_DELTA_DOUBLINGS: u32 = 40;

/// An application's preference (Antelope's App-requirement API: key = port, type = 1/2/3).
#[derive(
    Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize, Default,
)]
#[serde(rename_all = "lowercase")]
pub enum Mode {
    /// zeta = theta = 1.
    #[default]
    Default,
    /// Delay-sensitive: zeta = 0, theta = 1.
    Delay,
    /// Throughput-sensitive: zeta = 1, theta = 0.
    Throughput,
}

impl Mode {
    /// Every mode, in file order.
    pub const ALL: [Mode; 3] = [Mode::Default, Mode::Delay, Mode::Throughput];

    /// The name used in configs and model files.
    pub fn name(self) -> &'static str {
        match self {
            Mode::Default => "default",
            Mode::Delay => "delay",
            Mode::Throughput => "throughput",
        }
    }

    /// Parses [`Mode::name`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|m| m.name() == s)
    }

    /// (zeta, theta).
    pub fn weights(self) -> (f64, f64) {
        match self {
            Mode::Default => (1.0, 1.0),
            Mode::Delay => (0.0, 1.0),
            Mode::Throughput => (1.0, 0.0),
        }
    }
}

/// The normalized reward R^ of a unit under `mode`. A unit without a delay or rate estimate
/// yet scores 0.
pub fn reward(unit: &UnitStats, mode: Mode) -> f64 {
    let (zeta, theta) = mode.weights();
    let delay_min = unit.min_delay_ms;
    if delay_min <= 0.0 || unit.max_pacing_kbps <= 0.0 {
        return 0.0;
    }
    let delta = 2f64.powi(unit.index.min(MAX_DELTA_DOUBLINGS) as i32 + 1);
    let delay = unit.avg_srtt_ms.max(delay_min);
    let delay_eff = if delay <= delta * delay_min {
        delay_min
    } else {
        delay
    };
    let throughput_eff = zeta * unit.send_rate_kbps + (1.0 - zeta) * MAX_RATE;
    let r = (throughput_eff - ETA * unit.lost_pkts) / (theta * delay_eff).max(1.0);
    r / (unit.max_pacing_kbps / delay_min)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(index: u32, srtt: f64, rate: f64, lost: f64) -> UnitStats {
        UnitStats {
            index,
            avg_srtt_ms: srtt,
            acks: 20.0,
            lost_pkts: lost,
            build_ms: 50.0,
            max_pacing_kbps: 10_000.0,
            send_rate_kbps: rate,
            min_delay_ms: 50.0,
        }
    }

    #[test]
    fn delay_within_delta_counts_as_the_minimum() {
        // Eq. 2: first unit, delta = 2: 90 ms is within 2 x 50 ms, so delay' = 50 ms.
        let r = reward(&unit(0, 90.0, 8_000.0, 0.0), Mode::Default);
        assert!((r - (8_000.0 / 50.0) / (10_000.0 / 50.0)).abs() < 1e-12);
        // 120 ms is not: delay' = 120.
        let r = reward(&unit(0, 120.0, 8_000.0, 0.0), Mode::Default);
        assert!((r - (8_000.0 / 120.0) / (10_000.0 / 50.0)).abs() < 1e-12);
        // Third unit: delta = 8, so 120 ms counts as 50 again.
        let r = reward(&unit(2, 120.0, 8_000.0, 0.0), Mode::Default);
        assert!((r - 0.8).abs() < 1e-12);
    }

    #[test]
    fn loss_is_subtracted_with_eta_one() {
        let r = reward(&unit(0, 50.0, 8_000.0, 100.0), Mode::Default);
        assert!((r - (7_900.0 / 50.0) / 200.0).abs() < 1e-12);
    }

    #[test]
    fn modes_weigh_throughput_and_delay() {
        let u = unit(0, 200.0, 8_000.0, 0.0);
        // Throughput-sensitive: theta = 0, the denominator is max(0, 1) = 1.
        assert!((reward(&u, Mode::Throughput) - 8_000.0 / 200.0).abs() < 1e-12);
        // Delay-sensitive: zeta = 0, throughput' = MAX_RATE for everyone; delay decides.
        let slow = reward(&unit(0, 400.0, 1.0, 0.0), Mode::Delay);
        let fast = reward(&unit(0, 60.0, 1.0, 0.0), Mode::Delay);
        assert!(fast > slow);
        assert!((fast - MAX_RATE / 50.0 / 200.0).abs() < 1e-9);
    }

    #[test]
    #[allow(clippy::float_cmp)]
    fn no_estimates_yet_scores_zero() {
        let mut u = unit(0, 50.0, 1.0, 0.0);
        u.min_delay_ms = 0.0;
        assert_eq!(reward(&u, Mode::Default), 0.0);
        assert_eq!(Mode::parse("delay"), Some(Mode::Delay));
        assert_eq!(Mode::parse("x"), None);
    }
}
