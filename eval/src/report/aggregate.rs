//! From flow rows to the numbers of the report: per-environment scheme tables, per-condition
//! rewards, best scheme, ranks, reward loss, and the shares built on them.

use std::collections::{BTreeMap, BTreeSet};

use serde::Serialize;

use crate::results::FlowRow;

/// Everything the report shows, as structured data (`summary.json`).
#[derive(Debug, Clone, Serialize)]
pub struct Summary {
    /// Title of the report.
    pub title: String,
    /// How many runs, flows and conditions went in.
    pub counts: Counts,
    /// Schemes under test, sorted by name; plot colours follow this order.
    pub schemes: Vec<String>,
    /// Pantheon-style table per environment, sorted by environment name.
    pub envs: Vec<EnvTable>,
    /// Per scheme: in how many conditions it is best (TCP-RL Fig. 14).
    pub best_share: Vec<BestShare>,
    /// Per scheme: share of conditions at rank 1, top 3, top 5, and its median rank (Fig. 15).
    pub ranks: Vec<RankStats>,
    /// Per scheme: share of conditions with reward loss under 5/10/12 % (Fig. 16).
    pub reward_loss: Vec<RewardLossStats>,
    /// Per condition: each scheme's reward, rank and reward loss.
    pub conditions: Vec<ConditionResult>,
    /// Runs whose status is not `ok`, one entry per run.
    pub failed: Vec<FailedRun>,
    /// Selection headroom and the share each selector captures (when the report has single
    /// CCAs and selectors).
    pub headroom: Option<super::headroom::Headroom>,
}

/// Counts of what went into the report.
#[derive(Debug, Clone, Default, Serialize)]
pub struct Counts {
    /// Distinct runs (scenario, condition, scheme, seed).
    pub runs: usize,
    /// Runs whose rows all have status `ok`.
    pub ok_runs: usize,
    /// Runs with at least one row whose status is not `ok`.
    pub failed_runs: usize,
    /// Flow rows in total (all roles, all statuses).
    pub flows: usize,
    /// Flow rows that count towards scheme metrics (status `ok`, role `main`).
    pub main_flows_ok: usize,
    /// Conditions (scenario, condition) in which at least one scheme has a reward.
    pub conditions: usize,
    /// Schemes under test.
    pub schemes: usize,
    /// Counted flow rows whose reward was not finite (left out of every reward mean).
    pub nonfinite_rewards: usize,
    /// Counted flow rows that spent some time under the datapath's fallback rule after their
    /// start (an agent that answered late, died or came back).
    pub partly_fallback: usize,
    /// Their time under the fallback rule, s, summed.
    pub fallback_s: f64,
}

/// One environment's table: one row per scheme.
#[derive(Debug, Clone, Serialize)]
pub struct EnvTable {
    /// Environment label.
    pub env: String,
    /// One entry per scheme with counted flows in this environment.
    pub schemes: Vec<SchemeStats>,
}

/// Means over a scheme's counted flows in one environment; `None` when there is no finite value.
#[derive(Debug, Clone, Serialize)]
pub struct SchemeStats {
    /// Scheme.
    pub scheme: String,
    /// Runs with counted flows.
    pub runs: usize,
    /// Counted flows.
    pub flows: usize,
    /// Mean throughput, Mbit/s.
    pub throughput_mbps: Option<f64>,
    /// Mean of the flows' 95th-percentile RTT, ms.
    pub p95_rtt_ms: Option<f64>,
    /// Mean of the flows' mean RTT, ms.
    pub mean_rtt_ms: Option<f64>,
    /// Mean of the flows' mean queueing delay, ms.
    pub mean_qdelay_ms: Option<f64>,
    /// Mean loss rate (fraction).
    pub loss_rate: Option<f64>,
    /// Mean utilization (fraction).
    pub utilization: Option<f64>,
    /// Mean reward, ln(Mbit/s / ms).
    pub reward: Option<f64>,
    /// Mean flow completion time of finite flows that completed, s.
    pub fct_s: Option<f64>,
    /// Finite flows that completed (the FCT mean is over these).
    pub completed_flows: usize,
    /// Mean Jain index, one value per run.
    pub jain: Option<f64>,
}

