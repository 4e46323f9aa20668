//! `probe` (ours): probe the path on a start candidate, then choose once for the rest of the
//! flow with models of what each choice would really gain.
//!
//! A flow starts on its preference mode's start candidate (the best single candidate of the
//! training set under that mode's objective). Its first reports build the probe's path
//! features ([`features`]: base RTT, queue growth, delay and delivery-rate variability, loss,
//! and how close recent RTTs come back to the base: Copa's test for competing flows).
//! When the probe window ends (1.5 s and 10 minimum RTTs by default, stored with the models),
//! one regressor per other candidate ([`model`]; or the mean of a bag of them) predicts the
//! gain in the flow's score from switching to it now over staying; the flow switches to the
//! largest predicted gain if it exceeds a margin, and keeps its choice to the end;
//! delay-sensitive flows start on Vegas and move to Copa at the probe's end instead
//! ([`Handover`], [`default_handovers`]; without those two candidates they keep their start,
//! [`SWITCHING_MODES`]). A default-mode flow that kept
//! its start runs the competition watches ([`watch`]) for the rest of the flow and moves once:
//! to BBR when its queue stays up and overflows, to ARC when a queue that was up at the probe's
//! end stays up for 8 s without losses. So the policy swaps at most once per flow (twice
//! only under a default-mode hand-over, which the deployed policy has not), and not at all in
//! a flow that ends within its probe. A flow to a destination whose last probing flow moved
//! over a standing queue starts on that move's candidate instead and keeps it, without a
//! probe or a swap; every fourth flow to it probes anyway ([`memory`]). A box of probe
//! features ([`rule`]) can decide for a default-mode flow at the probe's end instead of the
//! models: the deployed ones move a flow whose probe met a variable delay and many losses (an
//! LTE uplink in a shallow buffer) to ARC, and keep a flow on its start on long paths whose
//! probe lost many packets ([`default_rules`]). Optionally
//! ([`trial`], off by default) the flow measures the proposal against its start before
//! keeping it, and goes back if it measured worse (a second swap); and optionally (`later`
//! models, off by default) default-mode flows choose once at the end of a longer window with
//! models trained on switches made there, or (`later_kind`, off by default) a default-mode flow
//! that kept its start looks at the competitors' kind ([`kind`]) again at the end of a longer
//! window.
//!
//! What it takes from the literature and what it changes:
//! - from Antelope (`PAPERS.md` §2): per-candidate gradient-boosted regressors and the
//!   preference modes chosen by port; but the label is the *remaining flow's* outcome of a
//!   real switch on that path (counterfactual runs that differ only after the probe, so the
//!   swap's cost is in the label), not the next data unit's reward of a random exploration,
//!   and the regressors predict the gain over staying, so the path's own level (a 2 Mbit/s
//!   cellular link against a 100 Mbit/s WAN) is not what they spend their trees on;
//! - from TCP-RL (§1.2): a decision from a window of path state at the start of the flow;
//!   left out: its re-exploration on path changes (a flow here keeps its one choice).
//!
//! Training: `ccp-eval gen-data <scenario> --kind probe` and `ccp-eval train probe`
//! (`docs/selector.md`).

pub mod delegate;
pub mod drain;
pub mod features;
pub mod kind;
pub mod memory;
pub mod model;
mod part;
pub mod rule;
pub mod trial;
pub mod watch;

use std::collections::HashMap;
use std::sync::{Arc, Mutex, PoisonError};

pub use delegate::{Delegate, DelegateGate};
pub use drain::{Drain, default_drain};
use features::{DRAINED, LOSS};
pub use features::{FEATURE_NAMES, N_FEATURES, ProbeStats, ProbeWindow};
pub use kind::{KindModel, KindSample};
pub use memory::{Groups, Memory, ShortFlows, default_memory, default_short};
pub use model::{DEFAULT_BAGS, ProbeModels, ProbeSample};
pub use part::Part;
pub use rule::{FeatureBox, FeatureRange, ProbeRule, default_rules};
pub use trial::{Trial, WindowScore};
pub use watch::{Watch, Watcher};

use crate::antelope::reward::Mode;
use crate::policy::{Decision, Explanation, Features, FlowContext, SelectionPolicy};

/// Gain (ln units of the mode's score: 0.1 is ~10 %) a candidate's prediction must exceed
/// before a flow leaves its start candidate (chosen on `selection-bench`, the validation set:
/// 0.02, 0.1 and 0.2 captured 26, 30 and 20 % of its headroom).
pub const DEFAULT_MARGIN: f64 = 0.1;

