//! `ccp-eval gen-data --kind probe` and `ccp-eval train probe`: the training data and models of
//! the probe policy (`ccp_selector::probe`, scheme `selector-probe`).
//!
//! `gen-data --kind probe` runs a scenario
//! 1. with every candidate alone: each preference mode's start candidate is the one with the
//!    best mean score under that mode's objective (unless `--starts` names them, so that
//!    several training scenarios share one start);
//! 2. once per (start, candidate) with `selector-probe-explore`: every flow starts on the
//!    start candidate, probes for the probe window, records its features and switches to the
//!    candidate (the start itself: it stays). Up to the probe's end the runs of one start are
//!    identical (same path, seed and candidate); after it they differ only by the switch.
//!
//! It writes `probe.csv` (condition, seed, mode, start, target, the flow's score under the
//! mode's objective, the features of the run's first probe) and `probe.json` (the window and
//! the starts). `train probe DIR... --out MODELS` turns each row into a gain (its score minus
//! the score of the run of the same condition, seed and start that stayed) and fits
//! `ccp_selector::probe::ProbeModels`.

use std::collections::{BTreeMap, HashMap};
use std::fmt::Write as _;
use std::path::{Path, PathBuf};
use std::sync::PoisonError;

use ccp_selector::antelope::Mode;
use ccp_selector::probe::{FEATURE_NAMES, N_FEATURES, ProbeModels, ProbeSample, ProbeWindow};
use serde::{Deserialize, Serialize};

use crate::runner;
use crate::scenario::Scenario;
use crate::selectors::{self, ProbeForce};
use crate::training::{options, run_labels};

/// The rows' file.
pub const DATA_FILE: &str = "probe.csv";
/// The window and starts of the data.
pub const META_FILE: &str = "probe.json";

/// What one `gen-data --kind probe` used: every directory trained together must agree.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct ProbeMeta {
    /// The probe window.
    pub window: ProbeWindow,
    /// Mode name -> start candidate.
    pub starts: BTreeMap<String, String>,
}

/// One row of `probe.csv`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeRow {
    /// Condition id.
    pub condition: String,
    /// Seed.
    pub seed: u64,
    /// Mode (of the score and the start).
    pub mode: Mode,
    /// Start candidate.
    pub start: String,
    /// Candidate switched to after the probe.
    pub target: String,
    /// Mean score of the run's flows under test under the mode's objective.
    pub score: f64,
    /// The probe's features.
    pub features: [f64; N_FEATURES],
}

/// Mode -> start candidate, as names.
fn names(starts: &BTreeMap<Mode, String>) -> BTreeMap<String, String> {
    starts
        .iter()
        .map(|(m, c)| (m.name().to_string(), c.clone()))
        .collect()
}

impl ProbeMeta {
    /// The starts by preference mode (an unknown mode name is an error).
    pub fn starts_by_mode(&self) -> Result<BTreeMap<Mode, String>, String> {
        self.starts
            .iter()
            .map(|(m, c)| {
                Mode::parse(m)
                    .map(|m| (m, c.clone()))
                    .ok_or_else(|| format!("unknown mode `{m}`"))
            })
            .collect()
    }
}

/// Reads the starts of an earlier `gen-data --kind probe` (its directory or its `probe.json`).
pub fn read_meta(path: &Path) -> Result<ProbeMeta, String> {
    let file = if path.is_dir() {
        path.join(META_FILE)
    } else {
        path.to_path_buf()
    };
    let text = std::fs::read_to_string(&file).map_err(|e| format!("{}: {e}", file.display()))?;
    let meta: ProbeMeta =
        serde_json::from_str(&text).map_err(|e| format!("{}: {e}", file.display()))?;
    meta.starts_by_mode()
        .map_err(|e| format!("{}: {e}", file.display()))?;
    if !meta.starts.contains_key(Mode::Default.name()) {
        return Err(format!("{}: no start for the default mode", file.display()));
    }
    Ok(meta)
}

