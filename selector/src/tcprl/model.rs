//! TCP-RL's two networks in ONNX Runtime: the actor-critic policy (one step of FC 128, FC 128,
//! LSTM 128, FC 128, softmax and value heads, the LSTM state as explicit inputs and outputs)
//! and the optional change detector (DNC). Written by `ccp_suite.tcprl` (`python/`).
//!
//! # The files
//! A directory with `tcprl.json` (the sidecar), `policy.onnx` and, optionally, `dnc.onnx`.
//! The sidecar: `schema_version` ([`SCHEMA_VERSION`]), `candidates` (the model's order),
//! `window` (reports per feature window), `obs_dim`, `hidden` (LSTM size), `step`
//! (`{"rtts": k}` or `{"seconds": s}`), `policy`, `dnc` (file names; `dnc` may be null) and
//! `dnc_threshold`, and optionally `start`: the candidate every flow starts on, or `"random"`
//! (also when absent: TCP-RL's random initial scheme, drawn per flow from its identity), and
//! `switch_margin` (0 when absent; see [`TcpRlSidecar::switch_margin`]). The policy takes
//! `obs` `[1, obs_dim]`, `h_in` and `c_in` `[1, hidden]` and gives `probs` `[1, candidates]`,
//! `value` `[1, 1]`, `h_out` and `c_out`; the DNC takes `x` `[1, 2 obs_dim + candidates]`
//! (last observation, one-hot of the last action, observation) and gives `p_change` `[1, 1]`.
//! Every name and shape is checked at load.

use std::path::{Path, PathBuf};
use std::sync::Mutex;

use ort::session::Session;
use ort::value::TensorRef;
use serde::Deserialize;

use super::step::{StepLength, observation_len};
use crate::onnx::{OnnxError, check_outlet, read_sidecar, runtime, subset_map};

/// Version of the observation schema (`tcprl::step::observation`).
pub const SCHEMA_VERSION: u32 = 1;

/// The step length as written in the sidecar.
#[derive(Debug, Clone, Deserialize)]
pub struct StepSpec {
    /// Smoothed RTTs per step.
    pub rtts: Option<f64>,
    /// Seconds per step.
    pub seconds: Option<f64>,
}

impl StepSpec {
    /// The step length this spec gives: exactly one of the two, finite and positive.
    fn length(&self) -> Option<StepLength> {
        match (self.rtts, self.seconds) {
            (Some(k), None) if k > 0.0 && k.is_finite() => Some(StepLength::Rtts(k)),
            (None, Some(s)) if s > 0.0 && s.is_finite() => Some(StepLength::Seconds(s)),
            _ => None,
        }
    }
}

/// `tcprl.json`.
#[derive(Debug, Clone, Deserialize)]
pub struct TcpRlSidecar {
    /// Observation schema.
    pub schema_version: u32,
    /// The model's candidates, in its order.
    pub candidates: Vec<String>,
    /// Reports per feature window.
    pub window: usize,
    /// Values per observation.
    pub obs_dim: usize,
    /// LSTM state size.
    pub hidden: usize,
    /// Step length.
    pub step: StepSpec,
    /// Policy file, relative to the sidecar.
    pub policy: String,
    /// DNC file, relative to the sidecar (`None`: no detector).
    pub dnc: Option<String>,
    /// P(change) above which the DNC fires.
    pub dnc_threshold: f64,
    /// The candidate a flow starts on; `None` or `"random"`: drawn per flow.
    #[serde(default)]
    pub start: Option<String>,
    /// How much more probable than the active candidate a step's most probable one must be
    /// for the flow to move to it (0, the default: TCP-RL's greedy argmax; in [0, 1]).
    #[serde(default)]
    pub switch_margin: f64,
}

/// The loaded networks, shared by every flow.
pub struct TcpRlModel {
    policy: Mutex<Session>,
    dnc: Option<Mutex<Session>>,
    sidecar: TcpRlSidecar,
    step: StepLength,
    /// For each of the selector's candidates, the model's index (`None`: not the model's).
    to_model: Vec<Option<usize>>,
    /// The sidecar's `start`, model order (`None`: random).
    start: Option<usize>,
    dir: PathBuf,
}

impl std::fmt::Debug for TcpRlModel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TcpRlModel")
            .field("sidecar", &self.sidecar)
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

