//! Antelope's reward models: one gradient-boosted regressor per candidate and preference mode,
//! predicting the next data unit's reward from this unit's features (`PAPERS.md` §2, "Models":
//! XGBoost, depth 6, 40 trees).
//!
//! The regressors are `forust-ml` boosters: pure Rust (no C++ XGBoost to build or load here),
//! fit and JSON save/load in one crate, XGBoost-style second-order trees with the same depth and
//! tree count. (`gbdt` loads XGBoost dumps exactly but would need XGBoost to train; linfa has no
//! tree regressors.)
//!
//! On disk a model set is a directory: `manifest.json` (format version, feature schema version
//! and names, unit size, candidates, per mode which file holds which candidate's booster, sample
//! counts) and one forust JSON file per (mode, candidate). Loading checks the format and the
//! schema, so a model trained on other features is refused with a clear error, never used.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use forust_ml::objective::ObjectiveType;
use forust_ml::{GradientBooster, Matrix};
use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::reward::{Mode, reward};
use super::samples::Sample;
use super::unit::{FEATURE_NAMES, FEATURE_SCHEMA_VERSION};
use crate::boosters::{Boosters, Table, create_dir, read_manifest, training_error, write_manifest};

/// Format version of `manifest.json`.
pub const MODEL_FORMAT_VERSION: u32 = 1;
/// Trees per booster (Antelope: 40).
pub const TREES: usize = 40;
/// Tree depth (Antelope: 6).
pub const DEPTH: usize = 6;
/// Fewest samples a (mode, candidate) booster is fit on; with fewer the candidate has no model.
pub const MIN_SAMPLES: usize = 30;

/// Why a model set cannot be loaded, saved or trained.
#[derive(Debug, Error)]
pub enum ModelError {
    /// A file could not be read or written.
    #[error("{path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The manifest is not valid JSON of the expected shape.
    #[error("{path}: not a valid model manifest: {msg}")]
    Manifest {
        /// The file.
        path: PathBuf,
        /// Why.
        msg: String,
    },
    /// The manifest was written for another format or feature schema.
    #[error("{path}: {what} is {found}, this build reads {expected}")]
    Version {
        /// The file.
        path: PathBuf,
        /// Which version.
        what: &'static str,
        /// In the file.
        found: u32,
        /// What this build reads.
        expected: u32,
    },
    /// The features named in the manifest differ from ours.
    #[error("{path}: features {found:?} differ from {expected:?}")]
    Features {
        /// The file.
        path: PathBuf,
        /// In the file.
        found: Vec<String>,
        /// Ours.
        expected: Vec<String>,
    },
    /// A booster file is not a forust model.
    #[error("{path}: not a forust model: {msg}")]
    Booster {
        /// The file.
        path: PathBuf,
        /// Why.
        msg: String,
    },
    /// A softmax classifier's file is not one, or cannot be evaluated.
    #[error("{path}: not a softmax classifier: {msg}")]
    Classifier {
        /// The file.
        path: PathBuf,
        /// Why.
        msg: String,
    },
    /// Training failed: the data cannot make a model, or a booster's fit failed.
    #[error("training {what}: {msg}")]
    Training {
        /// What was being trained (a mode and candidate, a kind, ...).
        what: String,
        /// Why.
        msg: String,
    },
    /// No candidate had enough samples to fit a model (the least a model is fit on).
    #[error("no candidate has {0} samples to train on")]
    NoData(usize),
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    format_version: u32,
    /// What the models predict: `antelope` (next unit's reward) or `outcome` (the whole
    /// flow's TCP-RL reward on this path).
    #[serde(default = "antelope_objective")]
    objective: String,
    feature_schema: u32,
    features: Vec<String>,
    acks_per_unit: u32,
    /// The candidate with the highest mean label (default mode) in the training set.
    #[serde(default)]
    start_candidate: Option<String>,
    /// Per mode (name): the candidate with the highest mean label of that mode.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    start_by_mode: BTreeMap<String, String>,
    trees: usize,
    depth: usize,
    /// mode name -> candidate -> booster file (relative to the directory).
    models: Table<String>,
    /// mode name -> candidate -> samples fitted.
    samples: Table<usize>,
}

fn antelope_objective() -> String {
    OBJECTIVE_ANTELOPE.into()
}

