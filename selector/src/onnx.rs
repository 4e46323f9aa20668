//! Policy 4, `onnx`: a neural network, loaded from an ONNX file and run with ONNX Runtime, maps
//! a window of per-report features to one score per candidate; the decision is the argmax.
//!
//! What it follows: ARC runs its learned selector with ONNX Runtime for inference, and TCP-RL
//! picks a congestion-control scheme per flow with a learned policy over recent measurements.
//! What it leaves out: online learning and exploration (TCP-RL's reinforcement loop; the model
//! here is trained offline by `selector/train/train_onnx.py` and frozen), per-candidate reward
//! regression (Antelope's models), and any GPU or batching across flows: one flow, one
//! single-threaded CPU inference per report.
//!
//! # The runtime
//! ONNX Runtime is loaded once per process by [`ccp_algorithms::onnx`] (the suite's one copy of
//! the library lookup, shared with ARC's actor): `ORT_DYLIB_PATH` if set, else the workspace
//! `.venv` that `make venv` fills. A missing or unloadable library is an [`OnnxError`], never a
//! panic.
//!
//! # The features (schema [`SCHEMA_VERSION`] 1)
//! Per report, in this order ([`FEATURES`], then one per candidate):
//! - `throughput_norm`: delivery rate (`rate_incoming`, else acked bytes over the time since the
//!   previous report, else 0) divided by the largest such rate the flow has seen, in `[0, 1]`;
//! - `rtt_ratio`: `rtt / min_rtt` (min over the flow's `rtt` and `min_rtt` samples), capped at
//!   [`RTT_RATIO_CAP`]; 0 without a sample;
//! - `loss_frac`: lost bytes over acked + SACKed + lost bytes, lost packets counted as
//!   [`MSS_BYTES`] each; 0 on an empty interval;
//! - `timeout`: 1 if the interval had a retransmission timeout, else 0;
//! - `current=<candidate>`: one-hot of the candidate active at that report.
//!
//! The model input is the last `window` reports (from the sidecar; the example uses 8), oldest
//! first, flattened: a float tensor `[1, window * (4 + candidates)]`. The output named in the
//! sidecar is a float tensor `[1, candidates]` of scores (the example: class probabilities).
//! Until `window` reports have been seen the policy stays.
//!
//! # The sidecar
//! `policy.onnx` comes with `policy.json` beside it: `schema_version`, `window`, `features`
//! (the per-report names above, candidates included), `candidates` (the model's order: of its
//! one-hot inputs and of its scores), `input_name`, `output_name`. [`OnnxModel::load`] checks
//! all of them, and the model's own input and output shapes, against the selector's
//! candidates; any mismatch is an error that names what was expected and what was found.
//!
//! The selector's candidates must be the model's, each once, in any order: the model sees its
//! own order and the policy maps by name (the one-hot of the active candidate goes to the
//! model's slot for it, and the model's scores come back in the selector's order). So the
//! example model, trained with `cubic` first, serves the agent's default order (`reno` first)
//! as well as `ccp-eval`'s.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

pub use ccp_algorithms::onnx::DYLIB_ENV;
use ccp_algorithms::onnx::RuntimeError;
pub(crate) use ccp_algorithms::onnx::check_outlet;
use ort::session::Session;
use ort::value::TensorRef;
use serde::Deserialize;

use crate::policy::{Decision, Features, SelectionPolicy};
use crate::selector::PolicyFactory;

/// Version of the feature schema below; bumped whenever a feature or its order changes.
pub const SCHEMA_VERSION: u32 = 1;

/// Per-report scalar features, in input order; the candidate one-hot (`current=<name>`) follows.
pub const FEATURES: [&str; 4] = ["throughput_norm", "rtt_ratio", "loss_frac", "timeout"];

/// Bytes counted per lost packet in `loss_frac`.
pub const MSS_BYTES: u64 = 1448;

/// Upper bound of `rtt_ratio`, so one stale `min_rtt` cannot blow the input up.
pub const RTT_RATIO_CAP: f64 = 10.0;

