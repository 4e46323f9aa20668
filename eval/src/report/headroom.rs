//! Selection headroom: what choosing a CCA per flow could gain over deploying one, and how
//! much of it each selector captures.
//!
//! Schemes named `selector-*` are selectors; every other scheme under test is a single CCA.
//! Rewards are the per-condition means of [`super::ConditionScheme::reward`] (the flows'
//! scores under their objectives). Only conditions in which every single CCA has a result
//! count (a single with a hole cannot be compared), and a selector's class and overall means
//! are over the same conditions.
//!
//! - **Best single overall** (`B`): the single CCA with the highest mean reward over all
//!   counted conditions, the one a user would deploy.
//! - **Oracle** of a condition: its best single CCA in hindsight; of a set of conditions, the
//!   mean of their oracles (a different CCA per condition).
//! - **Headroom** of a set: `R_oracle - R_B` (ln units: 0.1 is ~10 %).
//! - **Seed-held-out oracle** of a condition: the oracle picks the best of the singles' noisy
//!   means, so part of its lead is the seeds' luck, which no choice made before the run can
//!   have. For each seed, the single CCA best on the condition's other seeds is chosen and
//!   scored on the held-out seed; the mean over seeds is what knowing the condition, but not
//!   the seed, is worth. It needs two seeds that every single CCA ran; with three it chooses
//!   on two and so understates a little what more seeds would give. The headroom and shares
//!   measured against it sit beside the nominal ones (`headroom_held_out`,
//!   `captured_held_out`); the targets are stated against the nominal oracle.
//! - **Captured** by a selector: `(R_sel - R_B) / (R_oracle - R_B)`, over one condition, a
//!   class (environment label) or all conditions; undefined where the headroom is under
//!   [`MIN_HEADROOM`]. A class also names its own best single CCA (`best_in_class`) and the
//!   share captured against that one (`captured_vs_class`): beating `B` in a class where
//!   another single is better is not yet beating every single CCA there.

use std::collections::BTreeMap;

use serde::Serialize;

use super::aggregate::{ConditionResult, ConditionScheme, Summary};

/// Headroom below which a condition or class counts as having none (ln units: 1 %).
pub const MIN_HEADROOM: f64 = 0.01;

/// The prefix naming selector schemes.
pub const SELECTOR_PREFIX: &str = "selector-";

/// The headroom analysis of a report (`None` in [`Summary`] without both single CCAs and
/// selectors, or without a condition where every single has a result).
#[derive(Debug, Clone, Serialize)]
pub struct Headroom {
    /// The single CCAs compared.
    pub singles: Vec<String>,
    /// The selectors compared.
    pub selectors: Vec<String>,
    /// The best single CCA over all counted conditions (`B`).
    pub best_single: String,
    /// Conditions left out because some single CCA has no result in them.
    pub incomplete_conditions: usize,
    /// Over all counted conditions.
    pub overall: HeadroomRow,
    /// Per class (environment label), sorted by name.
    pub classes: Vec<HeadroomRow>,
    /// Per counted condition, in the summary's order.
    pub conditions: Vec<HeadroomRow>,
}

/// Headroom over one condition, one class or all conditions.
#[derive(Debug, Clone, Serialize)]
pub struct HeadroomRow {
    /// Condition id, class name, or `overall`.
    pub label: String,
    /// Class (environment label); `overall` for the overall row.
    pub env: String,
    /// Conditions in the set.
    pub conditions: usize,
    /// Mean reward of the best single overall (`B`) on the set.
    pub r_best_single: f64,
    /// The best single CCA of this set: the condition's oracle, the class's best single on
    /// average, or `B` overall.
    pub best_in_set: String,
    /// Its mean reward on the set.
    pub r_best_in_set: f64,
    /// Mean of the per-condition oracles.
    pub r_oracle: f64,
    /// `r_oracle - r_best_single`.
    pub headroom: f64,
    /// Mean of the per-condition seed-held-out oracles (`None` if a condition of the set has
    /// fewer than two seeds that every single CCA ran).
    pub r_oracle_held_out: Option<f64>,
    /// `r_oracle_held_out - r_best_single`.
    pub headroom_held_out: Option<f64>,
    /// Conditions of the set with at least [`MIN_HEADROOM`].
    pub conditions_with_headroom: usize,
    /// Each selector with a result on every condition of the set.
    pub selectors: Vec<SelectorHeadroom>,
}