/// The preference modes whose flows may leave their start candidate at the probe's end.
/// Delay-sensitive flows (`Mode::Delay`) keep theirs (Copa): on `selection-train` the
/// delay-mode regressors never proposed a move past the margin, and on `selection-bench`
/// (validation) their one move, to ARC on a 5 Mbit/s path with a 5-BDP buffer, lost 1.51 in
/// the delay objective (ARC fills the buffer that objective penalizes twice): the models were
/// fitted on too few delay-sensitive paths to be trusted off them. They still score every
/// candidate for the explanation. A mode's [`Handover`] comes first: the deployed one moves
/// delay-sensitive flows from Vegas to Copa, so this rule holds only where it cannot apply.
pub const SWITCHING_MODES: [Mode; 2] = [Mode::Default, Mode::Throughput];

/// The trial deployed flows run before they keep a switch ([`trial`]): none. On
/// `selection-bench` (validation) the trial captured 8 % of the headroom against 26-27 %
/// without it: a window of 1.5 s measures the proposal's first seconds, and against competing
/// flows or on a cellular link those do not say what the rest of the flow gains
/// (`docs/selector.md`). `ccp-eval` turns it on with `CCP_PROBE_TRIAL=on`.
pub fn default_trial() -> Option<Trial> {
    None
}

/// The competition watches deployed flows run after the probe ([`watch`]), the first to fire
/// moving the flow: a queue that stays up and overflows moves it to BBR
/// ([`Watch::overflowing_queue`]; on `selection-train` +0.0035 per flow, on `selection-bench`
/// +0.014, competition +0.092), a queue held for 8 s without losses to ARC
/// ([`Watch::held_queue`], for flows whose probe ended over a standing queue; +0.0081 per
/// condition on the three validation sets, +0.0108 on `selection-train`). The queue-only watch
/// to BBR ([`Watch::default`]) lost on both (`docs/selector.md`). A watch from the probe's move
/// to ARC ([`Watch::overflowing_arc`]) gained on the validation sets and lost on the third test
/// set and the recurring-flow sets, and is not deployed.
pub fn default_watch() -> Vec<Watch> {
    vec![Watch::overflowing_queue(), Watch::held_queue()]
}

/// A preference mode's start-up hand-over: flows of `mode` probe the path on `start` and move
/// to `then` at the probe's end, whatever the models predict (they still score every
/// candidate for the explanation). A selector without both candidates ignores it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Handover {
    /// The preference mode it is for.
    pub mode: Mode,
    /// The candidate the flow starts (and probes) on.
    pub start: String,
    /// The candidate it runs from the probe's end on.
    pub then: String,
}

impl Handover {
    /// Parses `<mode>:<start>><then>`, e.g. `delay:vegas>copa` (mode: `default`, `delay` or
    /// `throughput`).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let err = || format!("{spec:?}: not <mode>:<start>><then>, e.g. delay:vegas>copa");
        let (mode, pair) = spec.trim().split_once(':').ok_or_else(err)?;
        let (start, then) = pair.split_once('>').ok_or_else(err)?;
        let mode = Mode::parse(mode.trim())
            .ok_or_else(|| format!("{spec:?}: no preference mode {:?}", mode.trim()))?;
        let (start, then) = (start.trim(), then.trim());
        if start.is_empty() || then.is_empty() {
            return Err(err());
        }
        Ok(Self {
            mode,
            start: start.to_string(),
            then: then.to_string(),
        })
    }
}

/// The hand-overs deployed flows make: delay-sensitive flows probe on Vegas and run Copa
/// after. Copa alone, the delay mode's best single candidate on `selection-train`, fills a
/// deep buffer in its slow start and keeps the queue for seconds; Vegas's start leaves it
/// empty but Vegas collapses under random loss (a tenth to a quarter of Copa's rate at 1 %
/// loss). Started on Vegas and moved to Copa at 1.5 s, a flow gains over Copa alone +0.22 per
/// flow on `selection-train`'s 22 delay-sensitive flows and +0.17 on `selection-bench`'s 12
/// (delay objective, counterfactual runs of `gen-data --kind probe`; no other start-target
/// pair comes close: staying on Vegas loses 1.05 and 0.47), where moving Copa-started flows
/// anywhere lost (`docs/selector.md`).
pub fn default_handovers() -> Vec<Handover> {
    vec![Handover {
        mode: Mode::Delay,
        start: "vegas".into(),
        then: "copa".into(),
    }]
}

