//! The competitors' kind at the probe's end: a classifier of who a flow shares its bottleneck
//! with, and the move each kind pays for.
//!
//! Why: against competing flows the candidate that holds a flow's share depends on the
//! competitors' kind (Cubic flows: a loss-based candidate; BBR flows: BBR; a mix: ARC), and the
//! probe's regressors, fitted on the gain of each candidate, learn that mapping poorly from a
//! few hundred competing flows (`docs/selector/competitors-kind.md`: known from the flow's
//! start the kind alone is worth 60-63 % of the benchmark's headroom, known at the probe's end
//! about 50-56 %). This model asks the narrower question: which kind of long-running competitor,
//! if any, the probe met. One gradient-boosted log-loss booster per kind (one against the
//! rest) scores the probe's features; the scores are turned into probabilities and normalized
//! ([`Classifier::OneVsRest`]; a multiclass booster with a softmax objective,
//! [`Classifier::Softmax`], is the measured alternative). A default-mode flow moves to its kind's candidate when the most probable kind is a
//! competitor's and the probability that it competes with nobody is at most `1 - threshold`.
//!
//! What it follows: Antelope's per-CCA gradient-boosted models (`PAPERS.md` §2) for the
//! learner, and TCP-RL's grouping of flows (§1.1) for the idea that a flow's group, not its
//! every feature, picks its CCA. The labels are the scenario's (`ccp-eval gen-data --kind probe`
//! writes the long-running cross traffic's kind per training flow: `none`, `cubic`, `bbr`,
//! `mix`; finite flows under test are labelled `none`, since a move at the probe's end does not
//! pay on flows that end soon after it); each kind's candidate is the one with the best mean
//! counterfactual score over that kind's training flows, once for flows whose probe met a shallow
//! queue and once for those that met a deep one: the probe's largest RTT at least
//! [`DEFAULT_DEEP_FROM`] times its floor, a buffer of a BDP or more filled. Against Cubic flows
//! Cubic takes the flow's share back in a shallow buffer and loses it in a deep one, where ARC
//! holds it (`docs/selector/kind-model.md`, "The queue's depth"). The depth is read from the
//! probe, not learned as a label: classifying kind and depth together tells the kinds apart
//! worse. Left out: a kind's candidate per path (the regressors' job). Measured in
//! `docs/selector/kind-model.md`.

use std::collections::BTreeMap;
use std::path::Path;

use forust_ml::Matrix;
use forust_ml::objective::ObjectiveType;
use serde::{Deserialize, Serialize};

use super::features::{
    FEATURE_NAMES, FEATURE_SCHEMA_VERSION, N_FEATURES, ProbeWindow, RTT_RATIO_MAX,
};
use super::model::{booster, column_major};
use super::rule::FeatureBox;
use crate::antelope::model::ModelError;
use crate::antelope::reward::Mode;
use crate::boosters::{
    Boosters, Table, create_dir, read_manifest, read_text, training_error, write_manifest,
};
use crate::softmax::{SoftmaxBooster, SoftmaxParams};

/// Format name in `manifest.json`.
pub const FORMAT: &str = "probe-kind";
/// Format version of `manifest.json` (2: each kind's move over a deep queue; 3: the classifier
/// named, a softmax classifier in one file).
pub const FORMAT_VERSION: u32 = 3;
/// The softmax classifier's file in a model's directory.
pub const SOFTMAX_FILE: &str = "kind.json";
/// The label of a flow that shares its bottleneck with no long-running flow.
pub const NONE: &str = "none";
/// Trees per booster.
pub const TREES: usize = 150;
/// Tree depth.
pub const DEPTH: usize = 4;
/// Fewest samples' hessian in a leaf.
pub const MIN_LEAF: f32 = 1.0;
/// Learning rate.
pub const LEARNING_RATE: f32 = 0.1;
/// The softmax classifier's L2 penalty on leaf values.
pub const LAMBDA: f64 = 1.0;

/// The boxes of probe features whose flows the deployed kind model does not judge
/// ([`super::ProbeChoice::Predict`]'s `kind_skips`): none. A box of long paths (60 ms or more)
/// whose probe lost 0.5-40 packets per thousand, its flows kept on their start by a rule, gained
/// +0.0040 per condition on the twelve sets it was chosen on and nothing held out (-0.0017 on
/// the eighth test set, +0.0030 on the ninth): measured, not deployed
/// (`docs/selector/measured-not-deployed.md`, "A long path whose probe lost a few packets").
pub fn default_skips() -> Vec<FeatureBox> {
    Vec::new()
}

