//! LP-TCP (Kong, Zang & Ma, "Improving TCP Congestion Control with Machine Intelligence",
//! `NetAI`'18, §3.1): `NewReno` with a learned loss predictor that holds the window back when
//! a loss looks likely.
//!
//! Model:
//! - The window is `NewReno`'s ([`crate::reno`]: slow start, one MSS per window in avoidance,
//!   halving with one reduction per window on a loss, the loss window after a timeout).
//! - A random forest ([`forest`]) trained on `NewReno` flows predicts from the flow's state
//!   ([`features`]) whether the next interval will see a loss; P(loss) is the share of trees
//!   that say so.
//! - The hold rule: when P(loss) > `th`, `cwnd -= 1` segment (not below 2). The paper asks
//!   before every send; CCP gives the agent one report per RTT (at once on a loss), so the
//!   rule runs once per report, where one hold cancels one round trip of avoidance growth.
//! - `th` comes with the model: `ccp-eval train lptcp` picks it as the paper does, the best
//!   `M_e = log E(tp) - 0.1 log E(d)` over {0.1, 0.3, 0.5, 0.7, 0.9, th0} with th0 the
//!   threshold of maximum F1 on held-out samples (`docs/algorithms.md`).
//!
//! ```text
//!  report ──► NewReno window ──► features ──► forest: P(loss) ──► P > th ? cwnd -= 1 MSS
//! ```
//!
//! Models: [`LpTcpConfig::default`] (the registry's) reads `$CCP_LPTCP_MODEL`, else
//! `eval/models/lptcp/forest.json` of this source tree (`make models`), once per process;
//! [`AlgorithmConfig::ready`] says why it cannot be used, and tools refuse to start flows of
//! it. A flow built anyway without a model runs plain `NewReno` (never holds).
//!
//! Deviations and what is left out: features and decisions per report, not per packet (the
//! paper's 55 per-packet features become 56 per-report ones, [`features`]); the forest's
//! trees each see a random subset of features (linfa's ensemble), not a fresh subset per
//! split; P(loss) is a vote share, not averaged leaf frequencies. Training data comes from our
//! simulator's `NewReno`, not NS2's.

pub mod features;
pub mod forest;

use std::collections::VecDeque;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use crate::api::{Algorithm, AlgorithmConfig, Control, FlowStart, Handoff, Measurement};
use crate::programs::ProgramSpec;
use crate::reno::Reno;
use crate::window;

pub use features::{FEATURE_NAMES, FeatureTracker, N_FEATURES, SCHEMA_VERSION};
pub use forest::{Forest, ModelError};

/// The environment variable naming the registry's model file.
pub const MODEL_ENV: &str = "CCP_LPTCP_MODEL";

/// Where the registry's LP-TCP reads its model: `$CCP_LPTCP_MODEL`, else
/// `eval/models/lptcp/forest.json` in this source tree.
pub fn default_model_path() -> PathBuf {
    std::env::var_os(MODEL_ENV).map_or_else(
        || {
            PathBuf::from(env!("CARGO_MANIFEST_DIR"))
                .join("../eval/models/lptcp/forest.json")
        },
        PathBuf::from,
    )
}

/// The default model, loaded once per process.
fn default_model() -> Result<Arc<Forest>, String> {
    static MODEL: OnceLock<Result<Arc<Forest>, String>> = OnceLock::new();
    MODEL
        .get_or_init(|| {
            Forest::load(&default_model_path())
                .map(Arc::new)
                .map_err(|e| format!("{e} (make one with `make models`, or set {MODEL_ENV})"))
        })
        .clone()
}

/// Reports after a state whose losses label it: the window set at report k is in flight
/// until its ACKs arrive, by report k + 2, so a loss detected at k + 1 or k + 2 labels it.
pub const LABEL_REPORTS: usize = 2;

/// One training sample: the state at a report and whether one of the next
/// [`LABEL_REPORTS`] reports carried a loss or a timeout.
#[derive(Debug, Clone, PartialEq)]
pub struct Sample {
    /// The features, in [`FEATURE_NAMES`] order.
    pub features: [f64; N_FEATURES],
    /// One of the next [`LABEL_REPORTS`] reports carried a loss or a timeout.
    pub lost: bool,
}

/// Where collecting flows put their samples.
pub type SampleSink = Arc<Mutex<Vec<Sample>>>;

#[derive(Debug, Clone)]
enum Mode {
    /// The registry's: the default model, loaded on first use.
    Default,
    /// A given model.
    Model(Arc<Forest>),
    /// `NewReno` that records labelled samples (training data; never holds).
    Collect(SampleSink),
}