/// What can go wrong loading the runtime or a model, or running it.
#[derive(Debug, thiserror::Error)]
pub enum OnnxError {
    /// ONNX Runtime itself could not be found or loaded (`ccp_algorithms::onnx`).
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// The model or its sidecar could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The sidecar is not valid JSON of the expected form.
    #[error("bad sidecar {path}: {source}")]
    Sidecar {
        /// The sidecar file.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The model or sidecar does not match the schema or the selector's candidates.
    #[error("model {path} does not match: {what}: expected {expected}, found {found}")]
    Mismatch {
        /// The model file.
        path: PathBuf,
        /// What was compared.
        what: &'static str,
        /// What this build and the candidates need.
        expected: String,
        /// What the files say.
        found: String,
    },
    /// ONNX Runtime refused the model (malformed file, unsupported operator...).
    #[error("ONNX Runtime cannot load model {path}: {source}")]
    Model {
        /// The model file.
        path: PathBuf,
        /// The runtime's error.
        source: ort::Error,
    },
    /// Inference failed.
    #[error("inference failed: {0}")]
    Run(#[from] ort::Error),
    /// The input had the wrong length.
    #[error("input has {found} values, the model takes {expected}")]
    InputLength {
        /// What the model takes.
        expected: usize,
        /// What was passed.
        found: usize,
    },
    /// A thread panicked while holding the session (the lock is poisoned).
    #[error("the ONNX session lock is poisoned")]
    Poisoned,
}

impl OnnxError {
    /// Whether ONNX Runtime's library is missing (as opposed to a bad model or input): what a
    /// test or tool may skip on.
    #[must_use]
    pub fn is_library_missing(&self) -> bool {
        matches!(
            self,
            Self::Runtime(RuntimeError::LibraryNotFound { .. } | RuntimeError::CurrentDir(_))
        )
    }
}

/// The library path to use: `explicit`, else `ORT_DYLIB_PATH`, else the workspace `.venv`
/// ([`ccp_algorithms::onnx::resolve_library`]). Checks only that the file exists.
pub fn resolve_library(explicit: Option<&Path>) -> Result<PathBuf, OnnxError> {
    Ok(ccp_algorithms::onnx::resolve_library(explicit)?)
}

/// Loads ONNX Runtime (once per process, [`ccp_algorithms::onnx::environment`]) and returns
/// its environment and the library's path (for logs).
pub(crate) fn runtime(
    library: Option<&Path>,
) -> Result<(ort::environment::Environment, PathBuf), OnnxError> {
    Ok(ccp_algorithms::onnx::environment(library)?)
}

/// The sidecar `policy.json` (see the module docs); unknown fields are ignored.
#[derive(Debug, Clone, Deserialize)]
pub struct Sidecar {
    /// Feature schema the model was trained on.
    pub schema_version: u32,
    /// Reports per input window.
    pub window: usize,
    /// Per-report feature names, candidates' one-hot included.
    pub features: Vec<String>,
    /// Candidate names, by output index.
    pub candidates: Vec<String>,
    /// Name of the model input.
    pub input_name: String,
    /// Name of the score output.
    pub output_name: String,
}

/// A loaded, validated model, shared by every flow of a selector (wrap it in an [`Arc`]).
///
/// The session sits behind a mutex because `ort` runs take `&mut Session`; one inference per
/// report is short, so flows on different threads wait little.
pub struct OnnxModel {
    session: Mutex<Session>,
    sidecar: Sidecar,
    input_len: usize,
    library: PathBuf,
    /// The model's index of each of the selector's candidates, by the selector's index.
    to_model: Vec<usize>,
}

impl std::fmt::Debug for OnnxModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OnnxModel")
            .field("sidecar", &self.sidecar)
            .field("library", &self.library)
            .finish_non_exhaustive()
    }
}

impl OnnxModel {
    /// Loads `model` (`.onnx`) and its sidecar (same path, `.json`), for a selector with these
    /// candidates (the model's, in any order; see the module docs), with the library from
    /// [`resolve_library`].
    pub fn load(model: &Path, candidates: &[&str]) -> Result<Self, OnnxError> {
        Self::load_with_library(model, candidates, None)
    }