/// Runs `scenario` as the module doc says and writes `out/probe.csv` and `out/probe.json`;
/// `starts` (from another scenario's `probe.json`) fixes the start candidates. Returns the rows
/// written.
pub fn gen_data(
    scenario: &Scenario,
    out: &Path,
    jobs: usize,
    window: ProbeWindow,
    starts: Option<BTreeMap<Mode, String>>,
) -> Result<usize, String> {
    std::fs::create_dir_all(out).map_err(|e| format!("{}: {e}", out.display()))?;
    let candidates: Vec<String> = selectors::candidate_names()
        .into_iter()
        .map(String::from)
        .collect();
    let starts = if let Some(s) = starts {
        s
    } else {
        let opts = options(jobs, candidates.clone());
        let plan = runner::plan(scenario, &opts).map_err(|e| e.to_string())?;
        let output = runner::run(scenario, &plan, &opts);
        if output.failed > 0 {
            return Err(format!("{} of {} runs failed", output.failed, output.runs));
        }
        best_starts(&run_labels(scenario, &output.rows), &candidates)?
    };
    let mut by_start: BTreeMap<&str, Vec<Mode>> = BTreeMap::new();
    for (m, c) in &starts {
        by_start.entry(c.as_str()).or_default().push(*m);
    }
    let opts = options(jobs, vec![selectors::PROBE_EXPLORE.to_string()]);
    let plan = runner::plan(scenario, &opts).map_err(|e| e.to_string())?;
    let mut rows = Vec::new();
    for (start, modes) in by_start {
        for target in &candidates {
            selectors::set_probe_force(Some(ProbeForce {
                window,
                start: start.to_string(),
                target: target.clone(),
            }));
            selectors::gathered_probes()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            let output = runner::run(scenario, &plan, &opts);
            selectors::set_probe_force(None);
            if output.failed > 0 {
                return Err(format!("{} of {} runs failed", output.failed, output.runs));
            }
            let labels = run_labels(scenario, &output.rows);
            // The run's first probe (a run of several selector flows, e.g. web-like flows:
            // the one that ended its probe first).
            let mut first: HashMap<(String, u64), (u64, [f64; N_FEATURES])> = HashMap::new();
            for (cond, seed, p) in std::mem::take(
                &mut *selectors::gathered_probes()
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner),
            ) {
                let e = first.entry((cond, seed)).or_insert((p.at_us, p.features));
                if (p.at_us, p.features) < *e {
                    *e = (p.at_us, p.features);
                }
            }
            for ((cond, seed, _), score) in &labels {
                let Some((_, features)) = first.get(&(cond.clone(), *seed)) else {
                    continue; // no flow lived past its probe
                };
                for &mode in &modes {
                    rows.push(ProbeRow {
                        condition: cond.clone(),
                        seed: *seed,
                        mode,
                        start: start.to_string(),
                        target: target.clone(),
                        score: score[mode as usize],
                        features: *features,
                    });
                }
            }
        }
    }
    rows.sort_by(|a, b| {
        (&a.condition, a.seed, a.mode, &a.target).cmp(&(&b.condition, b.seed, b.mode, &b.target))
    });
    write_rows(&out.join(DATA_FILE), &rows)?;
    crate::probe_kind::write_labels(scenario, out)?;
    let meta = ProbeMeta {
        window,
        starts: names(&starts),
    };
    let path = out.join(META_FILE);
    let text = serde_json::to_string_pretty(&meta).map_err(|e| e.to_string())?;
    std::fs::write(&path, text).map_err(|e| format!("{}: {e}", path.display()))?;
    Ok(rows.len())
}

/// Per mode, the candidate with the best mean label over the runs where every candidate ran.
fn best_starts(
    labels: &HashMap<(String, u64, String), [f64; 3]>,
    candidates: &[String],
) -> Result<BTreeMap<Mode, String>, String> {
    let mut runs: BTreeMap<(&str, u64), usize> = BTreeMap::new();
    for (c, s, _) in labels.keys() {
        *runs.entry((c.as_str(), *s)).or_default() += 1;
    }
    let complete: Vec<(&str, u64)> = runs
        .into_iter()
        .filter(|(_, n)| *n == candidates.len())
        .map(|(k, _)| k)
        .collect();
    if complete.is_empty() {
        return Err("no condition where every candidate finished a run".into());
    }
    let mut starts = BTreeMap::new();
    for mode in Mode::ALL {
        let mean = |cand: &String| {
            complete
                .iter()
                .filter_map(|(c, s)| labels.get(&(c.to_string(), *s, cand.clone())))
                .map(|v| v[mode as usize])
                .sum::<f64>()
        };
        let best = candidates
            .iter()
            .max_by(|a, b| mean(a).total_cmp(&mean(b)))
            .ok_or("no candidates")?;
        starts.insert(mode, best.clone());
    }
    Ok(starts)
}

