//! `antelope`: Antelope's selection policy (Zhou et al., IEEE/ACM ToN; `PAPERS.md` §2).
//!
//! Per flow, reports are grouped into data units of N ACKs ([`unit`](mod@unit)); at the end of
//! each unit the seven unit features go to one gradient-boosted regressor per candidate
//! ([`model`]), which predicts the reward the next unit would earn on that candidate
//! ([`reward`](mod@reward), Eq. 1-3, in the flow's application preference mode); the candidate
//! with the highest prediction is the decision, and the selector's hysteresis turns two
//! agreeing decisions into a swap.
//! Between unit ends the policy answers [`Decision::Hold`]. A new flow starts on the
//! candidate its destination /24 chose most often ([`iplevel`]).
//!
//! Training: `ccp-eval gen-data` runs flows under [`Choose::Explore`] (a random candidate per
//! unit, Antelope's offline training) and writes [`Sample`]s; `ccp-eval train antelope`
//! fits a [`ModelSet`]. Online: with [`Antelope::with_online`], every finished unit appends a
//! real sample, and [`OnlineLearner`] refits in a background thread and swaps the models in
//! (a read lock and an `Arc` clone per decision; `on_report` never waits for a fit).
//!
//! Left out: Antelope's kernel-side collection and eBPF switch (our datapath reports once per
//! RTT, so a unit closes on the first report reaching N ACKs); its cloud learning service;
//! per-CCA private state reset (our candidates keep dormant state, DESIGN §3.2).

pub mod iplevel;
pub mod model;
pub mod reward;
pub mod samples;
pub mod unit;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError, RwLock};
use std::thread::JoinHandle;
use std::time::Duration;

pub use iplevel::IpTable;
pub use model::{ModelError, ModelSet};
pub use reward::{Mode, reward};
pub use samples::Sample;
pub use unit::{FEATURE_NAMES, UnitBuilder, UnitStats};

use crate::policy::{Decision, Explanation, Features, FlowContext, SelectionPolicy};

/// How the policy picks at a unit's end.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Choose {
    /// The candidate with the highest predicted reward.
    Predict,
    /// Offline data generation: with probability `switch_prob`, a uniformly random other
    /// candidate; otherwise stay.
    Explore {
        /// Chance of asking for a switch at a unit's end.
        switch_prob: f64,
    },
}

/// Antelope's parameters.
#[derive(Debug, Clone)]
pub struct AntelopeConfig {
    /// ACKs per data unit (Antelope's N).
    pub acks_per_unit: u32,
    /// Prefix length of IP-level prediction (24).
    pub prefix_len: u8,
    /// Decay of IP-level counts (0.9).
    pub ip_alpha: f64,
    /// Prefixes remembered at most.
    pub max_prefixes: usize,
    /// Candidate a flow starts on when its prefix is unknown and the models name no start
    /// candidate (by name; the first candidate if it is not among them).
    pub default_start: String,
    /// Preference mode per destination port; other ports use [`Mode::Default`].
    pub preferences: HashMap<u32, Mode>,
    /// How a unit's end is decided.
    pub choose: Choose,
    /// Relative margin a candidate's predicted reward must beat the active candidate's by
    /// before the policy asks for it (ours, not Antelope's: 0 is Antelope's plain argmax; the
    /// regressors' noise otherwise makes a flow swap every few units).
    pub min_gain: f64,
    /// Absolute margin instead of `min_gain`: a candidate must beat the active one's
    /// prediction by this much (ours; `None`: the relative `min_gain`). For predictions that
    /// are logarithms (`outcome`'s scores) it is a ratio, 0.1 being ~10 %, the same in every
    /// mode, where a margin relative to |prediction| depends on the scale of the mode's
    /// objective (a delay-sensitive score near -8 asks for a gain of 8 at `min_gain` = 1).
    pub min_gain_abs: Option<f64>,
}

impl AntelopeConfig {
    /// The defaults for models of `objective`: Antelope's own models ask for a 10 % margin;
    /// `outcome` models, whose predictions are TCP-RL rewards (ln of Mbit/s per ms) where a
    /// flow's starting candidate is usually already near the best, ask for a margin of 100 %
    /// of the active candidate's |prediction| (chosen on the validation grid of
    /// `docs/selector.md`, not on the test grid).
    pub fn for_objective(objective: &str) -> Self {
        Self {
            min_gain: if objective == model::OBJECTIVE_OUTCOME {
                1.0
            } else {
                0.1
            },
            ..Self::default()
        }
    }
}

