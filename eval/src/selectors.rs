//! The selector as `ccp-eval` schemes: `selector-rein`, `selector-antelope`,
//! `selector-outcome`, `selector-probe`, `selector-onnx`, `selector-tcprl`, and the training-data
//! generators `selector-explore` (Antelope's offline data generation: a random candidate per data
//! unit) and `selector-probe-explore` (the probe policy switched to a given candidate).
//!
//! portus picks an algorithm by a name with no `self` (`CongAlg::name`), so each scheme is the
//! one [`Selector`] type behind a marker that names it. Every run builds fresh selectors (so
//! IP-level counts and online samples never leak between runs and results stay deterministic);
//! only the loaded Antelope models are shared, read once per process.
//!
//! Models: `selector-antelope` reads the model set from `$CCP_ANTELOPE_MODELS`, else from
//! `eval/models/antelope` in this source tree (written by `ccp-eval train antelope`).

use std::collections::HashMap;
use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use ccp_algorithms::{AlgorithmConfig, CubicConfig, DynAlgorithmConfig};
use ccp_selector::antelope::model::{OBJECTIVE_ANTELOPE, OBJECTIVE_OUTCOME};
use ccp_selector::antelope::{Antelope, AntelopeConfig, Choose, Mode, ModelSet, Sample};
use ccp_selector::onnx::FeatureWindow;
use ccp_selector::probe::{self, Probe, ProbeChoice, ProbeRecord, ProbeWindow};
use ccp_selector::tcprl::{TcpRlModel, TcpRlPolicy};
use ccp_selector::{
    FlowContext, HysteresisConfig, PathChangeConfig, PolicyFactory, ReinPolicy, SelectionPolicy,
    Selector, SelectorFlow, SelectorLog, StaticPolicy,
};
use ccp_selector::{OnnxModel, OnnxPolicy};
use portus::ipc::Ipc;
use portus::{CongAlg, Datapath, DatapathInfo};

mod probe_settings;
pub use probe_settings::{
    probe_delegate, probe_drain, probe_gates, probe_handovers, probe_kind, probe_kind_afresh,
    probe_kind_dir, probe_kind_skips, probe_later, probe_later_kind, probe_margin, probe_memory,
    probe_models, probe_models_dir, probe_rules, probe_short, probe_trial, probe_watch,
};

/// Scheme: the selector with Rein's rules.
pub const REIN: &str = "selector-rein";
/// Scheme: the selector with Antelope's learned reward models.
pub const ANTELOPE: &str = "selector-antelope";
/// Scheme: the selector with our outcome models (each candidate's whole-flow reward on the
/// path the flow has seen so far).
pub const OUTCOME: &str = "selector-outcome";
/// Scheme: the selector with our probe policy (probe the path on the mode's start candidate,
/// then switch once to the largest predicted gain; `ccp_selector::probe`).
pub const PROBE: &str = "selector-probe";
/// Scheme: the probe policy forced to switch to the candidate [`set_probe_force`] names
/// (`gen-data --kind probe`).
pub const PROBE_EXPLORE: &str = "selector-probe-explore";
/// Scheme: the selector with the example ONNX network (`selector/models/example-onnx`).
pub const ONNX: &str = "selector-onnx";
/// Scheme: the selector with TCP-RL's learned policy (`selector/models/tcprl`).
pub const TCPRL: &str = "selector-tcprl";
/// Scheme: the selector switching at random per data unit, keeping training samples.
pub const EXPLORE: &str = "selector-explore";

/// (name, description) of every selector scheme.
pub const SCHEMES: &[(&str, &str)] = &[
    (REIN, "CCP: selector over every candidate, Rein's rules"),
    (
        ANTELOPE,
        "CCP: selector over every candidate, Antelope's per-candidate GBDT reward models",
    ),
    (
        OUTCOME,
        "CCP: selector over every candidate, per-candidate whole-flow reward models (ours)",
    ),
    (
        PROBE,
        "CCP: selector probing the path on a start candidate, then one switch by predicted gain (ours)",
    ),
    (
        ONNX,
        "CCP: selector over every candidate, an MLP in ONNX Runtime over 8-report windows",
    ),
    (
        TCPRL,
        "CCP: selector over every candidate, TCP-RL's A2C policy (LSTM) and change detector in ONNX Runtime",
    ),
    (
        EXPLORE,
        "CCP: selector switching at random per data unit (training data)",
    ),
    (
        PROBE_EXPLORE,
        "CCP: probe selector switched to a set candidate after its probe (training data)",
    ),
];