/// A candidate a default-mode flow moves to at the probe's end only when its queue never
/// drained during the probe (`rtt_ratio_drained` at least `min_drained`): one that pays
/// against competing flows, whose queue does not drain, and loses on a path of the flow's own.
/// ARC looked like one (on the validation sets and the first test set its moves earned +16.7
/// in competition and lost 5.4 in the other classes), but a gate on it at 1.1-1.3 kept only
/// the WAN flows off it: web flows share their path and a changing path's longer RTT looks
/// like a queue, so it gained a point of headroom at most and is not deployed
/// (`docs/selector/measured-not-deployed.md`, "A standing queue for moves to ARC").
///
/// A gate can ask for losses instead (`min_loss_per_kpkt`): a candidate that pays only against
/// competitors that overflow a shallow buffer steadily (BBR against BBR flows: 34-852 packets
/// lost per thousand during the probe on `selection-train`, against at most 20 where Cubic
/// flows compete and a move to BBR mostly loses). A loss gate on BBR at 50 per thousand gained
/// +0.0022 per condition on the validation sets and lost 0.0012 on the training set, so it is
/// not deployed either (`docs/selector/measured-not-deployed.md`, "A move to BBR at the probe's
/// end only over a lossy queue").
#[derive(Debug, Clone, PartialEq)]
pub struct QueueGate {
    /// The candidate gated.
    pub candidate: String,
    /// The least `rtt_ratio_drained` (the RTT over its floor where the queue drained most)
    /// that lets a flow move to it (0: no queue test).
    pub min_drained: f64,
    /// The least `loss_per_kpkt` (packets lost per thousand during the probe) that lets a flow
    /// move to it (0: no loss test).
    pub min_loss_per_kpkt: f64,
}

impl QueueGate {
    /// Parses `<candidate>:<ratio>` (a queue gate, a ratio of at least 1, e.g. `arc:1.3`) or
    /// `<candidate>:loss=<per kpkt>` (a loss gate, above 0, e.g. `bbr:loss=30`).
    pub fn parse(spec: &str) -> Result<Self, String> {
        let err = || {
            format!(
                "{spec:?}: not <candidate>:<ratio> or <candidate>:loss=<per kpkt>, e.g. arc:1.3"
            )
        };
        let (candidate, test) = spec.trim().split_once(':').ok_or_else(err)?;
        let candidate = candidate.trim();
        if candidate.is_empty() {
            return Err(err());
        }
        let number = |v: &str| v.trim().parse::<f64>().ok().filter(|x| x.is_finite());
        let gate = match test.trim().strip_prefix("loss=") {
            Some(v) => Self {
                candidate: candidate.to_string(),
                min_drained: 0.0,
                min_loss_per_kpkt: number(v).filter(|x| *x > 0.0).ok_or_else(err)?,
            },
            None => Self {
                candidate: candidate.to_string(),
                min_drained: number(test).filter(|x| *x >= 1.0).ok_or_else(err)?,
                min_loss_per_kpkt: 0.0,
            },
        };
        Ok(gate)
    }

    /// Whether the gate keeps a flow with features `x` off `candidate` (a missing feature
    /// fails its test).
    fn blocks(&self, candidate: &str, x: &[f64; N_FEATURES]) -> bool {
        let short = |value: f64, least: f64| least > 0.0 && (value < least || value.is_nan());
        candidate == self.candidate
            && (short(x[DRAINED], self.min_drained) || short(x[LOSS], self.min_loss_per_kpkt))
    }
}

/// The gates deployed flows pass: none (measured, not deployed: [`QueueGate`]).
pub fn default_gates() -> Vec<QueueGate> {
    Vec::new()
}

/// The `N` colon-separated numbers of `spec` (blanks around each allowed), each finite and at
/// least 0; `None` for any other count or value (the option specs of [`Drain`] and
/// [`DelegateGate`]).
pub(crate) fn spec_numbers<const N: usize>(spec: &str) -> Option<[f64; N]> {
    let mut out = [0.0; N];
    let mut parts = spec.split(':');
    for slot in &mut out {
        let v: f64 = parts.next()?.trim().parse().ok()?;
        if !v.is_finite() || v < 0.0 {
            return None;
        }
        *slot = v;
    }
    parts.next().is_none().then_some(out)
}

/// The features of one flow's probe, recorded for training.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct ProbeRecord {
    /// The datapath's socket id.
    pub sock_id: u32,
    /// Datapath time of the probe's end, µs.
    pub at_us: u64,
    /// The features, in [`FEATURE_NAMES`] order.
    pub features: [f64; N_FEATURES],
}