/// One scheme's share of conditions in which it is best.
#[derive(Debug, Clone, Serialize)]
pub struct BestShare {
    /// Scheme.
    pub scheme: String,
    /// Conditions where this scheme has rank 1 (ties count for every tied scheme).
    pub best_in: usize,
    /// `best_in` over all conditions.
    pub share: f64,
}

/// One scheme's rank statistics; shares are over all conditions (a condition in which the
/// scheme has no reward counts as not reaching the rank).
#[derive(Debug, Clone, Serialize)]
pub struct RankStats {
    /// Scheme.
    pub scheme: String,
    /// Conditions in which the scheme has a reward.
    pub evaluated: usize,
    /// Share of conditions at rank 1.
    pub top1: f64,
    /// Share of conditions at rank <= 3.
    pub top3: f64,
    /// Share of conditions at rank <= 5.
    pub top5: f64,
    /// Median rank over the conditions in which the scheme has a reward.
    pub median_rank: Option<f64>,
}

/// One scheme's reward-loss statistics; shares are over all conditions.
#[derive(Debug, Clone, Serialize)]
pub struct RewardLossStats {
    /// Scheme.
    pub scheme: String,
    /// Conditions in which the scheme has a defined reward loss.
    pub evaluated: usize,
    /// Share of conditions with reward loss < 5 %.
    pub under_5pct: f64,
    /// Share of conditions with reward loss < 10 %.
    pub under_10pct: f64,
    /// Share of conditions with reward loss < 12 %.
    pub under_12pct: f64,
    /// Median reward loss over the conditions where it is defined.
    pub median: Option<f64>,
}

/// The schemes' standing in one condition.
#[derive(Debug, Clone, Serialize)]
pub struct ConditionResult {
    /// Scenario.
    pub scenario: String,
    /// Condition id.
    pub condition: String,
    /// Environment label.
    pub env: String,
    /// Bottleneck rate, Mbit/s.
    pub bw_mbps: f64,
    /// Base RTT, ms.
    pub rtt_ms: f64,
    /// Random loss probability.
    pub loss: f64,
    /// Schemes at rank 1 (more than one on a tie).
    pub best: Vec<String>,
    /// The best reward.
    pub best_reward: f64,
    /// Every scheme with a reward here, sorted by name.
    pub schemes: Vec<ConditionScheme>,
}

/// One scheme in one condition.
#[derive(Debug, Clone, Serialize)]
pub struct ConditionScheme {
    /// Scheme.
    pub scheme: String,
    /// Mean reward over seeds and main flows: each flow's `score` (its objective's; TCP-RL's
    /// reward unless the scenario names another), or `reward` for rows without a score.
    pub reward: f64,
    /// Seeds with counted flows.
    pub seeds: usize,
    /// Per seed, the mean reward of that seed's counted flows (the seed-held-out oracle of
    /// [`super::headroom`] chooses on some seeds and scores on another).
    #[serde(skip)]
    pub seed_rewards: BTreeMap<u64, f64>,
    /// Counted flows.
    pub flows: usize,
    /// 1 = best; tied schemes share the better rank (1, 1, 3).
    pub rank: usize,
    /// `(R_best - R) / |R_best|`; 0 for rank 1; `None` if `R_best` is 0 and `R` is not.
    pub reward_loss: Option<f64>,
}

/// A run that did not finish with status `ok`.
#[derive(Debug, Clone, Serialize)]
pub struct FailedRun {
    /// Scenario.
    pub scenario: String,
    /// Condition id.
    pub condition: String,
    /// Scheme under test.
    pub scheme: String,
    /// Seed.
    pub seed: u64,
    /// The status text of the run's first non-`ok` row.
    pub status: String,
}