/// The candidates the deployed kind model's moves hand a flow to afresh
/// ([`super::ProbeChoice::Predict`]'s `kind_afresh`): none. Afresh to BBR measured +0.0006
/// per condition on twelve consulted sets (noise), afresh to Cubic -0.0024: measured, not
/// deployed (`docs/selector/measured-not-deployed.md`, "The kind model's moves made afresh").
pub fn default_afresh() -> Vec<String> {
    Vec::new()
}

/// How the kinds are told apart.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Classifier {
    /// One log-loss booster per kind against the rest, probabilities normalized to sum to 1
    /// (the manifest's `models`; formats 1 and 2 have no other). Deployed.
    #[default]
    OneVsRest,
    /// One multiclass booster with a softmax objective ([`SOFTMAX_FILE`]). Measured, not
    /// deployed: its moves earned more on the validation sets' counterfactual runs and flagged
    /// more competing flows by their right kind, but also twice the lone flows, and on the
    /// bench it made no difference outside the sets it was measured on (a fresh seventh test
    /// set -0.0022 per condition; `docs/selector/kind-model.md`, "One classifier for the
    /// kinds").
    Softmax,
}

impl Classifier {
    /// Parses `softmax` or `one-vs-rest`.
    pub fn parse(s: &str) -> Option<Self> {
        match s.trim() {
            "softmax" => Some(Self::Softmax),
            "one-vs-rest" => Some(Self::OneVsRest),
            _ => None,
        }
    }
}

/// The fitted classifier.
enum Fitted {
    OneVsRest(Boosters),
    Softmax(SoftmaxBooster),
}
/// The deployed threshold: a flow moves only when the probability that it competes with
/// nobody is at most `1 - threshold` (0.2). Chosen on the validation sets `selection-val3` and
/// `selection-val4` among 0.5-0.95 (`docs/selector.md`, "The competitors' kind at the probe's
/// end").
pub const DEFAULT_THRESHOLD: f64 = 0.8;
/// The probe's largest RTT over its floor (`rtt_ratio_max`) from which a flow's queue counts as
/// deep, for the training of [`KindModel::train`]: a buffer of at least one BDP filled during
/// the probe (a shared buffer's queue adds its depth to the floor). Chosen on `selection-val3`
/// and `selection-val4` from 1.5-3.0 in an offline screen on their counterfactual runs (1.8-3.0
/// all gained over one move per kind; 2.0 is where the choice of candidate changes on the
/// training sets).
pub const DEFAULT_DEEP_FROM: f64 = 2.0;
/// Fewest training flows of a kind over a shallow or a deep queue for that depth to get its own
/// move (else the kind's move over all its flows).
pub const MIN_DEPTH_FLOWS: usize = 10;

/// One training flow: its probe's features, its label and its counterfactual scores.
#[derive(Debug, Clone)]
pub struct KindSample {
    /// The probe's features.
    pub features: [f64; N_FEATURES],
    /// The long-running competitors' kind (`none`, `cubic`, `bbr`, `mix`, ...).
    pub kind: String,
    /// Score of the flow switched to each candidate at the probe's end (the start included).
    pub scores: BTreeMap<String, f64>,
}

#[derive(Debug, Serialize, Deserialize)]
struct Manifest {
    format: String,
    format_version: u32,
    feature_schema: u32,
    features: Vec<String>,
    window: ProbeWindow,
    /// The default mode's start candidate the training flows probed on.
    start: String,
    /// kind -> the candidate a flow of that kind moves to (over a shallow queue, when
    /// `deep_from` is set).
    moves: BTreeMap<String, String>,
    /// `rtt_ratio_max` from which a flow's queue is deep (`None`, and absent in format 1: one
    /// move per kind).
    #[serde(default)]
    deep_from: Option<f64>,
    /// kind -> the candidate a flow of that kind moves to over a deep queue (absent in format
    /// 1).
    #[serde(default)]
    deep_moves: BTreeMap<String, String>,
    trees: usize,
    depth: usize,
    /// The classifier (absent before format 3: one against the rest).
    #[serde(default)]
    classifier: Classifier,
    /// "default" -> kind -> booster file (one against the rest; empty for a softmax model).
    #[serde(default)]
    models: Table<String>,
    /// "default" -> kind -> training flows of that kind.
    samples: Table<usize>,
}

/// The classifier and each kind's move.
pub struct KindModel {
    window: ProbeWindow,
    start: String,
    moves: BTreeMap<String, String>,
    deep_from: Option<f64>,
    deep_moves: BTreeMap<String, String>,
    classifier: Fitted,
    /// Kind -> training flows of that kind.
    samples: BTreeMap<String, usize>,
}