/// How a flow's choice is made at the probe's end.
#[derive(Debug, Clone)]
pub enum ProbeChoice {
    /// Switch to the candidate with the largest predicted gain when it exceeds `margin`.
    Predict {
        /// The models (starts, window, regressors).
        models: Arc<ProbeModels>,
        /// Least predicted gain that moves a flow (ln units).
        margin: f64,
        /// Measure the proposed switch before keeping it ([`trial`]); `None`: switch for good
        /// at the probe's end.
        trial: Option<Trial>,
        /// After the probe, move a default-mode flow that stayed on its start when a queue
        /// never drains ([`watch`]); the first watch to fire moves it. None: the probe's
        /// choice is final.
        watches: Vec<Watch>,
        /// Modes whose flows start on a fixed candidate and move to another at the probe's
        /// end instead of asking the models ([`Handover`]; the first for a mode counts).
        handovers: Vec<Handover>,
        /// Models default-mode flows choose with instead, at the end of their (longer)
        /// window: such a flow keeps its start at the probe's end (the watch begins), keeps
        /// measuring, and chooses once with these models and the same margin when their window
        /// ends, unless the watch moved it first. `None`: every flow chooses at the probe's
        /// end, as deployed: a 5-s window measured better in cross-validation and on the
        /// validation sets but not on the test set
        /// (`docs/selector/measured-not-deployed-models.md`, "A later choice").
        later: Option<Arc<ProbeModels>>,
        /// Candidates a default-mode flow moves to only over a standing queue ([`QueueGate`]).
        gates: Vec<QueueGate>,
        /// Boxes of probe features whose default-mode flows move to a fixed candidate at the
        /// probe's end instead of asking the models ([`rule`]; the first that holds decides).
        rules: Vec<ProbeRule>,
        /// The competitors' kind ([`kind`]) and its threshold: a default-mode flow it places
        /// among competitors moves to their kind's candidate at the probe's end, before the
        /// rules and the models. `None`: no kind model.
        kind: Option<(Arc<KindModel>, f64)>,
        /// Boxes of probe features whose flows the kind model does not judge at the probe's
        /// end: the rules and the models decide for them ([`kind::default_skips`]).
        kind_skips: Vec<FeatureBox>,
        /// Candidates the kind model's moves hand a flow to afresh, as in a first slow start
        /// ([`crate::SelectionPolicy::afresh`]; the watches' moves choose for themselves).
        /// Empty: every kind move continues from the flow's window and rate
        /// ([`kind::default_afresh`]).
        kind_afresh: Vec<String>,
        /// A second look at the competitors' kind, with a model trained at a later window:
        /// a default-mode flow that kept its start at the probe's end keeps measuring and, at
        /// the end of that model's window, moves to the kind's candidate it names, unless a
        /// watch moved the flow first (with later models too, it reads their window's
        /// features, before they choose). `None`: one look, at the probe's end.
        later_kind: Option<(Arc<KindModel>, f64)>,
    },
    /// Training data: start on `start`, switch to `target` at the end of `window` (stay when
    /// it is the start), and record the probe's features in `sink`.
    Force {
        /// The probe window.
        window: ProbeWindow,
        /// The start candidate.
        start: String,
        /// The candidate switched to.
        target: String,
        /// Where every flow's probe is recorded.
        sink: Arc<Mutex<Vec<ProbeRecord>>>,
    },
}

/// The state shared by every flow of one selector.
#[derive(Debug)]
pub struct Probe {
    choice: ProbeChoice,
    preferences: HashMap<u32, Mode>,
    options: ProbeOptions,
    /// The path memory's verdicts, when it has one.
    groups: Option<Arc<Groups>>,
}

/// What a probe policy may do beyond choosing (all off in `Default`; [`default_drain`] and
/// [`default_memory`] are what the deployed policy uses).
#[derive(Debug, Clone, Default)]
pub struct ProbeOptions {
    /// Default-mode flows past its gate hand over to it at the probe's end ([`delegate`]).
    pub delegate: Option<Delegate>,
    /// Default-mode flows that keep their start drain at the probe's end ([`drain`]).
    pub drain: Option<Drain>,
    /// Flows of the switching modes to a destination whose last probing flows gave a usable
    /// verdict start on it ([`memory`]).
    pub memory: Option<Memory>,
    /// With `memory`: a probing flow that ends before its probe does gives its destination
    /// the rule's candidate as its verdict when the features of its reports so far fall
    /// inside the rule's box (otherwise no verdict, as before), and the next flows to it start
    /// on the candidate once enough such verdicts agree ([`memory::ShortFlows`]).
    pub short: Option<ShortFlows>,
}

impl Probe {
    /// Shared state choosing by `choice`; `preferences` maps destination ports to preference
    /// modes (other ports: the default mode).
    pub fn new(choice: ProbeChoice, preferences: HashMap<u32, Mode>) -> Arc<Self> {
        Self::with_options(choice, preferences, ProbeOptions::default())
    }

    /// [`Probe::new`] with `options` ([`ProbeOptions`]). A forced choice (training data)
    /// ignores them.
    pub fn with_options(
        choice: ProbeChoice,
        preferences: HashMap<u32, Mode>,
        options: ProbeOptions,
    ) -> Arc<Self> {
        let groups = match (&choice, options.memory) {
            (ProbeChoice::Predict { .. }, Some(m)) => {
                Some(Arc::new(Groups::new(m).with_short(options.short.clone())))
            }
            _ => None,
        };
        Arc::new(Self {
            choice,
            preferences,
            options,
            groups,
        })
    }