/// A mean over finite values.
#[derive(Debug, Default, Clone, Copy)]
struct Mean {
    sum: f64,
    n: usize,
}

impl Mean {
    fn add(&mut self, v: f64) {
        if v.is_finite() {
            self.sum += v;
            self.n += 1;
        }
    }

    fn get(self) -> Option<f64> {
        (self.n > 0).then(|| self.sum / self.n as f64)
    }
}

/// Whether a row counts towards scheme metrics.
pub(crate) fn counted(r: &FlowRow) -> bool {
    r.status == "ok" && r.role == "main"
}

/// Relative tolerance under which two rewards tie.
const TIE_TOLERANCE: f64 = 1e-9;

fn ties(a: f64, b: f64) -> bool {
    (a - b).abs() <= TIE_TOLERANCE * a.abs().max(b.abs()).max(1.0)
}

/// The median of values (mean of the middle two for an even count).
pub(crate) fn median(values: &mut [f64]) -> Option<f64> {
    if values.is_empty() {
        return None;
    }
    values.sort_by(f64::total_cmp);
    let n = values.len();
    Some(if n % 2 == 1 {
        values[n / 2]
    } else {
        f64::midpoint(values[n / 2 - 1], values[n / 2])
    })
}

type RunKey<'a> = (&'a str, &'a str, &'a str, u64);

/// Reward loss of `r` against the best reward `best` (see [`ConditionScheme::reward_loss`]).
pub(crate) fn reward_loss(best: f64, r: f64) -> Option<f64> {
    if ties(best, r) {
        return Some(0.0);
    }
    let l = (best - r) / best.abs();
    l.is_finite().then_some(l)
}

/// Computes the summary of a set of rows.
pub fn summarize(title: &str, rows: &[FlowRow]) -> Summary {
    let mut counts = Counts {
        flows: rows.len(),
        ..Counts::default()
    };

    // Runs and failures.
    let mut runs: BTreeMap<RunKey, Option<&str>> = BTreeMap::new();
    for r in rows {
        let e = runs
            .entry((&r.scenario, &r.condition, &r.scheme, r.seed))
            .or_insert(None);
        if r.status != "ok" && e.is_none() {
            *e = Some(&r.status);
        }
    }
    counts.runs = runs.len();
    let failed: Vec<FailedRun> = runs
        .iter()
        .filter_map(|(&(scenario, condition, scheme, seed), st)| {
            st.map(|status| FailedRun {
                scenario: scenario.to_string(),
                condition: condition.to_string(),
                scheme: scheme.to_string(),
                seed,
                status: status.to_string(),
            })
        })
        .collect();
    counts.failed_runs = failed.len();
    counts.ok_runs = counts.runs - counts.failed_runs;

    let schemes: Vec<String> = rows
        .iter()
        .filter(|r| r.role == "main")
        .map(|r| r.scheme.clone())
        .collect::<BTreeSet<_>>()
        .into_iter()
        .collect();
    counts.schemes = schemes.len();

    let ok: Vec<&FlowRow> = rows.iter().filter(|r| counted(r)).collect();
    counts.main_flows_ok = ok.len();
    counts.nonfinite_rewards = ok.iter().filter(|r| !r.reward.is_finite()).count();
    let partly: Vec<&&FlowRow> = ok.iter().filter(|r| r.fallback_s > 0.0).collect();
    counts.partly_fallback = partly.len();
    counts.fallback_s = partly.iter().fold(0.0, |a, r| a + r.fallback_s);

    let envs = env_tables(&ok);
    let conditions = condition_results(rows, &ok);
    counts.conditions = conditions.len();
    let (best_share, ranks, reward_loss) = shares(&schemes, &conditions);

    let mut summary = Summary {
        title: title.to_string(),
        counts,
        schemes,
        envs,
        best_share,
        ranks,
        reward_loss,
        conditions,
        failed,
        headroom: None,
    };
    summary.headroom = super::headroom::analyze(&summary);
    summary
}

