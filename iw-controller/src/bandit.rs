//! Discounted UCB (Garivier & Moulines) over initial windows, with TCP-RL's reward and its
//! sliding decision space (`PAPERS.md` §1.1, "Bandit", "Reward", "Sliding decision space").
//!
//! # Model
//! One [`DiscountedUcb`] per user group. A *step* is one learning iteration (default 10 min of
//! virtual time): during an iteration the group's IW is fixed; at its end the bandit is given the
//! flows of that iteration summarized per IW ([`FlowStats`]), updates, slides its arm list and
//! chooses the IW for the next iteration. With discount `gamma`, at step `t`:
//!
//! - `N_t(gamma, i) = sum_s gamma^(t-s) 1{I_s = i}`
//! - `Xbar_t(gamma, i) = (1 / N_t(gamma, i)) sum_s gamma^(t-s) X_s(i) 1{I_s = i}`
//! - `c_t(gamma, i) = 2B sqrt(xi ln n_t / N_t(gamma, i))`, `n_t = sum_i N_t(gamma, i)`
//! - every arm is played once first (in list order), then the arm maximizing `Xbar + c`.
//!
//! `X_s(i)` is the mean reward of the iteration's flows that used arm `i`. The reward of a flow
//! is `X = alpha * tput / tput_max + (1 - alpha) * rtt_min / rtt` with `tput_max`/`rtt_min` the
//! extremes seen so far by this bandit.
//!
//! # Renormalization, exactly
//! TCP-RL updates the extremes first when a new observation exceeds them and recomputes the
//! stored rewards. Because `X` is linear in `tput` and in `1 / rtt`, the bandit stores per arm the
//! discounted sums of the iteration means of `tput` and of `1 / rtt` instead of rewards, and
//! computes `Xbar` from them with the current extremes: that *is* recomputing every stored reward,
//! in O(1). Changing `tput_max` alone (or `rtt_min` alone) scales one term for every arm alike,
//! so the ordering by that term is unchanged, as the paper notes; the weighted sum of both terms
//! can in principle reorder arms, which exact recomputation handles without special cases.
//!
//! # Choices the paper leaves open
//! - `gamma` defaults to [`DEFAULT_GAMMA`] = 0.95. Garivier & Moulines recommend
//!   `gamma = 1 - sqrt(Y_T / T) / 4` for `Y_T` breakpoints in `T` steps; with 10-minute
//!   iterations and network conditions that drift on the scale of a few hours (diurnal load), one
//!   breakpoint per 4 h (24 steps) gives `1 - sqrt(1/24)/4 = 0.949`. The memory
//!   `1 / (1 - gamma)` is then 20 iterations (about 3.3 h), long enough for four arms to be
//!   compared on several samples each.
//! - `B = 1`: rewards lie in `[0, 1]`.
//! - If flows with several IWs end in one iteration (e.g. flows that started before a change),
//!   the step discounts once and then adds one play for every observed arm that is in the list;
//!   observations of IWs no longer in the list are ignored. An iteration without flows is no step.
//! - The sliding rule only runs once every arm has been played (the first-play rule comes first);
//!   a newly added arm has `N = 0` and is therefore played next.
//!
//! # Our addition (off by default)
//! [`BanditConfig::max_step_multiplier`] > 1 accelerates the sliding: consecutive slides in
//! one direction double the step, so a group whose best IW is far from the initial arms gets
//! there in a few iterations instead of one `Delta` per iteration (the `iw-web` evaluation
//! reports it as a separate policy).

use crate::sliding::{Slide, slide};

/// Default discount factor (see the module doc for the derivation).
pub const DEFAULT_GAMMA: f64 = 0.95;
/// Throughput weight in the reward, `PAPERS.md` §1.1 "Parameters used" (online: 0.8).
pub const DEFAULT_ALPHA: f64 = 0.8;
/// Exploration constant `xi`, §1.1 "Parameters used" (0.1).
pub const DEFAULT_XI: f64 = 0.1;
/// Initial arms, packets, §1.1 "Parameters used" ([5, 10, 15, 20]).
pub const DEFAULT_ARMS_PKTS: [u32; 4] = [5, 10, 15, 20];
/// Sliding step, packets, §1.1 "Parameters used" (5 online; the testbed used 1).
pub const DEFAULT_DELTA_PKTS: u32 = 5;

