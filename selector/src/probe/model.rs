//! The probe policy's models: per preference mode, the candidate a flow starts on and one
//! gradient-boosted regressor per other candidate predicting the **gain** in the flow's score
//! from switching to it at the probe's end over staying on the start candidate.
//!
//! The labels are counterfactual and include the swap: `ccp-eval gen-data --kind probe` runs
//! every training flow once per candidate, each run identical up to the probe's end (same
//! start, same path, same seed) and then switched to that candidate, so a label is what the
//! switch really earned on that path, transition included.
//!
//! A set may bag its boosters (`ccp-eval train probe --bags N`): each (mode, candidate) then
//! has `N` boosters, each fitted on a bootstrap resample of the training *paths* (every flow of
//! a drawn path, as often as the path was drawn), and the predicted gain is their mean. The
//! shipped set has one booster per (mode, candidate), as Antelope (`PAPERS.md` §2) fits: bagging
//! measured no better on the bench ([`DEFAULT_BAGS`]).
//!
//! On disk: `manifest.json` (format, feature schema, probe window, starts, per bag and mode
//! which file holds which candidate's booster, sample counts) and one forust JSON booster per
//! (bag, mode, candidate), bag `k` in the sub-folder `bag<k>`. Loading checks format, schema
//! and every tree, so a model trained on other features or a damaged booster is refused with
//! the reason. A set of format version 1 (one booster per mode and candidate, in the folder
//! itself) loads as one bag.

use std::collections::BTreeMap;
use std::path::Path;

use ccp_algorithms::api::SplitMix64;
use forust_ml::objective::ObjectiveType;
use forust_ml::{GradientBooster, Matrix};
use serde::{Deserialize, Serialize};

use super::features::{FEATURE_NAMES, FEATURE_SCHEMA_VERSION, N_FEATURES, ProbeWindow};
use crate::antelope::model::ModelError;
use crate::antelope::reward::Mode;
use crate::boosters::{Boosters, Table, create_dir, read_manifest, training_error, write_manifest};

/// Format name in `manifest.json`.
pub const FORMAT: &str = "probe-models";
/// Format version of `manifest.json` (2: bags; version 1 sets still load, as one bag).
pub const FORMAT_VERSION: u32 = 2;
/// Trees per booster (30 trees of depth 3 with 20 samples a leaf beat 60 of depth 4 in a
/// five-fold cross-validation over `selection-train`'s paths, and are a quarter the size).
pub const TREES: usize = 30;
/// Tree depth (small: a few hundred paths per candidate).
pub const DEPTH: usize = 3;
/// Fewest samples in a leaf (squared loss: each sample's hessian is 1).
pub const MIN_LEAF: f32 = 20.0;
/// Learning rate.
pub const LEARNING_RATE: f32 = 0.1;
/// Fewest samples a (mode, candidate) booster is fit on.
pub const MIN_SAMPLES: usize = 10;
/// Boosters per (mode, candidate) that `train probe` fits unless told otherwise: one, on every
/// sample. Eight bags (the mean of eight boosters on bootstrap resamples of the paths) did
/// better in a five-fold cross-validation over `selection-train`'s default-mode paths (+0.012
/// per flow against +0.008 at a 0.05 margin, +0.013 against +0.008 at 0.1), but not on the
/// bench: 47-48 % of the validation set's headroom against 43 % for one booster on the same
/// data and 49 % for the shipped one, and 26-28 % of the first test set's against 30 % and
/// 24 % (`docs/selector/measured-not-deployed-models.md`, "Bagged models").
pub const DEFAULT_BAGS: usize = 1;

/// One training example: a flow of `mode` started on `start`, probed, and switched to
/// `target` (the start itself: stayed); `gain` is its score minus the score of the same flow
/// that stayed on `start`.
#[derive(Debug, Clone, PartialEq)]
pub struct ProbeSample {
    /// Preference mode (and so objective) of the label.
    pub mode: Mode,
    /// The candidate switched to at the probe's end.
    pub target: String,
    /// The probe's features.
    pub features: [f64; N_FEATURES],
    /// Score with `target` minus score staying on the start candidate (ln units).
    pub gain: f64,
    /// The path (condition) the flow ran on: bags resample whole paths.
    pub path: String,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    format_version: u32,
    feature_schema: u32,
    features: Vec<String>,
    window: ProbeWindow,
    /// mode name -> start candidate.
    starts: BTreeMap<String, String>,
    trees: usize,
    depth: usize,
    /// Format version 1: the one bag's files and sample counts.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    models: Option<Table<String>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    samples: Option<Table<usize>>,
    /// Format version 2: per bag, its files and sample counts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    bags: Vec<BagTables>,
}

