//! The switch filter between a policy's raw decisions and an actual swap.
//!
//! A switch to candidate `k` happens only once the policy has asked for `k` in M consecutive
//! reports (any other answer, including `Stay`, restarts the count) and the current candidate
//! has been active for at least the minimum dwell time, `dwell_rtts` smoothed RTTs, and no loss
//! was seen in the last `loss_hold_rtts` smoothed RTTs. The loss hold keeps a swap out of a loss
//! episode: an incoming candidate starts with fresh recovery state (`adopt` resets it), so a
//! swap in mid-episode would cut the window a second time for the same losses.

use crate::policy::Decision;

/// Hysteresis parameters.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct HysteresisConfig {
    /// Consecutive agreeing decisions needed for a switch (at least 1; Antelope uses 2).
    pub agreeing_decisions: u32,
    /// Minimum time on a candidate before leaving it, in smoothed RTTs (0: none).
    pub dwell_rtts: f64,
    /// No swap within this many smoothed RTTs of the last loss (0: none).
    pub loss_hold_rtts: f64,
}

impl Default for HysteresisConfig {
    fn default() -> Self {
        Self {
            agreeing_decisions: 2,
            dwell_rtts: 2.0,
            loss_hold_rtts: 1.0,
        }
    }
}

impl HysteresisConfig {
    /// No hysteresis at all: every switch decision is a swap (for forced-swap tests).
    pub fn none() -> Self {
        Self {
            agreeing_decisions: 1,
            dwell_rtts: 0.0,
            loss_hold_rtts: 0.0,
        }
    }
}

/// The per-flow filter state.
#[derive(Debug, Clone)]
pub struct Hysteresis {
    config: HysteresisConfig,
    /// The candidate asked for and how many times in a row.
    pending: Option<(usize, u32)>,
    /// When the current candidate became active, µs.
    since_us: u64,
}

impl Hysteresis {
    /// A filter whose current candidate became active at `now_us`.
    pub fn new(config: HysteresisConfig, now_us: u64) -> Self {
        Self {
            config,
            pending: None,
            since_us: now_us,
        }
    }

    /// Its parameters.
    pub fn config(&self) -> &HysteresisConfig {
        &self.config
    }

    /// Starts over at `now_us`, as a filter built then: nothing pending, the dwell counted
    /// from `now_us` (after the active candidate was re-seated).
    pub fn restart(&mut self, now_us: u64) {
        self.pending = None;
        self.since_us = now_us;
    }

    /// Feeds one decision; returns the candidate to switch to now, if any. `current` is the
    /// active candidate, `srtt_us` its smoothed RTT (0: unknown, no dwell enforced),
    /// `last_loss_us` when it last saw a loss.
    pub fn filter(
        &mut self,
        decision: Decision,
        current: usize,
        now_us: u64,
        srtt_us: u64,
        last_loss_us: Option<u64>,
    ) -> Option<usize> {
        let config = self.config;
        self.filter_with(&config, decision, current, now_us, srtt_us, last_loss_us)
    }