impl std::fmt::Debug for KindModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("KindModel")
            .field("start", &self.start)
            .field("moves", &self.moves)
            .field("deep_from", &self.deep_from)
            .field("deep_moves", &self.deep_moves)
            .field("samples", &self.samples)
            .finish_non_exhaustive()
    }
}

impl KindModel {
    /// Fits one booster per kind (each with at least one flow of its kind and one of another)
    /// and picks each kind's candidate: the best mean score over its flows, if it is not
    /// `start` (a kind whose best is the start has no move). With `deep_from` (a
    /// `rtt_ratio_max`, [`DEFAULT_DEEP_FROM`] as deployed), once over the kind's flows whose
    /// probe's queue stayed under it and once over those that reached it, each from at least
    /// [`MIN_DEPTH_FLOWS`] flows (else from all the kind's flows). `none` never moves.
    pub fn train(
        samples: &[KindSample],
        start: &str,
        window: ProbeWindow,
        deep_from: Option<f64>,
    ) -> Result<Self, ModelError> {
        Self::train_with(samples, start, window, deep_from, Classifier::OneVsRest)
    }

    /// [`KindModel::train`] with the given classifier.
    pub fn train_with(
        samples: &[KindSample],
        start: &str,
        window: ProbeWindow,
        deep_from: Option<f64>,
        classifier: Classifier,
    ) -> Result<Self, ModelError> {
        if let Some(d) = deep_from
            && !(d.is_finite() && d >= 1.0)
        {
            return Err(training_error(
                "depth",
                format!("a deep queue's RTT ratio must be a number of at least 1, got {d}"),
            ));
        }
        let mut by_kind: BTreeMap<&str, Vec<&KindSample>> = BTreeMap::new();
        for s in samples {
            by_kind.entry(s.kind.as_str()).or_default().push(s);
        }
        if !by_kind.contains_key(NONE) || by_kind.len() < 2 {
            return Err(training_error(
                "kinds",
                format!(
                    "need flows labelled `{NONE}` and of at least one competitor kind, got {:?}",
                    by_kind.keys().collect::<Vec<_>>()
                ),
            ));
        }
        let fitted = match classifier {
            Classifier::OneVsRest => Fitted::OneVsRest(one_vs_rest(samples, &by_kind)?),
            Classifier::Softmax => Fitted::Softmax(softmax(samples, &by_kind)?),
        };
        let (mut moves, mut deep_moves) = (BTreeMap::new(), BTreeMap::new());
        for (kind, flows) in &by_kind {
            if *kind == NONE {
                continue;
            }
            let all = best_mean(flows);
            let (shallow, deep) = match deep_from {
                Some(d) => {
                    let (deep, shallow): (Vec<&KindSample>, Vec<&KindSample>) =
                        flows.iter().partition(|f| f.features[RTT_RATIO_MAX] >= d);
                    (best_or(&shallow, all), best_or(&deep, all))
                }
                None => (all, None),
            };
            for (to, best) in [(&mut moves, shallow), (&mut deep_moves, deep)] {
                if let Some(c) = best.filter(|c| *c != start) {
                    to.insert((*kind).to_string(), c.to_string());
                }
            }
        }
        Ok(Self {
            window,
            start: start.to_string(),
            moves,
            deep_from,
            deep_moves,
            classifier: fitted,
            samples: by_kind
                .iter()
                .map(|(k, f)| ((*k).to_string(), f.len()))
                .collect(),
        })
    }

    /// The classifier the model uses.
    pub fn classifier(&self) -> Classifier {
        match self.classifier {
            Fitted::OneVsRest(_) => Classifier::OneVsRest,
            Fitted::Softmax(_) => Classifier::Softmax,
        }
    }

    /// The probe window the training flows used.
    pub fn window(&self) -> ProbeWindow {
        self.window
    }

    /// The default mode's start candidate the model was trained on.
    pub fn start(&self) -> &str {
        &self.start
    }

    /// Whether the model reads the same probe as `models`: its training flows started on the
    /// default mode's start candidate of `models` and were probed over the same window. A model
    /// trained on another start or window reads features of another distribution; the message
    /// says which differs.
    pub fn fits(&self, models: &super::ProbeModels) -> Result<(), String> {
        self.starts_as(models, "kind model")?;
        if models.window != self.window {
            return Err(format!(
                "the kind model was trained on a probe of {} ms and {} RTTs, the probe models end \
                 theirs after {} ms and {} RTTs",
                self.window.min_ms, self.window.rtts, models.window.min_ms, models.window.rtts
            ));
        }
        Ok(())
    }