impl Default for AntelopeConfig {
    fn default() -> Self {
        Self {
            acks_per_unit: 20,
            prefix_len: 24,
            ip_alpha: 0.9,
            max_prefixes: 1 << 20,
            default_start: "cubic".into(),
            preferences: HashMap::new(),
            choose: Choose::Predict,
            min_gain: 0.3,
            min_gain_abs: None,
        }
    }
}

/// The state shared by every flow of one selector: models, IP-level counts, online samples.
#[derive(Debug)]
pub struct Antelope {
    config: AntelopeConfig,
    models: RwLock<Arc<ModelSet>>,
    ip: Mutex<IpTable>,
    samples: Option<Mutex<Vec<Sample>>>,
}

impl Antelope {
    /// Shared state deciding with `models`.
    pub fn new(config: AntelopeConfig, models: Arc<ModelSet>) -> Arc<Self> {
        Self::build(config, models, false)
    }

    /// Like [`Antelope::new`], also keeping every finished unit's sample (online training and
    /// `gen-data`).
    pub fn with_online(config: AntelopeConfig, models: Arc<ModelSet>) -> Arc<Self> {
        Self::build(config, models, true)
    }

    fn build(config: AntelopeConfig, models: Arc<ModelSet>, keep: bool) -> Arc<Self> {
        let ip = IpTable::new(config.prefix_len, config.ip_alpha, config.max_prefixes);
        Arc::new(Self {
            config,
            models: RwLock::new(models),
            ip: Mutex::new(ip),
            samples: keep.then(|| Mutex::new(Vec::new())),
        })
    }

    /// The models decisions use now.
    pub fn models(&self) -> Arc<ModelSet> {
        self.models
            .read()
            .unwrap_or_else(PoisonError::into_inner)
            .clone()
    }

    /// Replaces the models (reload, online refit); flows use them from their next decision.
    pub fn set_models(&self, models: ModelSet) {
        *self.models.write().unwrap_or_else(PoisonError::into_inner) = Arc::new(models);
    }

    /// Takes the samples kept so far (empty unless built [`Antelope::with_online`]).
    pub fn take_samples(&self) -> Vec<Sample> {
        self.samples.as_ref().map_or_else(Vec::new, |s| {
            std::mem::take(&mut *s.lock().unwrap_or_else(PoisonError::into_inner))
        })
    }

    /// Copies of the samples kept so far.
    pub fn samples(&self) -> Vec<Sample> {
        self.samples.as_ref().map_or_else(Vec::new, |s| {
            s.lock().unwrap_or_else(PoisonError::into_inner).clone()
        })
    }

    /// The candidate IP-level prediction would start a flow to `ip` on.
    pub fn predict_start(&self, ip: u32) -> Option<&'static str> {
        self.ip
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .predict(ip)
    }

    /// A policy for one flow.
    pub fn policy(self: &Arc<Self>, ctx: &FlowContext<'_>) -> AntelopePolicy {
        let mode = self
            .config
            .preferences
            .get(&ctx.dst_port)
            .copied()
            .unwrap_or_default();
        let names = ctx.candidates.to_vec();
        let position = |n: &str| names.iter().position(|c| *c == n);
        let initial = self
            .predict_start(ctx.dst_ip)
            .and_then(position)
            .or_else(|| self.models().start_for(mode).and_then(position))
            .or_else(|| position(&self.config.default_start))
            .unwrap_or(0);
        let seed = (u64::from(ctx.sock_id) << 32 | u64::from(ctx.dst_ip))
            ^ u64::from(ctx.dst_port).wrapping_mul(0x9E37_79B9_7F4A_7C15);
        AntelopePolicy {
            shared: self.clone(),
            names,
            mode,
            dst_ip: ctx.dst_ip,
            initial,
            units: UnitBuilder::new(self.config.acks_per_unit, ctx.mss_bytes),
            last_report_us: None,
            previous: None,
            scores: Vec::new(),
            rng: seed | 1,
        }
    }
}

