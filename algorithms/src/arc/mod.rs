//! ARC (Zhang et al., "learning congestion control in a real environment"; `PAPERS.md` §4): a
//! pacing-rate controller whose actor, a small network trained by off-policy actor-critic, runs
//! with ONNX Runtime beside the flow, asynchronously: the flow never waits for it and keeps the
//! last rate until a new action arrives.
//!
//! Model (`docs/algorithms.md` has the equations):
//! - Decisions every `interval_rtts` RTTs (default 1/2, the paper's best), through the suite's
//!   program of that interval ([`crate::programs::every_rtts`]; 1/2 is
//!   [`crate::programs::PER_HALF_RTT`]).
//! - State ([`features`]): the last `history` intervals (10 for the shipped actor) of send
//!   rate, delivery rate, loss, RTT ratio, RTT gradient, sent over acked bytes and the last
//!   action.
//! - Actor ([`actor`]): FC 128 - FC 128 - tanh, one output `a` in `[-1, 1]`; the rate becomes
//!   `rate (1 + δ a)` or `rate / (1 - δ a)` (δ = 0.5), the window twice the rate times the
//!   smoothed RTT ([`features::RateControl`]).
//! - Exploration is added on the environment side ([`ArcConfig::exploring`]: Gaussian noise on
//!   the action the flow applies, drawn from the flow's seed), not in the actor, which stays
//!   fixed during an episode, as in the paper.
//!
//! # Two ways to run the actor ([`Inference`])
//! - [`Inference::Worker`] (real time, what `ccp-agent` uses): the report handler hands the
//!   state to an inference thread ([`worker`]) and applies whatever answer has arrived since
//!   the last report; the datapath keeps the last rate meanwhile. An answer is normally one
//!   decision old when applied (inference takes ~0.1 ms, decisions are half an RTT apart); a
//!   slow one is applied at the first report after it is ready, and a decision is skipped while
//!   the previous one is still being computed.
//! - [`Inference::Deferred`] (deterministic, what the simulator and `ccp-eval` use): the same
//!   one-decision delay, computed inline: the action for the state of report `k` is computed
//!   at report `k` and applied at report `k + 1`, always, so a run depends only on its seed and
//!   the model. The difference to real time: there, an answer slower than a decision interval
//!   is applied later and skipped decisions happen; here never.
//!
//! # Hot reload
//! Flows of a config share one [`ModelStore`]: in real time its worker looks at the model files
//! at most once a second and switches to a new model (a new modification time or length) for
//! the decisions after it; a model that does not load is logged and the previous one stays.
//! Deferred flows take the store's model when they start and keep it (re-reading the files
//! first), so a run never changes model mid-flow.
//!
//! # What is left out
//! ARC's receiver-side counters (received bytes; ours are the sender's acked bytes), its Redis
//! store (online training records decisions through [`TrajectorySink`]; the agent's store is
//! `SQLite`), and its reward weights (training uses the environment's `ln(throughput / RTT)`).
//! A retransmission timeout halves rate and window, and the action due then is dropped (the
//! paper does not say). One addition: the rate never exceeds [`features::RATIO_CAP`] times the
//! largest delivery rate the flow has seen, where the state's send ratio saturates
//! ([`features::RateControl::steer`]). Without it, on cellular paths that lost nearly every
//! packet the shipped actor kept raising a rate it could no longer see, to about 10 Gbit/s
//! into a link of a few Mbit/s. Without a model
//! ([`AlgorithmConfig::ready`] says why; tools refuse to start flows) a flow keeps its initial
//! window, unpaced.

pub mod actor;
pub mod features;
pub mod worker;

use std::path::PathBuf;
use std::sync::atomic::{AtomicU8, Ordering};
use std::sync::{Arc, OnceLock};

pub use actor::{Actor, ActorError, ActorSidecar, ModelStore, Refresh};
pub use features::{FEATURES, Interval, Observer, RateControl, SCHEMA_VERSION};
use worker::Slot;

use crate::api::{Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement, SplitMix64};
use crate::programs::ProgramSpec;

/// The environment variable naming the registry's model file.
pub const MODEL_ENV: &str = "CCP_ARC_MODEL";

/// Intervals per state and action scale when no model says (the shipped actor's).
pub const DEFAULT_HISTORY: usize = 10;
/// See [`DEFAULT_HISTORY`].
pub const DEFAULT_DELTA: f64 = 0.5;

