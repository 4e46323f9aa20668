//! The selector as `ccp-eval` schemes: `selector-rein`, `selector-antelope`, and
//! `selector-explore` (Antelope's offline data generation: a random candidate per data unit).
//!
//! portus picks an algorithm by a name with no `self` (`CongAlg::name`), so each scheme is the
//! one [`Selector`] type behind a marker that names it. Every run builds fresh selectors (so
//! IP-level counts and online samples never leak between runs and results stay deterministic);
//! only the loaded Antelope models are shared, read once per process.
//!
//! Models: `selector-antelope` reads the model set from `$CCP_ANTELOPE_MODELS`, else from
//! `eval/models/antelope` in this source tree (written by `ccp-eval train antelope`).

use std::marker::PhantomData;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use ccp_algorithms::{
    AlgorithmConfig, BbrConfig, C2tcpConfig, CopaConfig, CubicConfig, DynAlgorithmConfig,
    IllinoisConfig, RenoConfig, VegasConfig, VivaceConfig, WestwoodConfig,
};
use ccp_selector::antelope::{Antelope, AntelopeConfig, Choose, ModelSet, Sample};
use ccp_selector::{
    FlowContext, HysteresisConfig, ReinPolicy, Selector, SelectorFlow, SelectorLog, StaticPolicy,
};
use portus::ipc::Ipc;
use portus::{CongAlg, Datapath, DatapathInfo};

/// Scheme: the selector with Rein's rules.
pub const REIN: &str = "selector-rein";
/// Scheme: the selector with Antelope's learned reward models.
pub const ANTELOPE: &str = "selector-antelope";
/// Scheme: the selector switching at random per data unit, keeping training samples.
pub const EXPLORE: &str = "selector-explore";

/// (name, description) of every selector scheme.
pub const SCHEMES: &[(&str, &str)] = &[
    (REIN, "CCP: selector over the nine, Rein's rules"),
    (
        ANTELOPE,
        "CCP: selector over the nine, Antelope's per-candidate GBDT reward models",
    ),
    (
        EXPLORE,
        "CCP: selector switching at random per data unit (training data)",
    ),
];

/// Chance of a random switch at the end of a data unit in `selector-explore`.
pub const EXPLORE_SWITCH_PROB: f64 = 0.3;

/// The nine candidate algorithms, in a fixed order.
pub fn candidates() -> Vec<Box<dyn DynAlgorithmConfig>> {
    vec![
        Box::new(CubicConfig::default()),
        Box::new(RenoConfig::default()),
        Box::new(BbrConfig::default()),
        Box::new(CopaConfig::default()),
        Box::new(VegasConfig::default()),
        Box::new(WestwoodConfig::default()),
        Box::new(IllinoisConfig::default()),
        Box::new(C2tcpConfig::default()),
        Box::new(VivaceConfig::default()),
    ]
}

/// The name of candidate `i` of [`candidates`] (`?` if out of range).
pub fn name_of(i: usize) -> &'static str {
    const NAMES: [&str; 9] = [
        CubicConfig::NAME,
        RenoConfig::NAME,
        BbrConfig::NAME,
        CopaConfig::NAME,
        VegasConfig::NAME,
        WestwoodConfig::NAME,
        IllinoisConfig::NAME,
        C2tcpConfig::NAME,
        VivaceConfig::NAME,
    ];
    NAMES.get(i).copied().unwrap_or("?")
}

/// Where `selector-antelope` reads its models.
pub fn models_dir() -> PathBuf {
    std::env::var_os("CCP_ANTELOPE_MODELS").map_or_else(
        || PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/antelope"),
        PathBuf::from,
    )
}

/// The Antelope models, loaded once per process (an error says why they cannot be used).
pub fn models() -> Result<Arc<ModelSet>, String> {
    static MODELS: OnceLock<Result<Arc<ModelSet>, String>> = OnceLock::new();
    MODELS
        .get_or_init(|| {
            ModelSet::load(&models_dir())
                .map(Arc::new)
                .map_err(|e| format!("{e} (train with `ccp-eval train antelope`)"))
        })
        .clone()
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
}

/// Builds the three selector schemes for one run.
pub fn build() -> (
    Named<ReinName>,
    Option<Named<AntelopeName>>,
    Named<ExploreName>,
    RunSelectors,
) {
    // Decisions are kept off the trace (one per report); swaps are recorded.
    let log = Arc::new(SelectorLog::new(true));
    let rein = Selector::new(
        candidates(),
        Arc::new(
            |ctx: &FlowContext<'_>| match ReinPolicy::for_candidates(ctx.candidates) {
                Some(p) => Box::new(p) as _,
                None => Box::new(StaticPolicy::default()) as _,
            },
        ),
    )
    .with_log(log.clone());
    let antelope = models().ok().map(|m| {
        let shared = Antelope::new(AntelopeConfig::default(), m);
        Named::new(
            Selector::new(
                candidates(),
                Arc::new(move |ctx: &FlowContext<'_>| Box::new(shared.policy(ctx)) as _),
            )
            .with_log(log.clone()),
        )
    });
    let explore_cfg = AntelopeConfig {
        choose: Choose::Explore {
            switch_prob: EXPLORE_SWITCH_PROB,
        },
        ..AntelopeConfig::default()
    };
    let explore = Antelope::with_online(explore_cfg, Arc::default());
    let shared = explore.clone();
    let explore_sel = Selector::new(
        candidates(),
        Arc::new(move |ctx: &FlowContext<'_>| Box::new(shared.policy(ctx)) as _),
    )
    .with_hysteresis(HysteresisConfig::none())
    .with_log(log.clone());
    (
        Named::new(rein),
        antelope,
        Named::new(explore_sel),
        RunSelectors {
            log,
            explore: Some(explore),
        },
    )
}

/// Samples gathered by `selector-explore` runs in this process (for `gen-data`).
pub fn gathered() -> &'static Mutex<Vec<Sample>> {
    static SAMPLES: OnceLock<Mutex<Vec<Sample>>> = OnceLock::new();
    SAMPLES.get_or_init(|| Mutex::new(Vec::new()))
}

impl RunSelectors {
    /// Moves the explore samples of this run into [`gathered`].
    pub fn keep_samples(&self) {
        if let Some(a) = &self.explore {
            let s = a.take_samples();
            if !s.is_empty() {
                gathered()
                    .lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .extend(s);
            }
        }
    }
}