#[derive(Default)]
struct EnvAcc<'a> {
    runs: BTreeMap<RunKey<'a>, f64>,
    flows: usize,
    tput: Mean,
    p95: Mean,
    rtt: Mean,
    qdelay: Mean,
    loss: Mean,
    util: Mean,
    reward: Mean,
    fct: Mean,
}

fn env_tables(ok: &[&FlowRow]) -> Vec<EnvTable> {
    let mut acc: BTreeMap<&str, BTreeMap<&str, EnvAcc>> = BTreeMap::new();
    for r in ok {
        let a = acc.entry(&r.env).or_default().entry(&r.scheme).or_default();
        // Jain is per run: keep the first main flow's value.
        a.runs
            .entry((&r.scenario, &r.condition, &r.scheme, r.seed))
            .or_insert(r.jain);
        a.flows += 1;
        a.tput.add(r.throughput_mbps);
        a.p95.add(r.p95_rtt_ms);
        a.rtt.add(r.mean_rtt_ms);
        a.qdelay.add(r.mean_qdelay_ms);
        a.loss.add(r.loss_rate);
        a.util.add(r.utilization);
        a.reward.add(r.reward);
        if let Some(f) = r.fct_s {
            a.fct.add(f);
        }
    }
    acc.into_iter()
        .map(|(env, m)| EnvTable {
            env: env.to_string(),
            schemes: m
                .into_iter()
                .map(|(scheme, a)| {
                    let mut jain = Mean::default();
                    a.runs.values().for_each(|&j| jain.add(j));
                    SchemeStats {
                        scheme: scheme.to_string(),
                        runs: a.runs.len(),
                        flows: a.flows,
                        throughput_mbps: a.tput.get(),
                        p95_rtt_ms: a.p95.get(),
                        mean_rtt_ms: a.rtt.get(),
                        mean_qdelay_ms: a.qdelay.get(),
                        loss_rate: a.loss.get(),
                        utilization: a.util.get(),
                        reward: a.reward.get(),
                        fct_s: a.fct.get(),
                        completed_flows: a.fct.n,
                        jain: jain.get(),
                    }
                })
                .collect(),
        })
        .collect()
}

/// A scheme's reward mean in one condition, and its mean per seed.
type RewardAcc = (Mean, BTreeMap<u64, Mean>);

fn condition_results(rows: &[FlowRow], ok: &[&FlowRow]) -> Vec<ConditionResult> {
    // Condition attributes come from the condition's first row, counted or not.
    let mut first: BTreeMap<(&str, &str), &FlowRow> = BTreeMap::new();
    for r in rows {
        first.entry((&r.scenario, &r.condition)).or_insert(r);
    }
    let mut acc: BTreeMap<(&str, &str), BTreeMap<&str, RewardAcc>> = BTreeMap::new();
    for r in ok {
        let (m, seeds) = acc
            .entry((&r.scenario, &r.condition))
            .or_default()
            .entry(&r.scheme)
            .or_default();
        m.add(r.rank_score());
        seeds.entry(r.seed).or_default().add(r.rank_score());
    }
    let mut out = Vec::new();
    for (key, schemes) in acc {
        let mut scheme_results: Vec<ConditionScheme> = schemes
            .iter()
            .filter_map(|(s, (m, seeds))| {
                Some(ConditionScheme {
                    scheme: s.to_string(),
                    reward: m.get()?,
                    seeds: seeds.len(),
                    seed_rewards: seeds
                        .iter()
                        .filter_map(|(seed, m)| Some((*seed, m.get()?)))
                        .collect(),
                    flows: m.n,
                    rank: 0,
                    reward_loss: None,
                })
            })
            .collect();
        let rewards: Vec<f64> = scheme_results.iter().map(|e| e.reward).collect();
        let Some(best_reward) = rewards.iter().copied().max_by(f64::total_cmp) else {
            continue;
        };
        for e in &mut scheme_results {
            let better = rewards
                .iter()
                .filter(|&&o| o > e.reward && !ties(o, e.reward))
                .count();
            e.rank = better + 1;
            e.reward_loss = if e.rank == 1 {
                Some(0.0)
            } else {
                reward_loss(best_reward, e.reward)
            };
        }
        let f = first.get(&key);
        out.push(ConditionResult {
            scenario: key.0.to_string(),
            condition: key.1.to_string(),
            env: f.map(|r| r.env.clone()).unwrap_or_default(),
            bw_mbps: f.map_or(0.0, |r| r.bw_mbps),
            rtt_ms: f.map_or(0.0, |r| r.rtt_ms),
            loss: f.map_or(0.0, |r| r.loss),
            best: scheme_results
                .iter()
                .filter(|s| s.rank == 1)
                .map(|s| s.scheme.clone())
                .collect(),
            best_reward,
            schemes: scheme_results,
        });
    }
    out
}

