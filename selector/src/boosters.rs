//! Gradient-boosted model files, shared by Antelope's and our `outcome` models
//! ([`crate::antelope::model`]) and the probe policy's ([`crate::probe::model`]): a set is a
//! directory with a JSON manifest and one forust booster file per (mode, candidate).
//! [`Boosters`] holds the boosters by mode and candidate with the samples each was fitted on,
//! and writes and reads them as the manifest's `models` and `samples` tables; the functions
//! below read and write one manifest or booster, and check that a booster read from a file can
//! be evaluated.

use std::collections::BTreeMap;
use std::path::Path;

use forust_ml::GradientBooster;
use serde::Serialize;

use crate::antelope::model::ModelError;
use crate::antelope::reward::Mode;

/// Creates a model set's directory `dir` (and its parents) if needed.
pub(crate) fn create_dir(dir: &Path) -> Result<(), ModelError> {
    std::fs::create_dir_all(dir).map_err(|source| ModelError::Io {
        path: dir.to_path_buf(),
        source,
    })
}

/// Training `what` failed (its data, or a booster's fit).
pub(crate) fn training_error(what: &str, msg: impl std::fmt::Display) -> ModelError {
    ModelError::Training {
        what: what.to_string(),
        msg: msg.to_string(),
    }
}

/// A manifest table: mode name -> candidate -> value (booster file, sample count).
pub(crate) type Table<T> = BTreeMap<String, BTreeMap<String, T>>;

/// Boosters by preference mode and candidate, with the samples each was fitted on.
#[derive(Default)]
pub(crate) struct Boosters {
    models: BTreeMap<Mode, BTreeMap<String, GradientBooster>>,
    samples: BTreeMap<Mode, BTreeMap<String, usize>>,
}

impl std::fmt::Debug for Boosters {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        self.samples.fmt(f)
    }
}

impl Boosters {
    /// Adds (or replaces) the booster of (mode, candidate), fitted on `n` samples.
    pub(crate) fn insert(&mut self, mode: Mode, cca: &str, b: GradientBooster, n: usize) {
        self.models
            .entry(mode)
            .or_default()
            .insert(cca.to_string(), b);
        self.samples
            .entry(mode)
            .or_default()
            .insert(cca.to_string(), n);
    }

    /// No booster at all.
    pub(crate) fn is_empty(&self) -> bool {
        self.models.is_empty()
    }

    /// The boosters of `mode`, by candidate.
    pub(crate) fn of(&self, mode: Mode) -> Option<&BTreeMap<String, GradientBooster>> {
        self.models.get(&mode)
    }

    /// Candidates with a booster for `mode`.
    pub(crate) fn candidates(&self, mode: Mode) -> Vec<&str> {
        self.of(mode)
            .map(|m| m.keys().map(String::as_str).collect())
            .unwrap_or_default()
    }

    /// Samples the (mode, candidate) booster was fitted on (0: none).
    pub(crate) fn samples(&self, mode: Mode, candidate: &str) -> usize {
        self.samples
            .get(&mode)
            .and_then(|m| m.get(candidate))
            .copied()
            .unwrap_or(0)
    }

    /// Writes every booster to `dir` as `<mode>-<candidate>.json` and returns the manifest's
    /// `models` and `samples` tables.
    pub(crate) fn write(&self, dir: &Path) -> Result<(Table<String>, Table<usize>), ModelError> {
        self.write_under(dir, "")
    }

    /// [`Boosters::write`] into `dir`'s sub-folder `sub` (created; `""`: `dir` itself); the
    /// tables name the files relative to `dir`.
    pub(crate) fn write_under(
        &self,
        dir: &Path,
        sub: &str,
    ) -> Result<(Table<String>, Table<usize>), ModelError> {
        if !sub.is_empty() {
            create_dir(&dir.join(sub))?;
        }
        let (mut models, mut samples) = (Table::new(), Table::new());
        for (mode, boosters) in &self.models {
            for (cca, b) in boosters {
                let name = format!("{}-{cca}.json", mode.name());
                let file = if sub.is_empty() {
                    name
                } else {
                    format!("{sub}/{name}")
                };
                write_booster(&dir.join(&file), b)?;
                models
                    .entry(mode.name().to_string())
                    .or_insert_with(BTreeMap::new)
                    .insert(cca.clone(), file);
                samples
                    .entry(mode.name().to_string())
                    .or_insert_with(BTreeMap::new)
                    .insert(cca.clone(), self.samples(*mode, cca));
            }
        }
        Ok((models, samples))
    }

