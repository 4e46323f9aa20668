//! The simulator stepped from Python: the native half of `ccp_suite.gym`'s environments.
//!
//! [`EnvCore`] is one environment of one kind (`select`, `rate`, `cwnd`) over one scenario:
//! `reset(condition, seed, initial)` starts an episode (one flow on that condition, the
//! scenario's duration) and runs it to the end of its first step; `step(action)` runs it to the
//! end of the next. The Gymnasium classes (`python/ccp_suite/gym/`) add spaces, seeding and
//! the condition draw. The GIL is released while the simulation runs, so environments in
//! different Python threads step in parallel.

mod control;
mod episode;
mod select;

use std::sync::Arc;

use ccp_algorithms::{Ccp, registry};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{FlowSpec, LockstepAgent, Scheme, SimConfig};
use ccp_eval::scenario::Scenario;
use ccp_selector::tcprl::{StepLength, Stepper};
use ccp_selector::{FlowContext, HysteresisConfig, PathChangeConfig, Selector, SelectorLog};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use control::{ControlConfig, Knob};
use episode::{AgentBuilder, Episode, Obs, Resumed};

/// Which environment.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Kind {
    Select,
    Rate,
    Cwnd,
}

/// The step's numbers besides the observation: (reward, throughput Mbit/s, RTT ms, loss
/// fraction, time s, active candidate, cwnd bytes, pacing rate bytes/s).
type StepInfo = (f64, f64, f64, f64, f64, usize, u64, u64);

fn info(o: &Obs) -> StepInfo {
    (
        o.reward,
        o.throughput_mbps,
        o.rtt_ms,
        o.loss,
        o.now_us as f64 / 1e6,
        o.current,
        o.cwnd_bytes,
        o.rate_bytes_per_sec,
    )
}

/// One environment over one scenario (see the module docs).
#[pyclass(module = "ccp_suite._native")]
pub(crate) struct EnvCore {
    kind: Kind,
    scenario: Scenario,
    candidates: Vec<&'static str>,
    window: usize,
    step: StepLength,
    history: usize,
    delta: f64,
    interval_rtts: f64,
    path_change: bool,
    duration_ns: u64,
    obs_len: usize,
    episode: Option<Episode>,
    last: Option<Obs>,
}