    /// Whether the model's training flows started on the default mode's start candidate of
    /// `models`; the message names the model as `what`.
    fn starts_as(&self, models: &super::ProbeModels, what: &str) -> Result<(), String> {
        match models.start_for(Mode::Default) {
            Some(start) if start != self.start => Err(format!(
                "the {what} was trained on flows started on {}, the probe models start on {start}",
                self.start
            )),
            _ => Ok(()),
        }
    }

    /// Whether the model can take a second look after the probe of `models`
    /// ([`super::ProbeChoice::Predict`]'s `later_kind`): trained on flows started on the same
    /// candidate, over a window longer than the probe's.
    pub fn fits_later(&self, models: &super::ProbeModels) -> Result<(), String> {
        self.starts_as(models, "later kind model")?;
        let (w, p) = (self.window, models.window);
        if w.min_ms <= p.min_ms && w.rtts <= p.rtts {
            return Err(format!(
                "the later kind model's window ({} ms, {} RTTs) is not longer than the probe's \
                 ({} ms, {} RTTs)",
                w.min_ms, w.rtts, p.min_ms, p.rtts
            ));
        }
        Ok(())
    }

    /// Each competitor kind's candidate (over a shallow queue, when [`KindModel::deep_from`]
    /// is set).
    pub fn moves(&self) -> &BTreeMap<String, String> {
        &self.moves
    }

    /// The probe's `rtt_ratio_max` from which a flow's queue counts as deep (`None`: one move
    /// per kind).
    pub fn deep_from(&self) -> Option<f64> {
        self.deep_from
    }

    /// Each competitor kind's candidate over a deep queue.
    pub fn deep_moves(&self) -> &BTreeMap<String, String> {
        &self.deep_moves
    }

    /// Probability of each kind for features `x` (one-against-the-rest probabilities,
    /// normalized to sum to 1); none when a feature is not finite or no booster gives a
    /// number.
    pub fn probabilities(&self, x: &[f64; N_FEATURES]) -> Vec<(&str, f64)> {
        // forust panics on a NaN that is not its missing value; a probe's features are finite,
        // and anything else is scored as nothing.
        if !x.iter().all(|v| v.is_finite()) {
            return Vec::new();
        }
        let models = match &self.classifier {
            Fitted::Softmax(b) => {
                return b.probabilities(x).map_or_else(Vec::new, |p| {
                    b.classes().iter().map(String::as_str).zip(p).collect()
                });
            }
            Fitted::OneVsRest(boosters) => match boosters.of(Mode::Default) {
                Some(m) => m,
                None => return Vec::new(),
            },
        };
        let m = Matrix::new(x, 1, N_FEATURES);
        let mut out: Vec<(&str, f64)> = models
            .iter()
            .map(|(k, b)| {
                let z = b.predict(&m, false).first().copied().unwrap_or(f64::NAN);
                let p = 1.0 / (1.0 + (-z).exp());
                (k.as_str(), if p.is_finite() { p } else { 0.0 })
            })
            .collect();
        let total: f64 = out.iter().map(|(_, p)| p).sum();
        if total <= 0.0 {
            return Vec::new();
        }
        for (_, p) in &mut out {
            *p /= total;
        }
        out
    }

    /// The kind and candidate a flow with features `x` moves to, if any: the most probable
    /// kind is a competitor's with a move, and `P(none) <= 1 - threshold`.
    pub fn decide(&self, x: &[f64; N_FEATURES], threshold: f64) -> Option<(&str, &str)> {
        let p = self.probabilities(x);
        let none = p.iter().find(|(k, _)| *k == NONE).map_or(1.0, |(_, v)| *v);
        let (kind, _) = p.iter().max_by(|a, b| a.1.total_cmp(&b.1))?;
        if *kind == NONE || none > 1.0 - threshold {
            return None;
        }
        let deep = self.deep_from.is_some_and(|d| x[RTT_RATIO_MAX] >= d);
        let target = if deep { &self.deep_moves } else { &self.moves }.get(*kind)?;
        Some((kind, target.as_str()))
    }

