//! `Startup` and `Drain` (draft-cardwell-iccrg-bbr-congestion-control-00 §4.3.1, §4.3.2), and
//! the full-pipe estimator that ends `Startup` (§4.3.1.2).

/// draft §4.3.1.1: `BBRHighGain = 2 / ln 2`, the smallest gain that doubles the sending rate
/// each round.
pub const HIGH_GAIN: f64 = 2.885;
/// draft §4.3.1.2: the bandwidth must grow by this factor per round to count as growth.
pub const FULL_BW_THRESHOLD: f64 = 1.25;
/// draft §4.3.1.2: rounds without growth before the pipe counts as full.
pub const FULL_BW_ROUNDS: u32 = 3;

/// The full-pipe estimator (draft §4.3.1.2, `BBRCheckFullPipe`).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct FullPipe {
    /// Bandwidth at the last growth, bytes/s.
    full_bw: u64,
    /// Rounds since then.
    count: u32,
    /// Whether the pipe has been filled.
    pub filled: bool,
}

impl FullPipe {
    /// One round's `BtlBw` estimate: the pipe is full after 3 rounds without 25 % growth.
    pub fn on_round(&mut self, btl_bw: u64) -> bool {
        if self.filled {
            return true;
        }
        if btl_bw as f64 >= self.full_bw as f64 * FULL_BW_THRESHOLD {
            self.full_bw = btl_bw;
            self.count = 0;
            return false;
        }
        self.count += 1;
        if self.count >= FULL_BW_ROUNDS {
            self.filled = true;
        }
        self.filled
    }

    /// Marks the pipe as filled (a handoff from a flow past its slow start).
    pub fn set_filled(&mut self) {
        self.filled = true;
    }
}

/// `Drain` ends once the data in flight has fallen to the estimated BDP (draft §4.3.2).
pub fn drained(inflight_bytes: u64, bdp_bytes: u64) -> bool {
    inflight_bytes <= bdp_bytes
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_pipe_is_full_after_three_rounds_without_a_quarter_more_bandwidth() {
        // draft §4.3.1.2.
        let mut f = FullPipe::default();
        assert!(!f.on_round(100));
        assert!(!f.on_round(200));
        assert!(!f.on_round(240), "20 % growth: first round without growth");
        assert!(!f.on_round(245), "second");
        assert!(
            !f.on_round(300),
            "300 >= 1.25 x 200: growth again, count restarts"
        );
        assert!(!f.on_round(310));
        assert!(!f.on_round(320));
        assert!(f.on_round(330), "three rounds below 375");
        assert!(f.on_round(1_000), "stays full");
    }

    #[test]
    fn high_gain_doubles_the_rate_per_round() {
        // draft §4.3.1.1: 2/ln 2.
        assert!((HIGH_GAIN - 2.0 / std::f64::consts::LN_2).abs() < 1e-3);
    }

    #[test]
    fn drain_ends_at_one_bdp_in_flight() {
        assert!(!drained(100_001, 100_000));
        assert!(drained(100_000, 100_000));
    }
}
