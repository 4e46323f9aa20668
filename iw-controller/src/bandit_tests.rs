//! Unit tests of each equation step of `PAPERS.md` §1.1 "Bandit" and "Reward".

use super::*;
use ccp_algorithms::api::SplitMix64;

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-9
}

fn one_flow(tput: f64, rtt_us: f64) -> FlowStats {
    let mut s = FlowStats::default();
    s.add(tput, rtt_us);
    s
}

fn config(arms: &[u32], gamma: f64, delta: u32) -> BanditConfig {
    BanditConfig {
        gamma,
        initial_arms_pkts: arms.to_vec(),
        delta_pkts: delta,
        max_iw_pkts: 100,
        ..BanditConfig::default()
    }
}

fn arm(b: &DiscountedUcb, iw: u32) -> Arm {
    *b.arms().iter().find(|a| a.iw_pkts == iw).unwrap()
}

/// §1.1 "Play each of the K arms once": the list order, whatever the rewards.
#[test]
fn every_arm_is_played_once_first() {
    let mut b = DiscountedUcb::new(BanditConfig::default());
    assert_eq!(b.current_iw(), 5);
    // Arm 5 gets a perfect reward, yet 10, 15 and 20 are tried before it is replayed.
    assert_eq!(b.step(&[(5, one_flow(100.0, 10.0))]), 10);
    assert_eq!(b.step(&[(10, one_flow(1.0, 1000.0))]), 15);
    assert_eq!(b.step(&[(15, one_flow(1.0, 1000.0))]), 20);
    assert!(
        b.arms()
            .iter()
            .filter(|a| a.iw_pkts != 20)
            .all(|a| a.plays == 1)
    );
}

/// §1.1 `N_t`, `Xbar_t` and `c_t` on a hand-computed example: gamma = 0.5, arms [5, 10], no sliding.
///
/// Step 1: arm 5, tput 100, RTT 10 -> `tput_max` 100, `rtt_min` 10, X = 0.8 + 0.2 = 1.
/// Step 2: arm 10, tput 50, RTT 20 -> X = 0.8 * 0.5 + 0.2 * 0.5 = 0.5.
/// After step 2: N(5) = 0.5, N(10) = 1, n = 1.5; c(5) = 2 sqrt(0.1 ln 1.5 / 0.5) = 0.569537,
/// c(10) = 2 sqrt(0.1 ln 1.5) = 0.402724. Step 3: arm 5 again -> N(5) = 0.25 + 1, N(10) = 0.5.
#[test]
fn discounted_counts_means_and_padding_match_hand_computation() {
    let mut b = DiscountedUcb::new(config(&[5, 10], 0.5, 0));
    b.step(&[(5, one_flow(100.0, 10.0))]);
    b.step(&[(10, one_flow(50.0, 20.0))]);
    let (a5, a10) = (arm(&b, 5), arm(&b, 10));
    assert!(close(a5.count, 0.5) && close(a10.count, 1.0));
    assert!(close(b.total_count(), 1.5));
    assert!(close(b.mean_reward(&a5).unwrap(), 1.0));
    assert!(close(b.mean_reward(&a10).unwrap(), 0.5));
    assert!((b.padding(&a5).unwrap() - 0.569_537).abs() < 1e-6);
    assert!((b.padding(&a10).unwrap() - 0.402_724).abs() < 1e-6);
    // Index: 1.0 + 0.5695 > 0.5 + 0.4027, so arm 5 is chosen.
    assert_eq!(b.current_iw(), 5);
    b.step(&[(5, one_flow(100.0, 10.0))]);
    let (a5, a10) = (arm(&b, 5), arm(&b, 10));
    assert!(close(a5.count, 1.25) && close(a10.count, 0.5));
    assert!(close(b.mean_reward(&a5).unwrap(), 1.0));
    assert!(close(b.mean_reward(&a10).unwrap(), 0.5));
}

/// The per-step reward is the iteration's mean reward: two flows in one step count once.
#[test]
fn one_step_per_iteration_with_the_mean_reward() {
    let mut b = DiscountedUcb::new(config(&[5, 10], 1.0, 0));
    let mut s = FlowStats::default();
    s.add(100.0, 10.0); // X = 1
    s.add(0.0, 20.0); // X = 0.2 * 0.5 = 0.1
    b.step(&[(5, s)]);
    let a5 = arm(&b, 5);
    assert!(close(a5.count, 1.0));
    // Mean of 1/rtt is 0.075; mean tput 50: X = 0.8 * 0.5 + 0.2 * 10 * 0.075 = 0.55 = (1 + 0.1) / 2.
    assert!(close(b.mean_reward(&a5).unwrap(), 0.55));
}