/// The schemes that make training data, not results: never run unless named.
pub const TRAINING_ONLY: [&str; 2] = [EXPLORE, PROBE_EXPLORE];

/// Chance of a random switch at the end of a data unit in `selector-explore`.
pub const EXPLORE_SWITCH_PROB: f64 = 0.3;

/// The selectors' candidates: the process registry's algorithms with Cubic first (index 0 is
/// where a policy with no opinion starts a flow), in a fixed order.
pub fn candidates() -> Vec<Box<dyn DynAlgorithmConfig>> {
    let mut v = ccp_algorithms::suite();
    if let Some(k) = v.iter().position(|c| c.name() == CubicConfig::NAME) {
        v.swap(0, k);
    }
    v
}

/// The names of [`candidates`], by index.
pub fn candidate_names() -> Vec<&'static str> {
    candidates().iter().map(|c| c.name()).collect()
}

/// Where the models of `objective` (`antelope` or `outcome`) are read from:
/// `$CCP_ANTELOPE_MODELS` / `$CCP_OUTCOME_MODELS`, else `eval/models/<objective>`.
pub fn models_dir(objective: &str) -> PathBuf {
    env_dir(
        &format!("CCP_{}_MODELS", objective.to_uppercase()),
        &format!("models/{objective}"),
    )
}

/// The directory `$var` names, else `default` relative to this crate's source.
fn env_dir(var: &str, default: &str) -> PathBuf {
    std::env::var_os(var).map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(default),
        PathBuf::from,
    )
}

/// The models of `objective`, loaded once per process (an error says why they cannot be used).
pub fn models(objective: &str) -> Result<Arc<ModelSet>, String> {
    type Slot = OnceLock<Result<Arc<ModelSet>, String>>;
    static ANTELOPE: Slot = OnceLock::new();
    static OUTCOME_MODELS: Slot = OnceLock::new();
    let slot = if objective == OBJECTIVE_OUTCOME {
        &OUTCOME_MODELS
    } else {
        &ANTELOPE
    };
    slot.get_or_init(|| {
        let dir = models_dir(objective);
        let hint = format!("(train with `ccp-eval gen-data antelope-train` and `ccp-eval train {objective}`, or `make models`)");
        match ModelSet::load(&dir) {
            Ok(m) if m.objective == objective => Ok(Arc::new(m)),
            Ok(m) => Err(format!(
                "{}: models predict `{}`, not `{objective}` {hint}",
                dir.display(),
                m.objective
            )),
            Err(e) => Err(format!("{e} {hint}")),
        }
    })
    .clone()
}

/// What `selector-probe-explore` does in the runs that follow: start on `start`, switch to
/// `target` at the end of `window`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ProbeForce {
    /// The probe window.
    pub window: ProbeWindow,
    /// The start candidate.
    pub start: String,
    /// The candidate switched to.
    pub target: String,
}

fn probe_force_slot() -> &'static Mutex<Option<ProbeForce>> {
    static FORCE: Mutex<Option<ProbeForce>> = Mutex::new(None);
    &FORCE
}

/// Sets what `selector-probe-explore` does in the runs built from now on (`gen-data --kind
/// probe` sets it before each batch of runs; `None`: the scheme stays on Cubic and records).
pub fn set_probe_force(force: Option<ProbeForce>) {
    *probe_force_slot()
        .lock()
        .unwrap_or_else(PoisonError::into_inner) = force;
}