    /// As [`OnnxModel::load`], with an explicit library path (ignored once a library is
    /// loaded in this process).
    pub fn load_with_library(
        model: &Path,
        candidates: &[&str],
        library: Option<&Path>,
    ) -> Result<Self, OnnxError> {
        let sidecar: Sidecar = read_sidecar(&model.with_extension("json"))?;
        let mismatch = |what, expected: String, found: String| OnnxError::Mismatch {
            path: model.to_path_buf(),
            what,
            expected,
            found,
        };
        if sidecar.schema_version != SCHEMA_VERSION {
            return Err(mismatch(
                "schema_version",
                SCHEMA_VERSION.to_string(),
                sidecar.schema_version.to_string(),
            ));
        }
        let Some(to_model) = candidate_map(&sidecar.candidates, candidates) else {
            return Err(mismatch(
                "candidates",
                format!(
                    "the selector's {candidates:?}, each once, in any order (a model over \
                     other candidates needs a selector over those)"
                ),
                format!("{:?}", sidecar.candidates),
            ));
        };
        let model_names: Vec<&str> = sidecar.candidates.iter().map(String::as_str).collect();
        let names = feature_names(&model_names);
        if sidecar.features != names {
            return Err(mismatch(
                "features",
                format!("{names:?}"),
                format!("{:?}", sidecar.features),
            ));
        }
        if sidecar.window == 0 {
            return Err(mismatch("window", ">= 1".into(), "0".into()));
        }
        let bytes = std::fs::read(model).map_err(|source| OnnxError::Io {
            path: model.to_path_buf(),
            source,
        })?;
        let (env, library) = runtime(library)?;
        let model_err = |source| OnnxError::Model {
            path: model.to_path_buf(),
            source,
        };
        let session = ccp_algorithms::onnx::session(&env, &bytes).map_err(model_err)?;

        let per_report = names.len();
        let input_len = sidecar.window * per_report;
        check_outlet(
            session.inputs(),
            &sidecar.input_name,
            input_len,
            "input",
            &mismatch,
        )?;
        check_outlet(
            session.outputs(),
            &sidecar.output_name,
            candidates.len(),
            "output",
            &mismatch,
        )?;
        Ok(Self {
            session: Mutex::new(session),
            sidecar,
            input_len,
            library,
            to_model,
        })
    }

    /// The model's index (input one-hot slot and score) of the selector's candidate
    /// `candidate`; `None` past the last one.
    pub fn model_index(&self, candidate: usize) -> Option<usize> {
        self.to_model.get(candidate).copied()
    }

    /// The validated sidecar.
    pub fn sidecar(&self) -> &Sidecar {
        &self.sidecar
    }

    /// The shared library in use.
    pub fn library(&self) -> &Path {
        &self.library
    }

    /// Values per input window (`window * (FEATURES.len() + candidates)`).
    pub fn input_len(&self) -> usize {
        self.input_len
    }

    /// Runs the model on one flattened window (in the model's layout) and writes one score per
    /// candidate to `scores`, in the model's order ([`Sidecar::candidates`]).
    pub fn scores(&self, input: &[f32], scores: &mut [f32]) -> Result<(), OnnxError> {
        if input.len() != self.input_len {
            return Err(OnnxError::InputLength {
                expected: self.input_len,
                found: input.len(),
            });
        }
        let tensor = TensorRef::from_array_view(([1usize, self.input_len], input))?;
        let mut session = self.session.lock().map_err(|_| OnnxError::Poisoned)?;
        let outputs = session.run(ort::inputs![self.sidecar.input_name.as_str() => tensor])?;
        let (_, out) = outputs[self.sidecar.output_name.as_str()].try_extract_tensor::<f32>()?;
        if out.len() != scores.len() {
            return Err(OnnxError::InputLength {
                expected: scores.len(),
                found: out.len(),
            });
        }
        scores.copy_from_slice(out);
        Ok(())
    }
}

/// For each of the selector's candidates, the model's index of the same name; `None` unless
/// both list the same names, each once.
pub(crate) fn candidate_map(model: &[String], selector: &[&str]) -> Option<Vec<usize>> {
    if model.len() != selector.len() {
        return None;
    }
    subset_map(model, selector)?.into_iter().collect()
}