/// An iteration without flows (or only with IWs not in the list) is no step.
#[test]
fn empty_iteration_is_no_step() {
    let mut b = DiscountedUcb::new(config(&[5, 10], 0.5, 0));
    b.step(&[(5, one_flow(100.0, 10.0))]);
    assert_eq!(b.step(&[]), 10);
    assert_eq!(b.step(&[(77, one_flow(100.0, 10.0))]), 10);
    assert_eq!(b.steps(), 1);
    assert!(close(arm(&b, 5).count, 1.0));
}

/// §1.1 "Reward": a new extreme updates `tput_max` / `rtt_min` first and every stored reward is
/// recomputed with them; a new `tput_max` alone keeps the ordering between arms.
#[test]
fn reward_renormalizes_on_new_extremes() {
    let mut b = DiscountedUcb::new(config(&[5, 10, 15], 1.0, 0));
    b.step(&[(5, one_flow(100.0, 10.0))]);
    b.step(&[(10, one_flow(50.0, 20.0))]);
    let before5 = b.mean_reward(&arm(&b, 5)).unwrap();
    let before10 = b.mean_reward(&arm(&b, 10)).unwrap();
    assert!(close(before5, 1.0) && close(before10, 0.5));
    // A throughput 4x the maximum: only tput_max changes.
    b.step(&[(15, one_flow(400.0, 10.0))]);
    assert!(close(b.scale().tput_max, 400.0) && close(b.scale().rtt_min_us, 10.0));
    let after5 = b.mean_reward(&arm(&b, 5)).unwrap();
    let after10 = b.mean_reward(&arm(&b, 10)).unwrap();
    assert!(close(after5, 0.8 * 0.25 + 0.2)); // 0.4
    assert!(close(after10, 0.8 * 0.125 + 0.2 * 0.5)); // 0.2
    assert!(after5 > after10, "ordering unchanged");
    // Now a smaller RTT on arm 10: both extremes move; arm 10's rewards are recomputed per flow:
    // step 2 -> 0.8 * 50/400 + 0.2 * 5/20 = 0.15, this step -> 0.8 * 400/400 + 0.2 = 1.0.
    b.step(&[(10, one_flow(400.0, 5.0))]);
    assert!(close(b.scale().rtt_min_us, 5.0));
    assert!(close(
        b.mean_reward(&arm(&b, 10)).unwrap(),
        f64::midpoint(0.15, 1.0)
    ));
    assert!(close(
        b.mean_reward(&arm(&b, 5)).unwrap(),
        0.8 * 0.25 + 0.2 * 0.5
    ));
}

/// Sliding inside the bandit: the best arm 5 is the smallest, so 5 - 5 floors at 1 and the
/// largest arm is dropped; the statistics of the arm that stays are kept and the new arm is
/// played next (first-play rule).
#[test]
fn sliding_keeps_statistics_and_plays_the_new_arm() {
    let mut b = DiscountedUcb::new(config(&[5, 10], 0.5, 5));
    b.step(&[(5, one_flow(100.0, 10.0))]);
    let next = b.step(&[(10, one_flow(50.0, 20.0))]);
    let iws: Vec<u32> = b.arms().iter().map(|a| a.iw_pkts).collect();
    assert_eq!(iws, vec![1, 5]);
    assert!(close(arm(&b, 5).count, 0.5));
    assert!(close(b.mean_reward(&arm(&b, 5)).unwrap(), 1.0));
    assert_eq!(next, 1);
}

/// Ties on the mean reward go to the arm with the smaller padding (the more exploited one).
#[test]
fn best_arm_ties_break_on_smaller_padding() {
    let mut b = DiscountedUcb::new(config(&[5, 10, 15], 1.0, 0));
    b.step(&[(5, one_flow(100.0, 10.0))]);
    b.step(&[(10, one_flow(100.0, 10.0))]);
    b.step(&[(15, one_flow(1.0, 100.0))]);
    assert_eq!(b.best_arm(), Some(5));
    b.step(&[(10, one_flow(100.0, 10.0))]);
    assert_eq!(b.best_arm(), Some(10));
}