    /// A policy for one flow.
    pub fn policy(&self, ctx: &FlowContext<'_>) -> ProbePolicy {
        let mode = self
            .preferences
            .get(&ctx.dst_port)
            .copied()
            .unwrap_or_default();
        let names = ctx.candidates.to_vec();
        let position = |n: &str| names.iter().position(|c| *c == n);
        let (window, start, target) = match &self.choice {
            ProbeChoice::Predict {
                models, handovers, ..
            } => {
                let handover = handovers
                    .iter()
                    .find(|h| h.mode == mode)
                    .and_then(|h| position(&h.start).zip(position(&h.then)));
                match handover {
                    Some((start, then)) => (models.window, Some(start), Some(then)),
                    None => (
                        models.window,
                        models.start_for(mode).and_then(position),
                        None,
                    ),
                }
            }
            ProbeChoice::Force {
                window,
                start,
                target,
                ..
            } => (*window, position(start), position(target)),
        };
        // The path memory: a flow of a switching mode that asks the models may start on its
        // destination's verdict instead of probing.
        let (ticket, remembered) = match (&self.groups, start) {
            (Some(groups), Some(s)) if target.is_none() && SWITCHING_MODES.contains(&mode) => {
                match groups.start(ctx.dst_ip, mode, names[s]) {
                    memory::Start::Probe(ticket) => (ticket, None),
                    memory::Start::Remembered(c) => (None, position(c)),
                }
            }
            _ => (None, None),
        };
        let initial = remembered.or(start).unwrap_or(0);
        let predicting = matches!(self.choice, ProbeChoice::Predict { .. })
            && mode == Mode::Default
            && target.is_none()
            && remembered.is_none();
        let delegate = match &self.options.delegate {
            Some(d) if predicting => Some(delegate::Following::new(d, ctx)),
            _ => None,
        };
        let drain = self.options.drain.filter(|_| predicting);
        ProbePolicy {
            delegate,
            drain,
            memory: self.groups.clone().zip(ticket),
            remembered: remembered.is_some(),
            later: false,
            choice: self.choice.clone(),
            names,
            mode,
            sock_id: ctx.sock_id,
            initial,
            forced: target,
            window,
            stats: ProbeStats::new(ctx.mss_bytes),
            chosen: remembered,
            watchers: Vec::new(),
            afresh_to: None,
            stage: None,
            features: Vec::new(),
            scores: Vec::new(),
            by: Part::Models,
        }
    }
}

/// The probe policy of one flow.
#[derive(Debug)]
pub struct ProbePolicy {
    /// The policy the flow may hand over to at the probe's end ([`delegate`]), following the
    /// flow until then; dropped when the flow keeps the probe's choice.
    delegate: Option<delegate::Following>,
    /// The drain a default-mode flow that keeps its start makes at the probe's end
    /// ([`drain`]).
    drain: Option<Drain>,
    /// Where the flow's verdict goes ([`memory`]): the table and the flow's ticket.
    memory: Option<(Arc<Groups>, memory::Ticket)>,
    /// The flow started on its destination's verdict and did not probe.
    remembered: bool,
    /// The later choice is pending (the flow kept its start at the probe's end).
    later: bool,
    choice: ProbeChoice,
    names: Vec<&'static str>,
    mode: Mode,
    sock_id: u32,
    initial: usize,
    /// The candidate the flow moves to at the probe's end whatever the models say: a forced
    /// run's target, or a hand-over's.
    forced: Option<usize>,
    window: ProbeWindow,
    stats: ProbeStats,
    chosen: Option<usize>,
    /// The running watches and their targets' indices, until one fires.
    watchers: Vec<(Watcher, usize)>,
    /// The target of a move made afresh (a watch's, or the kind model's), and whether it takes
    /// the flow's smoothed RTT as its floor ([`Watch::fresh_floor`]).
    afresh_to: Option<(usize, bool)>,
    stage: Option<trial::Stage>,
    features: Vec<f64>,
    scores: Vec<f64>,
    /// The part that made the latest decision.
    by: Part,
}

/// A flow whose policy goes (the flow closed) before its probe ended gives the path memory
/// the short-flow rule's verdict when the rule's box holds its features so far
/// ([`ProbeOptions::short`]).
impl Drop for ProbePolicy {
    fn drop(&mut self) {
        let Some((groups, ticket)) = &self.memory else {
            return;
        };
        let Some(rule) = groups.short_rule() else {
            return;
        };
        if self.chosen.is_some() || self.stage.is_some() || self.stats.reports() == 0 {
            return;
        }
        if rule.holds(&self.stats.features())
            && let Some(name) = self.names.iter().find(|n| **n == rule.candidate)
        {
            groups.record_short(ticket, name);
        }
    }
}

impl ProbePolicy {
    /// The flow's preference mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    /// The candidate chosen for good (`None` while probing or trying a switch).
    pub fn chosen(&self) -> Option<usize> {
        self.chosen
    }