/// Where `selector-onnx` reads its network: `$CCP_ONNX_MODEL`, else the example model.
pub fn onnx_model_path() -> PathBuf {
    std::env::var_os("CCP_ONNX_MODEL").map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../selector/models/example-onnx/policy.onnx")
        },
        PathBuf::from,
    )
}

/// The ONNX network over [`candidates`], loaded once per process (an error says why it cannot
/// be used: no ONNX Runtime library, a bad model, other candidates).
pub fn onnx_model() -> Result<Arc<OnnxModel>, String> {
    static MODEL: OnceLock<Result<Arc<OnnxModel>, String>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            OnnxModel::load(&onnx_model_path(), &candidate_names())
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
}

/// Where `selector-tcprl` reads its model: `$CCP_TCPRL_MODEL` (a `tcprl.json`), else the
/// shipped one (`selector/models/tcprl/tcprl.json`, `docs/learning.md`).
pub fn tcprl_model_path() -> PathBuf {
    std::env::var_os("CCP_TCPRL_MODEL").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../selector/models/tcprl/tcprl.json"),
        PathBuf::from,
    )
}

/// TCP-RL's networks over [`candidates`] from [`tcprl_model_path`], loaded once per process
/// and path (so a process may point `$CCP_TCPRL_MODEL` at a model it trained itself).
pub fn tcprl_model() -> Result<Arc<TcpRlModel>, String> {
    type Loaded = Result<Arc<TcpRlModel>, String>;
    static MODELS: OnceLock<Mutex<HashMap<PathBuf, Loaded>>> = OnceLock::new();
    let path = tcprl_model_path();
    let mut models = MODELS
        .get_or_init(Mutex::default)
        .lock()
        .unwrap_or_else(PoisonError::into_inner);
    models
        .entry(path.clone())
        .or_insert_with(|| {
            TcpRlModel::load(&path, &candidate_names())
                .map(Arc::new)
                .map_err(|e| e.to_string())
        })
        .clone()
}

/// Whether `name` is one of the selector schemes ([`SCHEMES`]).
pub fn is_scheme(name: &str) -> bool {
    SCHEMES.iter().any(|(n, _)| *n == name)
}

/// Why the selectors' candidates cannot all run as meant, if they cannot: one that cannot (ARC
/// without ONNX Runtime) would run as its fallback rule inside a selector, and the selector's
/// numbers (or training rows) would not be its own.
pub fn unready_candidate() -> Option<String> {
    ccp_algorithms::registry::global().unready(candidate_names())
}

/// Why a scheme cannot run in this process (its models or library are missing, a learned
/// algorithm's model, or a selector's candidate's), if it cannot.
pub fn unavailable(scheme: &str) -> Option<String> {
    let own = if scheme == ONNX {
        onnx_model().err()
    } else if scheme == TCPRL {
        tcprl_model().err()
    } else if scheme == PROBE {
        probe_models().err()
    } else {
        objective_of(scheme).and_then(|o| models(o).err())
    };
    own.or_else(|| ccp_algorithms::registry::global().not_ready(scheme))
        .or_else(|| is_scheme(scheme).then(unready_candidate).flatten())
}

/// The model objective a scheme needs, if any.
pub fn objective_of(scheme: &str) -> Option<&'static str> {
    match scheme {
        ANTELOPE => Some(OBJECTIVE_ANTELOPE),
        OUTCOME => Some(OBJECTIVE_OUTCOME),
        _ => None,
    }
}

/// Names a selector scheme for portus.
pub trait SchemeName: Send + Sync + 'static {
    /// The scheme name.
    const NAME: &'static str;
}

macro_rules! scheme_name {
    ($t:ident, $name:expr) => {
        /// Marker naming a selector scheme.
        #[derive(Debug)]
        pub struct $t;
        impl SchemeName for $t {
            const NAME: &'static str = $name;
        }
    };
}
scheme_name!(ReinName, REIN);
scheme_name!(AntelopeName, ANTELOPE);
scheme_name!(ExploreName, EXPLORE);
scheme_name!(OutcomeName, OUTCOME);
scheme_name!(OnnxName, ONNX);
scheme_name!(TcprlName, TCPRL);
scheme_name!(ProbeName, PROBE);
scheme_name!(ProbeExploreName, PROBE_EXPLORE);