/// Objective of models predicting the next data unit's Antelope reward.
pub const OBJECTIVE_ANTELOPE: &str = "antelope";
/// Objective of models predicting a candidate's whole-flow TCP-RL reward on the observed path.
pub const OBJECTIVE_OUTCOME: &str = "outcome";

/// Every reward model of one deployment: per mode, per candidate name.
#[derive(Default)]
pub struct ModelSet {
    boosters: Boosters,
    /// Data-unit size the models were trained with.
    pub acks_per_unit: u32,
    /// What the models predict ([`OBJECTIVE_ANTELOPE`] or [`OBJECTIVE_OUTCOME`]).
    pub objective: String,
    /// The candidate with the highest mean label (default mode) in the training set: where a
    /// flow starts when nothing is known about its destination.
    pub start_candidate: Option<String>,
    /// Per mode the models were fitted for: the candidate with the highest mean label of that
    /// mode (a delay-sensitive flow's start need not be a default flow's).
    pub start_by_mode: BTreeMap<Mode, String>,
}

impl std::fmt::Debug for ModelSet {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ModelSet")
            .field("samples", &self.boosters)
            .field("acks_per_unit", &self.acks_per_unit)
            .finish_non_exhaustive()
    }
}

impl ModelSet {
    /// Fits one booster per (mode, candidate) with at least [`MIN_SAMPLES`] samples, for
    /// Antelope's objective.
    pub fn train(samples: &[Sample], acks_per_unit: u32) -> Result<Self, ModelError> {
        Self::train_for(samples, acks_per_unit, OBJECTIVE_ANTELOPE, &Mode::ALL)
    }

    /// Fits one booster per candidate for each of `modes`, labelled with `objective`.
    pub fn train_for(
        samples: &[Sample],
        acks_per_unit: u32,
        objective: &str,
        modes: &[Mode],
    ) -> Result<Self, ModelError> {
        let mut by_cca: BTreeMap<&str, Vec<&Sample>> = BTreeMap::new();
        for s in samples {
            by_cca.entry(s.next_cca.as_str()).or_default().push(s);
        }
        let mut set = Self {
            acks_per_unit,
            objective: objective.to_string(),
            ..Self::default()
        };
        let mut best_mean = f64::NEG_INFINITY;
        let mut best_by_mode: BTreeMap<Mode, f64> = BTreeMap::new();
        for (cca, rows) in by_cca {
            if rows.len() < MIN_SAMPLES {
                continue;
            }
            let mean = rows.iter().map(|s| s.rewards[0]).sum::<f64>() / rows.len() as f64;
            if mean > best_mean {
                best_mean = mean;
                set.start_candidate = Some(cca.to_string());
            }
            for &mode in modes {
                let m =
                    rows.iter().map(|s| s.rewards[mode as usize]).sum::<f64>() / rows.len() as f64;
                let best = best_by_mode.entry(mode).or_insert(f64::NEG_INFINITY);
                if m > *best {
                    *best = m;
                    set.start_by_mode.insert(mode, cca.to_string());
                }
            }
            // Column-major feature matrix.
            let n = rows.len();
            let mut data = vec![0.0; n * FEATURE_NAMES.len()];
            for (i, s) in rows.iter().enumerate() {
                for (j, v) in s.features.iter().enumerate() {
                    data[j * n + i] = *v;
                }
            }
            let matrix = Matrix::new(&data, n, FEATURE_NAMES.len());
            for &mode in modes {
                let y: Vec<f64> = rows.iter().map(|s| s.rewards[mode as usize]).collect();
                let mut b = GradientBooster::default()
                    .set_objective_type(ObjectiveType::SquaredLoss)
                    // Features are never negative; a finite sentinel keeps the JSON valid
                    // (forust's default NaN is written as `null` and cannot be read back).
                    .set_missing(-1.0)
                    .set_iterations(TREES)
                    .set_max_depth(DEPTH)
                    .set_learning_rate(0.3)
                    .set_parallel(false)
                    .set_seed(0);
                b.fit_unweighted(&matrix, &y, None)
                    .map_err(|e| training_error(&format!("{}/{cca}", mode.name()), e))?;
                set.boosters.insert(mode, cca, b, n);
            }
        }
        if set.boosters.is_empty() {
            return Err(ModelError::NoData(MIN_SAMPLES));
        }
        Ok(set)
    }