/// LP-TCP's configuration and factory.
#[derive(Debug, Clone)]
pub struct LpTcpConfig {
    mode: Mode,
    threshold: Option<f64>,
}

impl Default for LpTcpConfig {
    /// The model at [`default_model_path`] with its threshold.
    fn default() -> Self {
        Self {
            mode: Mode::Default,
            threshold: None,
        }
    }
}

impl LpTcpConfig {
    /// LP-TCP with `model` and its threshold.
    pub fn with_model(model: Arc<Forest>) -> Self {
        Self {
            mode: Mode::Model(model),
            threshold: None,
        }
    }

    /// LP-TCP with the model in `path`.
    pub fn load(path: &std::path::Path) -> Result<Self, ModelError> {
        Ok(Self::with_model(Arc::new(Forest::load(path)?)))
    }

    /// `NewReno` flows that append a [`Sample`] per report to `sink`: the training data of
    /// `ccp-eval gen-data lptcp`.
    pub fn collecting(sink: SampleSink) -> Self {
        Self {
            mode: Mode::Collect(sink),
            threshold: None,
        }
    }

    /// Overrides the model's hold threshold (the threshold search of `ccp-eval train lptcp`).
    #[must_use]
    pub fn threshold(mut self, th: f64) -> Self {
        self.threshold = Some(th);
        self
    }
}

impl AlgorithmConfig for LpTcpConfig {
    const NAME: &'static str = "lptcp";

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn ready(&self) -> Result<(), String> {
        match &self.mode {
            Mode::Default => default_model().map(drop),
            Mode::Model(_) | Mode::Collect(_) => Ok(()),
        }
    }

    fn build(&self, start: &FlowStart) -> Box<dyn Algorithm> {
        let (model, sink) = match &self.mode {
            Mode::Default => match default_model() {
                Ok(m) => (Some(m), None),
                Err(e) => {
                    static SAID: std::sync::Once = std::sync::Once::new();
                    SAID.call_once(|| {
                        tracing::error!(error = %e, "lptcp flows without a model run NewReno");
                    });
                    (None, None)
                }
            },
            Mode::Model(m) => (Some(m.clone()), None),
            Mode::Collect(s) => (None, Some(s.clone())),
        };
        let threshold = self
            .threshold
            .or_else(|| model.as_ref().map(|m| m.threshold()))
            .unwrap_or(1.0);
        Box::new(LpTcp {
            reno: Reno::new(start),
            features: FeatureTracker::default(),
            model,
            threshold,
            sink,
            pending: VecDeque::new(),
            holds: 0,
        })
    }
}

/// One LP-TCP flow.
#[derive(Debug)]
pub struct LpTcp {
    reno: Reno,
    features: FeatureTracker,
    model: Option<Arc<Forest>>,
    threshold: f64,
    sink: Option<SampleSink>,
    /// Collecting: the last reports' features, labelled by the next [`LABEL_REPORTS`].
    pending: VecDeque<([f64; N_FEATURES], bool)>,
    holds: u64,
}

impl LpTcp {
    /// Reports at which the window was held back so far.
    pub fn holds(&self) -> u64 {
        self.holds
    }

    fn mss(&self) -> u32 {
        self.reno.state.mss_bytes
    }
}

