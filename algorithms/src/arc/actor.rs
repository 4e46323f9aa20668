//! ARC's actor as an ONNX model, and the store that hot-reloads it.
//!
//! A model is two files: `actor.onnx` (input `obs`, float `[N, history * 7]`; output `action`,
//! float `[N, 1]` in `[-1, 1]`) and its sidecar `actor.json` beside it:
//!
//! ```json
//! {"schema_version": 1, "features": ["send_rate_norm", ...], "history": 10, "delta": 0.5,
//!  "interval_rtts": 0.5, "input_name": "obs", "output_name": "action", "version": 3}
//! ```
//!
//! [`Actor::load`] checks the schema version and feature names against this build's
//! ([`super::features`]), `history >= 1`, `delta > 0`, and the model's own input and output
//! shapes; any mismatch is an [`ActorError`] naming what was expected and what was found.
//! `version` (any integer, default 0) is the learner's model version: it is logged on every
//! load and recorded with each decision, so a learner can tell which model acted.
//!
//! [`ModelStore`] holds the current actor of one path and reloads it when the files change
//! (their modification time or length): a good new model replaces the old one for decisions
//! from then on; a bad one is reported (`tracing::error!`, [`ModelStore::last_error`]) and the
//! old one stays. A writer should write both files under temporary names and rename them into
//! place (the sidecar first), so a reader never sees half a file.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::time::{Duration, Instant, SystemTime};

use ort::session::Session;
use ort::value::TensorRef;
use serde::Deserialize;

use super::features::{FEATURES, SCHEMA_VERSION};
use crate::onnx::{RuntimeError, check_outlet};

/// What can go wrong loading or running an actor.
#[derive(Debug, thiserror::Error)]
pub enum ActorError {
    /// ONNX Runtime could not be loaded.
    #[error(transparent)]
    Runtime(#[from] RuntimeError),
    /// A file could not be read.
    #[error("cannot read {path}: {source}")]
    Io {
        /// The file.
        path: PathBuf,
        /// The I/O error.
        source: std::io::Error,
    },
    /// The sidecar is not JSON of the expected form.
    #[error("bad sidecar {path}: {source}")]
    Sidecar {
        /// The sidecar.
        path: PathBuf,
        /// The parse error.
        source: serde_json::Error,
    },
    /// The model or sidecar does not match this build's schema.
    #[error("ARC model {path} does not match: {what}: expected {expected}, found {found}")]
    Mismatch {
        /// The model file.
        path: PathBuf,
        /// What was compared.
        what: &'static str,
        /// What this build needs.
        expected: String,
        /// What the files say.
        found: String,
    },
    /// ONNX Runtime refused the model.
    #[error("ONNX Runtime cannot load ARC model {path}: {source}")]
    Model {
        /// The model file.
        path: PathBuf,
        /// The runtime's error.
        source: ort::Error,
    },
    /// Inference failed.
    #[error("ARC inference failed: {0}")]
    Run(String),
    /// The state had the wrong length.
    #[error("the state has {found} values, the actor takes {expected}")]
    InputLength {
        /// What the model takes.
        expected: usize,
        /// What was passed.
        found: usize,
    },
}

/// The sidecar `actor.json` (see the module docs); unknown fields are ignored.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct ActorSidecar {
    /// Feature schema the model was trained on.
    pub schema_version: u32,
    /// Per-interval feature names.
    pub features: Vec<String>,
    /// Intervals per state.
    pub history: usize,
    /// The action's scale ([`super::features::RateControl::delta`]).
    pub delta: f64,
    /// The decision interval it was trained with, RTTs.
    #[serde(default = "half")]
    pub interval_rtts: f64,
    /// Name of the model input.
    pub input_name: String,
    /// Name of the action output.
    pub output_name: String,
    /// The learner's model version.
    #[serde(default)]
    pub version: u64,
}

fn half() -> f64 {
    0.5
}