fn header() -> String {
    let mut h = "condition,seed,mode,start,target,score".to_string();
    for f in FEATURE_NAMES {
        let _ = write!(h, ",{f}");
    }
    h
}

fn write_rows(path: &Path, rows: &[ProbeRow]) -> Result<(), String> {
    let mut text = header();
    text.push('\n');
    for r in rows {
        let _ = write!(
            text,
            "{},{},{},{},{},{}",
            r.condition,
            r.seed,
            r.mode.name(),
            r.start,
            r.target,
            r.score
        );
        for v in r.features {
            let _ = write!(text, ",{v}");
        }
        text.push('\n');
    }
    std::fs::write(path, text).map_err(|e| format!("{}: {e}", path.display()))
}

/// Reads `probe.csv`; a malformed line is an error naming the file and line.
pub fn read_rows(path: &Path) -> Result<Vec<ProbeRow>, String> {
    let text = std::fs::read_to_string(path).map_err(|e| format!("{}: {e}", path.display()))?;
    let mut lines = text.lines();
    if lines.next() != Some(header().as_str()) {
        return Err(format!(
            "{}: not a probe data file (header differs from `{}`)",
            path.display(),
            header()
        ));
    }
    let mut rows = Vec::new();
    for (i, line) in lines.enumerate().filter(|(_, l)| !l.trim().is_empty()) {
        let bad = |what: &str| format!("{}:{}: {what}", path.display(), i + 2);
        let cols: Vec<&str> = line.split(',').collect();
        if cols.len() != 6 + N_FEATURES {
            return Err(bad(&format!(
                "{} columns, expected {}",
                cols.len(),
                6 + N_FEATURES
            )));
        }
        let num = |s: &str| {
            s.parse::<f64>()
                .ok()
                .filter(|v| v.is_finite())
                .ok_or_else(|| bad(&format!("`{s}` is not a finite number")))
        };
        let mut features = [0.0; N_FEATURES];
        for (f, s) in features.iter_mut().zip(&cols[6..]) {
            *f = num(s)?;
        }
        rows.push(ProbeRow {
            condition: cols[0].to_string(),
            seed: cols[1].parse().map_err(|_| bad("seed"))?,
            mode: Mode::parse(cols[2]).ok_or_else(|| bad(&format!("mode `{}`", cols[2])))?,
            start: cols[3].to_string(),
            target: cols[4].to_string(),
            score: num(cols[5])?,
            features,
        });
    }
    Ok(rows)
}

/// The gains of `rows`: each row's score minus the score of the row of the same condition,
/// seed and mode that stayed on the start; rows without that twin are dropped.
pub fn gains(rows: &[ProbeRow]) -> Vec<ProbeSample> {
    let stay: HashMap<(&str, u64, Mode), f64> = rows
        .iter()
        .filter(|r| r.target == r.start)
        .map(|r| ((r.condition.as_str(), r.seed, r.mode), r.score))
        .collect();
    rows.iter()
        .filter_map(|r| {
            let base = stay.get(&(r.condition.as_str(), r.seed, r.mode))?;
            Some(ProbeSample {
                mode: r.mode,
                target: r.target.clone(),
                features: r.features,
                gain: r.score - base,
                path: r.condition.clone(),
            })
        })
        .collect()
}