/// One selector on one set.
#[derive(Debug, Clone, Serialize)]
pub struct SelectorHeadroom {
    /// Scheme.
    pub scheme: String,
    /// Mean reward on the set.
    pub reward: f64,
    /// `(reward - r_best_single) / headroom`; `None` under [`MIN_HEADROOM`].
    pub captured: Option<f64>,
    /// `(reward - r_best_single) / headroom_held_out`; `None` without it or under
    /// [`MIN_HEADROOM`].
    pub captured_held_out: Option<f64>,
    /// `(reward - r_best_in_set) / (r_oracle - r_best_in_set)`; `None` under [`MIN_HEADROOM`].
    pub captured_vs_set_best: Option<f64>,
    /// Whether the reward is above the set's best single CCA's (equal is not above).
    pub beats_best_in_set: bool,
}

/// Whether a scheme is a selector.
pub fn is_selector(scheme: &str) -> bool {
    scheme.starts_with(SELECTOR_PREFIX)
}

fn share(gain: f64, headroom: f64) -> Option<f64> {
    (headroom >= MIN_HEADROOM).then(|| gain / headroom)
}

/// A scheme's entry in one condition.
fn entry<'a>(c: &'a ConditionResult, scheme: &str) -> Option<&'a ConditionScheme> {
    c.schemes.iter().find(|e| e.scheme == scheme)
}

/// A scheme's mean reward in one condition, if it has a finite one.
fn reward(c: &ConditionResult, scheme: &str) -> Option<f64> {
    entry(c, scheme).map(|e| e.reward).filter(|r| r.is_finite())
}

/// A scheme's mean reward over `set` (`None` if it misses a condition).
fn mean_of(set: &[&ConditionResult], scheme: &str) -> Option<f64> {
    set.iter()
        .map(|c| reward(c, scheme))
        .sum::<Option<f64>>()
        .map(|t| t / set.len() as f64)
}

/// The single CCA with the highest mean over `set`, and that mean.
fn best_of(singles: &[String], set: &[&ConditionResult]) -> Option<(String, f64)> {
    singles
        .iter()
        .filter_map(|s| Some((s.clone(), mean_of(set, s)?)))
        .max_by(|a, b| a.1.total_cmp(&b.1))
}

/// The best single CCA of one condition, in hindsight: its reward.
fn oracle(singles: &[String], c: &ConditionResult) -> f64 {
    singles
        .iter()
        .filter_map(|s| reward(c, s))
        .fold(f64::NEG_INFINITY, f64::max)
}

/// The seed-held-out oracle of one condition (module doc): `None` unless at least two seeds
/// have a reward for every single CCA.
fn held_out_oracle(singles: &[String], c: &ConditionResult) -> Option<f64> {
    let per_seed: Vec<&BTreeMap<u64, f64>> = singles
        .iter()
        .map(|s| entry(c, s).map(|e| &e.seed_rewards))
        .collect::<Option<_>>()?;
    let seeds: Vec<u64> = per_seed
        .first()?
        .keys()
        .copied()
        .filter(|k| {
            per_seed
                .iter()
                .all(|m| m.get(k).is_some_and(|r| r.is_finite()))
        })
        .collect();
    if seeds.len() < 2 {
        return None;
    }
    let mut total = 0.0;
    for &held in &seeds {
        let others = |m: &BTreeMap<u64, f64>| {
            seeds
                .iter()
                .filter(|&&k| k != held)
                .map(|k| m[k])
                .sum::<f64>()
        };
        // The first single of the best mean on the other seeds (ties go to name order).
        let chosen = per_seed
            .iter()
            .copied()
            .reduce(|best, m| if others(m) > others(best) { m } else { best })?;
        total += chosen[&held];
    }
    Some(total / seeds.len() as f64)
}