/// Parameters of one group's bandit.
#[derive(Debug, Clone, PartialEq)]
pub struct BanditConfig {
    /// Throughput weight `alpha` in `[0, 1]` (recommended 0.8).
    pub alpha: f64,
    /// Exploration constant `xi > 0` (recommended 0.1).
    pub xi: f64,
    /// Discount `gamma` in `(0, 1]` (recommended [`DEFAULT_GAMMA`]; 1 is plain UCB).
    pub gamma: f64,
    /// Upper bound `B` of the reward (1 for TCP-RL's reward).
    pub reward_bound: f64,
    /// Initial arms, packets, distinct, each in `[1, max_iw_pkts]` (recommended [5, 10, 15, 20]).
    pub initial_arms_pkts: Vec<u32>,
    /// Sliding step `Delta`, packets (recommended 5; 1 in the testbed setting; 0 disables sliding).
    pub delta_pkts: u32,
    /// Largest IW an arm may take, packets.
    pub max_iw_pkts: u32,
    /// Accelerated sliding (our addition; 1 = TCP-RL's rule, the default): when the space
    /// slides in the same direction at consecutive decisions, the step doubles each time
    /// (`Delta`, `2 Delta`, `4 Delta`, ...) up to `max_step_multiplier x Delta`; a decision
    /// that keeps the list or turns resets it to `Delta`.
    pub max_step_multiplier: u32,
    /// Normalize the reward by the extremes of the per-iteration means (our reading, off by
    /// default): `tput_max` is the largest mean throughput and `rtt_min` the smallest mean RTT
    /// any arm had in one iteration, instead of the extremes of single flows. With heavy-tailed
    /// flow sizes the single-flow `tput_max` is an order of magnitude above the mean, which
    /// shrinks the throughput term below the RTT term whatever `alpha` says.
    pub scale_from_means: bool,
}

impl Default for BanditConfig {
    fn default() -> Self {
        Self {
            alpha: DEFAULT_ALPHA,
            xi: DEFAULT_XI,
            gamma: DEFAULT_GAMMA,
            reward_bound: 1.0,
            initial_arms_pkts: DEFAULT_ARMS_PKTS.to_vec(),
            delta_pkts: DEFAULT_DELTA_PKTS,
            max_iw_pkts: crate::DEFAULT_MAX_IW_PKTS,
            max_step_multiplier: 1,
            scale_from_means: false,
        }
    }
}

/// Running sums over the flows that used one IW during one iteration.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct FlowStats {
    /// Number of flows.
    pub count: u64,
    /// Sum of throughputs, bytes/s.
    pub sum_tput: f64,
    /// Sum of `1 / rtt`, 1/µs.
    pub sum_inv_rtt: f64,
    /// Largest throughput seen, bytes/s.
    pub max_tput: f64,
    /// Smallest RTT seen, µs (`f64::INFINITY`: none).
    pub min_rtt_us: f64,
}

impl Default for FlowStats {
    fn default() -> Self {
        Self {
            count: 0,
            sum_tput: 0.0,
            sum_inv_rtt: 0.0,
            max_tput: 0.0,
            min_rtt_us: f64::INFINITY,
        }
    }
}

impl FlowStats {
    /// Adds one flow (the caller has validated: `tput >= 0`, `rtt_us > 0`, both finite).
    pub fn add(&mut self, tput_bytes_per_sec: f64, rtt_us: f64) {
        self.count += 1;
        self.sum_tput += tput_bytes_per_sec;
        self.sum_inv_rtt += 1.0 / rtt_us;
        self.max_tput = self.max_tput.max(tput_bytes_per_sec);
        self.min_rtt_us = self.min_rtt_us.min(rtt_us);
    }

    /// Adds all flows of `other`.
    pub fn merge(&mut self, other: &FlowStats) {
        self.count += other.count;
        self.sum_tput += other.sum_tput;
        self.sum_inv_rtt += other.sum_inv_rtt;
        self.max_tput = self.max_tput.max(other.max_tput);
        self.min_rtt_us = self.min_rtt_us.min(other.min_rtt_us);
    }
}

/// The history extremes that normalize the reward (`tput_max`, `rtt_min`).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct RewardScale {
    /// Largest throughput seen, bytes/s (0: none yet).
    pub tput_max: f64,
    /// Smallest RTT seen, µs (`f64::INFINITY`: none yet).
    pub rtt_min_us: f64,
}

impl Default for RewardScale {
    fn default() -> Self {
        Self {
            tput_max: 0.0,
            rtt_min_us: f64::INFINITY,
        }
    }
}

impl RewardScale {
    /// Widens the extremes to include `stats` (the "update them first" step).
    pub fn observe(&mut self, stats: &FlowStats) {
        self.tput_max = self.tput_max.max(stats.max_tput);
        self.rtt_min_us = self.rtt_min_us.min(stats.min_rtt_us);
    }