/// Where the registry's ARC reads its actor: `$CCP_ARC_MODEL`, else
/// `algorithms/models/arc/actor.onnx` of this source tree (`make arc-model`).
pub fn default_model_path() -> PathBuf {
    std::env::var_os(MODEL_ENV).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/arc/actor.onnx"),
        PathBuf::from,
    )
}

/// The default model's store, opened once per process.
fn default_store() -> Arc<ModelStore> {
    static STORE: OnceLock<Arc<ModelStore>> = OnceLock::new();
    STORE
        .get_or_init(|| ModelStore::open(default_model_path()))
        .clone()
}

/// How a flow runs its actor (see the module docs).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Inference {
    /// Inline, applied one decision later: deterministic (the simulator's).
    Deferred,
    /// On the store's inference thread, applied when it arrives (the agent's).
    Worker,
}

static DEFAULT_INFERENCE: AtomicU8 = AtomicU8::new(0);

/// Sets how flows of configs that do not say ([`ArcConfig::inference`]) run their actor, for
/// the whole process; `ccp-agent` sets [`Inference::Worker`] before it starts. The default is
/// [`Inference::Deferred`].
pub fn set_default_inference(mode: Inference) {
    DEFAULT_INFERENCE.store(u8::from(mode == Inference::Worker), Ordering::Relaxed);
}

/// The process's default ([`set_default_inference`]).
pub fn default_inference() -> Inference {
    if DEFAULT_INFERENCE.load(Ordering::Relaxed) == 1 {
        Inference::Worker
    } else {
        Inference::Deferred
    }
}

type SharedSink = Arc<dyn TrajectorySink>;
static DEFAULT_RECORDING: std::sync::Mutex<Option<(SharedSink, f64)>> = std::sync::Mutex::new(None);

/// Makes every flow of a config that records nothing itself put its decisions into `sink`,
/// exploring with Gaussian noise of deviation `exploration_std` unless its config explores
/// already, for the whole process (`ccp-agent --arc-trajectories`). Flows started before keep
/// what they had.
pub fn set_default_recording(sink: SharedSink, exploration_std: f64) {
    let std = if exploration_std.is_finite() {
        exploration_std.max(0.0)
    } else {
        0.0
    };
    *DEFAULT_RECORDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner) = Some((sink, std));
}

fn default_recording() -> Option<(SharedSink, f64)> {
    DEFAULT_RECORDING
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .clone()
}

/// One decision of a flow, for a learner.
#[derive(Debug, Clone, PartialEq)]
pub struct Decision {
    /// The datapath's socket id.
    pub sock_id: u32,
    /// The flow's seed (tells flows of one socket id apart).
    pub flow_seed: u64,
    /// Decisions of the flow so far (0 first).
    pub step: u64,
    /// Report time, µs.
    pub now_us: u64,
    /// The state at this report (`history * 7` values).
    pub state: Vec<f32>,
    /// The action applied at this report (after exploration noise); NaN: none applied.
    pub action: f32,
    /// The actor's own answer before noise; NaN: none.
    pub actor_action: f32,
    /// Version of the model that computed the action (0: none).
    pub model_version: u64,
    /// The interval that ended at this report.
    pub interval: Interval,
}

/// Where flows put their decisions (the agent's trajectory store). `record` runs on the report
/// path: it must not block (queue and return).
pub trait TrajectorySink: Send + Sync {
    /// One decision.
    fn record(&self, decision: &Decision);
}

/// ARC's configuration and factory.
#[derive(Clone)]
pub struct ArcConfig {
    store: Option<Arc<ModelStore>>,
    /// Decision interval, RTTs (1/2).
    pub interval_rtts: f64,
    inference: Option<Inference>,
    /// Standard deviation of the Gaussian noise added to each action (0: none).
    pub exploration_std: f64,
    sink: Option<Arc<dyn TrajectorySink>>,
}

impl std::fmt::Debug for ArcConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArcConfig")
            .field("model", &self.store.as_ref().map(|s| s.path().to_path_buf()))
            .field("interval_rtts", &self.interval_rtts)
            .field("inference", &self.inference)
            .field("exploration_std", &self.exploration_std)
            .field("recording", &self.sink.is_some())
            .finish()
    }
}

impl Default for ArcConfig {
    /// The model at [`default_model_path`], decisions every RTT/2, no exploration, the
    /// process's inference mode.
    fn default() -> Self {
        Self {
            store: None,
            interval_rtts: 0.5,
            inference: None,
            exploration_std: 0.0,
            sink: None,
        }
    }
}