/// One bag of the manifest.
#[derive(Debug, Serialize, Deserialize)]
struct BagTables {
    /// mode name -> candidate -> booster file (relative to the set's directory).
    models: Table<String>,
    /// mode name -> candidate -> samples fitted (a drawn path's flows count once per draw).
    samples: Table<usize>,
}

/// The probe's models for every mode.
#[derive(Default)]
pub struct ProbeModels {
    /// When a flow's probe ends (the window the training data was recorded with).
    pub window: ProbeWindow,
    /// Per mode: the candidate a flow starts (and is probed) on.
    pub starts: BTreeMap<Mode, String>,
    /// The bags (at least one when loaded or trained).
    bags: Vec<Boosters>,
}

impl std::fmt::Debug for ProbeModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeModels")
            .field("window", &self.window)
            .field("starts", &self.starts)
            .field("samples", &self.bags)
            .finish_non_exhaustive()
    }
}

/// An unfitted booster over the probe's features with `objective` and its size: `trees` of
/// `depth`, `min_leaf` hessian in a leaf, `learning_rate` (the gain regressors' and the kind
/// model's).
pub(super) fn booster(
    objective: ObjectiveType,
    trees: usize,
    depth: usize,
    min_leaf: f32,
    learning_rate: f32,
) -> GradientBooster {
    GradientBooster::default()
        .set_objective_type(objective)
        // Features are never negative; a finite sentinel keeps the JSON valid.
        .set_missing(-1.0)
        .set_iterations(trees)
        .set_max_depth(depth)
        .set_min_leaf_weight(min_leaf)
        .set_learning_rate(learning_rate)
        .set_parallel(false)
        .set_seed(0)
}

/// The features of `rows` in forust's column-major layout (feature by feature), for a
/// `Matrix` of `rows.len()` rows and [`N_FEATURES`] columns.
pub(super) fn column_major(rows: &[&[f64; N_FEATURES]]) -> Vec<f64> {
    let n = rows.len();
    let mut data = vec![0.0; n * N_FEATURES];
    for (i, x) in rows.iter().enumerate() {
        for (j, v) in x.iter().enumerate() {
            data[j * n + i] = *v;
        }
    }
    data
}

impl ProbeModels {
    /// Fits [`DEFAULT_BAGS`] bags of one booster per (mode, target) with at least
    /// [`MIN_SAMPLES`] samples ([`ProbeModels::train_bags`]).
    pub fn train(
        samples: &[ProbeSample],
        window: ProbeWindow,
        starts: BTreeMap<Mode, String>,
    ) -> Result<Self, ModelError> {
        Self::train_bags(samples, window, starts, DEFAULT_BAGS)
    }

    /// Fits `bags` bags: with one, every sample once; with more, bag `k` draws as many paths
    /// as there are, with replacement (seeded by `k`, so training is reproducible), and takes
    /// every flow of a drawn path once per draw. A mode's start candidate has no model (its
    /// gain is 0 by definition); samples of a mode without a start are ignored. Fails when no
    /// bag has a booster.
    pub fn train_bags(
        samples: &[ProbeSample],
        window: ProbeWindow,
        starts: BTreeMap<Mode, String>,
        bags: usize,
    ) -> Result<Self, ModelError> {
        let usable: Vec<&ProbeSample> = samples
            .iter()
            .filter(|s| s.gain.is_finite())
            .filter(|s| starts.get(&s.mode).is_some_and(|st| *st != s.target))
            .collect();
        let mut paths: Vec<&str> = usable.iter().map(|s| s.path.as_str()).collect();
        paths.sort_unstable();
        paths.dedup();
        let mut set = Self {
            window,
            starts,
            ..Self::default()
        };
        for k in 0..bags.max(1) {
            let draws = if bags <= 1 {
                paths.iter().map(|p| (*p, 1)).collect()
            } else {
                draw_paths(&paths, k as u64)
            };
            let mut groups: BTreeMap<(Mode, &str), Vec<&ProbeSample>> = BTreeMap::new();
            for s in &usable {
                for _ in 0..draws.get(s.path.as_str()).copied().unwrap_or(0) {
                    groups.entry((s.mode, &s.target)).or_default().push(s);
                }
            }
            set.bags.push(fit_bag(&groups)?);
        }
        if set.bags.iter().all(Boosters::is_empty) {
            return Err(ModelError::NoData(MIN_SAMPLES));
        }
        Ok(set)
    }