    /// Widens the extremes to include the means of `stats` (one arm's flows of one iteration):
    /// its mean throughput and its mean RTT (the inverse of the mean of `1 / rtt`).
    pub fn observe_means(&mut self, stats: &FlowStats) {
        if stats.count == 0 {
            return;
        }
        let n = stats.count as f64;
        self.tput_max = self.tput_max.max(stats.sum_tput / n);
        if stats.sum_inv_rtt > 0.0 {
            self.rtt_min_us = self.rtt_min_us.min(n / stats.sum_inv_rtt);
        }
    }

    /// TCP-RL's reward `alpha * tput / tput_max + (1 - alpha) * rtt_min / rtt`, from a mean
    /// throughput and a mean of `1 / rtt`; in `[0, 1]` once the extremes cover the inputs.
    pub fn reward(&self, alpha: f64, mean_tput: f64, mean_inv_rtt: f64) -> f64 {
        let t = if self.tput_max > 0.0 {
            mean_tput / self.tput_max
        } else {
            0.0
        };
        let r = if self.rtt_min_us.is_finite() {
            self.rtt_min_us * mean_inv_rtt
        } else {
            0.0
        };
        alpha * t + (1.0 - alpha) * r
    }
}

/// One arm's discounted statistics.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Arm {
    /// The initial window, packets.
    pub iw_pkts: u32,
    /// `N_t(gamma, i)`: discounted number of plays.
    pub count: f64,
    /// Discounted sum of the per-step mean throughputs, bytes/s.
    sum_tput: f64,
    /// Discounted sum of the per-step means of `1 / rtt`, 1/µs.
    sum_inv_rtt: f64,
    /// Undiscounted number of steps in which this arm was played.
    pub plays: u64,
}

impl Arm {
    fn new(iw_pkts: u32) -> Self {
        Self {
            iw_pkts,
            count: 0.0,
            sum_tput: 0.0,
            sum_inv_rtt: 0.0,
            plays: 0,
        }
    }
}

/// A discounted-UCB bandit over IWs with a sliding arm list (one per user group).
#[derive(Debug, Clone)]
pub struct DiscountedUcb {
    config: BanditConfig,
    arms: Vec<Arm>,
    scale: RewardScale,
    current_pkts: u32,
    steps: u64,
    /// Consecutive slides in one direction so far (+ up, - down; 0 after a keep).
    slide_run: i32,
}

impl DiscountedUcb {
    /// A fresh bandit; arms are clamped to `[1, max_iw_pkts]` and deduplicated (an empty list
    /// becomes `[crate::DEFAULT_IW_PKTS]`). The first IW is the first arm.
    pub fn new(config: BanditConfig) -> Self {
        let max = config.max_iw_pkts.max(1);
        let mut iws: Vec<u32> = Vec::new();
        for &a in &config.initial_arms_pkts {
            let a = a.clamp(1, max);
            if !iws.contains(&a) {
                iws.push(a);
            }
        }
        if iws.is_empty() {
            iws.push(crate::DEFAULT_IW_PKTS.min(max));
        }
        let current_pkts = iws[0];
        Self {
            config,
            arms: iws.into_iter().map(Arm::new).collect(),
            scale: RewardScale::default(),
            current_pkts,
            steps: 0,
            slide_run: 0,
        }
    }

    /// The IW to use until the next step, packets.
    pub fn current_iw(&self) -> u32 {
        self.current_pkts
    }

    /// The arms, in list order.
    pub fn arms(&self) -> &[Arm] {
        &self.arms
    }

    /// The reward normalization extremes seen so far.
    pub fn scale(&self) -> RewardScale {
        self.scale
    }

    /// Number of steps taken (iterations with flows).
    pub fn steps(&self) -> u64 {
        self.steps
    }

    /// `Xbar_t(gamma, i)` with the current extremes (`None` for an arm never played).
    pub fn mean_reward(&self, arm: &Arm) -> Option<f64> {
        (arm.count > 0.0).then(|| {
            self.scale.reward(
                self.config.alpha,
                arm.sum_tput / arm.count,
                arm.sum_inv_rtt / arm.count,
            )
        })
    }

    /// `n_t(gamma) = sum_i N_t(gamma, i)`.
    pub fn total_count(&self) -> f64 {
        self.arms.iter().map(|a| a.count).sum()
    }