/// A [`Selector`] registered under `N::NAME`.
pub struct Named<N>(Selector, PhantomData<N>);

impl<N> Named<N> {
    /// Wraps `selector`.
    pub fn new(selector: Selector) -> Self {
        Self(selector, PhantomData)
    }
}

impl<I: Ipc, N: SchemeName> CongAlg<I> for Named<N> {
    type Flow = SelectorFlow<I>;

    fn name() -> &'static str {
        N::NAME
    }

    fn datapath_programs(&self) -> std::collections::HashMap<&'static str, String> {
        <Selector as CongAlg<I>>::datapath_programs(&self.0)
    }

    fn new_flow(&self, datapath: Datapath<I>, info: DatapathInfo) -> Self::Flow {
        <Selector as CongAlg<I>>::new_flow(&self.0, datapath, info)
    }
}

/// The selectors of one run, and what they leave behind.
#[derive(Default)]
pub struct RunSelectors {
    /// Shared log of every selector flow in the run (swap events recorded).
    pub log: Arc<SelectorLog>,
    /// The explore scheme's state (its samples), if it was built.
    pub explore: Option<Arc<Antelope>>,
    /// ONNX feature windows recorded by the explore scheme's flows.
    pub windows: Arc<Mutex<Vec<Vec<f32>>>>,
    /// Probes recorded by `selector-probe-explore`'s flows.
    pub probes: Arc<Mutex<Vec<ProbeRecord>>>,
}

/// Reports per ONNX feature window recorded by `selector-explore` (the example model's K).
pub const ONNX_WINDOW: usize = 8;

/// Wraps a policy and records its flow's ONNX feature window (`ccp_selector::onnx`) every
/// [`ONNX_WINDOW`] reports once full, for `gen-data`'s `onnx.csv`.
struct Recorded {
    inner: Box<dyn SelectionPolicy>,
    window: FeatureWindow,
    sink: Arc<Mutex<Vec<Vec<f32>>>>,
}

impl SelectionPolicy for Recorded {
    fn name(&self) -> &'static str {
        self.inner.name()
    }
    fn initial(&self) -> usize {
        self.inner.initial()
    }
    fn decide(&mut self, f: &ccp_selector::Features<'_>) -> ccp_selector::Decision {
        self.window.push(f);
        if self.window.is_full() && self.window.seen().is_multiple_of(ONNX_WINDOW) {
            self.sink
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(self.window.values().to_vec());
        }
        self.inner.decide(f)
    }
    fn explain(&self) -> Option<ccp_selector::Explanation> {
        self.inner.explain()
    }
    fn decided_by(&self) -> Option<&'static str> {
        self.inner.decided_by()
    }
    fn afresh(&self, to: usize) -> bool {
        self.inner.afresh(to)
    }
    fn afresh_floor(&self, to: usize) -> bool {
        self.inner.afresh_floor(to)
    }
    fn hysteresis(&self) -> Option<ccp_selector::HysteresisConfig> {
        self.inner.hysteresis()
    }
    fn path_changed(&mut self, floor_us: u64) {
        self.inner.path_changed(floor_us);
    }
}

/// The selector schemes of one run.
pub struct RunSchemes {
    /// `selector-rein`.
    pub rein: Named<ReinName>,
    /// `selector-antelope` (if its models load).
    pub antelope: Option<Named<AntelopeName>>,
    /// `selector-outcome` (if its models load).
    pub outcome: Option<Named<OutcomeName>>,
    /// `selector-probe` (if its models load).
    pub probe: Option<Named<ProbeName>>,
    /// `selector-probe-explore`.
    pub probe_explore: Named<ProbeExploreName>,
    /// `selector-onnx` (if ONNX Runtime and the model load).
    pub onnx: Option<Named<OnnxName>>,
    /// `selector-tcprl` (if ONNX Runtime and the model load). No hysteresis: the policy was
    /// trained with every decision taking effect (`ccp/Select-v0`).
    pub tcprl: Option<Named<TcprlName>>,
    /// `selector-explore`.
    pub explore: Named<ExploreName>,
}