/// `train probe DIR... --out MODELS [--bags N] [--folds K] [--holdout DIR]...
/// [--predictions DIR]`: fits the probe models, `bags` boosters per (mode, candidate), on
/// every directory's rows (their windows and starts must agree) and writes them. With `folds`
/// (at least 2), first cross-validates them by path ([`cross_validate`], the deployed margin);
/// with `holdout` directories (other scenarios' counterfactual rows, same window and starts),
/// scores the fitted models on them ([`hold_out`]). With `predictions`, every scored flow's
/// predicted and realised gain per target goes to `cv.csv` and `holdout.csv` there. Returns a
/// summary.
pub fn train(
    data: &[PathBuf],
    out: &Path,
    bags: usize,
    folds: usize,
    holdout: &[PathBuf],
    predictions: Option<&Path>,
) -> Result<String, String> {
    let first = "the first directory's (use gen-data --starts)";
    let mut meta: Option<ProbeMeta> = None;
    let mut samples = Vec::new();
    let mut all = Vec::new();
    for d in data {
        let rows = read_dir(d, &mut meta, first)?;
        samples.extend(gains(&rows));
        all.extend(rows);
    }
    let mut held = Vec::new();
    for d in holdout {
        held.extend(read_dir(d, &mut meta, first)?);
    }
    let meta = meta.ok_or("no data directory")?;
    let margin = ccp_selector::probe::DEFAULT_MARGIN;
    let mut summary = String::new();
    if folds > 0 {
        let mut rows = Vec::new();
        let cv = cross_validate(&all, &meta, folds, bags, margin, 0, &mut rows)?;
        let _ = write!(
            summary,
            "cross-validated ({folds} folds by path, margin {margin}):"
        );
        describe(&mut summary, &cv);
        if let Some(dir) = predictions {
            write_predictions(dir, "cv.csv", &rows)?;
        }
    }
    let starts = meta.starts_by_mode()?;
    let models = ProbeModels::train_bags(&samples, meta.window, starts.clone(), bags)
        .map_err(|e| e.to_string())?;
    models.save(out).map_err(|e| e.to_string())?;
    if !holdout.is_empty() {
        let _ = write!(summary, "held out (margin {margin}):");
        score_into(&mut summary, &models, &held, margin, predictions)?;
    }
    let _ = write!(
        summary,
        "{} samples, bags: {}; starts",
        samples.len(),
        models.bags()
    );
    for (m, c) in &starts {
        let _ = write!(summary, " {}={c}", m.name());
    }
    let _ = write!(
        summary,
        "; default-mode models: {}",
        models.candidates(Mode::Default).join(" ")
    );
    Ok(summary)
}

/// One flow of the counterfactual rows: its probe's features and each target's score.
type Flow<'a> = ([f64; N_FEATURES], BTreeMap<&'a str, f64>);

/// The counterfactual rows by flow: (condition, seed, mode) -> (features, target -> score).
fn flows_of(rows: &[ProbeRow]) -> BTreeMap<(&str, u64, Mode), Flow<'_>> {
    let mut flows: BTreeMap<(&str, u64, Mode), Flow<'_>> = BTreeMap::new();
    for r in rows {
        let e = flows
            .entry((r.condition.as_str(), r.seed, r.mode))
            .or_insert_with(|| (r.features, BTreeMap::new()));
        e.1.insert(r.target.as_str(), r.score);
    }
    flows
}

/// What the probe's models made of counterfactual rows they were not fitted on, per mode.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct CvMode {
    /// Flows (condition, seed) with a run that stayed on the start.
    pub flows: usize,
    /// Mean gain over staying of the best move or none (what a perfect choice earns).
    pub oracle: f64,
    /// Mean gain over staying of the move the held-out models choose (0 when they stay).
    pub gain: f64,
    /// Flows the models moved.
    pub moves: usize,
    /// Moves that lost against staying.
    pub harmful: usize,
}

/// One target of one held-out flow: what the models predicted a move there would gain and
/// what it gained (a row of `--predictions`' `cv.csv` and `holdout.csv`).
#[derive(Debug, Clone, PartialEq, Serialize)]
pub struct Prediction {
    /// Condition id.
    pub condition: String,
    /// Seed.
    pub seed: u64,
    /// Mode of the flow.
    pub mode: &'static str,
    /// The candidate moved to (the start: the flow stays, predicted and gained 0).
    pub target: String,
    /// The models' predicted gain over staying.
    pub predicted: f64,
    /// The run's score minus the stay run's.
    pub gain: f64,
}

