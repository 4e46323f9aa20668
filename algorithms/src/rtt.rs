//! RTT bookkeeping shared by the algorithms: RFC 6298's smoothed RTT, the minimum RTT and a
//! minimum over a time window.

use std::collections::VecDeque;

/// A running minimum (`current_us`, 0: none yet) lowered by the non-zero `samples` (0: no
/// sample).
pub fn lower_min(current_us: u64, samples: impl IntoIterator<Item = u64>) -> u64 {
    samples
        .into_iter()
        .filter(|s| *s > 0)
        .fold(current_us, |m, s| if m == 0 || s < m { s } else { m })
}

/// Windowed minimum over time, µs (a monotone deque: exact).
#[derive(Debug, Clone, Default)]
pub struct MinWindow {
    samples: VecDeque<(u64, u64)>,
}

impl MinWindow {
    /// Takes `value` at `now_us` and forgets samples older than `window_us`.
    pub fn update(&mut self, now_us: u64, value: u64, window_us: u64) {
        if value > 0 {
            while self.samples.back().is_some_and(|&(_, v)| v >= value) {
                self.samples.pop_back();
            }
            self.samples.push_back((now_us, value));
        }
        while self.samples.len() > 1
            && self
                .samples
                .front()
                .is_some_and(|&(t, _)| t.saturating_add(window_us) < now_us)
        {
            self.samples.pop_front();
        }
    }

    /// The minimum, µs (0: none).
    pub fn get(&self) -> u64 {
        self.samples.front().map_or(0, |&(_, v)| v)
    }
}

/// Smoothed RTT (RFC 6298 §2, gain 1/8) and the flow's minimum RTT, µs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct RttEstimator {
    srtt_us: u64,
    min_rtt_us: u64,
}

impl RttEstimator {
    /// Continues from a handoff's estimates (0: unknown).
    pub fn from_handoff(srtt_us: u64, min_rtt_us: u64) -> Self {
        Self {
            srtt_us,
            min_rtt_us,
        }
    }

    /// Takes the latest sample and the interval's minimum (0: none).
    pub fn on_sample(&mut self, rtt_us: u64, min_rtt_us: u64) {
        if rtt_us > 0 {
            // RFC 6298 §2.3: SRTT <- 7/8 SRTT + 1/8 R'.
            self.srtt_us = if self.srtt_us == 0 {
                rtt_us
            } else {
                self.srtt_us - self.srtt_us / 8 + rtt_us / 8
            };
        }
        self.min_rtt_us = lower_min(self.min_rtt_us, [rtt_us, min_rtt_us]);
    }

    /// Smoothed RTT, µs (0: no sample yet).
    pub fn srtt_us(&self) -> u64 {
        self.srtt_us
    }

    /// Minimum RTT, µs (0: no sample yet).
    pub fn min_rtt_us(&self) -> u64 {
        self.min_rtt_us
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn srtt_follows_rfc6298_and_min_ignores_missing_samples() {
        let mut r = RttEstimator::default();
        r.on_sample(80_000, 0);
        assert_eq!((r.srtt_us(), r.min_rtt_us()), (80_000, 80_000));
        r.on_sample(0, 60_000);
        r.on_sample(40_000, 0);
        assert_eq!(r.srtt_us(), 80_000 - 10_000 + 5_000);
        assert_eq!(r.min_rtt_us(), 40_000);
    }
}
