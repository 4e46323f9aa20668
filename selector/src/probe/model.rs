//! The probe policy's models: per preference mode, the candidate a flow starts on and one
//! gradient-boosted regressor per other candidate predicting the **gain** in the flow's score
//! from switching to it at the probe's end over staying on the start candidate.
//!
//! The labels are counterfactual and include the swap: `ccp-eval gen-data --kind probe` runs
//! every training flow once per candidate, each run identical up to the probe's end (same
//! start, same path, same seed) and then switched to that candidate, so a label is what the
//! switch really earned on that path, transition included.
//!
//! On disk: `manifest.json` (format, feature schema, probe window, starts, per mode which file
//! holds which candidate's booster, sample counts) and one forust JSON booster per (mode,
//! candidate). Loading checks format, schema and every tree, so a model trained on other
//! features or a damaged booster is refused with the reason.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use forust_ml::objective::ObjectiveType;
use forust_ml::{GradientBooster, Matrix};
use serde::{Deserialize, Serialize};

use super::features::{FEATURE_NAMES, FEATURE_SCHEMA_VERSION, N_FEATURES, ProbeWindow};
use crate::antelope::model::ModelError;
use crate::antelope::reward::Mode;
use crate::boosters::{Boosters, Table, read_manifest, write_manifest};

/// Format name in `manifest.json`.
pub const FORMAT: &str = "probe-models";
/// Format version of `manifest.json`.
pub const FORMAT_VERSION: u32 = 1;
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
    /// mode name -> candidate -> booster file (relative to the directory).
    models: Table<String>,
    /// mode name -> candidate -> samples fitted.
    samples: Table<usize>,
}

/// The probe's models for every mode.
#[derive(Default)]
pub struct ProbeModels {
    /// When a flow's probe ends (the window the training data was recorded with).
    pub window: ProbeWindow,
    /// Per mode: the candidate a flow starts (and is probed) on.
    pub starts: BTreeMap<Mode, String>,
    boosters: Boosters,
}

impl std::fmt::Debug for ProbeModels {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProbeModels")
            .field("window", &self.window)
            .field("starts", &self.starts)
            .field("samples", &self.boosters)
            .finish_non_exhaustive()
    }
}

fn booster() -> GradientBooster {
    GradientBooster::default()
        .set_objective_type(ObjectiveType::SquaredLoss)
        // Features are never negative; a finite sentinel keeps the JSON valid.
        .set_missing(-1.0)
        .set_iterations(TREES)
        .set_max_depth(DEPTH)
        .set_min_leaf_weight(MIN_LEAF)
        .set_learning_rate(LEARNING_RATE)
        .set_parallel(false)
        .set_seed(0)
}

impl ProbeModels {
    /// Fits one booster per (mode, target) with at least [`MIN_SAMPLES`] samples; a mode's
    /// start candidate has no model (its gain is 0 by definition). `starts` names each mode's
    /// start; samples of a mode without a start are ignored.
    pub fn train(
        samples: &[ProbeSample],
        window: ProbeWindow,
        starts: BTreeMap<Mode, String>,
    ) -> Result<Self, ModelError> {
        let mut groups: BTreeMap<(Mode, &str), Vec<&ProbeSample>> = BTreeMap::new();
        for s in samples.iter().filter(|s| s.gain.is_finite()) {
            if starts.get(&s.mode).is_some_and(|st| *st != s.target) {
                groups.entry((s.mode, &s.target)).or_default().push(s);
            }
        }
        let mut set = Self {
            window,
            starts,
            ..Self::default()
        };
        for ((mode, target), rows) in groups {
            if rows.len() < MIN_SAMPLES {
                continue;
            }
            let n = rows.len();
            let mut data = vec![0.0; n * N_FEATURES];
            for (i, s) in rows.iter().enumerate() {
                for (j, v) in s.features.iter().enumerate() {
                    data[j * n + i] = *v;
                }
            }
            let y: Vec<f64> = rows.iter().map(|s| s.gain).collect();
            let mut b = booster();
            b.fit_unweighted(&Matrix::new(&data, n, N_FEATURES), &y, None)
                .map_err(|e| ModelError::Booster {
                    path: PathBuf::from(format!("<training {}/{target}>", mode.name())),
                    msg: e.to_string(),
                })?;
            set.boosters.insert(mode, target, b, n);
        }
        if set.boosters.is_empty() {
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

    /// Candidates with a model for `mode`.
    pub fn candidates(&self, mode: Mode) -> Vec<&str> {
        self.boosters.candidates(mode)
    }

    /// Samples the (mode, candidate) booster was fit on (0: none).
    pub fn samples(&self, mode: Mode, candidate: &str) -> usize {
        self.boosters.samples(mode, candidate)
    }

    /// Predicted gain of switching to each of `names` (in that order) over staying on the
    /// start of `mode` (a mode without models uses the default mode's). The start candidate
    /// scores 0; a candidate without a model `f64::NEG_INFINITY` (never chosen).
    pub fn predict(
        &self,
        mode: Mode,
        names: &[&str],
        features: &[f64; N_FEATURES],
        out: &mut Vec<f64>,
    ) {
        out.clear();
        let (mode, models) = match self.boosters.of(mode) {
            Some(m) => (mode, Some(m)),
            None => (Mode::Default, self.boosters.of(Mode::Default)),
        };
        let start = self.start_for(mode);
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

    /// Writes the set to `dir` (created if needed).
    pub fn save(&self, dir: &Path) -> Result<(), ModelError> {
        std::fs::create_dir_all(dir).map_err(|source| ModelError::Io {
            path: dir.to_path_buf(),
            source,
        })?;
        let (models, samples) = self.boosters.write(dir)?;
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
            models,
            samples,
        };
        write_manifest(&dir.join("manifest.json"), &manifest)
    }

    /// Reads a set written by [`ProbeModels::save`], checking format, feature schema and trees.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let path = dir.join("manifest.json");
        let manifest: Manifest = read_manifest(&path)?;
        if manifest.format != FORMAT {
            return Err(ModelError::Manifest {
                path,
                msg: format!("format is `{}`, not `{FORMAT}`", manifest.format),
            });
        }
        for (what, found, expected) in [
            ("format_version", manifest.format_version, FORMAT_VERSION),
            (
                "feature_schema",
                manifest.feature_schema,
                FEATURE_SCHEMA_VERSION,
            ),
        ] {
            if found != expected {
                return Err(ModelError::Version {
                    path,
                    what,
                    found,
                    expected,
                });
            }
        }
        let expected: Vec<String> = FEATURE_NAMES.iter().map(|s| (*s).to_string()).collect();
        if manifest.features != expected {
            return Err(ModelError::Features {
                path,
                found: manifest.features,
                expected,
            });
        }
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
        set.boosters = Boosters::read(dir, &path, &manifest.models, &manifest.samples, N_FEATURES)?;
        Ok(set)
    }
}
