//! RTT bookkeeping shared by the algorithms: RFC 6298's smoothed RTT and the minimum RTT.

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
        for s in [rtt_us, min_rtt_us] {
            if s > 0 && (self.min_rtt_us == 0 || s < self.min_rtt_us) {
                self.min_rtt_us = s;
            }
        }
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