    /// The padding `c_t(gamma, i) = 2B sqrt(xi ln n_t / N_t(gamma, i))` (`None` if never played).
    pub fn padding(&self, arm: &Arm) -> Option<f64> {
        (arm.count > 0.0).then(|| {
            // ln n_t is negative for n_t < 1 (heavily discounted history): floor it at 0.
            let ln_n = self.total_count().ln().max(0.0);
            2.0 * self.config.reward_bound * (self.config.xi * ln_n / arm.count).sqrt()
        })
    }

    /// The arm TCP-RL calls best: highest mean reward, ties broken by the smallest padding
    /// (`None` until every arm has been played).
    pub fn best_arm(&self) -> Option<u32> {
        let mut best: Option<(f64, f64, u32)> = None;
        for arm in &self.arms {
            let (Some(x), Some(c)) = (self.mean_reward(arm), self.padding(arm)) else {
                return None;
            };
            let better = match best {
                None => true,
                // Higher mean first, then the smaller padding (exact ties only).
                Some((bx, bc, _)) => x.total_cmp(&bx).then(bc.total_cmp(&c)).is_gt(),
            };
            if better {
                best = Some((x, c, arm.iw_pkts));
            }
        }
        best.map(|(_, _, iw)| iw)
    }

    /// One step: the flows of the iteration that just ended, per IW used. Updates the extremes
    /// first, discounts every arm, adds the observed arms, slides, chooses the next IW and
    /// returns it. An empty `observed` (no flows) is no step and keeps the current IW.
    pub fn step(&mut self, observed: &[(u32, FlowStats)]) -> u32 {
        let played: Vec<&(u32, FlowStats)> = observed
            .iter()
            .filter(|(iw, s)| s.count > 0 && self.arms.iter().any(|a| a.iw_pkts == *iw))
            .collect();
        if played.is_empty() {
            return self.current_pkts;
        }
        for (_, s) in &played {
            if self.config.scale_from_means {
                self.scale.observe_means(s);
            } else {
                self.scale.observe(s);
            }
        }
        let gamma = self.config.gamma;
        for arm in &mut self.arms {
            arm.count *= gamma;
            arm.sum_tput *= gamma;
            arm.sum_inv_rtt *= gamma;
        }
        for (iw, s) in played {
            if let Some(arm) = self.arms.iter_mut().find(|a| a.iw_pkts == *iw) {
                let n = s.count as f64;
                arm.count += 1.0;
                arm.sum_tput += s.sum_tput / n;
                arm.sum_inv_rtt += s.sum_inv_rtt / n;
                arm.plays += 1;
            }
        }
        self.steps += 1;
        self.slide();
        self.current_pkts = self.choose();
        self.current_pkts
    }

    /// Applies the sliding rule (once every arm has been played), keeping the statistics of the
    /// arms that stay.
    fn slide(&mut self) {
        let Some(best) = self.best_arm() else {
            return;
        };
        let iws: Vec<u32> = self.arms.iter().map(|a| a.iw_pkts).collect();
        let (delta, max) = (self.config.delta_pkts, self.config.max_iw_pkts);
        let mut decision = slide(&iws, best, delta, max);
        let run = match decision {
            Slide::Keep => 0,
            Slide::Up { .. } => self.slide_run.max(0) + 1,
            Slide::Down { .. } => self.slide_run.min(0) - 1,
        };
        self.slide_run = run;
        let mult = 1u32
            .checked_shl(run.unsigned_abs().saturating_sub(1))
            .unwrap_or(u32::MAX)
            .min(self.config.max_step_multiplier.max(1));
        if mult > 1 {
            let faster = slide(&iws, best, delta.saturating_mul(mult), max);
            if faster != Slide::Keep {
                decision = faster;
            }
        }
        match decision {
            Slide::Keep => {}
            Slide::Up { add, drop } | Slide::Down { add, drop } => {
                self.arms.retain(|a| a.iw_pkts != drop);
                self.arms.push(Arm::new(add));
                self.arms.sort_by_key(|a| a.iw_pkts);
            }
        }
    }

    /// First unplayed arm in list order, else the arm maximizing `Xbar + c` (ties: the first).
    fn choose(&self) -> u32 {
        let mut best: Option<(f64, u32)> = None;
        for arm in &self.arms {
            let (Some(x), Some(c)) = (self.mean_reward(arm), self.padding(arm)) else {
                return arm.iw_pkts;
            };
            let index = x + c;
            if best.is_none_or(|(b, _)| index > b) {
                best = Some((index, arm.iw_pkts));
            }
        }
        best.map_or(self.current_pkts, |(_, iw)| iw)
    }
}

#[cfg(test)]
#[path = "bandit_tests.rs"]
mod tests;