/// The sidecar path of a model path (`actor.onnx` -> `actor.json`).
pub fn sidecar_path(model: &Path) -> PathBuf {
    model.with_extension("json")
}

/// A loaded, validated actor.
pub struct Actor {
    session: Mutex<Session>,
    sidecar: ActorSidecar,
    input_len: usize,
}

impl std::fmt::Debug for Actor {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Actor")
            .field("sidecar", &self.sidecar)
            .finish_non_exhaustive()
    }
}

impl Actor {
    /// Loads `model` (`.onnx`) and its sidecar (`.json` beside it) with the library of
    /// [`crate::onnx::resolve_library`].
    pub fn load(model: &Path) -> Result<Self, ActorError> {
        let side = sidecar_path(model);
        let text = std::fs::read_to_string(&side).map_err(|source| ActorError::Io {
            path: side.clone(),
            source,
        })?;
        let sidecar: ActorSidecar =
            serde_json::from_str(&text).map_err(|source| ActorError::Sidecar {
                path: side.clone(),
                source,
            })?;
        let mismatch = |what, expected: String, found: String| ActorError::Mismatch {
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
        if sidecar.features != FEATURES {
            return Err(mismatch(
                "features",
                format!("{FEATURES:?}"),
                format!("{:?}", sidecar.features),
            ));
        }
        let valid = (1..=1000).contains(&sidecar.history)
            && sidecar.delta > 0.0
            && sidecar.delta <= 10.0
            && sidecar.interval_rtts > 0.0
            && sidecar.interval_rtts.is_finite();
        if !valid {
            return Err(mismatch(
                "history, delta, interval_rtts",
                "1..=1000, (0, 10], > 0".into(),
                format!(
                    "{}, {}, {}",
                    sidecar.history, sidecar.delta, sidecar.interval_rtts
                ),
            ));
        }
        let bytes = std::fs::read(model).map_err(|source| ActorError::Io {
            path: model.to_path_buf(),
            source,
        })?;
        let (env, _) = crate::onnx::environment(None)?;
        let session = crate::onnx::session(&env, &bytes).map_err(|source| ActorError::Model {
            path: model.to_path_buf(),
            source,
        })?;
        let input_len = sidecar.history * FEATURES.len();
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
            1,
            "output",
            &mismatch,
        )?;
        Ok(Self {
            session: Mutex::new(session),
            sidecar,
            input_len,
        })
    }

    /// The validated sidecar.
    pub fn sidecar(&self) -> &ActorSidecar {
        &self.sidecar
    }

    /// The learner's model version.
    pub fn version(&self) -> u64 {
        self.sidecar.version
    }

    /// Values per state.
    pub fn input_len(&self) -> usize {
        self.input_len
    }

    /// The action for `state`, in `[-1, 1]`.
    pub fn act(&self, state: &[f32]) -> Result<f64, ActorError> {
        if state.len() != self.input_len {
            return Err(ActorError::InputLength {
                expected: self.input_len,
                found: state.len(),
            });
        }
        let run = |e: ort::Error| ActorError::Run(e.to_string());
        let tensor = TensorRef::from_array_view(([1usize, self.input_len], state)).map_err(run)?;
        let mut session = self.session.lock().unwrap_or_else(PoisonError::into_inner);
        let outputs = session
            .run(ort::inputs![self.sidecar.input_name.as_str() => tensor])
            .map_err(run)?;
        let (_, out) = outputs[self.sidecar.output_name.as_str()]
            .try_extract_tensor::<f32>()
            .map_err(run)?;
        match out.first() {
            Some(a) if a.is_finite() => Ok(f64::from(*a).clamp(-1.0, 1.0)),
            Some(a) => Err(ActorError::Run(format!("the actor answered {a}"))),
            None => Err(ActorError::Run("the actor answered nothing".into())),
        }
    }
}

/// Modification time and length of the model and of its sidecar (`None`: missing).
type Stamp = [Option<(SystemTime, u64)>; 2];