fn shares(
    schemes: &[String],
    conditions: &[ConditionResult],
) -> (Vec<BestShare>, Vec<RankStats>, Vec<RewardLossStats>) {
    let total = conditions.len();
    let share = |n: usize| {
        if total == 0 {
            0.0
        } else {
            n as f64 / total as f64
        }
    };
    let mut best = Vec::new();
    let mut ranks = Vec::new();
    let mut losses = Vec::new();
    for s in schemes {
        let entries: Vec<&ConditionScheme> = conditions
            .iter()
            .filter_map(|c| c.schemes.iter().find(|e| &e.scheme == s))
            .collect();
        let at_most = |k: usize| entries.iter().filter(|e| e.rank <= k).count();
        let best_in = at_most(1);
        best.push(BestShare {
            scheme: s.clone(),
            best_in,
            share: share(best_in),
        });
        let mut rank_values: Vec<f64> = entries.iter().map(|e| e.rank as f64).collect();
        ranks.push(RankStats {
            scheme: s.clone(),
            evaluated: entries.len(),
            top1: share(best_in),
            top3: share(at_most(3)),
            top5: share(at_most(5)),
            median_rank: median(&mut rank_values),
        });
        let mut loss_values: Vec<f64> = entries.iter().filter_map(|e| e.reward_loss).collect();
        let under = |t: f64| share(loss_values.iter().filter(|&&l| l < t).count());
        let (u5, u10, u12) = (under(0.05), under(0.10), under(0.12));
        losses.push(RewardLossStats {
            scheme: s.clone(),
            evaluated: loss_values.len(),
            under_5pct: u5,
            under_10pct: u10,
            under_12pct: u12,
            median: median(&mut loss_values),
        });
    }
    (best, ranks, losses)
}

/// One run's main-flow means, for the faint points of the throughput-delay plots.
#[derive(Debug, Clone)]
pub(crate) struct RunPoint {
    pub(crate) env: String,
    pub(crate) scheme: String,
    pub(crate) throughput_mbps: f64,
    pub(crate) p95_rtt_ms: f64,
}

/// Per run (counted flows only): mean throughput and mean p95 RTT.
pub(crate) fn run_points(rows: &[FlowRow]) -> Vec<RunPoint> {
    let mut acc: BTreeMap<(RunKey, &str), (Mean, Mean)> = BTreeMap::new();
    for r in rows.iter().filter(|r| counted(r)) {
        let (t, d) = acc
            .entry(((&r.scenario, &r.condition, &r.scheme, r.seed), &r.env))
            .or_default();
        t.add(r.throughput_mbps);
        d.add(r.p95_rtt_ms);
    }
    acc.into_iter()
        .filter_map(|(((_, _, scheme, _), env), (t, d))| {
            Some(RunPoint {
                env: env.to_string(),
                scheme: scheme.to_string(),
                throughput_mbps: t.get()?,
                p95_rtt_ms: d.get()?,
            })
        })
        .collect()
}