#[pymethods]
impl EnvCore {
    /// `kind`: `select`, `rate` or `cwnd`; `scenario`: a built-in name or a TOML file.
    /// `select`: `candidates` (default: the selectors' nine), `window` reports per
    /// observation, steps of `step_rtts` smoothed RTTs or `step_s` seconds. `rate`/`cwnd`:
    /// `history` intervals per observation, action scale `delta` (default 0.5 for `rate`, 1
    /// for `cwnd`), decisions every `interval_rtts` RTTs (default 0.5 for `rate`, 1 for
    /// `cwnd`). `duration_s`: episode length (default: the scenario's). `path_change`
    /// (`select`): the selector's path-change detection, as `ccp-eval`'s selectors run it
    /// (default on).
    #[new]
    #[pyo3(signature = (kind, scenario, candidates = None, window = 8, step_rtts = 1.0,
        step_s = None, history = 10, delta = None, interval_rtts = None, duration_s = None,
        path_change = true))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        kind: &str,
        scenario: &Bound<'_, PyAny>,
        candidates: Option<Vec<String>>,
        window: usize,
        step_rtts: f64,
        step_s: Option<f64>,
        history: usize,
        delta: Option<f64>,
        interval_rtts: Option<f64>,
        duration_s: Option<f64>,
        path_change: bool,
    ) -> PyResult<Self> {
        crate::pending::ensure_installed()?;
        let kind = match kind {
            "select" => Kind::Select,
            "rate" => Kind::Rate,
            "cwnd" => Kind::Cwnd,
            other => {
                return Err(PyValueError::new_err(format!(
                    "unknown environment kind {other:?} (select, rate, cwnd)"
                )));
            }
        };
        let scenario = crate::scenario::load(scenario)?;
        if scenario.conditions.is_empty() {
            return Err(PyValueError::new_err("the scenario has no conditions"));
        }
        let candidates = match candidates {
            None => ccp_eval::selectors::candidate_names(),
            Some(names) => names
                .iter()
                .map(|n| registry::global().resolve(n))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| PyValueError::new_err(e.to_string()))?,
        };
        if candidates.is_empty() {
            return Err(PyValueError::new_err("no candidates"));
        }
        if window == 0 || history == 0 {
            return Err(PyValueError::new_err("window and history must be >= 1"));
        }
        let step = match step_s {
            Some(s) if s > 0.0 && s.is_finite() => StepLength::Seconds(s),
            Some(s) => {
                return Err(PyValueError::new_err(format!(
                    "step_s must be > 0, got {s}"
                )));
            }
            None if step_rtts > 0.0 && step_rtts.is_finite() => StepLength::Rtts(step_rtts),
            None => {
                return Err(PyValueError::new_err(format!(
                    "step_rtts must be > 0, got {step_rtts}"
                )));
            }
        };
        let delta = delta.unwrap_or(if kind == Kind::Rate { 0.5 } else { 1.0 });
        if !(delta > 0.0 && delta.is_finite()) {
            return Err(PyValueError::new_err(format!(
                "delta must be > 0, got {delta}"
            )));
        }
        let interval_rtts = interval_rtts.unwrap_or(if kind == Kind::Rate { 0.5 } else { 1.0 });
        control::programs_every(interval_rtts).map_err(PyValueError::new_err)?;
        let duration_s = duration_s.unwrap_or(scenario.duration_s);
        if !(duration_s > 0.0 && duration_s.is_finite()) {
            return Err(PyValueError::new_err(format!(
                "duration_s must be > 0, got {duration_s}"
            )));
        }
        let obs_len = match kind {
            Kind::Select => ccp_selector::tcprl::observation_len(window, candidates.len()),
            Kind::Rate | Kind::Cwnd => history * control::FEATURES.len(),
        };
        Ok(Self {
            kind,
            scenario,
            candidates,
            window,
            step,
            history,
            delta,
            interval_rtts,
            path_change,
            duration_ns: (duration_s * 1e9) as u64,
            obs_len,
            episode: None,
            last: None,
        })
    }

    /// Condition ids of the scenario, by index.
    fn conditions(&self) -> Vec<String> {
        self.scenario
            .conditions
            .iter()
            .map(|c| c.id.clone())
            .collect()
    }

    /// The candidates (`select`), by action index.
    fn candidates(&self) -> Vec<&'static str> {
        self.candidates.clone()
    }

    /// Values per observation.
    fn obs_len(&self) -> usize {
        self.obs_len
    }

    /// Names of the values of one report, then of the step's state (`select`), or of one
    /// interval (`rate`, `cwnd`).
    fn feature_names(&self) -> Vec<String> {
        match self.kind {
            Kind::Select => ccp_selector::onnx::feature_names(&self.candidates)
                .into_iter()
                .chain(ccp_selector::tcprl::STATE.iter().map(|s| (*s).to_string()))
                .collect(),
            Kind::Rate | Kind::Cwnd => control::FEATURES.iter().map(|s| (*s).to_string()).collect(),
        }
    }

    /// Episode length, s.
    fn duration_s(&self) -> f64 {
        self.duration_ns as f64 / 1e9
    }

    /// Starts an episode on condition `condition` with simulation seed `seed` (`select`: on
    /// candidate `initial`) and runs it to the end of its first step. Returns the observation
    /// (float32 bytes) and the step's numbers.
    #[pyo3(signature = (condition, seed, initial = 0))]
    fn reset<'py>(
        &mut self,
        py: Python<'py>,
        condition: usize,
        seed: u64,
        initial: usize,
    ) -> PyResult<(Bound<'py, PyBytes>, StepInfo)> {
        let Some(cond) = self.scenario.conditions.get(condition) else {
            return Err(PyValueError::new_err(format!(
                "condition {condition} out of range (the scenario has {})",
                self.scenario.conditions.len()
            )));
        };
        if initial >= self.candidates.len() {
            return Err(PyValueError::new_err(format!(
                "initial candidate {initial} out of range ({} candidates)",
                self.candidates.len()
            )));
        }
        let (link, _) = ccp_eval::runner::link_for(cond);
        let owd = (cond.rtt_ms * 1e6 / 2.0) as u64;
        let cfg = SimConfig {
            seed,
            duration_ns: self.duration_ns,
            link,
            flows: vec![FlowSpec::bulk(
                Scheme::Ccp {
                    alg: "gym".to_string(),
                },
                owd,
            )],
            changes: ccp_eval::runner::path_changes(cond),
            agent_latency_ns: 0,
            ack_aggregation_ns: (cond.ack_aggregation_ms * 1e6) as u64,
            sample_interval_ns: 0,
            datapath: DatapathConfig::default(),
        };
        self.episode = None;
        self.last = None;
        let mut ep = Episode::start(cfg, self.agent(initial)?).map_err(PyRuntimeError::new_err)?;
        let first = py.detach(|| ep.resume(0.0));
        match first {
            Resumed::Step(o) => {
                let out = (obs_bytes(py, &o.features), info(&o));
                self.episode = Some(ep);
                self.last = Some(o);
                Ok(out)
            }
            Resumed::Done(Ok(_)) => Err(PyRuntimeError::new_err(
                "the episode ended before its first step (duration shorter than two reports?)",
            )),
            Resumed::Done(Err(e)) => Err(PyRuntimeError::new_err(e)),
        }
    }

    /// Applies `action` (`select`: a candidate index; `rate`/`cwnd`: a value in [-1, 1]) and
    /// runs to the end of the next step. Returns the observation, the step's numbers and
    /// whether the episode is over (then the observation is the last one again and the reward
    /// 0).
    fn step<'py>(
        &mut self,
        py: Python<'py>,
        action: f64,
    ) -> PyResult<(Bound<'py, PyBytes>, StepInfo, bool)> {
        let Some(ep) = self.episode.as_mut() else {
            return Err(PyRuntimeError::new_err(
                "step() before reset() or after the episode ended",
            ));
        };
        match py.detach(|| ep.resume(action)) {
            Resumed::Step(o) => {
                let out = (obs_bytes(py, &o.features), info(&o), false);
                self.last = Some(o);
                Ok(out)
            }
            Resumed::Done(r) => {
                self.episode = None;
                r.map_err(PyRuntimeError::new_err)?;
                let last = self.last.take().unwrap_or_default();
                let mut i = info(&last);
                i.0 = 0.0;
                i.4 = self.duration_ns as f64 / 1e9;
                Ok((obs_bytes(py, &last.features), i, true))
            }
        }
    }
}