/// Scores `models` on `flows` (those `keep` accepts): each flow moves to the candidate with
/// the largest predicted gain if it exceeds `margin`, and earns what that move's run earned
/// over staying; every target's prediction goes to `predictions`. Flows without a stay run
/// are skipped.
fn score_flows(
    models: &ProbeModels,
    flows: &BTreeMap<(&str, u64, Mode), Flow<'_>>,
    keep: impl Fn(&str) -> bool,
    margin: f64,
    out: &mut BTreeMap<Mode, CvMode>,
    predictions: &mut Vec<Prediction>,
) {
    let (mut scores, mut names) = (Vec::new(), Vec::new());
    for ((cond, seed, mode), (features, by_target)) in flows {
        if !keep(cond) {
            continue;
        }
        let Some(start) = models.start_for(*mode) else {
            continue;
        };
        let Some(stay) = by_target.get(start) else {
            continue;
        };
        names.clear();
        names.extend(by_target.keys().copied());
        models.predict(*mode, &names, features, &mut scores);
        predictions.extend(names.iter().zip(&scores).map(|(n, p)| Prediction {
            condition: (*cond).to_string(),
            seed: *seed,
            mode: mode.name(),
            target: (*n).to_string(),
            predicted: *p,
            gain: by_target[n] - stay,
        }));
        let best = names
            .iter()
            .zip(&scores)
            .filter(|(n, _)| **n != start)
            .max_by(|a, b| a.1.total_cmp(b.1));
        let m = out.entry(*mode).or_default();
        m.flows += 1;
        m.oracle += by_target.values().map(|s| s - stay).fold(0.0, f64::max);
        if let Some((n, p)) = best
            && *p > margin
        {
            let g = by_target[n] - stay;
            m.gain += g;
            m.moves += 1;
            m.harmful += usize::from(g < 0.0);
        }
    }
}

/// Turns the sums of [`score_flows`] into means per flow.
fn per_flow(mut out: BTreeMap<Mode, CvMode>) -> BTreeMap<Mode, CvMode> {
    for m in out.values_mut() {
        let n = m.flows.max(1) as f64;
        m.oracle /= n;
        m.gain /= n;
    }
    out
}

/// `folds`-fold cross-validation by path: each condition's flows are held out together, the
/// models (`bags` boosters each) are fitted on the other folds' rows, and each held-out flow
/// moves to the candidate with the largest predicted gain if it exceeds `margin`; what that
/// move earned (its row's score minus the stay run's) is the flow's gain. Folds are drawn by a
/// shuffle of the sorted conditions seeded with `seed`. Errors when a fold's training rows fit
/// no model.
/// Every held-out flow's predictions are added to `predictions`.
pub fn cross_validate(
    rows: &[ProbeRow],
    meta: &ProbeMeta,
    folds: usize,
    bags: usize,
    margin: f64,
    seed: u64,
    predictions: &mut Vec<Prediction>,
) -> Result<BTreeMap<Mode, CvMode>, String> {
    let starts = meta.starts_by_mode()?;
    let mut paths: Vec<&str> = rows.iter().map(|r| r.condition.as_str()).collect();
    paths.sort_unstable();
    paths.dedup();
    if folds < 2 || paths.len() < folds {
        return Err(format!(
            "cross-validation needs at least 2 folds and a path per fold ({} paths, {folds} folds)",
            paths.len()
        ));
    }
    let mut rng = ccp_algorithms::api::SplitMix64::new(seed);
    for i in (1..paths.len()).rev() {
        let j = (rng.next_u64() % (i as u64 + 1)) as usize;
        paths.swap(i, j);
    }
    let fold: HashMap<&str, usize> = paths
        .iter()
        .enumerate()
        .map(|(i, p)| (*p, i % folds))
        .collect();
    let flows = flows_of(rows);
    let mut out: BTreeMap<Mode, CvMode> = BTreeMap::new();
    let samples = gains(rows);
    for f in 0..folds {
        let train: Vec<ProbeSample> = samples
            .iter()
            .filter(|s| fold[s.path.as_str()] != f)
            .cloned()
            .collect();
        let models = ProbeModels::train_bags(&train, meta.window, starts.clone(), bags)
            .map_err(|e| format!("fold {f}: {e}"))?;
        score_flows(
            &models,
            &flows,
            |c| fold[c] == f,
            margin,
            &mut out,
            predictions,
        );
    }
    Ok(per_flow(out))
}

/// Scores `models` on counterfactual rows they were not fitted on (another scenario's
/// `gen-data --kind probe`), as [`cross_validate`] scores a fold, with every flow's
/// predictions added to `predictions`.
pub fn hold_out(
    models: &ProbeModels,
    rows: &[ProbeRow],
    margin: f64,
    predictions: &mut Vec<Prediction>,
) -> BTreeMap<Mode, CvMode> {
    let mut out = BTreeMap::new();
    score_flows(
        models,
        &flows_of(rows),
        |_| true,
        margin,
        &mut out,
        predictions,
    );
    per_flow(out)
}