/// What every row of one analysis shares.
struct Sets<'a> {
    singles: &'a [String],
    selectors: &'a [String],
    best_single: String,
}

impl Sets<'_> {
    /// The headroom row of `set`.
    fn row(&self, label: &str, env: &str, set: &[&ConditionResult]) -> Option<HeadroomRow> {
        let r_b = mean_of(set, &self.best_single)?;
        let (best_in_set, r_set) = best_of(self.singles, set)?;
        let r_oracle = set.iter().map(|c| oracle(self.singles, c)).sum::<f64>() / set.len() as f64;
        let r_oracle_held_out = set
            .iter()
            .map(|c| held_out_oracle(self.singles, c))
            .sum::<Option<f64>>()
            .map(|t| t / set.len() as f64);
        let headroom_held_out = r_oracle_held_out.map(|o| o - r_b);
        let with = set
            .iter()
            .filter(|c| {
                let b = reward(c, &self.best_single).unwrap_or(f64::NEG_INFINITY);
                oracle(self.singles, c) - b >= MIN_HEADROOM
            })
            .count();
        let selectors = self
            .selectors
            .iter()
            .filter_map(|s| {
                let r = mean_of(set, s)?;
                Some(SelectorHeadroom {
                    scheme: s.clone(),
                    reward: r,
                    captured: share(r - r_b, r_oracle - r_b),
                    captured_held_out: headroom_held_out.and_then(|h| share(r - r_b, h)),
                    captured_vs_set_best: share(r - r_set, r_oracle - r_set),
                    beats_best_in_set: r > r_set && (r - r_set).abs() > 1e-9,
                })
            })
            .collect();
        Some(HeadroomRow {
            label: label.to_string(),
            env: env.to_string(),
            conditions: set.len(),
            r_best_single: r_b,
            best_in_set,
            r_best_in_set: r_set,
            r_oracle,
            headroom: r_oracle - r_b,
            r_oracle_held_out,
            headroom_held_out,
            conditions_with_headroom: with,
            selectors,
        })
    }
}

/// The headroom analysis of a summary's conditions.
pub fn analyze(summary: &Summary) -> Option<Headroom> {
    let singles: Vec<String> = summary
        .schemes
        .iter()
        .filter(|s| !is_selector(s))
        .cloned()
        .collect();
    let selectors: Vec<String> = summary
        .schemes
        .iter()
        .filter(|s| is_selector(s))
        .cloned()
        .collect();
    if singles.is_empty() || selectors.is_empty() {
        return None;
    }
    let complete: Vec<&ConditionResult> = summary
        .conditions
        .iter()
        .filter(|c| singles.iter().all(|s| reward(c, s).is_some()))
        .collect();
    if complete.is_empty() {
        return None;
    }
    let incomplete_conditions = summary.conditions.len() - complete.len();
    let sets = Sets {
        singles: &singles,
        selectors: &selectors,
        best_single: best_of(&singles, &complete)?.0,
    };
    let row = |label: &str, env: &str, set: &[&ConditionResult]| sets.row(label, env, set);
    let overall = row("overall", "overall", &complete)?;
    let mut by_env: BTreeMap<&str, Vec<&ConditionResult>> = BTreeMap::new();
    for c in &complete {
        by_env.entry(&c.env).or_default().push(c);
    }
    let classes = by_env
        .iter()
        .filter_map(|(env, set)| row(env, env, set))
        .collect();
    let conditions = complete
        .iter()
        .filter_map(|c| row(&c.condition, &c.env, &[c]))
        .collect();
    Some(Headroom {
        best_single: sets.best_single.clone(),
        singles,
        selectors,
        incomplete_conditions,
        overall,
        classes,
        conditions,
    })
}