fn stamp(model: &Path) -> Stamp {
    let one = |p: &Path| {
        std::fs::metadata(p)
            .ok()
            .map(|m| (m.modified().unwrap_or(SystemTime::UNIX_EPOCH), m.len()))
    };
    [one(model), one(&sidecar_path(model))]
}

#[derive(Debug, Default)]
struct Checked {
    /// Files of the actor in use.
    loaded: Option<Stamp>,
    /// Files that failed to load last (not retried until they change).
    failed: Option<Stamp>,
    last_error: Option<String>,
    last_check: Option<Instant>,
    reloads: u64,
}

/// What [`ModelStore::refresh`] did.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refresh {
    /// The files are the ones loaded (or the ones that failed last).
    Unchanged,
    /// A new actor is in use; its version.
    Reloaded(u64),
    /// The files changed and do not load; the previous actor (if any) stays.
    Failed(String),
}

/// The current actor of one model path, reloaded when the files change (see the module docs).
#[derive(Debug)]
pub struct ModelStore {
    path: PathBuf,
    current: RwLock<Option<Arc<Actor>>>,
    checked: Mutex<Checked>,
    /// The inference worker of this store, started on first use ([`super::worker`]).
    pub(super) worker: std::sync::OnceLock<super::worker::Worker>,
}

impl ModelStore {
    /// A store for `path` with the actor there loaded (or the error kept, see
    /// [`ModelStore::ready`]).
    pub fn open(path: impl Into<PathBuf>) -> Arc<Self> {
        let store = Arc::new(Self {
            path: path.into(),
            current: RwLock::new(None),
            checked: Mutex::new(Checked::default()),
            worker: std::sync::OnceLock::new(),
        });
        store.refresh();
        store
    }

    /// The model path.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The actor in use, if one ever loaded.
    pub fn current(&self) -> Option<Arc<Actor>> {
        self.current
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Whether an actor is in use, or why not.
    pub fn ready(&self) -> Result<(), String> {
        if self.current().is_some() {
            return Ok(());
        }
        let c = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        Err(c.last_error.clone().unwrap_or_else(|| {
            format!("no ARC model at {}", self.path.display())
        }))
    }

    /// The error of the last load that failed, if any.
    pub fn last_error(&self) -> Option<String> {
        self.checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_error
            .clone()
    }

    /// Successful loads so far (the first included).
    pub fn reloads(&self) -> u64 {
        self.checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .reloads
    }

    /// Loads the files again if they changed since the last load (or failed load).
    pub fn refresh(&self) -> Refresh {
        let mut c = self.checked.lock().unwrap_or_else(PoisonError::into_inner);
        c.last_check = Some(Instant::now());
        let now = stamp(&self.path);
        if c.loaded == Some(now) || c.failed == Some(now) {
            return Refresh::Unchanged;
        }
        match Actor::load(&self.path) {
            Ok(actor) => {
                let version = actor.version();
                *self.current.write().unwrap_or_else(PoisonError::into_inner) =
                    Some(Arc::new(actor));
                c.loaded = Some(now);
                c.failed = None;
                c.last_error = None;
                c.reloads += 1;
                tracing::info!(path = %self.path.display(), version, "ARC model loaded");
                Refresh::Reloaded(version)
            }
            Err(e) => {
                let msg = e.to_string();
                if c.loaded.is_some() {
                    tracing::error!(path = %self.path.display(), error = %msg,
                        "ARC model not reloaded; the previous model stays in use");
                }
                c.failed = Some(now);
                c.last_error = Some(msg.clone());
                Refresh::Failed(msg)
            }
        }
    }

    /// [`ModelStore::refresh`] unless the last check was less than `period` ago.
    pub fn refresh_every(&self, period: Duration) -> Refresh {
        let due = self
            .checked
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .last_check
            .is_none_or(|t| t.elapsed() >= period);
        if due {
            self.refresh()
        } else {
            Refresh::Unchanged
        }
    }
}