    /// Where a flow of `mode` starts (the default mode's start for a mode without its own).
    pub fn start_for(&self, mode: Mode) -> Option<&str> {
        self.starts
            .get(&mode)
            .or_else(|| self.starts.get(&Mode::Default))
            .map(String::as_str)
    }

    /// Bags in the set.
    pub fn bags(&self) -> usize {
        self.bags.len()
    }

    /// Candidates with a model for `mode` (in the first bag).
    pub fn candidates(&self, mode: Mode) -> Vec<&str> {
        self.bags
            .first()
            .map(|b| b.candidates(mode))
            .unwrap_or_default()
    }

    /// Samples the (mode, candidate) booster of the first bag was fit on (0: none).
    pub fn samples(&self, mode: Mode, candidate: &str) -> usize {
        self.bags.first().map_or(0, |b| b.samples(mode, candidate))
    }

    /// Predicted gain of switching to each of `names` (in that order) over staying on the
    /// start of `mode`: the mean over the bags of [`ProbeModels::predict_in_bag`]. The start
    /// candidate scores 0; a candidate without a model in some bag `f64::NEG_INFINITY` (never
    /// chosen).
    pub fn predict(
        &self,
        mode: Mode,
        names: &[&str],
        features: &[f64; N_FEATURES],
        out: &mut Vec<f64>,
    ) {
        out.clear();
        if self.bags.is_empty() {
            let start = self.start_for(mode);
            out.extend(names.iter().map(|n| {
                if Some(*n) == start {
                    0.0
                } else {
                    f64::NEG_INFINITY
                }
            }));
            return;
        }
        out.resize(names.len(), 0.0);
        let mut one = Vec::with_capacity(names.len());
        for k in 0..self.bags.len() {
            self.predict_in_bag(k, mode, names, features, &mut one);
            for (o, v) in out.iter_mut().zip(&one) {
                *o += v;
            }
        }
        let n = self.bags.len() as f64;
        for o in out.iter_mut() {
            *o /= n;
        }
    }

    /// Bag `k`'s predicted gain of switching to each of `names` (in that order) over staying
    /// on the start of `mode` (a mode without models in the bag uses its default-mode models):
    /// the start candidate scores 0, a candidate without a model `f64::NEG_INFINITY`; every
    /// candidate `f64::NEG_INFINITY` when there is no bag `k`, and every one but the start
    /// when a feature is not finite.
    pub fn predict_in_bag(
        &self,
        k: usize,
        mode: Mode,
        names: &[&str],
        features: &[f64; N_FEATURES],
        out: &mut Vec<f64>,
    ) {
        out.clear();
        let Some(bag) = self.bags.get(k) else {
            out.resize(names.len(), f64::NEG_INFINITY);
            return;
        };
        let (mode, models) = match bag.of(mode) {
            Some(ms) => (mode, Some(ms)),
            None => (Mode::Default, bag.of(Mode::Default)),
        };
        let start = self.start_for(mode);
        // forust panics on a NaN that is not its missing value: features that are not finite
        // (no probe gives them) predict nothing, and only the start scores.
        let models = models.filter(|_| features.iter().all(|v| v.is_finite()));
        let m = Matrix::new(features, 1, N_FEATURES);
        for name in names {
            let score = if Some(*name) == start {
                0.0
            } else {
                models
                    .and_then(|ms| ms.get(*name))
                    .and_then(|b| b.predict(&m, false).first().copied())
                    .filter(|v| v.is_finite())
                    .unwrap_or(f64::NEG_INFINITY)
            };
            out.push(score);
        }
    }