    /// Writes the model to `dir` (created if needed).
    pub fn save(&self, dir: &Path) -> Result<(), ModelError> {
        create_dir(dir)?;
        let (models, samples) = match &self.classifier {
            Fitted::OneVsRest(boosters) => boosters.write(dir)?,
            Fitted::Softmax(b) => {
                let path = dir.join(SOFTMAX_FILE);
                let json = serde_json::to_string(b).map_err(|e| ModelError::Classifier {
                    path: path.clone(),
                    msg: e.to_string(),
                })?;
                std::fs::write(&path, json).map_err(|source| ModelError::Io { path, source })?;
                let samples = [(Mode::Default.name().to_string(), self.samples.clone())];
                (Table::new(), samples.into_iter().collect())
            }
        };
        let manifest = Manifest {
            format: FORMAT.into(),
            format_version: FORMAT_VERSION,
            feature_schema: FEATURE_SCHEMA_VERSION,
            features: FEATURE_NAMES.iter().map(|s| (*s).to_string()).collect(),
            window: self.window,
            start: self.start.clone(),
            moves: self.moves.clone(),
            deep_from: self.deep_from,
            deep_moves: self.deep_moves.clone(),
            trees: TREES,
            depth: DEPTH,
            classifier: self.classifier(),
            models,
            samples,
        };
        write_manifest(&dir.join("manifest.json"), &manifest)
    }

    /// Reads a model written by [`KindModel::save`], checking format, feature schema, trees,
    /// and that every kind with a move has a booster and `none` has one.
    pub fn load(dir: &Path) -> Result<Self, ModelError> {
        let path = dir.join("manifest.json");
        let manifest: Manifest = read_manifest(&path)?;
        let bad = |msg: String| ModelError::Manifest {
            path: path.clone(),
            msg,
        };
        super::model::check_header(
            &path,
            (&manifest.format, FORMAT),
            (manifest.format_version, FORMAT_VERSION),
            manifest.feature_schema,
            &manifest.features,
        )?;
        if manifest.models.keys().any(|m| m != Mode::Default.name()) {
            return Err(bad("models are for the default mode only".into()));
        }
        let classifier = match manifest.classifier {
            Classifier::OneVsRest => Fitted::OneVsRest(Boosters::read(
                dir,
                &path,
                &manifest.models,
                &manifest.samples,
                N_FEATURES,
            )?),
            Classifier::Softmax => Fitted::Softmax(read_softmax(&dir.join(SOFTMAX_FILE))?),
        };
        let kinds: Vec<&str> = match &classifier {
            Fitted::OneVsRest(b) => b.candidates(Mode::Default),
            Fitted::Softmax(b) => b.classes().iter().map(String::as_str).collect(),
        };
        if !kinds.contains(&NONE) {
            return Err(bad(format!("no booster for `{NONE}`")));
        }
        let moved = manifest.moves.keys().chain(manifest.deep_moves.keys());
        if let Some(k) = moved.clone().find(|k| !kinds.contains(&k.as_str())) {
            return Err(bad(format!("a move for `{k}`, which has no booster")));
        }
        if moved.clone().any(|k| k == NONE) {
            return Err(bad(format!("`{NONE}` cannot have a move")));
        }
        match manifest.deep_from {
            Some(d) if !(d.is_finite() && d >= 1.0) => {
                return Err(bad(format!(
                    "deep_from must be an RTT ratio of at least 1, got {d}"
                )));
            }
            None if !manifest.deep_moves.is_empty() => {
                return Err(bad("moves over a deep queue without deep_from".into()));
            }
            _ => {}
        }
        Ok(Self {
            window: manifest.window,
            start: manifest.start,
            moves: manifest.moves,
            deep_from: manifest.deep_from,
            deep_moves: manifest.deep_moves,
            classifier,
            samples: manifest
                .samples
                .get(Mode::Default.name())
                .cloned()
                .unwrap_or_default(),
        })
    }
}

/// Reads a softmax classifier and checks that it can be evaluated over the probe's features.
fn read_softmax(path: &Path) -> Result<SoftmaxBooster, ModelError> {
    let bad = |msg: String| ModelError::Classifier {
        path: path.to_path_buf(),
        msg,
    };
    let json = read_text(path)?;
    let b: SoftmaxBooster = serde_json::from_str(&json).map_err(|e| bad(e.to_string()))?;
    b.check().map_err(&bad)?;
    if b.n_features() != N_FEATURES {
        return Err(bad(format!(
            "{} features, the probe has {N_FEATURES}",
            b.n_features()
        )));
    }
    Ok(b)
}