impl ArcConfig {
    /// ARC with the model at `path` (reloaded when it changes; see [`ModelStore`]).
    pub fn with_model(path: impl Into<PathBuf>) -> Self {
        Self::with_store(ModelStore::open(path))
    }

    /// ARC with a shared store.
    pub fn with_store(store: Arc<ModelStore>) -> Self {
        Self {
            store: Some(store),
            ..Self::default()
        }
    }

    /// Decisions every `interval_rtts` RTTs (checked by [`AlgorithmConfig::ready`]).
    #[must_use]
    pub fn interval_rtts(mut self, interval_rtts: f64) -> Self {
        self.interval_rtts = interval_rtts;
        self
    }

    /// Runs the actor this way whatever the process's default.
    #[must_use]
    pub fn inference(mut self, mode: Inference) -> Self {
        self.inference = Some(mode);
        self
    }

    /// Adds Gaussian noise of standard deviation `std` to each action (exploration on the
    /// environment side).
    #[must_use]
    pub fn exploring(mut self, std: f64) -> Self {
        self.exploration_std = std;
        self
    }

    /// Every decision of every flow goes to `sink`.
    #[must_use]
    pub fn recording(mut self, sink: Arc<dyn TrajectorySink>) -> Self {
        self.sink = Some(sink);
        self
    }

    /// The model store (the default one unless one was given).
    pub fn store(&self) -> Arc<ModelStore> {
        self.store.clone().unwrap_or_else(default_store)
    }

    fn program_list(&self) -> &'static [&'static ProgramSpec] {
        static FALLBACK: [&ProgramSpec; 1] = [&crate::programs::PER_HALF_RTT];
        crate::programs::every_rtts(self.interval_rtts).unwrap_or(&FALLBACK)
    }
}

impl AlgorithmConfig for ArcConfig {
    const NAME: &'static str = "arc";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.program_list()
    }

    fn ready(&self) -> Result<(), String> {
        crate::programs::every_rtts(self.interval_rtts)?;
        if !(self.exploration_std >= 0.0 && self.exploration_std.is_finite()) {
            return Err(format!(
                "exploration std must be >= 0, got {}",
                self.exploration_std
            ));
        }
        self.store()
            .ready()
            .map_err(|e| format!("{e} (make one with `make arc-model`, or set {MODEL_ENV})"))
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        Box::new(ArcCc::new(self, start))
    }
}

/// One ARC flow.
pub struct ArcCc {
    store: Arc<ModelStore>,
    mode: Inference,
    /// Deferred: the actor the flow started with.
    actor: Option<Arc<Actor>>,
    programs: &'static [&'static ProgramSpec],
    observer: Observer,
    control: RateControl,
    /// Deferred: the action computed at the last report, (noisy, actor's, version).
    pending: Option<(f64, f64, u64)>,
    /// Worker: the flow's mailbox and the last answer taken from it.
    slot: Arc<Slot>,
    last_seq: u32,
    /// The action in force since the last applied one.
    in_force: f64,
    exploration_std: f64,
    rng: SplitMix64,
    sink: Option<Arc<dyn TrajectorySink>>,
    sock_id: u32,
    seed: u64,
    steps: u64,
    state: Vec<f32>,
}

impl std::fmt::Debug for ArcCc {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ArcCc")
            .field("mode", &self.mode)
            .field("control", &self.control)
            .field("in_force", &self.in_force)
            .field("steps", &self.steps)
            .finish_non_exhaustive()
    }
}

impl ArcCc {
    /// A new flow of `cfg`.
    pub fn new(cfg: &ArcConfig, start: &FlowStart) -> Self {
        let store = cfg.store();
        let mode = cfg.inference.unwrap_or_else(default_inference);
        let actor = match mode {
            Inference::Deferred => {
                store.refresh();
                store.current()
            }
            Inference::Worker => None,
        };
        let sidecar = store.current().map(|a| a.sidecar().clone());
        let (history, delta) = sidecar
            .as_ref()
            .map_or((DEFAULT_HISTORY, DEFAULT_DELTA), |s| (s.history, s.delta));
        let observer = Observer::new(start, history);
        let own_std = if cfg.exploration_std.is_finite() {
            cfg.exploration_std.max(0.0)
        } else {
            0.0
        };
        let (sink, exploration_std) = match (&cfg.sink, default_recording()) {
            (Some(s), _) => (Some(s.clone()), own_std),
            (None, Some((s, std))) => (Some(s), if own_std > 0.0 { own_std } else { std }),
            (None, None) => (None, own_std),
        };
        let control = RateControl::new(
            start.mss_bytes,
            observer.handoff.cwnd_bytes,
            delta,
        );
        Self {
            store,
            mode,
            actor,
            programs: cfg.program_list(),
            observer,
            control,
            pending: None,
            slot: Arc::new(Slot::default()),
            last_seq: 0,
            in_force: 0.0,
            exploration_std,
            rng: SplitMix64::new(start.seed ^ 0x4152_4300_0000_0000),
            sink,
            sock_id: start.sock_id,
            seed: start.seed,
            steps: 0,
            state: Vec::new(),
        }
    }