    /// Writes the set to `dir` (created if needed), bag `k` in `dir/bag<k>`.
    pub fn save(&self, dir: &Path) -> Result<(), ModelError> {
        create_dir(dir)?;
        let mut bags = Vec::with_capacity(self.bags.len());
        for (k, bag) in self.bags.iter().enumerate() {
            let (models, samples) = bag.write_under(dir, &format!("bag{k}"))?;
            bags.push(BagTables { models, samples });
        }
        let manifest = Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            feature_schema: FEATURE_SCHEMA_VERSION,
            features: FEATURE_NAMES.iter().map(|s| (*s).to_string()).collect(),
            window: self.window,
            starts: self
                .starts
                .iter()
                .map(|(m, c)| (m.name().to_string(), c.clone()))
                .collect(),
            trees: TREES,
            depth: DEPTH,
            models: None,
            samples: None,
            bags,
        };
        write_manifest(&dir.join("manifest.json"), &manifest)
    }

    /// Reads a set written by [`ProbeModels::save`] (or a version 1 set, as one bag), checking
    /// format, feature schema and trees.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let path = dir.join("manifest.json");
        let manifest: Manifest = read_manifest(&path)?;
        check_header(
            &path,
            (&manifest.format, FORMAT),
            (manifest.format_version, FORMAT_VERSION),
            manifest.feature_schema,
            &manifest.features,
        )?;
        let mode_of = |name: &str, what: &str| {
            Mode::parse(name).ok_or_else(|| ModelError::Manifest {
                path: path.clone(),
                msg: format!("{what}: unknown mode `{name}`"),
            })
        };
        let mut set = Self {
            window: manifest.window,
            ..Self::default()
        };
        for (mode, cca) in &manifest.starts {
            set.starts.insert(mode_of(mode, "starts")?, cca.clone());
        }
        if !set.starts.contains_key(&Mode::Default) {
            return Err(ModelError::Manifest {
                path,
                msg: "no start candidate for the default mode".into(),
            });
        }
        let tables: Vec<(Table<String>, Table<usize>)> = if manifest.format_version == 1 {
            vec![(
                manifest.models.unwrap_or_default(),
                manifest.samples.unwrap_or_default(),
            )]
        } else {
            manifest
                .bags
                .into_iter()
                .map(|b| (b.models, b.samples))
                .collect()
        };
        if tables.is_empty() {
            return Err(ModelError::Manifest {
                path,
                msg: "no bags listed".into(),
            });
        }
        for (models, samples) in &tables {
            set.bags
                .push(Boosters::read(dir, &path, models, samples, N_FEATURES)?);
        }
        Ok(set)
    }
}

/// Checks a probe model manifest's header (at `path`): its format is `format.1`, its format
/// version between 1 and `version.1`, and its feature schema and names this build's.
pub(super) fn check_header(
    path: &Path,
    format: (&str, &str),
    version: (u32, u32),
    feature_schema: u32,
    features: &[String],
) -> Result<(), ModelError> {
    let path = path.to_path_buf();
    if format.0 != format.1 {
        return Err(ModelError::Manifest {
            path,
            msg: format!("format is `{}`, not `{}`", format.0, format.1),
        });
    }
    if !(1..=version.1).contains(&version.0) {
        return Err(ModelError::Version {
            path,
            what: "format_version",
            found: version.0,
            expected: version.1,
        });
    }
    if feature_schema != FEATURE_SCHEMA_VERSION {
        return Err(ModelError::Version {
            path,
            what: "feature_schema",
            found: feature_schema,
            expected: FEATURE_SCHEMA_VERSION,
        });
    }
    let expected: Vec<String> = FEATURE_NAMES.iter().map(|s| (*s).to_string()).collect();
    if features != expected.as_slice() {
        return Err(ModelError::Features {
            path,
            found: features.to_vec(),
            expected,
        });
    }
    Ok(())
}

/// How often each of `paths` is drawn in bag `k`'s bootstrap resample (as many draws as
/// paths, with replacement).
fn draw_paths<'a>(paths: &[&'a str], k: u64) -> BTreeMap<&'a str, usize> {
    let mut rng = SplitMix64::new(0x9e37_79b9_7f4a_7c15 ^ k);
    let mut out = BTreeMap::new();
    if paths.is_empty() {
        return out;
    }
    for _ in 0..paths.len() {
        let i = (rng.next_u64() % paths.len() as u64) as usize;
        *out.entry(paths[i]).or_insert(0) += 1;
    }
    out
}

/// One bag: a booster per (mode, target) group with at least [`MIN_SAMPLES`] samples.
fn fit_bag(groups: &BTreeMap<(Mode, &str), Vec<&ProbeSample>>) -> Result<Boosters, ModelError> {
    let mut bag = Boosters::default();
    for ((mode, target), rows) in groups {
        if rows.len() < MIN_SAMPLES {
            continue;
        }
        let n = rows.len();
        let data = column_major(&rows.iter().map(|s| &s.features).collect::<Vec<_>>());
        let y: Vec<f64> = rows.iter().map(|s| s.gain).collect();
        let mut b = booster(
            ObjectiveType::SquaredLoss,
            TREES,
            DEPTH,
            MIN_LEAF,
            LEARNING_RATE,
        );
        b.fit_unweighted(&Matrix::new(&data, n, N_FEATURES), &y, None)
            .map_err(|e| training_error(&format!("{}/{target}", mode.name()), e))?;
        bag.insert(*mode, target, b, n);
    }
    Ok(bag)
}