    /// [`Hysteresis::filter`] with `config`'s parameters instead of its own, for a decision
    /// of a policy that asks for its own ([`crate::SelectionPolicy::hysteresis`]).
    pub fn filter_with(
        &mut self,
        config: &HysteresisConfig,
        decision: Decision,
        current: usize,
        now_us: u64,
        srtt_us: u64,
        last_loss_us: Option<u64>,
    ) -> Option<usize> {
        let target = match decision {
            Decision::Hold => return None,
            Decision::SwitchTo(k) if k != current => k,
            _ => {
                self.pending = None;
                return None;
            }
        };
        let count = match self.pending {
            Some((k, n)) if k == target => n.saturating_add(1),
            _ => 1,
        };
        self.pending = Some((target, count));
        let dwell_us = (config.dwell_rtts.max(0.0) * srtt_us as f64) as u64;
        let dwelt = now_us.saturating_sub(self.since_us) >= dwell_us;
        let hold_us = (config.loss_hold_rtts.max(0.0) * srtt_us as f64) as u64;
        let after_loss = last_loss_us.is_none_or(|t| now_us.saturating_sub(t) >= hold_us);
        if count >= config.agreeing_decisions.max(1) && dwelt && after_loss {
            self.pending = None;
            self.since_us = now_us;
            Some(target)
        } else {
            None
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn h(m: u32, dwell: f64) -> Hysteresis {
        Hysteresis::new(
            HysteresisConfig {
                agreeing_decisions: m,
                dwell_rtts: dwell,
                loss_hold_rtts: 1.0,
            },
            0,
        )
    }

    #[test]
    fn two_agreeing_decisions_switch() {
        let mut f = h(2, 0.0);
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 10, 50, None), None);
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 20, 50, None), Some(1));
    }

    #[test]
    fn disagreement_or_stay_restarts_the_count() {
        let mut f = h(2, 0.0);
        for t in 0..100 {
            let d = if t % 2 == 0 {
                Decision::SwitchTo(1)
            } else {
                Decision::SwitchTo(2)
            };
            assert_eq!(f.filter(d, 0, t, 50, None), None);
        }
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 100, 50, None), None);
        assert_eq!(f.filter(Decision::Stay, 0, 101, 50, None), None);
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 102, 50, None), None);
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 103, 50, None), Some(1));
    }

    #[test]
    fn a_policy_s_own_parameters_replace_the_selector_s_for_its_decision() {
        // Inside the loss hold (a loss 20 µs ago, sRTT 50 µs) the selector's parameters hold
        // the swap; a policy asking for none gets it at once, and the dwell restarts from it.
        let mut f = h(1, 0.0);
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 100, 50, Some(80)), None);
        let none = HysteresisConfig::none();
        assert_eq!(
            f.filter_with(&none, Decision::SwitchTo(1), 0, 100, 50, Some(80)),
            Some(1)
        );
        assert!(
            (f.config().loss_hold_rtts - 1.0).abs() < 1e-12,
            "its own are kept"
        );
        let mut f = h(1, 2.0);
        assert_eq!(
            f.filter_with(&none, Decision::SwitchTo(1), 0, 10, 50, None),
            Some(1)
        );
        assert_eq!(
            f.filter(Decision::SwitchTo(0), 1, 50, 50, None),
            None,
            "dwell from 10"
        );
        assert_eq!(f.filter(Decision::SwitchTo(0), 1, 110, 50, None), Some(0));
    }

    #[test]
    fn hold_neither_counts_nor_restarts() {
        let mut f = h(2, 0.0);
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 10, 50, None), None);
        assert_eq!(f.filter(Decision::Hold, 0, 15, 50, None), None);
        assert_eq!(f.filter(Decision::Hold, 0, 16, 50, None), None);
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 20, 50, None), Some(1));
    }

    #[test]
    fn asking_for_the_current_candidate_is_staying() {
        let mut f = h(1, 0.0);
        assert_eq!(f.filter(Decision::SwitchTo(0), 0, 1, 50, None), None);
    }

    #[test]
    fn dwell_time_holds_a_fresh_candidate() {
        let mut f = h(1, 2.0);
        // Two RTTs of 50 µs from t = 0: nothing before t = 100.
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 99, 50, None), None);
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 100, 50, None), Some(1));
        assert_eq!(f.filter(Decision::SwitchTo(0), 1, 150, 50, None), None);
        assert_eq!(f.filter(Decision::SwitchTo(0), 1, 200, 50, None), Some(0));
    }

    #[test]
    fn no_swap_within_an_rtt_of_a_loss() {
        let mut f = h(1, 0.0);
        assert_eq!(f.filter(Decision::SwitchTo(1), 0, 120, 50, Some(100)), None);
        assert_eq!(
            f.filter(Decision::SwitchTo(1), 0, 150, 50, Some(100)),
            Some(1)
        );
    }

    #[test]
    fn m_of_one_and_no_dwell_switches_every_time() {
        let mut f = Hysteresis::new(HysteresisConfig::none(), 0);
        for t in 0..10 {
            let cur = (t % 2) as usize;
            assert_eq!(
                f.filter(Decision::SwitchTo(1 - cur), cur, t, 50, None),
                Some(1 - cur)
            );
        }
    }
}