    /// Reads the boosters a manifest (at `manifest`, in `dir`) lists in its `models` table, over
    /// `n_features` features, with their counts from `samples` (0 where missing).
    pub(crate) fn read(
        dir: &Path,
        manifest: &Path,
        models: &Table<String>,
        samples: &Table<usize>,
        n_features: usize,
    ) -> Result<Self, ModelError> {
        let mut out = Self::default();
        for (mode_name, files) in models {
            let Some(mode) = Mode::parse(mode_name) else {
                return Err(ModelError::Manifest {
                    path: manifest.to_path_buf(),
                    msg: format!("unknown mode `{mode_name}`"),
                });
            };
            for (cca, file) in files {
                let b = read_booster(&dir.join(file), n_features)?;
                let n = samples
                    .get(mode_name)
                    .and_then(|m| m.get(cca))
                    .copied()
                    .unwrap_or(0);
                out.insert(mode, cca, b, n);
            }
        }
        if out.is_empty() {
            return Err(ModelError::Manifest {
                path: manifest.to_path_buf(),
                msg: "no models listed".into(),
            });
        }
        Ok(out)
    }
}

/// Reads a model file's text.
pub(crate) fn read_text(path: &Path) -> Result<String, ModelError> {
    std::fs::read_to_string(path).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads and parses a model set's JSON manifest.
pub(crate) fn read_manifest<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, ModelError> {
    let text = read_text(path)?;
    serde_json::from_str(&text).map_err(|e| ModelError::Manifest {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })
}

/// Writes a model set's manifest as pretty JSON.
pub(crate) fn write_manifest<T: Serialize>(path: &Path, manifest: &T) -> Result<(), ModelError> {
    let text = serde_json::to_string_pretty(manifest).map_err(|e| ModelError::Manifest {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    std::fs::write(path, text).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes one booster's forust JSON.
pub(crate) fn write_booster(path: &Path, b: &GradientBooster) -> Result<(), ModelError> {
    let json = b.json_dump().map_err(|e| ModelError::Booster {
        path: path.to_path_buf(),
        msg: e.to_string(),
    })?;
    std::fs::write(path, json).map_err(|source| ModelError::Io {
        path: path.to_path_buf(),
        source,
    })
}

/// Reads one booster and checks that every tree can be evaluated over `n_features` features
/// ([`check_trees`]).
pub(crate) fn read_booster(path: &Path, n_features: usize) -> Result<GradientBooster, ModelError> {
    let booster = |msg: String| ModelError::Booster {
        path: path.to_path_buf(),
        msg,
    };
    let json = read_text(path)?;
    let b = GradientBooster::from_json(&json).map_err(|e| booster(e.to_string()))?;
    check_trees(&b, n_features).map_err(booster)?;
    Ok(b)
}

/// Checks that a booster read from a file can be evaluated: forust-ml walks each tree from node
/// 0 by child index until a leaf, without bounds or cycle checks, so a file whose tree points
/// backwards (or at itself) makes `predict` loop forever and one past the end panics. Every
/// split must name one of the model's features and point forward to existing nodes (forust
/// numbers children after their parent), and every leaf weight must be finite.
fn check_trees(b: &GradientBooster, n_features: usize) -> Result<(), String> {
    for (t, tree) in b.trees.iter().enumerate() {
        if tree.nodes.is_empty() {
            return Err(format!("tree {t} has no nodes"));
        }
        let len = tree.nodes.len();
        for (i, node) in tree.nodes.iter().enumerate() {
            if node.is_leaf {
                if !node.weight_value.is_finite() {
                    return Err(format!("tree {t}, node {i}: leaf weight is not finite"));
                }
                continue;
            }
            if node.split_feature >= n_features {
                return Err(format!(
                    "tree {t}, node {i}: split on feature {} of {n_features}",
                    node.split_feature
                ));
            }
            for (what, child) in [
                ("left", node.left_child),
                ("right", node.right_child),
                ("missing", node.missing_node),
            ] {
                if child <= i || child >= len {
                    return Err(format!(
                        "tree {t}, node {i}: {what} child {child} is not a later node of {len}"
                    ));
                }
            }
        }
    }
    Ok(())
}