/// For each of the selector's candidates, the model's index of the same name (`None`: not the
/// model's); `None` unless every model candidate is among the selector's, each once.
pub(crate) fn subset_map(model: &[String], selector: &[&str]) -> Option<Vec<Option<usize>>> {
    let map: Vec<Option<usize>> = selector
        .iter()
        .map(|s| model.iter().position(|m| m == s))
        .collect();
    let mut seen = vec![0u32; model.len()];
    for i in map.iter().flatten() {
        seen[*i] += 1;
    }
    seen.iter().all(|&n| n == 1).then_some(map)
}

/// A model's JSON sidecar.
pub(crate) fn read_sidecar<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, OnnxError> {
    let text = std::fs::read_to_string(path).map_err(|source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_str(&text).map_err(|source| OnnxError::Sidecar {
        path: path.to_path_buf(),
        source,
    })
}

/// Per-report feature names for these candidates: [`FEATURES`], then `current=<name>` each.
pub fn feature_names(candidates: &[&str]) -> Vec<String> {
    FEATURES
        .iter()
        .map(|f| (*f).to_string())
        .chain(candidates.iter().map(|c| format!("current={c}")))
        .collect()
}

/// A flow's input window in the schema of this module: the last K reports' features, oldest
/// first (zeros before the flow has them). Used by [`OnnxPolicy`] and by `ccp-eval gen-data`,
/// which records windows to train on.
#[derive(Debug, Clone)]
pub struct FeatureWindow {
    window: Vec<f32>,
    per_report: usize,
    reports: usize,
    seen: usize,
    min_rtt_us: u64,
    max_tput: f64,
    prev_now_us: Option<u64>,
}

impl FeatureWindow {
    /// An empty window of `reports` reports over `candidates` candidates.
    pub fn new(reports: usize, candidates: usize) -> Self {
        let per_report = FEATURES.len() + candidates;
        Self {
            window: vec![0.0; reports * per_report],
            per_report,
            reports,
            seen: 0,
            min_rtt_us: 0,
            max_tput: 0.0,
            prev_now_us: None,
        }
    }

    /// The input values, oldest report first.
    pub fn values(&self) -> &[f32] {
        &self.window
    }

    /// Whether K reports have been seen.
    pub fn is_full(&self) -> bool {
        self.seen >= self.reports
    }

    /// Reports seen so far.
    pub fn seen(&self) -> usize {
        self.seen
    }
}

/// The `onnx` policy for one flow: keeps the feature window and asks the shared model.
#[derive(Debug)]
pub struct OnnxPolicy {
    model: Arc<OnnxModel>,
    window: FeatureWindow,
    /// The last scores in the model's order.
    model_scores: Vec<f32>,
    /// The same in the selector's order.
    scores: Vec<f32>,
    errors: u64,
    initial: usize,
}

impl OnnxPolicy {
    /// A policy for one flow over `model`'s candidates, starting on `initial`.
    pub fn new(model: Arc<OnnxModel>, initial: usize) -> Self {
        let n = model.sidecar.candidates.len();
        Self {
            window: FeatureWindow::new(model.sidecar.window, n),
            model_scores: vec![0.0; n],
            scores: vec![0.0; n],
            model,
            errors: 0,
            initial,
        }
    }

    /// A [`Selector`](crate::Selector) policy factory: one `OnnxPolicy` per flow, all sharing
    /// `model`, each starting on `initial`. The selector's candidates must be the ones `model`
    /// was loaded for, in that order (checked by [`OnnxModel::load`]).
    pub fn factory(model: Arc<OnnxModel>, initial: usize) -> PolicyFactory {
        Arc::new(move |_: &crate::policy::FlowContext<'_>| {
            Box::new(OnnxPolicy::new(model.clone(), initial)) as _
        })
    }

    /// The current input window, in the model's layout (for tests and traces).
    pub fn window(&self) -> &[f32] {
        self.window.values()
    }

    /// The scores of the last inference, by the selector's candidate index.
    pub fn scores(&self) -> &[f32] {
        &self.scores
    }

    /// Inferences that failed (each answered `Stay`).
    pub fn errors(&self) -> u64 {
        self.errors
    }

    /// Appends one report's features to the window (see the module docs for the schema), the
    /// active candidate in the model's slot for it.
    pub fn push(&mut self, f: &Features<'_>) {
        let current = self.model.model_index(f.current).unwrap_or(usize::MAX);
        self.window.push(&Features { current, ..*f });
    }
}

