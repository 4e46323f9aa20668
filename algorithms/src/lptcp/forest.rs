//! LP-TCP's loss predictor as a file: a random forest of binary decision trees over the
//! feature schema of [`super::features`], with the hold threshold chosen for it.
//!
//! The forest is trained with `linfa` (`ccp-eval train lptcp`, `eval/src/lptcp.rs`) and stored
//! in this crate's own small JSON format so the algorithm needs no ML toolkit at run time:
//!
//! ```json
//! { "format": "ccp-lptcp-forest", "version": 1, "schema_version": 1,
//!   "features": ["cwnd_pkts", ...], "threshold": 0.5, "trained_on": "...",
//!   "thresholds": [{"threshold": 0.1, "m_e": 1.2, ...}, ...],
//!   "trees": [{"nodes": [{"split": {"feature": 0, "value": 151.5, "left": 1, "right": 2}},
//!                         {"leaf": {"lost": false}}, {"leaf": {"lost": true}}]}] }
//! ```
//!
//! A split sends a sample left when `x[feature] < value` (linfa's prediction rule). Nodes are
//! stored root first and every child comes after its parent, so a tree cannot loop. P(loss) is
//! the share of trees whose leaf says lost (Breiman's vote). Anything else in a file (another
//! format, version or feature schema, a child out of range, a feature index outside the
//! schema, a threshold outside [0, 1]) is refused with a [`ModelError`] saying what and where.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use thiserror::Error;

use super::features::{FEATURE_NAMES, N_FEATURES, SCHEMA_VERSION};

/// The `format` a forest file names.
pub const FORMAT: &str = "ccp-lptcp-forest";
/// The version of the file layout.
pub const FORMAT_VERSION: u32 = 1;

/// Why a forest file cannot be used.
#[derive(Debug, Error)]
pub enum ModelError {
    /// The file could not be read.
    #[error("LP-TCP model {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// What the OS said.
        source: std::io::Error,
    },
    /// The file is not a forest file.
    #[error("LP-TCP model {path}: not a forest file: {reason}")]
    Parse {
        /// The file.
        path: PathBuf,
        /// What the parser said.
        reason: String,
    },
    /// The file is a forest of another format, version or feature schema.
    #[error("LP-TCP model {path}: {what} is {found}, this build reads {expected} (retrain with `ccp-eval train lptcp`)")]
    Mismatch {
        /// The file.
        path: PathBuf,
        /// Which property.
        what: &'static str,
        /// The file's.
        found: String,
        /// This build's.
        expected: String,
    },
    /// A tree or the threshold is malformed.
    #[error("LP-TCP model {path}: {reason}")]
    Invalid {
        /// The file.
        path: PathBuf,
        /// What is wrong, and where.
        reason: String,
    },
}

/// A forest file's contents.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ForestFile {
    /// Always [`FORMAT`].
    pub format: String,
    /// Always [`FORMAT_VERSION`].
    pub version: u32,
    /// The feature schema's version ([`SCHEMA_VERSION`]).
    pub schema_version: u32,
    /// The feature names, in order ([`FEATURE_NAMES`]).
    pub features: Vec<String>,
    /// Hold when P(loss) exceeds this.
    pub threshold: f64,
    /// What the forest was trained on (free text).
    #[serde(default)]
    pub trained_on: String,
    /// How the threshold was chosen: every candidate's score.
    #[serde(default)]
    pub thresholds: Vec<ThresholdScore>,
    /// The trees.
    pub trees: Vec<Tree>,
}

/// One candidate threshold's result on the tuning runs (the paper's `M_e`).
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct ThresholdScore {
    /// The threshold.
    pub threshold: f64,
    /// Where it came from: `listed` (the paper's 0.1 .. 0.9) or `max-f1` (th0).
    pub source: String,
    /// `log E(tp) - 0.1 log E(d)`, tp in Mbit/s and d in ms.
    pub m_e: f64,
    /// Mean throughput, Mbit/s.
    pub throughput_mbps: f64,
    /// Mean queueing delay (RTT - `RTT_min`), ms.
    pub delay_ms: f64,
}

/// One decision tree.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct Tree {
    /// Root first; children after their parent.
    pub nodes: Vec<Node>,
}

/// One node of a tree.
#[derive(Debug, Clone, Copy, Serialize, Deserialize, PartialEq)]
#[serde(rename_all = "lowercase")]
pub enum Node {
    /// `x[feature] < value` goes to `left`, else to `right` (node indices).
    Split {
        /// Feature index.
        feature: usize,
        /// Split value.
        value: f64,
        /// Left child.
        left: usize,
        /// Right child.
        right: usize,
    },
    /// A leaf: whether it predicts a loss.
    Leaf {
        /// The class.
        lost: bool,
    },
}