    /// Candidates with a model for `mode`.
    pub fn candidates(&self, mode: Mode) -> Vec<&str> {
        self.boosters.candidates(mode)
    }

    /// Samples the (mode, candidate) model was fit on (0: no model).
    pub fn samples(&self, mode: Mode, candidate: &str) -> usize {
        self.boosters.samples(mode, candidate)
    }

    /// Where a flow of `mode` starts when nothing is known about its destination: the mode's
    /// own best candidate in the training set, else the default mode's.
    pub fn start_for(&self, mode: Mode) -> Option<&str> {
        self.start_by_mode
            .get(&mode)
            .or(self.start_candidate.as_ref())
            .map(String::as_str)
    }

    /// The booster for (mode, candidate), if any.
    pub fn model(&self, mode: Mode, candidate: &str) -> Option<&GradientBooster> {
        self.boosters.of(mode).and_then(|m| m.get(candidate))
    }

    /// Predicted next-unit reward of each candidate in `names` (in that order) under `mode`
    /// (a set without models for `mode`, e.g. `outcome` models fitted for the default mode
    /// only, predicts with its default-mode models); a candidate with no model scores
    /// `f64::NEG_INFINITY` and never wins, as does every candidate when a feature is not
    /// finite (forust panics on a NaN that is not its missing value).
    pub fn predict(&self, mode: Mode, names: &[&str], features: &[f64; 7], out: &mut Vec<f64>) {
        out.clear();
        let m = Matrix::new(features, 1, FEATURE_NAMES.len());
        let models = self
            .boosters
            .of(mode)
            .or_else(|| self.boosters.of(Mode::Default))
            .filter(|_| features.iter().all(|v| v.is_finite()));
        for name in names {
            let score = models
                .and_then(|ms| ms.get(*name))
                .and_then(|b| b.predict(&m, false).first().copied())
                .filter(|v| v.is_finite())
                .unwrap_or(f64::NEG_INFINITY);
            out.push(score);
        }
    }

    /// Writes the set to `dir` (created if needed).
    pub fn save(&self, dir: &Path) -> Result<(), ModelError> {
        create_dir(dir)?;
        let (models, samples) = self.boosters.write(dir)?;
        let manifest = Manifest {
            format: "antelope-models".into(),
            format_version: MODEL_FORMAT_VERSION,
            objective: self.objective.clone(),
            feature_schema: FEATURE_SCHEMA_VERSION,
            features: FEATURE_NAMES.iter().map(|s| (*s).to_string()).collect(),
            acks_per_unit: self.acks_per_unit,
            start_candidate: self.start_candidate.clone(),
            start_by_mode: self
                .start_by_mode
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

    /// Reads a set written by [`ModelSet::save`], checking format and feature schema.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let path = dir.join("manifest.json");
        let manifest: Manifest = read_manifest(&path)?;
        if manifest.format != "antelope-models" {
            return Err(ModelError::Manifest {
                path,
                msg: format!("format is `{}`", manifest.format),
            });
        }
        for (what, found, expected) in [
            (
                "format_version",
                manifest.format_version,
                MODEL_FORMAT_VERSION,
            ),
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
        let mut set = Self {
            acks_per_unit: manifest.acks_per_unit,
            objective: manifest.objective.clone(),
            start_candidate: manifest.start_candidate.clone(),
            ..Self::default()
        };
        for (mode_name, cca) in &manifest.start_by_mode {
            let Some(mode) = Mode::parse(mode_name) else {
                return Err(ModelError::Manifest {
                    path,
                    msg: format!("start_by_mode: unknown mode `{mode_name}`"),
                });
            };
            set.start_by_mode.insert(mode, cca.clone());
        }
        set.boosters = Boosters::read(
            dir,
            &path,
            &manifest.models,
            &manifest.samples,
            FEATURE_NAMES.len(),
        )?;
        Ok(set)
    }
}

/// The reward of a unit under every mode, in [`Mode::ALL`] order.
pub fn rewards(unit: &super::unit::UnitStats) -> [f64; 3] {
    Mode::ALL.map(|m| reward(unit, m))
}