impl FeatureWindow {
    /// Appends one report's features (see the module docs for the schema).
    pub fn push(&mut self, f: &Features<'_>) {
        let m = f.measurement;
        self.min_rtt_us = ccp_algorithms::rtt::lower_min(self.min_rtt_us, [m.min_rtt_us, m.rtt_us]);
        let tput = if m.rate_incoming_bytes_per_sec > 0 {
            m.rate_incoming_bytes_per_sec as f64
        } else if let Some(prev) = self.prev_now_us
            && m.now_us > prev
        {
            m.acked_bytes as f64 * 1e6 / (m.now_us - prev) as f64
        } else {
            0.0
        };
        self.prev_now_us = Some(m.now_us);
        self.max_tput = self.max_tput.max(tput);
        let tput_norm = if self.max_tput > 0.0 {
            tput / self.max_tput
        } else {
            0.0
        };
        let rtt_ratio = if m.rtt_us > 0 && self.min_rtt_us > 0 {
            (m.rtt_us as f64 / self.min_rtt_us as f64).min(RTT_RATIO_CAP)
        } else {
            0.0
        };
        let lost_bytes = m.lost_pkts.saturating_mul(MSS_BYTES);
        let denom = m
            .acked_bytes
            .saturating_add(m.sacked_bytes)
            .saturating_add(lost_bytes);
        let loss_frac = if denom > 0 {
            lost_bytes as f64 / denom as f64
        } else {
            0.0
        };
        let p = self.per_report;
        self.window.copy_within(p.., 0);
        let start = self.window.len() - p;
        let row = &mut self.window[start..];
        row[0] = tput_norm as f32;
        row[1] = rtt_ratio as f32;
        row[2] = loss_frac as f32;
        row[3] = if m.timeout { 1.0 } else { 0.0 };
        for (i, v) in row[FEATURES.len()..].iter_mut().enumerate() {
            *v = if i == f.current { 1.0 } else { 0.0 };
        }
        self.seen = self.seen.saturating_add(1);
    }
}

impl SelectionPolicy for OnnxPolicy {
    fn name(&self) -> &'static str {
        "onnx"
    }

    fn initial(&self) -> usize {
        self.initial
    }

    fn decide(&mut self, f: &Features<'_>) -> Decision {
        self.push(f);
        if !self.window.is_full() {
            return Decision::Stay;
        }
        if self
            .model
            .scores(self.window.values(), &mut self.model_scores)
            .is_err()
        {
            self.errors += 1;
            return Decision::Stay;
        }
        for (k, s) in self.scores.iter_mut().enumerate() {
            *s = self
                .model
                .model_index(k)
                .map_or(f32::NAN, |m| self.model_scores[m]);
        }
        match argmax(&self.scores) {
            Some(best) if best != f.current => Decision::SwitchTo(best),
            _ => Decision::Stay,
        }
    }

    fn explain(&self) -> Option<crate::policy::Explanation> {
        self.window.is_full().then(|| crate::policy::Explanation {
            by: self.name(),
            features: self.window.values().iter().map(|v| f64::from(*v)).collect(),
            scores: self.scores.iter().map(|v| f64::from(*v)).collect(),
        })
    }
}

/// Index of the largest score (the first on ties; NaN never wins).
pub fn argmax(scores: &[f32]) -> Option<usize> {
    let mut best: Option<(usize, f32)> = None;
    for (i, &s) in scores.iter().enumerate() {
        if !s.is_nan() && best.is_none_or(|(_, b)| s > b) {
            best = Some((i, s));
        }
    }
    best.map(|(i, _)| i)
}
