//! `ccp-eval gen-data` and `ccp-eval train`: offline training of the learned selectors.
//!
//! `gen-data` runs a scenario twice:
//! 1. with `selector-explore` (flows start on Cubic and switch to a random candidate at the end
//!    of a data unit with probability 0.3; Antelope's offline training) and writes every
//!    (features of unit t, candidate of unit t+1, Antelope reward of unit t+1 per mode) tuple
//!    to `samples.csv`;
//! 2. with each of the candidates alone (the twelve), and writes `outcome.csv`: for every explore
//!    sample's features (the path as seen so far, under whichever candidate ran) and every
//!    candidate c, c's whole-flow scores in that condition and seed: the mean over the run's
//!    flows under test of their objective's score (TCP-RL's reward unless the scenario names
//!    another objective) for the default mode, and of the delay- and throughput-sensitive
//!    objectives' scores (`crate::scenario::Objective`) for those modes. This is the training
//!    set of our `outcome` policy, one regressor per candidate and mode.
//!
//! `train antelope|outcome DIR --out MODELS` fits one regressor per candidate (and mode, for
//! Antelope) and writes a versioned model set (`ccp_selector::antelope::model`).

use std::collections::HashMap;
use std::fmt::Write as _;
use std::path::Path;
use std::sync::PoisonError;

use ccp_selector::antelope::model::{OBJECTIVE_ANTELOPE, OBJECTIVE_OUTCOME};
use ccp_selector::antelope::{Mode, ModelSet, Sample, samples};

use crate::runner::{self, RunOptions};
use crate::scenario::{Objective, Scenario};
use crate::selectors::{self, RunSample};

/// Data-unit size of the generated samples (Antelope's N).
const ACKS_PER_UNIT: u32 = 20;
/// Every k-th explore sample becomes outcome samples (nine each), to bound the set's size.
const OUTCOME_STRIDE: usize = 2;

/// What `gen-data` wrote.
#[derive(Debug, Clone, Copy)]
pub struct GenData {
    /// Rows of `samples.csv`.
    pub samples: usize,
    /// Rows of `outcome.csv`.
    pub outcome: usize,
    /// Rows of `onnx.csv`.
    pub windows: usize,
}