/// One softmax classifier over the kinds of `by_kind` (classes in its order), fitted on
/// `samples` in their order, of the boosters' size.
fn softmax(
    samples: &[KindSample],
    by_kind: &BTreeMap<&str, Vec<&KindSample>>,
) -> Result<SoftmaxBooster, ModelError> {
    let class: BTreeMap<&str, usize> = by_kind.keys().enumerate().map(|(i, k)| (*k, i)).collect();
    let x: Vec<Vec<f64>> = samples.iter().map(|s| s.features.to_vec()).collect();
    let y: Vec<usize> = samples.iter().map(|s| class[s.kind.as_str()]).collect();
    let params = SoftmaxParams {
        rounds: TREES,
        depth: DEPTH,
        learning_rate: f64::from(LEARNING_RATE),
        min_leaf_hessian: f64::from(MIN_LEAF),
        lambda: LAMBDA,
    };
    let kinds = by_kind.keys().map(|k| (*k).to_string()).collect();
    SoftmaxBooster::fit(&x, &y, kinds, params).map_err(|e| training_error("kinds", e))
}

/// One log-loss booster per kind against the rest.
fn one_vs_rest(
    samples: &[KindSample],
    by_kind: &BTreeMap<&str, Vec<&KindSample>>,
) -> Result<Boosters, ModelError> {
    let data = column_major(&samples.iter().map(|s| &s.features).collect::<Vec<_>>());
    let matrix = Matrix::new(&data, samples.len(), N_FEATURES);
    let mut boosters = Boosters::default();
    for (kind, flows) in by_kind {
        let y: Vec<f64> = samples
            .iter()
            .map(|s| f64::from(u8::from(s.kind == *kind)))
            .collect();
        let mut b = booster(
            ObjectiveType::LogLoss,
            TREES,
            DEPTH,
            MIN_LEAF,
            LEARNING_RATE,
        );
        b.fit_unweighted(&matrix, &y, None)
            .map_err(|e| training_error(kind, e))?;
        boosters.insert(Mode::Default, kind, b, flows.len());
    }
    Ok(boosters)
}

/// The candidate with the best mean score over `flows`, among those scored on every one of
/// them (`None`: no such candidate).
fn best_mean<'a>(flows: &[&'a KindSample]) -> Option<&'a str> {
    let mut sums: BTreeMap<&str, (f64, usize)> = BTreeMap::new();
    for f in flows {
        for (c, v) in &f.scores {
            if v.is_finite() {
                let e = sums.entry(c.as_str()).or_default();
                e.0 += v;
                e.1 += 1;
            }
        }
    }
    sums.into_iter()
        .filter(|(_, (_, k))| *k == flows.len())
        .map(|(c, (s, k))| (c, s / k as f64))
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|(c, _)| c)
}