    /// The current pacing rate, bytes/s (0: not set yet).
    pub fn rate_bytes_per_sec(&self) -> f64 {
        self.control.rate
    }

    /// The action in force.
    pub fn action(&self) -> f64 {
        self.in_force
    }

    /// Inferences that failed in real time (the rate stayed each time).
    pub fn inference_errors(&self) -> u64 {
        self.slot.errors()
    }

    /// Gaussian noise (Box-Muller) of the configured deviation.
    fn noise(&mut self) -> f64 {
        if self.exploration_std <= 0.0 {
            return 0.0;
        }
        let u1 = self.rng.next_f64().max(f64::MIN_POSITIVE);
        let u2 = self.rng.next_f64();
        self.exploration_std * (-2.0 * u1.ln()).sqrt() * (std::f64::consts::TAU * u2).cos()
    }

    /// The action to apply now, if one is due: (noisy, actor's, version).
    fn due(&mut self) -> Option<(f64, f64, u64)> {
        match self.mode {
            Inference::Deferred => self.pending.take(),
            Inference::Worker => {
                let (seq, a, version) = self.slot.latest();
                if seq == self.last_seq {
                    return None;
                }
                self.last_seq = seq;
                let a = f64::from(a);
                let noisy = (a + self.noise()).clamp(-1.0, 1.0);
                Some((noisy, a, version))
            }
        }
    }

    /// Starts the computation of the next action on the state just observed.
    fn ask(&mut self) {
        match self.mode {
            Inference::Deferred => {
                if let Some(actor) = &self.actor {
                    match actor.act(&self.state) {
                        Ok(a) => {
                            let version = actor.version();
                            let noisy = (a + self.noise()).clamp(-1.0, 1.0);
                            self.pending = Some((noisy, a, version));
                        }
                        Err(e) => {
                            tracing::error!(error = %e, "ARC inference failed; the rate stays");
                        }
                    }
                }
            }
            Inference::Worker => {
                worker::submit(&self.store, &self.slot, &self.state);
            }
        }
    }
}

impl Algorithm for ArcCc {
    fn name(&self) -> &'static str {
        ArcConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        self.programs
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.observer.handoff = *handoff;
        self.control.cwnd = f64::from(handoff.cwnd_bytes);
        self.control.rate = 0.0;
        self.pending = None;
        self.observer.handoff.pacing = crate::api::Pacing::Unpaced;
        self.observer.handoff.cwnd_bytes = self.control.cwnd_bytes();
        Control::cwnd(self.control.cwnd_bytes()).with_pacing(crate::api::Pacing::Unpaced)
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        let interval = self.observer.observe(m, self.in_force);
        self.observer.state_into(&mut self.state);
        let applied = self.due();
        if m.timeout {
            // A due action is dropped: the timeout's halving goes first.
            self.control.timeout();
        } else if let Some((a, _, _)) = applied {
            self.control.steer(a, &self.observer);
            self.in_force = a;
        }
        let applied = applied.filter(|_| !m.timeout);
        if let Some(sink) = &self.sink {
            let (action, actor_action, model_version) =
                applied.map_or((f32::NAN, f32::NAN, 0), |(a, b, v)| (a as f32, b as f32, v));
            sink.record(&Decision {
                sock_id: self.sock_id,
                flow_seed: self.seed,
                step: self.steps,
                now_us: m.now_us,
                state: self.state.clone(),
                action,
                actor_action,
                model_version,
                interval,
            });
        }
        self.steps += 1;
        self.ask();
        let c = self.control.control();
        self.observer.handoff.cwnd_bytes = self.control.cwnd_bytes();
        self.observer.handoff.pacing = self.control.pacing();
        c
    }

    fn handoff(&self) -> Handoff {
        self.observer.handoff
    }
}

#[cfg(test)]
mod tests;