/// A smooth unimodal reward peaked at IW 30 (throughput grows up to 30, RTT grows past it),
/// with seeded noise: from [5, 10, 15, 20] and Delta = 5 the arms slide to include 30 and 30
/// becomes the most played arm within 150 iterations (30 joins the arms within 10).
#[test]
fn sliding_bandit_converges_to_iw_30() {
    let mut rng = SplitMix64::new(7);
    let mut b = DiscountedUcb::new(BanditConfig::default());
    let mut plays = std::collections::BTreeMap::<u32, u32>::new();
    let mut reached_30 = None;
    for it in 0..150 {
        if reached_30.is_none() && b.arms().iter().any(|a| a.iw_pkts == 30) {
            reached_30 = Some(it);
        }
        let iw = b.current_iw();
        let x = (f64::from(iw) - 30.0) / 10.0;
        let tput_mean = 1e6 * (-x * x).exp();
        let rtt_mean = 50_000.0 * (1.0 + (f64::from(iw) - 30.0).max(0.0) / 10.0);
        let mut s = FlowStats::default();
        for _ in 0..50 {
            let tput = tput_mean * (0.9 + 0.2 * rng.next_f64());
            let rtt = rtt_mean * (0.95 + 0.1 * rng.next_f64());
            s.add(tput, rtt);
        }
        b.step(&[(iw, s)]);
        if it >= 50 {
            *plays.entry(iw).or_default() += 1;
        }
    }
    // Four first plays, then 25 and 30 are each added after one more step.
    assert!(reached_30.is_some_and(|it| it <= 10), "{reached_30:?}");
    assert!(b.arms().iter().any(|a| a.iw_pkts == 30), "{:?}", b.arms());
    let (most, _) = plays.iter().max_by_key(|(_, n)| **n).unwrap();
    assert_eq!(*most, 30, "{plays:?}");
}

/// Our accelerated sliding: with a reward that keeps growing with the IW, consecutive slides
/// up double the step (5, 10, 20, then capped at 4 x 5); with the multiplier at 1 (the
/// paper's rule) every slide adds Delta.
#[test]
fn consecutive_slides_double_the_step_up_to_the_cap() {
    let added = |mult: u32| {
        let mut b = DiscountedUcb::new(BanditConfig {
            max_step_multiplier: mult,
            ..config(&[5, 10, 15, 20], 0.95, 5)
        });
        let mut largest = vec![20];
        for _ in 0..40 {
            let iw = b.current_iw();
            b.step(&[(iw, one_flow(f64::from(iw) * 1e4, 50_000.0))]);
            let top = b.arms().iter().map(|a| a.iw_pkts).max().unwrap();
            if top != *largest.last().unwrap() {
                largest.push(top);
            }
        }
        largest
            .windows(2)
            .map(|w| w[1] - w[0])
            .collect::<Vec<u32>>()
    };
    let plain = added(1);
    assert!(
        plain.len() >= 3 && plain.iter().all(|&d| d == 5),
        "{plain:?}"
    );
    let fast = added(4);
    assert!(fast.len() >= 5, "{fast:?}");
    assert_eq!(&fast[..5], &[5, 10, 20, 20, 20], "{fast:?}");
}

/// Our `scale_from_means`: the extremes are those of one arm-iteration's means, not of single
/// flows, so the best arm's throughput term is near 1 even when one flow ran much faster.
#[test]
fn scale_from_means_uses_iteration_means() {
    let mut stats = FlowStats::default();
    stats.add(1e6, 40_000.0);
    stats.add(9e6, 60_000.0);
    let mut flows = RewardScale::default();
    flows.observe(&stats);
    assert!(close(flows.tput_max, 9e6) && close(flows.rtt_min_us, 40_000.0));
    let mut means = RewardScale::default();
    means.observe_means(&stats);
    assert!(close(means.tput_max, 5e6));
    // The mean RTT is the inverse of the mean of 1 / rtt: 2 / (1/40000 + 1/60000) = 48000.
    assert!(close(means.rtt_min_us, 48_000.0));
    means.observe_means(&FlowStats::default());
    assert!(close(means.tput_max, 5e6));
    let r = means.reward(0.8, 5e6, 1.0 / 48_000.0);
    assert!(close(r, 1.0), "{r}");
}