fn session(path: &Path, library: Option<&Path>) -> Result<Session, OnnxError> {
    let bytes = std::fs::read(path).map_err(|source| OnnxError::Io {
        path: path.to_path_buf(),
        source,
    })?;
    let (env, _) = runtime(library)?;
    ccp_algorithms::onnx::session(&env, &bytes).map_err(|source| OnnxError::Model {
        path: path.to_path_buf(),
        source,
    })
}

/// The model's index of the sidecar's `start` (`None`: random), or the name it does not know.
fn start_index(sidecar: &TcpRlSidecar) -> Result<Option<usize>, String> {
    match sidecar.start.as_deref() {
        None | Some("random") => Ok(None),
        Some(name) => sidecar
            .candidates
            .iter()
            .position(|c| c == name)
            .map(Some)
            .ok_or_else(|| name.to_string()),
    }
}

impl TcpRlModel {
    /// Loads `sidecar` (`tcprl.json`) and its networks for a selector over `candidates`, which
    /// must include each of the model's once, in any order (a selector with more candidates
    /// than the model was trained with runs it over the model's: the others are never chosen),
    /// with the library of [`crate::onnx::resolve_library`].
    pub fn load(sidecar: &Path, candidates: &[&str]) -> Result<Self, OnnxError> {
        Self::load_with_library(sidecar, candidates, None)
    }