/// The margin `$CCP_ANTELOPE_MIN_GAIN` / `$CCP_OUTCOME_MIN_GAIN` sets for the models of
/// `objective` instead of [`AntelopeConfig::for_objective`]'s (a sweep on a validation set;
/// `docs/selector.md`). A value that is not a finite number >= 0 is ignored.
pub fn min_gain_override(objective: &str) -> Option<f64> {
    env_margin(&format!("CCP_{}_MIN_GAIN", objective.to_uppercase()))
}

/// A margin from the environment variable `var`: a finite number >= 0, else `None`.
/// `$CCP_OUTCOME_MARGIN_ABS` / `$CCP_ANTELOPE_MARGIN_ABS` set
/// `AntelopeConfig::min_gain_abs` (absolute margin) the same way.
fn env_margin(var: &str) -> Option<f64> {
    env_f64(var).filter(|g| g.is_finite() && *g >= 0.0)
}

/// The number the environment variable `var` holds (surrounding blanks allowed), else `None`.
fn env_f64(var: &str) -> Option<f64> {
    std::env::var(var).ok()?.trim().parse().ok()
}

/// Antelope's App-requirement API as the harness configures it (key = destination port):
/// flows to 5001 are delay-sensitive, to 5002 throughput-sensitive (`selection-bench`'s
/// application-preference class); every other port uses the default mode.
pub const PREFERENCE_PORTS: [(u16, Mode); 2] = [(5001, Mode::Delay), (5002, Mode::Throughput)];

/// Antelope's App-requirement map as the policies take it (port -> mode).
fn preferences() -> HashMap<u32, Mode> {
    PREFERENCE_PORTS
        .iter()
        .map(|&(p, m)| (u32::from(p), m))
        .collect()
}

/// The hysteresis of the probe policy: its one decision is acted on at once (no agreeing
/// decisions or dwell to wait for), but never inside a loss episode (the loss hold).
fn probe_hysteresis() -> HysteresisConfig {
    HysteresisConfig {
        agreeing_decisions: 1,
        dwell_rtts: 0.0,
        ..HysteresisConfig::default()
    }
}

/// A selector with the probe policy choosing by `choice`, with `options` (a delegate, a
/// drain); `port` as in [`learned`].
fn probing(
    choice: ProbeChoice,
    options: probe::ProbeOptions,
    log: &Arc<SelectorLog>,
    port: Option<u16>,
) -> Selector {
    let shared = Probe::with_options(choice, preferences(), options);
    Selector::new(
        candidates(),
        on_port(port, move |ctx| Box::new(shared.policy(ctx))),
    )
    .with_hysteresis(probe_hysteresis())
    .with_path_change(path_change())
    .with_log(log.clone())
}

/// The path-change detection of every `selector-*` scheme but the two that generate training
/// data (`selector-explore`, `selector-probe-explore`): the defaults
/// (`ccp_selector::path_change`), off with `$CCP_PATH_CHANGE=off` (for measuring without it).
pub fn path_change() -> Option<PathChangeConfig> {
    match std::env::var("CCP_PATH_CHANGE") {
        Ok(v) if v.trim() == "off" => None,
        _ => Some(PathChangeConfig::default()),
    }
}

/// A selector deciding with Antelope's policy machinery over `models`; `port`, if given, is
/// the destination port its flows' policies see (see [`build_for`]).
fn learned(models: Arc<ModelSet>, log: &Arc<SelectorLog>, port: Option<u16>) -> Selector {
    let mut config = AntelopeConfig::for_objective(&models.objective);
    if let Some(g) = min_gain_override(&models.objective) {
        config.min_gain = g;
    }
    config.min_gain_abs = env_margin(&format!(
        "CCP_{}_MARGIN_ABS",
        models.objective.to_uppercase()
    ));
    config.preferences = preferences();
    let shared = Antelope::new(config, models);
    Selector::new(
        candidates(),
        on_port(port, move |ctx| Box::new(shared.policy(ctx))),
    )
    .with_path_change(path_change())
    .with_log(log.clone())
}