/// Writes the explore runs' ONNX feature windows (`r<i>.<feature>` columns, the schema of
/// `ccp_selector::onnx`) labelled with the condition's best candidate alone
/// (`best_candidate`): the training set of `selector/train/train_onnx.py --data`.
fn write_onnx_windows(
    path: &Path,
    names: &[String],
    reward: &HashMap<(&str, u64, &str), f64>,
) -> Result<usize, String> {
    let mut windows = std::mem::take(
        &mut *selectors::gathered_windows()
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    windows.sort_by(|a, b| {
        (&a.0, a.1)
            .cmp(&(&b.0, b.1))
            .then_with(|| a.2.partial_cmp(&b.2).unwrap_or(std::cmp::Ordering::Equal))
    });
    let refs: Vec<&str> = names.iter().map(String::as_str).collect();
    let per_report = ccp_selector::onnx::feature_names(&refs);
    let mut text = String::new();
    for i in 0..selectors::ONNX_WINDOW {
        for f in &per_report {
            let _ = write!(text, "r{i}.{f},");
        }
    }
    text.push_str("best_candidate\n");
    let mut rows = 0;
    for (cond, seed, w) in &windows {
        let best = names
            .iter()
            .filter_map(|c| {
                reward
                    .get(&(cond.as_str(), *seed, c.as_str()))
                    .map(|r| (c, *r))
            })
            .max_by(|a, b| a.1.total_cmp(&b.1));
        let Some((best, _)) = best else { continue };
        for v in w {
            let _ = write!(text, "{v},");
        }
        text.push_str(best);
        text.push('\n');
        rows += 1;
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(rows)
}

pub(crate) fn options(jobs: usize, schemes: Vec<String>) -> RunOptions {
    RunOptions {
        jobs,
        schemes: Some(schemes),
        progress: true,
        ..RunOptions::default()
    }
}

fn write_samples(path: &Path, rows: &[Sample]) -> Result<(), String> {
    let mut text = samples::header();
    for s in rows {
        text.push('\n');
        samples::write_line(&mut text, s);
    }
    text.push('\n');
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Runs `scenario` as described in the module doc and writes `out/samples.csv` and
/// `out/outcome.csv`.
pub fn gen_data(scenario: &Scenario, out: &Path, jobs: usize) -> Result<GenData, String> {
    let opts = options(jobs, vec![selectors::EXPLORE.to_string()]);
    let plan = runner::plan(scenario, &opts).map_err(|e| e.to_string())?;
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    selectors::gathered()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    selectors::gathered_windows()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clear();
    let output = runner::run(scenario, &plan, &opts);
    if output.failed > 0 {
        return Err(format!("{} of {} runs failed", output.failed, output.runs));
    }
    let mut all: Vec<RunSample> = std::mem::take(
        &mut *selectors::gathered()
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    // Runs finish in any order; sort so the files are the same for the same scenario.
    all.sort_by(|a, b| {
        (&a.0, a.1, &a.2.next_cca)
            .cmp(&(&b.0, b.1, &b.2.next_cca))
            .then_with(|| {
                a.2.features
                    .partial_cmp(&b.2.features)
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
            .then_with(|| {
                a.2.rewards
                    .partial_cmp(&b.2.rewards)
                    .unwrap_or(std::cmp::Ordering::Equal)
            })
    });
    let plain: Vec<Sample> = all.iter().map(|(_, _, s)| s.clone()).collect();
    write_samples(&out.join("samples.csv"), &plain)?;

    // Every candidate alone on the same conditions and seeds: its whole-flow reward.
    let names: Vec<String> = selectors::candidate_names()
        .into_iter()
        .map(String::from)
        .collect();
    let opts = options(jobs, names.clone());
    let plan = runner::plan(scenario, &opts).map_err(|e| e.to_string())?;
    let output = runner::run(scenario, &plan, &opts);
    let labels = run_labels(scenario, &output.rows);
    let reward: HashMap<(&str, u64, &str), f64> = labels
        .iter()
        .map(|(k, v)| ((k.0.as_str(), k.1, k.2.as_str()), v[0]))
        .collect();
    let mut outcome = Vec::new();
    for (cond, seed, s) in all.iter().step_by(OUTCOME_STRIDE) {
        for c in &names {
            if let Some(r) = labels.get(&(cond.clone(), *seed, c.clone())) {
                outcome.push(Sample {
                    features: s.features,
                    next_cca: c.clone(),
                    rewards: *r,
                });
            }
        }
    }
    write_samples(&out.join("outcome.csv"), &outcome)?;
    let windows = write_onnx_windows(&out.join("onnx.csv"), &names, &reward)?;
    Ok(GenData {
        samples: plain.len(),
        outcome: outcome.len(),
        windows,
    })
}

/// A run's labels, per (condition, seed, scheme): the mean scores of its flows under test,
/// under the scenario's own objective (TCP-RL's reward unless it names another) for the
/// default mode, and under the delay- and throughput-sensitive objectives for those modes, in
/// [`Mode::ALL`] order; a run of several flows (web-like flows) counts every flow, not the
/// last one.
pub(crate) fn run_labels(
    scenario: &Scenario,
    rows: &[crate::results::FlowRow],
) -> HashMap<(String, u64, String), [f64; 3]> {
    let mut sums: HashMap<(&str, u64, &str), ([f64; 3], usize)> = HashMap::new();
    for r in rows.iter().filter(|r| r.role == "main" && r.status == "ok") {
        let scores = [
            r.rank_score(),
            runner::score(r, Objective::Delay, None, scenario.duration_s),
            runner::score(r, Objective::Throughput, None, scenario.duration_s),
        ];
        if scores.iter().all(|x| x.is_finite()) {
            let e = sums
                .entry((r.condition.as_str(), r.seed, r.scheme.as_str()))
                .or_default();
            for (a, x) in e.0.iter_mut().zip(scores) {
                *a += x;
            }
            e.1 += 1;
        }
    }
    sums.into_iter()
        .map(|((c, seed, s), (sum, n))| {
            (
                (c.to_string(), seed, s.to_string()),
                sum.map(|x| x / n as f64),
            )
        })
        .collect()
}

/// Fits the models of `objective` (`antelope` on `DATA/samples.csv`, `outcome` on
/// `DATA/outcome.csv`; a `data` entry may also name the file; the samples of every entry
/// together) and writes them to `out`; returns a summary. `outcome` models are fitted for the
/// default mode only unless `per_mode` (then for every mode, on each mode's labels).
pub fn train(
    objective: &str,
    data: &[std::path::PathBuf],
    out: &Path,
    per_mode: bool,
) -> Result<String, String> {
    let (file, modes): (&str, &[Mode]) = match objective {
        OBJECTIVE_ANTELOPE => ("samples.csv", &Mode::ALL),
        OBJECTIVE_OUTCOME if per_mode => ("outcome.csv", &Mode::ALL),
        OBJECTIVE_OUTCOME => ("outcome.csv", &[Mode::Default]),
        other => {
            return Err(format!(
                "unknown policy `{other}` (trainable: antelope, outcome, lptcp)"
            ));
        }
    };
    let mut samples = Vec::new();
    for data in data {
        let path = if data.is_dir() {
            data.join(file)
        } else {
            data.clone()
        };
        samples.extend(samples::read(&path).map_err(|e| e.to_string())?);
    }
    let set = ModelSet::train_for(&samples, ACKS_PER_UNIT, objective, modes)
        .map_err(|e| e.to_string())?;
    set.save(out).map_err(|e| e.to_string())?;
    let models: Vec<String> = set
        .candidates(Mode::Default)
        .iter()
        .map(|c| format!("{c} ({})", set.samples(Mode::Default, c)))
        .collect();
    Ok(format!(
        "{} samples; models: {}",
        samples.len(),
        models.join(" ")
    ))
}