    /// As [`TcpRlModel::load`] with an explicit ONNX Runtime library.
    pub fn load_with_library(
        sidecar_path: &Path,
        candidates: &[&str],
        library: Option<&Path>,
    ) -> Result<Self, OnnxError> {
        let sidecar: TcpRlSidecar = read_sidecar(sidecar_path)?;
        let mismatch = |what, expected: String, found: String| OnnxError::Mismatch {
            path: sidecar_path.to_path_buf(),
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
        let Some(to_model) = subset_map(&sidecar.candidates, candidates) else {
            return Err(mismatch(
                "candidates",
                format!("each of them once among the selector's {candidates:?}"),
                format!("{:?}", sidecar.candidates),
            ));
        };
        let obs_dim = observation_len(sidecar.window, sidecar.candidates.len());
        if sidecar.window == 0 || sidecar.obs_dim != obs_dim {
            return Err(mismatch(
                "obs_dim",
                format!("{obs_dim} (window {} >= 1)", sidecar.window),
                sidecar.obs_dim.to_string(),
            ));
        }
        let step = sidecar.step.length().ok_or_else(|| {
            mismatch(
                "step",
                "{\"rtts\": k > 0} or {\"seconds\": s > 0}".into(),
                format!("{:?}", sidecar.step),
            )
        })?;
        let unit = 0.0..=1.0;
        if sidecar.hidden == 0
            || !unit.contains(&sidecar.dnc_threshold)
            || !unit.contains(&sidecar.switch_margin)
        {
            let found = (sidecar.hidden, sidecar.dnc_threshold, sidecar.switch_margin);
            return Err(mismatch(
                "hidden, dnc_threshold, switch_margin",
                ">= 1, in [0, 1], in [0, 1]".into(),
                format!("{found:?}"),
            ));
        }
        let start = start_index(&sidecar).map_err(|name| {
            mismatch(
                "start",
                format!("\"random\" or one of {:?}", sidecar.candidates),
                format!("{name:?}"),
            )
        })?;
        let dir = sidecar_path
            .parent()
            .unwrap_or(Path::new("."))
            .to_path_buf();
        let policy_path = dir.join(&sidecar.policy);
        let policy = session(&policy_path, library)?;
        let pm = |what, expected: String, found: String| OnnxError::Mismatch {
            path: policy_path.clone(),
            what,
            expected,
            found,
        };
        let n = sidecar.candidates.len();
        let h = sidecar.hidden;
        check_outlet(policy.inputs(), "obs", obs_dim, "input", &pm)?;
        check_outlet(policy.inputs(), "h_in", h, "input", &pm)?;
        check_outlet(policy.inputs(), "c_in", h, "input", &pm)?;
        check_outlet(policy.outputs(), "probs", n, "output", &pm)?;
        check_outlet(policy.outputs(), "h_out", h, "output", &pm)?;
        check_outlet(policy.outputs(), "c_out", h, "output", &pm)?;
        let dnc = match &sidecar.dnc {
            None => None,
            Some(file) => {
                let path = dir.join(file);
                let s = session(&path, library)?;
                let dm = |what, expected: String, found: String| OnnxError::Mismatch {
                    path: path.clone(),
                    what,
                    expected,
                    found,
                };
                check_outlet(s.inputs(), "x", 2 * obs_dim + n, "input", &dm)?;
                check_outlet(s.outputs(), "p_change", 1, "output", &dm)?;
                Some(Mutex::new(s))
            }
        };
        Ok(Self {
            policy: Mutex::new(policy),
            dnc,
            sidecar,
            step,
            to_model,
            start,
            dir,
        })
    }

    /// The validated sidecar.
    pub fn sidecar(&self) -> &TcpRlSidecar {
        &self.sidecar
    }

    /// The step length the policy was trained with.
    pub fn step(&self) -> StepLength {
        self.step
    }

    /// Whether the change detector is loaded.
    pub fn has_dnc(&self) -> bool {
        self.dnc.is_some()
    }

    /// The model's index of the candidate every flow starts on (`None`: a random one).
    pub fn start(&self) -> Option<usize> {
        self.start
    }

    /// The model's index of the selector's candidate `candidate`.
    pub fn model_index(&self, candidate: usize) -> Option<usize> {
        self.to_model.get(candidate).copied().flatten()
    }

    /// The selector's number of candidates.
    pub fn selector_len(&self) -> usize {
        self.to_model.len()
    }

    /// One policy step: writes the candidate probabilities (model order) to `probs` and
    /// replaces `h` and `c` with the new LSTM state.
    pub fn policy_step(
        &self,
        obs: &[f32],
        h: &mut [f32],
        c: &mut [f32],
        probs: &mut [f32],
    ) -> Result<(), OnnxError> {
        let hidden = self.sidecar.hidden;
        for (len, want) in [
            (obs.len(), self.sidecar.obs_dim),
            (h.len(), hidden),
            (c.len(), hidden),
            (probs.len(), self.sidecar.candidates.len()),
        ] {
            if len != want {
                return Err(OnnxError::InputLength {
                    expected: want,
                    found: len,
                });
            }
        }
        let obs_in = TensorRef::from_array_view(([1usize, obs.len()], obs))?;
        let h_in = TensorRef::from_array_view(([1usize, hidden], &*h))?;
        let c_in = TensorRef::from_array_view(([1usize, hidden], &*c))?;
        let mut session = self.policy.lock().map_err(|_| OnnxError::Poisoned)?;
        let out = session.run(ort::inputs!["obs" => obs_in, "h_in" => h_in, "c_in" => c_in])?;
        let (_, p) = out["probs"].try_extract_tensor::<f32>()?;
        let (_, hn) = out["h_out"].try_extract_tensor::<f32>()?;
        let (_, cn) = out["c_out"].try_extract_tensor::<f32>()?;
        if p.len() != probs.len() || hn.len() != hidden || cn.len() != hidden {
            return Err(OnnxError::InputLength {
                expected: probs.len(),
                found: p.len(),
            });
        }
        probs.copy_from_slice(p);
        h.copy_from_slice(hn);
        c.copy_from_slice(cn);
        Ok(())
    }

    /// The DNC's probability that the path changed, on `x` (last observation, one-hot of the
    /// last action in the model's order, observation); `None` without a DNC.
    pub fn change_probability(&self, x: &[f32]) -> Result<Option<f32>, OnnxError> {
        let Some(dnc) = &self.dnc else {
            return Ok(None);
        };
        let want = 2 * self.sidecar.obs_dim + self.sidecar.candidates.len();
        if x.len() != want {
            return Err(OnnxError::InputLength {
                expected: want,
                found: x.len(),
            });
        }
        let t = TensorRef::from_array_view(([1usize, x.len()], x))?;
        let mut s = dnc.lock().map_err(|_| OnnxError::Poisoned)?;
        let out = s.run(ort::inputs!["x" => t])?;
        let (_, p) = out["p_change"].try_extract_tensor::<f32>()?;
        Ok(p.first().copied())
    }
}

#[cfg(test)]
mod tests {
    use crate::onnx::subset_map;

    #[test]
    fn a_selector_may_hold_more_candidates_than_the_model_but_not_fewer() {
        let model = ["a".to_string(), "b".to_string()];
        assert_eq!(
            subset_map(&model, &["b", "x", "a"]),
            Some(vec![Some(1), None, Some(0)])
        );
        assert_eq!(subset_map(&model, &["a"]), None);
        assert_eq!(subset_map(&model, &["a", "b", "a"]), None);
    }
}