/// A policy factory over `make` whose flows see `port`, if given, as their destination port
/// (see [`build_for`]).
fn on_port<F>(port: Option<u16>, make: F) -> PolicyFactory
where
    F: Fn(&FlowContext<'_>) -> Box<dyn SelectionPolicy> + Send + Sync + 'static,
{
    Arc::new(move |ctx: &FlowContext<'_>| {
        let mut ctx = *ctx;
        if let Some(p) = port {
            ctx.dst_port = u32::from(p);
        }
        make(&ctx)
    })
}

/// `selector-rein`: Rein's rules over the candidates (Cubic throughout when they lack Rein's
/// three).
fn rein(log: &Arc<SelectorLog>) -> Selector {
    Selector::new(
        candidates(),
        Arc::new(
            |ctx: &FlowContext<'_>| match ReinPolicy::for_candidates(ctx.candidates) {
                Some(p) => Box::new(p) as _,
                None => Box::new(StaticPolicy::default()) as _,
            },
        ),
    )
    .with_path_change(path_change())
    .with_log(log.clone())
}

/// Builds the selector schemes for one run ([`build_for`] with the flows' own ports).
pub fn build() -> (RunSchemes, RunSelectors) {
    build_for(None)
}

/// `selector-probe` as deployed (its models, margin, trial, watches, hand-overs, later models,
/// gates, rules, kind model with its skips and afresh moves, later kind model, delegate, drain
/// and path memory; each overridable by its `$CCP_PROBE_*` variable), if its models load;
/// `port` as in [`build_for`].
fn deployed_probe(log: &Arc<SelectorLog>, port: Option<u16>) -> Option<Named<ProbeName>> {
    probe_models().ok().map(|models| {
        Named::new(probing(
            ProbeChoice::Predict {
                models,
                margin: probe_margin(),
                trial: probe_trial(),
                watches: probe_watch(),
                handovers: probe_handovers(),
                later: probe_later(),
                gates: probe_gates(),
                rules: probe_rules(),
                kind: probe_kind(),
                kind_skips: probe_kind_skips(),
                kind_afresh: probe_kind_afresh(),
                later_kind: probe_later_kind(),
            },
            probe::ProbeOptions {
                delegate: probe_delegate(),
                drain: probe_drain(),
                memory: probe_memory(),
                short: probe_short(),
            },
            log,
            port,
        ))
    })
}

