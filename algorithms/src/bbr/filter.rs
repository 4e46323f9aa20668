//! The two windowed filters of BBR's path model (draft-cardwell-iccrg-bbr-congestion-control-00
//! §4.1.1, §4.1.2): the maximum delivery rate over the last rounds and the minimum RTT over
//! the last seconds.

use std::collections::VecDeque;

/// Windowed maximum over a count (round trips): `BtlBw = max(delivery rate)` over the last
/// `window` rounds (draft §4.1.1, `BtlBwFilterLen = 10`).
///
/// A monotone deque: exact, and at most `window` entries.
#[derive(Debug, Clone, Default)]
pub struct MaxFilter {
    /// (round, value), rounds increasing and values decreasing.
    samples: VecDeque<(u64, u64)>,
    window: u64,
}

impl MaxFilter {
    /// A filter over the last `window` rounds (at least 1).
    pub fn new(window: u64) -> Self {
        Self {
            samples: VecDeque::new(),
            window: window.max(1),
        }
    }

    /// Takes `value` measured in round `round` (rounds never go backwards).
    pub fn update(&mut self, round: u64, value: u64) {
        while self.samples.back().is_some_and(|&(_, v)| v <= value) {
            self.samples.pop_back();
        }
        self.samples.push_back((round, value));
        self.expire(round);
    }

    /// Drops samples older than `window` rounds before `round`.
    pub fn expire(&mut self, round: u64) {
        while self
            .samples
            .front()
            .is_some_and(|&(r, _)| r.saturating_add(self.window) <= round)
        {
            self.samples.pop_front();
        }
    }

    /// The current maximum (0: no sample in the window).
    pub fn get(&self) -> u64 {
        self.samples.front().map_or(0, |&(_, v)| v)
    }

    /// Forgets everything and starts from `value` at `round` (a handoff's estimate).
    pub fn reset(&mut self, round: u64, value: u64) {
        self.samples.clear();
        if value > 0 {
            self.samples.push_back((round, value));
        }
    }
}

/// BBR's `RTprop`: the minimum RTT, replaced by a strictly lower sample or by the next sample
/// once it is older than the window (draft §4.1.2, `RTpropFilterLen = 10 s`; Linux
/// `bbr_update_min_rtt`); its expiry is what triggers `ProbeRTT`.
///
/// A sample equal to the minimum does not refresh it (Linux compares with `<`): on a path
/// without jitter the exact minimum recurs every round, and refreshing on `<=` would keep the
/// estimate young forever, so `ProbeRTT` would never run and the queue never drain.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct MinRtt {
    /// Minimum RTT, µs (0: no sample yet).
    pub rtt_us: u64,
    /// When it was taken, µs.
    pub stamp_us: u64,
}

impl MinRtt {
    /// Whether the estimate is older than `window_us` at `now_us`.
    pub fn expired(&self, now_us: u64, window_us: u64) -> bool {
        now_us > self.stamp_us.saturating_add(window_us)
    }

    /// `if rtt < RTprop or expired: RTprop = rtt, stamp = now` (Linux `bbr_update_min_rtt`;
    /// the draft's pseudocode writes `<=`, which never expires on a jitter-free path); returns
    /// whether the estimate had expired before the sample.
    pub fn update(&mut self, now_us: u64, sample_us: u64, window_us: u64) -> bool {
        let expired = self.expired(now_us, window_us);
        if sample_us > 0 && (self.rtt_us == 0 || sample_us < self.rtt_us || expired) {
            self.rtt_us = sample_us;
            self.stamp_us = now_us;
        }
        expired
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn max_filter_keeps_the_largest_sample_of_the_last_ten_rounds() {
        // draft §4.1.1: BtlBw = max(delivery_rate) over the last 10 round trips.
        let mut f = MaxFilter::new(10);
        f.update(0, 500);
        f.update(1, 900);
        f.update(2, 700);
        assert_eq!(f.get(), 900);
        f.update(10, 100);
        assert_eq!(f.get(), 900, "round 1 is still within the last ten rounds");
        f.update(11, 100);
        assert_eq!(f.get(), 700);
        f.update(12, 100);
        assert_eq!(f.get(), 100);
        f.reset(12, 0);
        assert_eq!(f.get(), 0);
    }

    #[test]
    fn min_rtt_takes_lower_samples_and_any_sample_after_expiry() {
        // draft §4.1.2.3.
        let mut m = MinRtt::default();
        assert!(!m.update(0, 50_000, 10_000_000));
        assert!(!m.update(1_000_000, 60_000, 10_000_000));
        assert_eq!(m.rtt_us, 50_000);
        assert!(!m.update(2_000_000, 45_000, 10_000_000));
        assert_eq!((m.rtt_us, m.stamp_us), (45_000, 2_000_000));
        assert!(!m.update(11_000_000, 45_000, 10_000_000));
        assert_eq!(
            (m.rtt_us, m.stamp_us),
            (45_000, 2_000_000),
            "an equal sample does not refresh the estimate (Linux: `<`)"
        );
        assert!(m.update(12_000_001, 70_000, 10_000_000), "expired");
        assert_eq!((m.rtt_us, m.stamp_us), (70_000, 12_000_001));
        assert!(!m.update(12_000_002, 0, 10_000_000), "no sample, no change");
    }
}