/// A validated forest and its threshold.
#[derive(Debug, Clone, PartialEq)]
pub struct Forest {
    trees: Vec<Tree>,
    threshold: f64,
}

impl Forest {
    /// Reads and validates a forest file.
    pub fn load(path: &Path) -> Result<Self, ModelError> {
        let text = std::fs::read_to_string(path).map_err(|source| ModelError::Io {
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(path, &text)
    }

    /// Parses and validates a forest file's text (`path` names it in errors).
    pub fn parse(path: &Path, text: &str) -> Result<Self, ModelError> {
        let file: ForestFile = serde_json::from_str(text).map_err(|e| ModelError::Parse {
            path: path.to_path_buf(),
            reason: e.to_string(),
        })?;
        Self::from_file(path, file)
    }

    /// Validates a forest file's contents.
    pub fn from_file(path: &Path, file: ForestFile) -> Result<Self, ModelError> {
        let mismatch = |what, found: String, expected: String| ModelError::Mismatch {
            path: path.to_path_buf(),
            what,
            found,
            expected,
        };
        let invalid = |reason: String| ModelError::Invalid {
            path: path.to_path_buf(),
            reason,
        };
        if file.format != FORMAT {
            return Err(mismatch("format", file.format, FORMAT.into()));
        }
        if file.version != FORMAT_VERSION {
            return Err(mismatch(
                "version",
                file.version.to_string(),
                FORMAT_VERSION.to_string(),
            ));
        }
        if file.schema_version != SCHEMA_VERSION {
            return Err(mismatch(
                "feature schema version",
                file.schema_version.to_string(),
                SCHEMA_VERSION.to_string(),
            ));
        }
        if file.features.iter().map(String::as_str).ne(FEATURE_NAMES) {
            let first = file
                .features
                .iter()
                .zip(FEATURE_NAMES)
                .position(|(a, b)| a != b)
                .unwrap_or(file.features.len().min(N_FEATURES));
            return Err(mismatch(
                "feature list",
                format!(
                    "{} features, #{first} `{}`",
                    file.features.len(),
                    file.features.get(first).map_or("<none>", String::as_str)
                ),
                format!(
                    "{N_FEATURES} features, #{first} `{}`",
                    FEATURE_NAMES.get(first).copied().unwrap_or("<none>")
                ),
            ));
        }
        if !(0.0..=1.0).contains(&file.threshold) {
            return Err(invalid(format!(
                "threshold {} is not a probability in [0, 1]",
                file.threshold
            )));
        }
        if file.trees.is_empty() {
            return Err(invalid("no trees".into()));
        }
        for (t, tree) in file.trees.iter().enumerate() {
            if tree.nodes.is_empty() {
                return Err(invalid(format!("tree {t} has no nodes")));
            }
            for (i, n) in tree.nodes.iter().enumerate() {
                if let Node::Split {
                    feature,
                    value,
                    left,
                    right,
                } = *n
                {
                    let bad_child = |c: usize| c <= i || c >= tree.nodes.len();
                    if feature >= N_FEATURES {
                        return Err(invalid(format!(
                            "tree {t} node {i}: feature {feature} outside the schema's {N_FEATURES}"
                        )));
                    }
                    if value.is_nan() {
                        return Err(invalid(format!("tree {t} node {i}: split value NaN")));
                    }
                    if bad_child(left) || bad_child(right) {
                        return Err(invalid(format!(
                            "tree {t} node {i}: children {left}, {right} must come after it and within the {} nodes",
                            tree.nodes.len()
                        )));
                    }
                }
            }
        }
        Ok(Self {
            trees: file.trees,
            threshold: file.threshold,
        })
    }

    /// A forest from validated parts (the trainer's; `threshold` clamped into [0, 1]).
    pub fn from_trees(trees: Vec<Tree>, threshold: f64) -> Result<Self, ModelError> {
        let file = Self::file_for(trees, threshold);
        Self::from_file(Path::new("<memory>"), file)
    }

    fn file_for(trees: Vec<Tree>, threshold: f64) -> ForestFile {
        ForestFile {
            format: FORMAT.into(),
            version: FORMAT_VERSION,
            schema_version: SCHEMA_VERSION,
            features: FEATURE_NAMES.iter().map(|s| (*s).to_string()).collect(),
            threshold: if threshold.is_nan() {
                1.0
            } else {
                threshold.clamp(0.0, 1.0)
            },
            trained_on: String::new(),
            thresholds: Vec::new(),
            trees,
        }
    }

    /// The file that [`Forest::load`] reads back as this forest.
    pub fn to_file(&self) -> ForestFile {
        Self::file_for(self.trees.clone(), self.threshold)
    }

    /// The hold threshold.
    pub fn threshold(&self) -> f64 {
        self.threshold
    }

    /// The same trees with another threshold.
    #[must_use]
    pub fn with_threshold(mut self, threshold: f64) -> Self {
        self.threshold = if threshold.is_nan() {
            1.0
        } else {
            threshold.clamp(0.0, 1.0)
        };
        self
    }

    /// Number of trees.
    pub fn len(&self) -> usize {
        self.trees.len()
    }

    /// Whether the forest has no trees (never, once validated).
    pub fn is_empty(&self) -> bool {
        self.trees.is_empty()
    }

    /// Whether tree `t` predicts a loss for `x` (`false` for a tree index out of range).
    pub fn tree_predicts_loss(&self, t: usize, x: &[f64; N_FEATURES]) -> bool {
        let Some(tree) = self.trees.get(t) else {
            return false;
        };
        let mut i = 0;
        // Children come after parents (validated), so this ends within `nodes.len()` steps.
        loop {
            match tree.nodes.get(i) {
                Some(Node::Leaf { lost }) => return *lost,
                Some(Node::Split {
                    feature,
                    value,
                    left,
                    right,
                }) => {
                    i = if x[*feature] < *value { *left } else { *right };
                }
                None => return false,
            }
        }
    }

    /// P(loss): the share of trees that predict a loss for `x`.
    pub fn p_loss(&self, x: &[f64; N_FEATURES]) -> f64 {
        let votes = (0..self.trees.len())
            .filter(|t| self.tree_predicts_loss(*t, x))
            .count();
        votes as f64 / self.trees.len().max(1) as f64
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn stump(feature: usize, value: f64) -> Tree {
        Tree {
            nodes: vec![
                Node::Split {
                    feature,
                    value,
                    left: 1,
                    right: 2,
                },
                Node::Leaf { lost: false },
                Node::Leaf { lost: true },
            ],
        }
    }

    #[test]
    fn votes_are_the_share_of_trees_predicting_loss() {
        let f = Forest::from_trees(vec![stump(0, 100.0), stump(0, 150.0)], 0.4).unwrap();
        let mut x = [0.0; N_FEATURES];
        x[0] = 99.0;
        assert!(f.p_loss(&x).abs() < 1e-12);
        x[0] = 100.0;
        assert!((f.p_loss(&x) - 0.5).abs() < 1e-12, "`<` goes left, as linfa");
        x[0] = 200.0;
        assert!((f.p_loss(&x) - 1.0).abs() < 1e-12);
    }

    #[test]
    fn a_file_round_trips() {
        let f = Forest::from_trees(vec![stump(3, 1.5)], 0.7).unwrap();
        let text = serde_json::to_string(&f.to_file()).unwrap();
        assert_eq!(Forest::parse(Path::new("x.json"), &text).unwrap(), f);
    }

    fn refused(edit: impl FnOnce(&mut ForestFile)) -> String {
        let mut file = Forest::from_trees(vec![stump(0, 1.0)], 0.5)
            .unwrap()
            .to_file();
        edit(&mut file);
        let text = serde_json::to_string(&file).unwrap();
        Forest::parse(Path::new("m.json"), &text)
            .unwrap_err()
            .to_string()
    }

    #[test]
    fn bad_files_are_refused_saying_why() {
        let e = Forest::parse(Path::new("m.json"), "{\"format\": 3}").unwrap_err();
        assert!(e.to_string().contains("not a forest file"), "{e}");
        let e = refused(|f| f.format = "onnx".into());
        assert!(e.contains("format is onnx"), "{e}");
        let e = refused(|f| f.schema_version = 99);
        assert!(e.contains("feature schema version is 99"), "{e}");
        let e = refused(|f| f.features[5] = "srtt".into());
        assert!(e.contains("#5 `srtt`") && e.contains("ack_ia_1_us"), "{e}");
        let e = refused(|f| f.features.pop().map(drop).unwrap_or_default());
        assert!(e.contains("55 features"), "{e}");
        let e = refused(|f| f.threshold = 1.5);
        assert!(e.contains("threshold 1.5"), "{e}");
        let e = refused(|f| f.trees.clear());
        assert!(e.contains("no trees"), "{e}");
        let e = refused(|f| {
            f.trees[0].nodes[0] = Node::Split {
                feature: 0,
                value: 1.0,
                left: 0,
                right: 2,
            };
        });
        assert!(e.contains("tree 0 node 0: children 0, 2"), "{e}");
        let e = refused(|f| {
            f.trees[0].nodes[0] = Node::Split {
                feature: 56,
                value: 1.0,
                left: 1,
                right: 2,
            };
        });
        assert!(e.contains("feature 56 outside"), "{e}");
        let e = Forest::load(Path::new("/nonexistent/forest.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/forest.json"), "{e}");
    }
}