impl Algorithm for LpTcp {
    fn name(&self) -> &'static str {
        LpTcpConfig::NAME
    }

    fn programs(&self) -> &'static [&'static ProgramSpec] {
        &window::PROGRAMS
    }

    fn activate(&mut self, handoff: &Handoff) -> Control {
        self.pending.clear();
        self.reno.activate(handoff)
    }

    fn on_report(&mut self, m: &Measurement) -> Control {
        self.reno.on_report(m);
        let mss = self.mss();
        self.features.on_report(
            m.now_us,
            m.acked_bytes.saturating_add(m.sacked_bytes),
            m.rate_outgoing_bytes_per_sec,
            m.rtt_us,
            m.inflight_bytes,
            m.cwnd_bytes,
            mss,
        );
        let cwnd = self.reno.state.cwnd;
        let x = self
            .features
            .features(f64::from(cwnd) / f64::from(mss));
        if let Some(sink) = &self.sink {
            // The states of the last two reports take this report's loss; the older one is
            // complete (the window it set was in flight until now).
            for p in &mut self.pending {
                p.1 |= m.congestion();
            }
            if self.pending.len() == LABEL_REPORTS
                && let Some((features, lost)) = self.pending.pop_front()
            {
                sink.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .push(Sample { features, lost });
            }
            self.pending.push_back((x, false));
        } else if let Some(model) = &self.model
            && model.p_loss(&x) > self.threshold
        {
            let floor = <window::Bytes as window::WindowUnit>::loss_window(mss);
            let held = cwnd.saturating_sub(mss).max(floor);
            if held < cwnd {
                self.reno.state.cwnd = held;
                self.holds += 1;
            }
        }
        Control::cwnd(self.reno.state.cwnd)
    }

    fn handoff(&self) -> Handoff {
        self.reno.handoff()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use forest::{Node, Tree};

    const MSS: u32 = 1000;

    fn start() -> FlowStart {
        FlowStart {
            sock_id: 1,
            mss_bytes: MSS,
            init_cwnd_bytes: 10 * MSS,
            seed: 0,
        }
    }

    /// A forest that predicts a loss once the window reaches `pkts` segments.
    fn cwnd_above(pkts: f64) -> Arc<Forest> {
        let tree = Tree {
            nodes: vec![
                Node::Split {
                    feature: 0,
                    value: pkts,
                    left: 1,
                    right: 2,
                },
                Node::Leaf { lost: false },
                Node::Leaf { lost: true },
            ],
        };
        Arc::new(Forest::from_trees(vec![tree], 0.5).unwrap())
    }

    fn report(now_us: u64, acked_bytes: u64) -> Measurement {
        Measurement {
            now_us,
            acked_bytes,
            rtt_us: 100_000,
            min_rtt_us: 100_000,
            rate_outgoing_bytes_per_sec: 100_000,
            ..Measurement::default()
        }
    }

    #[test]
    fn the_window_is_held_where_the_forest_predicts_loss() {
        let mut alg = LpTcpConfig::with_model(cwnd_above(30.0)).build(&start());
        alg.activate(&Handoff {
            ssthresh_bytes: 20 * MSS,
            in_first_slow_start: false,
            last_loss_us: Some(0),
            cwnd_bytes: 20 * MSS,
            ..Handoff::flow_start(&start())
        });
        let mut t = 0;
        for _ in 0..40 {
            t += 100_000;
            let w = u64::from(alg.cwnd_bytes());
            alg.on_report(&report(t, w));
        }
        // Avoidance climbs one MSS per round trip to 30, where each hold cancels the growth.
        let w = alg.cwnd_bytes();
        assert!((29 * MSS..=30 * MSS).contains(&w), "{w}");
    }

    #[test]
    fn a_threshold_of_one_never_holds() {
        let mut alg = LpTcpConfig::with_model(cwnd_above(0.0))
            .threshold(1.0)
            .build(&start());
        let mut reno = Reno::new(&start());
        alg.activate(&Handoff::flow_start(&start()));
        reno.activate(&Handoff::flow_start(&start()));
        for k in 1..20 {
            let w = u64::from(alg.cwnd_bytes());
            alg.on_report(&report(k * 100_000, w));
            reno.on_report(&report(k * 100_000, w));
            assert_eq!(alg.cwnd_bytes(), reno.cwnd_bytes());
        }
    }

    #[test]
    fn collecting_labels_each_state_with_the_next_two_reports() {
        let sink = SampleSink::default();
        let mut alg = LpTcpConfig::collecting(sink.clone()).build(&start());
        alg.activate(&Handoff::flow_start(&start()));
        alg.on_report(&report(100_000, 10_000));
        alg.on_report(&report(200_000, 20_000));
        alg.on_report(&Measurement {
            lost_pkts: 2,
            ..report(300_000, 5_000)
        });
        alg.on_report(&report(400_000, 5_000));
        alg.on_report(&report(500_000, 5_000));
        let s = sink.lock().unwrap();
        // Reports 1 and 2 precede the loss at report 3 by two and one; report 3's state is
        // labelled by reports 4 and 5.
        assert_eq!(
            s.iter().map(|x| x.lost).collect::<Vec<_>>(),
            [true, true, false]
        );
        // The state just before the loss: the window after the second report's slow start.
        assert!((s[1].features[0] - 40.0).abs() < 1e-9, "{}", s[1].features[0]);
    }

    #[test]
    fn a_missing_default_model_is_a_clear_error() {
        // The registry's config reads the default path; a bad explicit file says where.
        let e = LpTcpConfig::load(std::path::Path::new("/nonexistent/lptcp.json")).unwrap_err();
        assert!(e.to_string().contains("/nonexistent/lptcp.json"), "{e}");
    }
}