    /// The part of the policy that made the flow's latest decision.
    pub fn part(&self) -> Part {
        self.by
    }

    /// Whether the flow has a decision to explain: its probe ended (a flow started from
    /// memory has no probe to explain).
    fn explains(&self) -> bool {
        !self.remembered && (self.chosen.is_some() || self.stage.is_some())
    }

    /// Whether the flow started on its destination's verdict without a probe ([`memory`]).
    pub fn remembered(&self) -> bool {
        self.remembered
    }

    /// Keeps `c` for good and gives it to the path memory as the flow's verdict, with how far
    /// its probe's queue drained (`drained`, [`memory::Groups::record`]).
    fn keep(&mut self, c: usize, drained: f64) {
        self.chosen = Some(c);
        if let (Some((groups, ticket)), Some(name)) = (&self.memory, self.names.get(c)) {
            groups.record(ticket, name, drained);
        }
    }

    /// How far the probe's queue drained (`rtt_ratio_drained`; NaN before the probe ended).
    fn drained(&self) -> f64 {
        self.features.get(DRAINED).copied().unwrap_or(f64::NAN)
    }

    /// The trial's measured scores so far (reference, trial), ln units, while it runs.
    pub fn trial_scores(&self) -> (Option<f64>, Option<f64>) {
        self.stage
            .as_ref()
            .map_or((None, None), |s| s.scores(self.mode))
    }

    /// Starts the watches of a default-mode flow that chose `running` at the probe's end (or
    /// with the later models): the competition watches when it kept its start, and those from
    /// `running` ([`Watch::from`]). A watch's move starts none: a flow moves at most twice.
    fn start_watch(&mut self, running: usize) {
        self.watchers.clear();
        let ProbeChoice::Predict { watches, .. } = &self.choice else {
            return;
        };
        if self.mode != Mode::Default {
            return;
        }
        let start = self.forced.unwrap_or(self.initial);
        let (Some(on), Some(start)) = (self.names.get(running), self.names.get(start)) else {
            return;
        };
        let (min_rtt_us, mss_bytes) = (self.stats.min_rtt_us(), self.stats.mss_bytes());
        self.watchers = watches
            .iter()
            .filter(|w| w.applies(&self.features, on, start))
            .filter_map(|w| {
                let target = self.names.iter().position(|n| *n == w.target)?;
                (target != running)
                    .then(|| (Watcher::new(w.clone(), min_rtt_us, mss_bytes), target))
            })
            .collect();
    }

    /// Whether this flow defers its choice to the later models: a default-mode flow of a
    /// policy that has them, not forced.
    fn defers(&self) -> bool {
        matches!(&self.choice, ProbeChoice::Predict { later: Some(_), .. })
            && self.forced.is_none()
            && self.mode == Mode::Default
    }

    /// Whether this flow takes a second look at the competitors' kind: a default-mode flow of a
    /// policy with a later kind model, not forced.
    fn looks_again(&self) -> bool {
        matches!(
            &self.choice,
            ProbeChoice::Predict {
                later_kind: Some(_),
                ..
            }
        ) && self.forced.is_none()
            && self.mode == Mode::Default
    }

    /// Keeps the later choice pending when the flow kept its start at the probe's end and
    /// defers to the later models or looks at the kind again.
    fn start_later(&mut self, chosen: usize) {
        self.later = (self.defers() || self.looks_again()) && chosen == self.initial;
    }

    /// The later choice, while pending: measures the report and, once the later window ended
    /// (the later models', else the later kind model's), moves to the kind's candidate the
    /// later kind model names, else chooses with the later models (a move ends the watch).
    fn look_later(&mut self, chosen: usize, f: &Features<'_>) -> usize {
        if !self.later {
            return chosen;
        }
        let window = match &self.choice {
            ProbeChoice::Predict { later: Some(m), .. } => Some(m.window),
            ProbeChoice::Predict {
                later_kind: Some((k, _)),
                ..
            } => Some(k.window()),
            _ => None,
        };
        // No later window, or the watch moved the flow: no later choice.
        let Some(window) = window.filter(|_| chosen == self.initial) else {
            self.later = false;
            return chosen;
        };
        self.stats.push(f.measurement, f.now_us);
        if !self.stats.done(&window) {
            return chosen;
        }
        self.later = false;
        let ProbeChoice::Predict {
            later: models,
            later_kind: kind,
            ..
        } = &self.choice
        else {
            return chosen;
        };
        // The models and the kind model are taken only now, once per flow.
        let (models, kind) = (models.clone(), kind.clone());
        let x = self.stats.features();
        let by_kind = kind
            .as_ref()
            .and_then(|(m, threshold)| m.decide(&x, *threshold))
            .and_then(|(_, to)| self.names.iter().position(|n| *n == to));
        let c = match (by_kind, &models) {
            (Some(to), _) => {
                self.features = x.to_vec();
                self.by = Part::LaterKind;
                to
            }
            (None, Some(m)) => self.choose_with(Some(m), &x, chosen, f.now_us).0,
            (None, None) => chosen,
        };
        if c != chosen {
            self.keep(c, self.drained());
            self.start_watch(c);
        }
        c
    }