/// Antelope's per-flow policy.
#[derive(Debug)]
pub struct AntelopePolicy {
    shared: Arc<Antelope>,
    names: Vec<&'static str>,
    mode: Mode,
    dst_ip: u32,
    initial: usize,
    units: UnitBuilder,
    last_report_us: Option<u64>,
    /// Features of the previous unit, waiting for the next unit's reward.
    previous: Option<[f64; 7]>,
    /// Predictions of the last unit's decision (empty when exploring).
    scores: Vec<f64>,
    rng: u64,
}

impl AntelopePolicy {
    /// The flow's preference mode.
    pub fn mode(&self) -> Mode {
        self.mode
    }

    fn next_random(&mut self) -> u64 {
        // xorshift64*: small, seeded, deterministic.
        self.rng ^= self.rng >> 12;
        self.rng ^= self.rng << 25;
        self.rng ^= self.rng >> 27;
        self.rng.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn choose(&mut self, features: &[f64; 7], current: usize) -> usize {
        match self.shared.config.choose {
            Choose::Predict => {
                let models = self.shared.models();
                models.predict(self.mode, &self.names, features, &mut self.scores);
                let best = crate::policy::argmax_from(&self.scores, current);
                let now = self
                    .scores
                    .get(current)
                    .copied()
                    .unwrap_or(f64::NEG_INFINITY);
                let top = self.scores.get(best).copied().unwrap_or(f64::NEG_INFINITY);
                let margin = self
                    .shared
                    .config
                    .min_gain_abs
                    .unwrap_or(self.shared.config.min_gain * now.abs());
                if now.is_finite() && top - now <= margin {
                    current
                } else {
                    best
                }
            }
            Choose::Explore { switch_prob } => {
                self.scores.clear();
                let n = self.names.len() as u64;
                let draw = (self.next_random() >> 11) as f64 / (1u64 << 53) as f64;
                if n < 2 || draw >= switch_prob {
                    return current;
                }
                let k = (self.next_random() % (n - 1)) as usize;
                if k >= current { k + 1 } else { k }
            }
        }
    }
}

impl SelectionPolicy for AntelopePolicy {
    fn name(&self) -> &'static str {
        "antelope"
    }

    fn initial(&self) -> usize {
        self.initial
    }

    fn decide(&mut self, f: &Features<'_>) -> Decision {
        let start = self
            .last_report_us
            .unwrap_or(f.now_us.saturating_sub(f.srtt_us));
        self.last_report_us = Some(f.now_us);
        let Some(unit) = self.units.push(f.measurement, start, f.srtt_us) else {
            return Decision::Hold;
        };
        let features = unit.features();
        if let (Some(prev), Some(sink)) = (self.previous, &self.shared.samples) {
            let sample = Sample {
                features: prev,
                next_cca: self.names.get(f.current).copied().unwrap_or("").to_string(),
                rewards: model::rewards(&unit),
            };
            sink.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .push(sample);
        }
        self.previous = Some(features);
        let best = self.choose(&features, f.current);
        if let Some(name) = self.names.get(best) {
            self.shared
                .ip
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .record(self.dst_ip, name);
        }
        if best == f.current {
            Decision::Stay
        } else {
            Decision::SwitchTo(best)
        }
    }

    /// Built on demand from the last unit's features and scores (nothing is kept per unit
    /// for a trace nobody reads).
    fn explain(&self) -> Option<Explanation> {
        self.previous.map(|features| Explanation {
            by: self.name(),
            features: features.to_vec(),
            scores: self.scores.clone(),
        })
    }
}

/// Refits an [`Antelope`]'s models from its online samples in a background thread.
///
/// Every `period` it takes the new samples, adds them to a bounded window of the most recent
/// `window` samples (plus the offline samples it was started with), fits a fresh
/// [`ModelSet`] and swaps it in. Flows never wait for a fit. With a save folder, each refit's
/// models are also written there (into a fresh folder beside it, then moved into place), so
/// they outlive the process and can be evaluated or deployed elsewhere. Dropping the learner
/// stops the thread.
#[derive(Debug)]
pub struct OnlineLearner {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<()>>,
    counts: Arc<LearnerCounts>,
}