/// `score-probe MODELS DATA... [--predictions DIR]`: scores a saved model set on
/// counterfactual rows ([`hold_out`], the deployed margin); the rows' window and starts must be
/// the models'. Returns a summary.
pub fn score(
    models: &Path,
    data: &[PathBuf],
    predictions: Option<&Path>,
) -> Result<String, String> {
    let set = ProbeModels::load(models).map_err(|e| format!("{}: {e}", models.display()))?;
    let against = format!("the models' ({})", models.display());
    let mut meta = Some(ProbeMeta {
        window: set.window,
        starts: names(&set.starts),
    });
    let mut rows = Vec::new();
    for d in data {
        rows.extend(read_dir(d, &mut meta, &against)?);
    }
    let margin = ccp_selector::probe::DEFAULT_MARGIN;
    let mut summary = format!("{} scored (margin {margin}):", models.display());
    score_into(&mut summary, &set, &rows, margin, predictions)?;
    summary.pop();
    Ok(summary)
}

/// [`hold_out`] of `models` on `rows`, described into `summary`; the predictions go to
/// `holdout.csv` in `predictions` when given.
fn score_into(
    summary: &mut String,
    models: &ProbeModels,
    rows: &[ProbeRow],
    margin: f64,
    predictions: Option<&Path>,
) -> Result<(), String> {
    let mut preds = Vec::new();
    let scores = hold_out(models, rows, margin, &mut preds);
    if let Some(dir) = predictions {
        write_predictions(dir, "holdout.csv", &preds)?;
    }
    describe(summary, &scores);
    Ok(())
}

/// Appends one line per mode of `scores` to `summary`.
fn describe(summary: &mut String, scores: &BTreeMap<Mode, CvMode>) {
    for (mode, m) in scores {
        let _ = write!(
            summary,
            " {}: {} flows, gain {:+.4} of {:.4} per flow, {} moves ({} lose);",
            mode.name(),
            m.flows,
            m.gain,
            m.oracle,
            m.moves,
            m.harmful
        );
    }
    summary.push('\n');
}

/// The rows of `gen-data --kind probe`'s directory `d`, whose window and starts must be
/// `meta`'s (said to be `against`'s when they are not); `meta` becomes the directory's when
/// it was `None`.
pub(crate) fn read_dir(
    d: &Path,
    meta: &mut Option<ProbeMeta>,
    against: &str,
) -> Result<Vec<ProbeRow>, String> {
    let m = read_meta(d)?;
    if let Some(known) = meta.as_ref()
        && *known != m
    {
        return Err(format!(
            "{}: window or starts differ from {against}",
            d.display()
        ));
    }
    *meta = Some(m);
    read_rows(&d.join(DATA_FILE))
}