    /// The candidate for good once chosen: `chosen`, or the target of the first watch that
    /// fired (every watch sees every report, so each keeps its own window). A competition
    /// watch's move is the path memory's verdict (a standing queue it found); a move from the
    /// probe's choice ([`Watch::from`]) is not, and the memory keeps the probe's: later flows
    /// to the destination start on the candidate that pays against the competitors found, where
    /// a start on the fallback measured against the one flow's overflow lost more on the
    /// recurring-flow sets (`docs/selector/measured-not-deployed.md`, "A watch from the probe's
    /// move to ARC").
    fn watched(&mut self, chosen: usize, f: &Features<'_>) -> usize {
        let mut fired = None;
        for (w, target) in &mut self.watchers {
            if w.push(f.measurement, f.now_us) && fired.is_none() {
                fired = Some((*target, w.afresh(), w.fresh_floor(), w.from_choice()));
            }
        }
        let Some((target, afresh, fresh_floor, from_choice)) = fired else {
            return chosen;
        };
        self.afresh_to = afresh.then_some((target, fresh_floor));
        self.by = Part::Watch;
        if from_choice {
            self.chosen = Some(target);
        } else {
            self.keep(target, f64::INFINITY);
        }
        self.watchers.clear();
        target
    }

    /// The trial a proposed switch runs (`None`: it is kept at once).
    fn trial(&self) -> Option<Trial> {
        match &self.choice {
            ProbeChoice::Predict { trial, .. } if self.forced.is_none() => *trial,
            _ => None,
        }
    }

    /// The candidate for the rest of the flow and its predicted gain over staying (0 when it
    /// stays or the switch is forced; the models still score every candidate then, for the
    /// explanation).
    fn choose(&mut self, x: &[f64; N_FEATURES], current: usize, now_us: u64) -> (usize, f64) {
        self.choose_with(None, x, current, now_us)
    }

    /// [`ProbePolicy::choose`] with `models` instead of the choice's own (the later choice's).
    fn choose_with(
        &mut self,
        models: Option<&Arc<ProbeModels>>,
        x: &[f64; N_FEATURES],
        current: usize,
        now_us: u64,
    ) -> (usize, f64) {
        self.features = x.to_vec();
        let at_probe_end = models.is_none();
        let deferring = at_probe_end && self.defers();
        self.by = if at_probe_end {
            Part::Models
        } else {
            Part::LaterModels
        };
        match &self.choice {
            ProbeChoice::Predict {
                models: own,
                margin,
                gates,
                rules,
                kind,
                kind_skips,
                kind_afresh,
                ..
            } => {
                let models = models.unwrap_or(own);
                models.predict(self.mode, &self.names, x, &mut self.scores);
                if let Some(then) = self.forced {
                    self.by = Part::Handover;
                    return (then, 0.0);
                }
                // The competitors' kind decides first at the probe's end (not tried: infinite
                // gain).
                if at_probe_end
                    && self.mode == Mode::Default
                    && let Some((model, threshold)) = kind
                    && !kind_skips.iter().any(|b| b.holds(x))
                    && let Some((_, to)) = model.decide(x, *threshold)
                    && let Some(to) = self.names.iter().position(|n| *n == to)
                    && to != current
                {
                    self.by = Part::Kind;
                    if kind_afresh.iter().any(|c| *c == self.names[to]) {
                        self.afresh_to = Some((to, false));
                    }
                    return (to, f64::INFINITY);
                }
                // A rule's box decides before the models at the probe's end (and is not
                // tried: infinite gain).
                if at_probe_end
                    && self.mode == Mode::Default
                    && let Some(to) = rules.iter().filter(|r| r.holds(x)).find_map(|r| {
                        if r.candidate == rule::START {
                            Some(current)
                        } else {
                            self.names.iter().position(|n| *n == r.candidate)
                        }
                    })
                {
                    self.by = Part::Rule;
                    return if to == current {
                        (current, 0.0)
                    } else {
                        (to, f64::INFINITY)
                    };
                }
                // A default-mode flow with later models defers its choice to them (the
                // probe's models still scored every candidate for the explanation).
                if deferring {
                    return (current, 0.0);
                }
                let now = self
                    .scores
                    .get(current)
                    .copied()
                    .unwrap_or(f64::NEG_INFINITY);
                // The best other candidate (a negative margin proposes it even when it is
                // predicted slightly worse: a trial measures it before the flow keeps it).
                let gated = |i: usize| {
                    self.mode == Mode::Default
                        && self
                            .names
                            .get(i)
                            .is_some_and(|n| gates.iter().any(|g| g.blocks(n, x)))
                };
                let mut best = current;
                for (i, s) in self.scores.iter().enumerate() {
                    if i != current && !gated(i) && (best == current || *s > self.scores[best]) {
                        best = i;
                    }
                }
                let top = self.scores.get(best).copied().unwrap_or(f64::NEG_INFINITY);
                if best != current
                    && top.is_finite()
                    && top - now > *margin
                    && SWITCHING_MODES.contains(&self.mode)
                {
                    (best, top - now)
                } else {
                    (current, 0.0)
                }
            }
            ProbeChoice::Force { sink, .. } => {
                self.by = Part::Forced;
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(ProbeRecord {
                        sock_id: self.sock_id,
                        at_us: now_us,
                        features: *x,
                    });
                (self.forced.unwrap_or(current), 0.0)
            }
        }
    }
}