/// What an [`OnlineLearner`] did.
#[derive(Debug, Default)]
struct LearnerCounts {
    refits: AtomicU64,
    samples: AtomicU64,
    save_errors: AtomicU64,
}

impl OnlineLearner {
    /// Starts the learner.
    pub fn spawn(
        antelope: Arc<Antelope>,
        base: Vec<Sample>,
        period: Duration,
        window: usize,
    ) -> Self {
        Self::spawn_saving(antelope, base, period, window, None)
    }

    /// Starts the learner; each refit's models are also saved to `save` when given.
    pub fn spawn_saving(
        antelope: Arc<Antelope>,
        base: Vec<Sample>,
        period: Duration,
        window: usize,
        save: Option<PathBuf>,
    ) -> Self {
        let stop = Arc::new(AtomicBool::new(false));
        let counts = Arc::new(LearnerCounts::default());
        let (s, c) = (stop.clone(), counts.clone());
        let handle = std::thread::spawn(move || {
            let mut recent: Vec<Sample> = Vec::new();
            let step = Duration::from_millis(10).min(period);
            let mut waited = Duration::ZERO;
            while !s.load(Ordering::Relaxed) {
                std::thread::sleep(step);
                waited += step;
                if waited < period {
                    continue;
                }
                waited = Duration::ZERO;
                let new = antelope.take_samples();
                if new.is_empty() {
                    continue;
                }
                c.samples.fetch_add(new.len() as u64, Ordering::Relaxed);
                recent.extend(new);
                if recent.len() > window {
                    recent.drain(..recent.len() - window);
                }
                let all: Vec<Sample> = base.iter().chain(&recent).cloned().collect();
                // A failed refit keeps the previous models.
                let models = match ModelSet::train(&all, antelope.config.acks_per_unit) {
                    Ok(m) => m,
                    Err(e) => {
                        tracing::warn!(error = %e, samples = all.len(), "online refit failed; the models stay");
                        continue;
                    }
                };
                if let Some(dir) = &save
                    && let Err(e) = save_replacing(&models, dir)
                {
                    c.save_errors.fetch_add(1, Ordering::Relaxed);
                    tracing::warn!(error = %e, dir = %dir.display(), "online models not saved");
                }
                antelope.set_models(models);
                let n = c.refits.fetch_add(1, Ordering::Relaxed) + 1;
                tracing::info!(
                    refit = n,
                    online_samples = recent.len(),
                    offline_samples = base.len(),
                    "antelope models refitted from online samples"
                );
            }
        });
        Self {
            stop,
            handle: Some(handle),
            counts,
        }
    }

    /// Refits done so far.
    pub fn refits(&self) -> u64 {
        self.counts.refits.load(Ordering::Relaxed)
    }

    /// Online samples taken so far.
    pub fn samples(&self) -> u64 {
        self.counts.samples.load(Ordering::Relaxed)
    }

    /// Refits whose models could not be saved.
    pub fn save_errors(&self) -> u64 {
        self.counts.save_errors.load(Ordering::Relaxed)
    }
}

/// Writes `models` into a fresh folder beside `dir`, then moves it to `dir` (the previous
/// contents are moved aside first and removed after), so a reader finds the old set, the new
/// one or (between the two renames) none, never a mix.
fn save_replacing(models: &ModelSet, dir: &Path) -> Result<(), ModelError> {
    let io = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ModelError::Io { path, source }
    };
    let name = dir.file_name().map_or_else(
        || "models".to_string(),
        |n| n.to_string_lossy().into_owned(),
    );
    let parent = dir.parent().unwrap_or(Path::new("."));
    let fresh = parent.join(format!(".{name}.new-{}", std::process::id()));
    let old = parent.join(format!(".{name}.old-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&fresh);
    models.save(&fresh)?;
    let had_old = dir.exists();
    if had_old {
        let _ = std::fs::remove_dir_all(&old);
        std::fs::rename(dir, &old).map_err(io(dir))?;
    }
    std::fs::rename(&fresh, dir).map_err(io(dir))?;
    if had_old {
        std::fs::remove_dir_all(&old).map_err(io(&old))?;
    }
    Ok(())
}

impl Drop for OnlineLearner {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

#[cfg(test)]
#[allow(clippy::unwrap_used, clippy::expect_used, clippy::float_cmp)]
mod tests;