/// Writes prediction rows to `dir/name` as CSV (creating `dir`).
fn write_predictions(dir: &Path, name: &str, rows: &[Prediction]) -> Result<(), String> {
    std::fs::create_dir_all(dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    crate::results::write_csv(&dir.join(name), rows).map_err(|e| e.to_string())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn row(cond: &str, mode: Mode, target: &str, score: f64) -> ProbeRow {
        ProbeRow {
            condition: cond.into(),
            seed: 1,
            mode,
            start: "bbr".into(),
            target: target.into(),
            score,
            features: [1.5; N_FEATURES],
        }
    }

    #[test]
    fn rows_survive_the_file_and_become_gains_over_staying() {
        let rows = vec![
            row("a", Mode::Default, "bbr", -1.0),
            row("a", Mode::Default, "copa", -0.7),
            row("a", Mode::Delay, "bbr", -5.0),
            row("a", Mode::Delay, "vegas", -5.5),
            // No stay run for b: dropped.
            row("b", Mode::Default, "copa", -0.1),
        ];
        let dir = std::env::temp_dir().join(format!("ccp-probe-rows-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join(DATA_FILE);
        write_rows(&path, &rows).unwrap();
        assert_eq!(read_rows(&path).unwrap(), rows);
        let g = gains(&rows);
        assert_eq!(g.len(), 4);
        let copa = g.iter().find(|s| s.target == "copa").unwrap();
        assert!((copa.gain - 0.3).abs() < 1e-12);
        let vegas = g.iter().find(|s| s.target == "vegas").unwrap();
        assert!((vegas.gain + 0.5).abs() < 1e-12);
        assert!(
            g.iter()
                .filter(|s| s.target == "bbr")
                .all(|s| s.gain == 0.0)
        );
        // Malformed files are refused with the line.
        std::fs::write(&path, format!("{}\na,1,default,bbr,bbr,x", header())).unwrap();
        let e = read_rows(&path).unwrap_err();
        assert!(e.contains(":2:"), "{e}");
        std::fs::write(&path, "condition,seed\n").unwrap();
        assert!(
            read_rows(&path)
                .unwrap_err()
                .contains("not a probe data file")
        );
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_start_is_the_best_mean_of_the_complete_runs() {
        let c = ["bbr".to_string(), "copa".to_string()];
        let mut l = HashMap::new();
        l.insert(("a".into(), 1, "bbr".into()), [-1.0, -6.0, 1.0]);
        l.insert(("a".into(), 1, "copa".into()), [-0.5, -7.0, 0.5]);
        // Incomplete: ignored.
        l.insert(("b".into(), 1, "bbr".into()), [-9.0, -9.0, -9.0]);
        let s = best_starts(&l, &c).unwrap();
        assert_eq!(s[&Mode::Default], "copa");
        assert_eq!(s[&Mode::Delay], "bbr");
        assert_eq!(s[&Mode::Throughput], "bbr");
        assert!(best_starts(&HashMap::new(), &c).is_err());
    }

    #[test]
    fn cross_validation_holds_out_whole_paths_and_scores_the_moves_made() {
        // Twenty paths: on half, Copa gains 0.5 (feature 0 high); elsewhere it loses 0.4.
        let mut rows = Vec::new();
        for p in 0..20 {
            let high = p % 2 == 0;
            for seed in 1..=8 {
                for (target, score) in [("bbr", -1.0), ("copa", if high { -0.5 } else { -1.4 })] {
                    let mut r = row(&format!("p{p}"), Mode::Default, target, score);
                    r.seed = seed;
                    r.features[0] = if high { 100.0 } else { 10.0 };
                    rows.push(r);
                }
            }
        }
        let meta = ProbeMeta {
            window: ProbeWindow::default(),
            starts: BTreeMap::from([("default".to_string(), "bbr".to_string())]),
        };
        let cv = cross_validate(&rows, &meta, 5, 1, 0.1, 7, &mut Vec::new()).unwrap();
        let m = &cv[&Mode::Default];
        assert_eq!(m.flows, 160);
        assert!((m.oracle - 0.25).abs() < 1e-9, "{m:?}");
        // The held-out paths are told apart by feature 0: every move is right.
        assert_eq!((m.moves, m.harmful), (80, 0), "{m:?}");
        assert!((m.gain - 0.25).abs() < 1e-9, "{m:?}");
        // Models fitted on every path and scored on them as a held-out set move the same
        // flows, and every flow's targets become prediction rows (the stay predicted 0).
        let starts = meta.starts_by_mode().unwrap();
        let models = ProbeModels::train(&gains(&rows), meta.window, starts).unwrap();
        let mut preds = Vec::new();
        let h = &hold_out(&models, &rows, 0.1, &mut preds)[&Mode::Default];
        assert_eq!((h.flows, h.moves, h.harmful), (160, 80, 0), "{h:?}");
        assert!((h.gain - 0.25).abs() < 1e-9 && (h.oracle - 0.25).abs() < 1e-9);
        assert_eq!(preds.len(), 320);
        assert!(
            preds
                .iter()
                .filter(|p| p.target == "bbr")
                .all(|p| p.predicted == 0.0 && p.gain == 0.0)
        );
        assert!(
            preds
                .iter()
                .filter(|p| p.target == "copa")
                .all(|p| (p.predicted > 0.1) == (p.gain > 0.0))
        );
        // Too few paths for the folds, or one fold: an error.
        assert!(cross_validate(&rows[..16], &meta, 5, 1, 0.1, 7, &mut Vec::new()).is_err());
        assert!(cross_validate(&rows, &meta, 1, 1, 0.1, 7, &mut Vec::new()).is_err());
    }
}