impl EnvCore {
    /// The lock-step agent of an episode: the selector with the learner as its policy
    /// (`select`), or the learner's rate/window algorithm.
    fn agent(&self, initial: usize) -> PyResult<AgentBuilder> {
        let kind = self.kind;
        let (step, window, history, delta) = (self.step, self.window, self.history, self.delta);
        let path_change = self.path_change.then(PathChangeConfig::default);
        let programs =
            control::programs_every(self.interval_rtts).map_err(PyValueError::new_err)?;
        let configs = registry::global()
            .configs(&self.candidates)
            .map_err(|e| PyValueError::new_err(e.to_string()))?;
        Ok(Box::new(move |port| match kind {
            Kind::Select => {
                let selector = Selector::new(
                    configs,
                    Arc::new(move |ctx: &FlowContext<'_>| {
                        Box::new(select::Learner {
                            port,
                            stepper: Stepper::new(step, window, ctx.candidates.len()),
                            initial,
                        }) as _
                    }),
                )
                .with_hysteresis(HysteresisConfig::none())
                .with_path_change(path_change)
                .with_log(Arc::new(SelectorLog::new(false)));
                LockstepAgent::new(selector)
            }
            Kind::Rate | Kind::Cwnd => LockstepAgent::new(Ccp::new(ControlConfig {
                knob: if kind == Kind::Rate {
                    Knob::Rate
                } else {
                    Knob::Cwnd
                },
                port,
                history,
                delta,
                programs,
            })),
        }))
    }
}

fn obs_bytes<'py>(py: Python<'py>, v: &[f32]) -> Bound<'py, PyBytes> {
    PyBytes::new_with(py, v.len() * 4, |buf| {
        for (chunk, x) in buf.chunks_exact_mut(4).zip(v) {
            chunk.copy_from_slice(&x.to_le_bytes());
        }
        Ok(())
    })
    .unwrap_or_else(|_| PyBytes::new(py, &[]))
}