/// [`best_mean`] over `flows` when they are at least [`MIN_DEPTH_FLOWS`], else `fallback`.
fn best_or<'a>(flows: &[&'a KindSample], fallback: Option<&'a str>) -> Option<&'a str> {
    if flows.len() >= MIN_DEPTH_FLOWS {
        best_mean(flows)
    } else {
        fallback
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Flows whose drained ratio (a standing queue) and loss tell their kind: `none` drains,
    /// `cubic` holds a queue with few losses, `bbr` holds one with many. Each kind scores best
    /// on its own candidate.
    fn samples(n: usize) -> Vec<KindSample> {
        let mut rng = ccp_algorithms::api::SplitMix64::new(7);
        let mut out = Vec::new();
        for i in 0..n {
            let (kind, drained, loss, best) = match i % 3 {
                0 => (NONE, 1.0, 1.0, "copa"),
                1 => ("cubic", 2.5, 5.0, "cubic"),
                _ => ("bbr", 2.5, 200.0, "bbr"),
            };
            let mut x = [0.0; N_FEATURES];
            for v in &mut x {
                *v = rng.next_f64();
            }
            x[super::super::features::DRAINED] = drained + 0.3 * rng.next_f64();
            x[super::super::features::LOSS] = loss * (1.0 + rng.next_f64());
            let scores = ["copa", "cubic", "bbr"]
                .iter()
                .map(|c| ((*c).to_string(), if *c == best { 0.0 } else { -1.0 }))
                .collect();
            out.push(KindSample {
                features: x,
                kind: kind.to_string(),
                scores,
            });
        }
        out
    }

    /// At least 85 of 90 flows get their kind (none for a lone flow) at the deployed threshold.
    fn assert_kinds_right(m: &KindModel, test: &[KindSample]) {
        let right = test
            .iter()
            .filter(|s| {
                let want = (s.kind != NONE).then_some(s.kind.as_str());
                m.decide(&s.features, DEFAULT_THRESHOLD).map(|(k, _)| k) == want
            })
            .count();
        assert!(right >= 85, "{right} of {} right", test.len());
    }

    #[test]
    fn it_learns_the_kinds_and_their_moves_and_round_trips() {
        let train = samples(300);
        let m = KindModel::train(&train, "copa", ProbeWindow::default(), None).unwrap();
        assert_eq!(m.moves().get("cubic").map(String::as_str), Some("cubic"));
        assert_eq!(m.moves().get("bbr").map(String::as_str), Some("bbr"));
        assert!(!m.moves().contains_key(NONE));
        let test = samples(90);
        assert_kinds_right(&m, &test);
        let p = m.probabilities(&test[0].features);
        assert!((p.iter().map(|(_, v)| v).sum::<f64>() - 1.0).abs() < 1e-9);
        let dir = std::env::temp_dir().join(format!("ccp-kind-{}", std::process::id()));
        m.save(&dir).unwrap();
        let back = KindModel::load(&dir).unwrap();
        for s in &test {
            assert_eq!(m.decide(&s.features, 0.8), back.decide(&s.features, 0.8));
        }
        // Features no probe gives (not numbers, infinite) move nobody, without a panic.
        let mut one_bad = test[1].features;
        one_bad[3] = f64::NAN;
        for bad in [[f64::NAN; N_FEATURES], [f64::INFINITY; N_FEATURES], one_bad] {
            assert!(back.probabilities(&bad).is_empty());
            assert_eq!(back.decide(&bad, 0.8), None);
        }
        // A threshold of 1 leaves no room for doubt: only P(none) = 0 moves.
        assert!(test.iter().all(|s| back.decide(&s.features, 1.0).is_none()));
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// Against Cubic flows a shallow queue pays on Cubic and a deep one on ARC: the model
    /// trained with a depth split moves each to its own, and keeps that through a save; a split
    /// under 1 is refused.
    #[test]
    fn a_deep_queue_has_its_own_move() {
        let mut rng = ccp_algorithms::api::SplitMix64::new(11);
        let mut train = Vec::new();
        for i in 0..240 {
            let (kind, ratio_max, best) = match i % 3 {
                0 => (NONE, 1.2, "copa"),
                1 => ("cubic", 1.5, "cubic"),
                _ => ("cubic", 3.0, "arc"),
            };
            let mut x = [0.0; N_FEATURES];
            for v in &mut x {
                *v = rng.next_f64();
            }
            x[super::super::features::DRAINED] = if kind == NONE { 1.0 } else { 2.5 };
            x[RTT_RATIO_MAX] = ratio_max + 0.2 * rng.next_f64();
            let scores = ["copa", "cubic", "arc"]
                .iter()
                .map(|c| ((*c).to_string(), if *c == best { 0.0 } else { -1.0 }))
                .collect();
            train.push(KindSample {
                features: x,
                kind: kind.to_string(),
                scores,
            });
        }
        let m = KindModel::train(&train, "copa", ProbeWindow::default(), Some(2.0)).unwrap();
        assert_eq!(m.moves().get("cubic").map(String::as_str), Some("cubic"));
        assert_eq!(m.deep_moves().get("cubic").map(String::as_str), Some("arc"));
        let dir = std::env::temp_dir().join(format!("ccp-kind-deep-{}", std::process::id()));
        m.save(&dir).unwrap();
        let back = KindModel::load(&dir).unwrap();
        assert_eq!(back.deep_from(), Some(2.0));
        for s in &train {
            let want = match s.kind.as_str() {
                NONE => None,
                _ if s.features[RTT_RATIO_MAX] >= 2.0 => Some("arc"),
                _ => Some("cubic"),
            };
            assert_eq!(back.decide(&s.features, 0.8).map(|(_, c)| c), want);
        }
        // Without the split, one move for the kind; a split under 1 is refused.
        let one = KindModel::train(&train, "copa", ProbeWindow::default(), None).unwrap();
        assert!(one.deep_moves().is_empty() && one.deep_from().is_none());
        for bad in [0.5, f64::NAN] {
            assert!(KindModel::train(&train, "copa", ProbeWindow::default(), Some(bad)).is_err());
        }
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// A format-1 manifest (before the depth split), which the header check accepts, loads as
    /// one move per kind.
    #[test]
    fn a_format_1_model_loads_with_one_move_per_kind() {
        let m = KindModel::train(&samples(60), "copa", ProbeWindow::default(), None).unwrap();
        let dir = std::env::temp_dir().join(format!("ccp-kind-v1-{}", std::process::id()));
        m.save(&dir).unwrap();
        let path = dir.join("manifest.json");
        let mut v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&path).unwrap()).unwrap();
        let o = v.as_object_mut().unwrap();
        o.insert("format_version".into(), 1.into());
        o.remove("deep_from");
        o.remove("deep_moves");
        o.remove("classifier");
        std::fs::write(&path, v.to_string()).unwrap();
        let back = KindModel::load(&dir).unwrap();
        assert_eq!(back.moves(), m.moves());
        assert!(back.deep_from().is_none() && back.deep_moves().is_empty());
        let _ = std::fs::remove_dir_all(&dir);
    }

    /// The softmax classifier learns the same kinds, writes one file, reads back to the same
    /// decisions, and a damaged file says so.
    #[test]
    fn a_softmax_classifier_learns_the_kinds_and_round_trips() {
        let train = samples(300);
        let m = KindModel::train_with(
            &train,
            "copa",
            ProbeWindow::default(),
            None,
            Classifier::Softmax,
        )
        .unwrap();
        assert_eq!(m.classifier(), Classifier::Softmax);
        let test = samples(90);
        assert_kinds_right(&m, &test);
        let dir = std::env::temp_dir().join(format!("ccp-kind-sm-{}", std::process::id()));
        m.save(&dir).unwrap();
        assert!(dir.join(SOFTMAX_FILE).is_file());
        assert!(!dir.join("default-none.json").exists());
        let back = KindModel::load(&dir).unwrap();
        assert_eq!(back.classifier(), Classifier::Softmax);
        for s in &test {
            assert_eq!(m.decide(&s.features, 0.8), back.decide(&s.features, 0.8));
        }
        assert!(back.probabilities(&[f64::NAN; N_FEATURES]).is_empty());
        let file = dir.join(SOFTMAX_FILE);
        let good = std::fs::read_to_string(&file).unwrap();
        std::fs::write(&file, &good[..good.len() / 2]).unwrap();
        let e = KindModel::load(&dir).unwrap_err().to_string();
        assert!(e.contains("not a softmax classifier"), "{e}");
        std::fs::remove_file(&file).unwrap();
        assert!(KindModel::load(&dir).is_err());
        // A one-against-the-rest model says so in its manifest.
        let ovr = KindModel::train(&train, "copa", ProbeWindow::default(), None).unwrap();
        assert_eq!(ovr.classifier(), Classifier::OneVsRest);
        ovr.save(&dir).unwrap();
        let text = std::fs::read_to_string(dir.join("manifest.json")).unwrap();
        assert!(text.contains("\"classifier\": \"one-vs-rest\""), "{text}");
        assert_eq!(Classifier::parse(" softmax "), Some(Classifier::Softmax));
        assert_eq!(Classifier::parse("forest"), None);
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn training_without_lone_flows_or_with_one_kind_is_refused() {
        let only_cubic: Vec<_> = samples(30)
            .into_iter()
            .filter(|s| s.kind == "cubic")
            .collect();
        assert!(KindModel::train(&only_cubic, "copa", ProbeWindow::default(), None).is_err());
        let only_none: Vec<_> = samples(30).into_iter().filter(|s| s.kind == NONE).collect();
        assert!(KindModel::train(&only_none, "copa", ProbeWindow::default(), None).is_err());
    }

    #[test]
    fn damaged_manifests_say_what_is_wrong() {
        let m = KindModel::train(&samples(60), "copa", ProbeWindow::default(), Some(2.0)).unwrap();
        let dir = std::env::temp_dir().join(format!("ccp-kind-bad-{}", std::process::id()));
        m.save(&dir).unwrap();
        let path = dir.join("manifest.json");
        let good = std::fs::read_to_string(&path).unwrap();
        for (from, to, says) in [
            ("\"probe-kind\"", "\"probe-models\"", "format"),
            (
                "\"feature_schema\": 2",
                "\"feature_schema\": 1",
                "feature_schema",
            ),
            (
                "\"cubic\": \"cubic\"",
                "\"none\": \"cubic\"",
                "cannot have a move",
            ),
            ("\"cubic\": \"cubic\"", "\"vegas\": \"cubic\"", "no booster"),
            // Moves over a deep queue without a split, or a split under 1.
            (
                "\"deep_from\": 2.0",
                "\"deep_from\": null",
                "without deep_from",
            ),
            ("\"deep_from\": 2.0", "\"deep_from\": 0.5", "at least 1"),
        ] {
            assert!(good.contains(from), "{from} not in the manifest");
            std::fs::write(&path, good.replacen(from, to, 1)).unwrap();
            let e = KindModel::load(&dir).unwrap_err().to_string();
            assert!(e.contains(says), "{from} -> {to}: {e}");
        }
        std::fs::write(&path, "{").unwrap();
        assert!(KindModel::load(&dir).is_err());
        let _ = std::fs::remove_dir_all(&dir);
    }
}