impl SelectionPolicy for ProbePolicy {
    fn name(&self) -> &'static str {
        "probe"
    }

    fn initial(&self) -> usize {
        self.initial
    }

    /// The watches start over on the new floor: a queue they saw over the old one was the
    /// longer path.
    fn path_changed(&mut self, floor_us: u64) {
        for (w, _) in &mut self.watchers {
            w.restart(floor_us);
        }
    }

    fn decide(&mut self, f: &Features<'_>) -> Decision {
        if let Some(d) = self.delegate.as_mut().filter(|d| d.deciding()) {
            return d.decide(f);
        }
        let want = if let Some(c) = self.chosen {
            let c = self.watched(c, f);
            self.look_later(c, f)
        } else if let (Some(trial), Some(stage)) = (self.trial(), self.stage.as_mut()) {
            let flow = trial::TrialFlow {
                trial: &trial,
                mode: self.mode,
                start: self.initial,
                min_rtt_us: self.stats.min_rtt_us(),
            };
            let step = stage.step(&flow, f.current, f.measurement, f.now_us);
            self.by = Part::Trial;
            match step {
                trial::Step::Run(c) => c,
                trial::Step::Done(c) => {
                    self.keep(c, self.drained());
                    self.start_watch(c);
                    self.start_later(c);
                    c
                }
            }
        } else {
            self.stats.push(f.measurement, f.now_us);
            if !self.stats.done(&self.window) {
                if let Some(d) = self.delegate.as_mut() {
                    d.follow(f);
                }
                return Decision::Hold;
            }
            // The probe's features: the models, the delegate's gate and the drain read them.
            let x = self.stats.features();
            let (c, gain) = self.choose(&x, f.current, f.now_us);
            if let Some(d) = self.delegate.as_mut() {
                if d.take_over(&x) {
                    self.chosen = Some(f.current);
                    self.by = Part::Delegate;
                    return d.decide(f);
                }
                self.delegate = None;
            }
            match self.trial() {
                Some(t) if c != f.current && gain < t.confident_gain => {
                    // Measure the start first, then the proposal (`trial`).
                    self.stage = Some(trial::Stage::Reference {
                        target: c,
                        window: WindowScore::default(),
                    });
                    f.current
                }
                _ => {
                    self.keep(c, self.drained());
                    self.start_watch(c);
                    self.start_later(c);
                    if c == f.current
                        && let Some(cwnd_bytes) = self
                            .drain
                            .and_then(|d| d.window_bytes(&x, self.stats.mss_bytes()))
                    {
                        return Decision::Drain { cwnd_bytes };
                    }
                    c
                }
            }
        };
        // The choice is asked for until the selector makes it (a loss hold may delay it).
        if want == f.current {
            Decision::Stay
        } else {
            Decision::SwitchTo(want)
        }
    }

    fn hysteresis(&self) -> Option<crate::HysteresisConfig> {
        self.delegate
            .as_ref()
            .filter(|d| d.deciding())
            .map(delegate::Following::hysteresis)
    }

    fn afresh(&self, to: usize) -> bool {
        match &self.delegate {
            Some(d) if d.deciding() => d.afresh(to),
            _ => self.afresh_to.is_some_and(|(t, _)| t == to),
        }
    }

    fn afresh_floor(&self, to: usize) -> bool {
        match &self.delegate {
            Some(d) if d.deciding() => d.afresh_floor(to),
            _ => self.afresh_to == Some((to, true)),
        }
    }

    fn decided_by(&self) -> Option<&'static str> {
        self.explains().then_some(self.by.as_str())
    }

    fn explain(&self) -> Option<Explanation> {
        self.explains().then(|| Explanation {
            by: self.by.as_str(),
            features: self.features.clone(),
            scores: self.scores.clone(),
        })
    }
}

#[cfg(test)]
mod tests;
