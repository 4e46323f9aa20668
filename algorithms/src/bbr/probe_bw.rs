//! `ProbeBW`'s gain cycle (draft-cardwell-iccrg-bbr-congestion-control-00 §4.3.3).

use crate::api::SplitMix64;

/// draft §4.3.3: `pacing_gain` of the eight phases; each lasts about one `RTprop`.
pub const GAIN_CYCLE: [f64; 8] = [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0];

/// Where `ProbeBW` is in its gain cycle.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct GainCycle {
    /// Index into [`GAIN_CYCLE`].
    pub index: usize,
    /// When the current phase began, µs.
    pub stamp_us: u64,
}

impl GainCycle {
    /// Enters `ProbeBW` at `now_us` at a random phase other than the draining one (draft
    /// §4.3.3.5: `cycle_index = len - 1 - random(0, len - 2)`, then one advance): the phases
    /// 2..7 and 0. The randomness is the flow's generator (seeded from `FlowStart::seed`).
    pub fn enter(now_us: u64, rng: &mut SplitMix64) -> Self {
        let r = (rng.next_u64() % (GAIN_CYCLE.len() as u64 - 1)) as usize;
        let mut c = Self {
            index: GAIN_CYCLE.len() - 1 - r,
            stamp_us: now_us,
        };
        c.advance(now_us);
        c
    }

    /// The current phase's pacing gain.
    pub fn gain(&self) -> f64 {
        GAIN_CYCLE[self.index % GAIN_CYCLE.len()]
    }

    /// Moves to the next phase (draft §4.3.3.5 `BBRAdvanceCyclePhase`).
    pub fn advance(&mut self, now_us: u64) {
        self.index = (self.index + 1) % GAIN_CYCLE.len();
        self.stamp_us = now_us;
    }

    /// Whether the phase is over (draft §4.3.3.5 `BBRIsNextCyclePhase`): a phase lasts one
    /// `RTprop`; the probing phase also needs the pipe (1.25 BDP in flight) or a loss, the
    /// draining phase ends early once in-flight data is down to one BDP.
    pub fn is_next_phase(
        &self,
        now_us: u64,
        min_rtt_us: u64,
        inflight_bytes: u64,
        bdp_bytes: u64,
        loss: bool,
    ) -> bool {
        let full_length = now_us.saturating_sub(self.stamp_us) > min_rtt_us;
        let gain = self.gain();
        if gain > 1.0 {
            full_length && (loss || inflight_bytes as f64 >= gain * bdp_bytes as f64)
        } else if gain < 1.0 {
            full_length || inflight_bytes <= bdp_bytes
        } else {
            full_length
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_cycle_probes_drains_then_cruises_for_six_phases() {
        // draft §4.3.3: [5/4, 3/4, 1, 1, 1, 1, 1, 1], mean gain 1.
        let mut c = GainCycle::default();
        let gains: Vec<f64> = (0..9)
            .map(|i| {
                let g = c.gain();
                c.advance(i);
                g
            })
            .collect();
        assert_eq!(gains, [1.25, 0.75, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.25]);
        assert!((GAIN_CYCLE.iter().sum::<f64>() / 8.0 - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_random_start_never_lands_on_the_draining_phase_and_depends_on_the_seed() {
        let mut seen = [false; 8];
        for seed in 0..200u64 {
            let c = GainCycle::enter(5, &mut SplitMix64::new(seed));
            assert_ne!(c.index, 1);
            assert_eq!(c.stamp_us, 5);
            seen[c.index] = true;
        }
        assert_eq!(seen, [true, false, true, true, true, true, true, true]);
        let (mut a, mut b) = (SplitMix64::new(7), SplitMix64::new(7));
        assert_eq!(GainCycle::enter(0, &mut a), GainCycle::enter(0, &mut b));
    }

    #[test]
    fn phases_last_one_min_rtt_probing_needs_the_pipe_draining_may_end_early() {
        // draft §4.3.3.5 BBRIsNextCyclePhase.
        let probe = GainCycle {
            index: 0,
            stamp_us: 0,
        };
        assert!(!probe.is_next_phase(50_000, 50_000, 200_000, 100_000, false));
        assert!(!probe.is_next_phase(50_001, 50_000, 110_000, 100_000, false));
        assert!(probe.is_next_phase(50_001, 50_000, 125_000, 100_000, false));
        assert!(probe.is_next_phase(50_001, 50_000, 0, 100_000, true));
        let drain = GainCycle {
            index: 1,
            stamp_us: 0,
        };
        assert!(drain.is_next_phase(10, 50_000, 100_000, 100_000, false));
        assert!(!drain.is_next_phase(10, 50_000, 100_001, 100_000, false));
        let cruise = GainCycle {
            index: 4,
            stamp_us: 0,
        };
        assert!(!cruise.is_next_phase(50_000, 50_000, 0, 100_000, false));
        assert!(cruise.is_next_phase(50_001, 50_000, 0, 100_000, false));
    }
}