/// Builds the selector schemes for one run whose selector flows all go to `port`. The
/// simulator opens every flow to port 80, so the harness passes the port of a condition's
/// flows under test here (when they share one) and the learned policies see it as their
/// flows' destination port, as a real flow's would be.
pub fn build_for(port: Option<u16>) -> (RunSchemes, RunSelectors) {
    // Every event is kept, decisions (one per report) too: swaps.csv and decisions.csv are
    // made from them.
    let log = Arc::new(SelectorLog::new(true));
    let rein = rein(&log);
    let antelope = models(OBJECTIVE_ANTELOPE)
        .ok()
        .map(|m| Named::new(learned(m, &log, port)));
    let outcome = models(OBJECTIVE_OUTCOME)
        .ok()
        .map(|m| Named::new(learned(m, &log, port)));
    let explore_cfg = AntelopeConfig {
        choose: Choose::Explore {
            switch_prob: EXPLORE_SWITCH_PROB,
        },
        ..AntelopeConfig::default()
    };
    let probe = deployed_probe(&log, port);
    let probes: Arc<Mutex<Vec<ProbeRecord>>> = Arc::default();
    let force = probe_force_slot()
        .lock()
        .unwrap_or_else(PoisonError::into_inner)
        .clone()
        .unwrap_or(ProbeForce {
            window: ProbeWindow::default(),
            start: CubicConfig::NAME.into(),
            target: CubicConfig::NAME.into(),
        });
    let probe_explore = Named::new(probing(
        ProbeChoice::Force {
            window: force.window,
            start: force.start,
            target: force.target,
            sink: probes.clone(),
        },
        probe::ProbeOptions::default(),
        &log,
        port,
    ));
    let explore = Antelope::with_online(explore_cfg, Arc::default());
    let shared = explore.clone();
    let windows: Arc<Mutex<Vec<Vec<f32>>>> = Arc::default();
    let sink = windows.clone();
    let explore_sel = Selector::new(
        candidates(),
        Arc::new(move |ctx: &FlowContext<'_>| {
            Box::new(Recorded {
                inner: Box::new(shared.policy(ctx)),
                window: FeatureWindow::new(ONNX_WINDOW, ctx.candidates.len()),
                sink: sink.clone(),
            }) as _
        }),
    )
    .with_hysteresis(HysteresisConfig::none())
    .with_log(log.clone());
    (
        RunSchemes {
            rein: Named::new(rein),
            antelope,
            outcome,
            probe,
            probe_explore,
            onnx: onnx_model().ok().map(|m| {
                Named::new(
                    Selector::new(candidates(), OnnxPolicy::factory(m, 0))
                        .with_path_change(path_change())
                        .with_log(log.clone()),
                )
            }),
            tcprl: tcprl_model().ok().map(|m| {
                Named::new(
                    Selector::new(candidates(), TcpRlPolicy::factory(m))
                        .with_hysteresis(HysteresisConfig::none())
                        .with_path_change(path_change())
                        .with_log(log.clone()),
                )
            }),
            explore: Named::new(explore_sel),
        },
        RunSelectors {
            log,
            explore: Some(explore),
            windows,
            probes,
        },
    )
}

/// A training sample and the run it came from: (condition id, seed, sample).
pub type RunSample = (String, u64, Sample);

/// An ONNX feature window and the run it came from: (condition id, seed, window).
pub type RunWindow = (String, u64, Vec<f32>);

/// A probe and the run it came from: (condition id, seed, probe).
pub type RunProbe = (String, u64, ProbeRecord);

/// Probes gathered by `selector-probe-explore` runs in this process (for `gen-data --kind
/// probe`).
pub fn gathered_probes() -> &'static Mutex<Vec<RunProbe>> {
    static PROBES: OnceLock<Mutex<Vec<RunProbe>>> = OnceLock::new();
    PROBES.get_or_init(|| Mutex::new(Vec::new()))
}

/// Feature windows gathered by `selector-explore` runs in this process (for `gen-data`).
pub fn gathered_windows() -> &'static Mutex<Vec<RunWindow>> {
    static WINDOWS: OnceLock<Mutex<Vec<RunWindow>>> = OnceLock::new();
    WINDOWS.get_or_init(|| Mutex::new(Vec::new()))
}

/// Samples gathered by `selector-explore` runs in this process (for `gen-data`).
pub fn gathered() -> &'static Mutex<Vec<RunSample>> {
    static SAMPLES: OnceLock<Mutex<Vec<RunSample>>> = OnceLock::new();
    SAMPLES.get_or_init(|| Mutex::new(Vec::new()))
}

impl RunSelectors {
    /// Moves the explore samples of this run (condition `condition`, seed `seed`) into
    /// [`gathered`].
    pub fn keep_samples(&self, condition: &str, seed: u64) {
        let probes =
            std::mem::take(&mut *self.probes.lock().unwrap_or_else(PoisonError::into_inner));
        if !probes.is_empty() {
            gathered_probes()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(probes.into_iter().map(|p| (condition.to_string(), seed, p)));
        }
        let windows =
            std::mem::take(&mut *self.windows.lock().unwrap_or_else(PoisonError::into_inner));
        if !windows.is_empty() {
            gathered_windows()
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .extend(
                    windows
                        .into_iter()
                        .map(|w| (condition.to_string(), seed, w)),
                );
        }
        if let Some(a) = &self.explore {
            let s = a.take_samples();
            if !s.is_empty() {
                gathered()
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(s.into_iter().map(|x| (condition.to_string(), seed, x)));
            }
        }
    }
}
