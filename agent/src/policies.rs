//! Selection policies by name: the one place `selector.policy` is turned into a policy factory.
//!
//! Adding a policy is one arm in [`build`] and one entry in [`KNOWN`]. A learned policy loads
//! its model from [`PolicyContext::models`] here, once per (re)load, so a bad model is an error
//! at load time (and a reload keeps the previous policy), never at flow creation.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use ccp_selector::antelope::model::{OBJECTIVE_ANTELOPE, OBJECTIVE_OUTCOME};
use ccp_selector::antelope::{Antelope, AntelopeConfig, Mode, ModelSet, OnlineLearner, samples};
use ccp_selector::{EveryN, FlowContext, PolicyFactory, ReinPolicy, SelectionPolicy, StaticPolicy};

use crate::config::{OnlineSettings, Preference, Preferences};

/// The policy names [`build`] knows, as written in `selector.policy`.
pub const KNOWN: &[&str] = &[
    "static:<cca>",
    "rotate:<reports>",
    "rein",
    "antelope",
    "outcome",
    "probe",
    "onnx",
    "tcprl",
];

/// What a policy may be built from.
#[derive(Debug, Clone, Copy)]
pub struct PolicyContext<'a> {
    /// The selector's candidates, by index.
    pub candidates: &'a [&'static str],
    /// `selector.models`: where learned policies find their model files.
    pub models: Option<&'a Path>,
    /// `[preferences]`: per destination port preference modes.
    pub preferences: &'a Preferences,
    /// `[selector.online]`: Antelope's online retraining, when enabled.
    pub online: Option<&'a OnlineSettings>,
}

/// A policy that cannot be built.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PolicyError {
    /// No policy has this name.
    #[error("selector.policy: unknown policy {name:?} (known: {known})", known = KNOWN.join(", "))]
    Unknown {
        /// The name asked for.
        name: String,
    },
    /// The policy needs candidates that are not configured.
    #[error("selector.policy: {policy} needs the candidates {needs} in selector.candidates")]
    MissingCandidates {
        /// The policy.
        policy: String,
        /// What it needs.
        needs: String,
    },
    /// The policy's model could not be loaded.
    #[error("selector.policy: {policy}: model: {message}")]
    Model {
        /// The policy.
        policy: String,
        /// Why.
        message: String,
    },
}

/// A learned policy's model cannot be used.
fn model_error(policy: &str, message: String) -> PolicyError {
    PolicyError::Model {
        policy: policy.to_string(),
        message,
    }
}

impl PolicyContext<'_> {
    /// `<selector.models>/<rel>`: where `policy` reads its model.
    fn model_path(&self, policy: &str, rel: impl AsRef<Path>) -> Result<PathBuf, PolicyError> {
        self.models
            .map(|m| m.join(rel))
            .ok_or_else(|| model_error(policy, "selector.models is not set".into()))
    }
}

/// Builds the factory for `spec` (`name` or `name:argument`).
pub fn build(spec: &str, ctx: &PolicyContext<'_>) -> Result<PolicyFactory, PolicyError> {
    let spec = spec.trim();
    let (name, arg) = spec
        .split_once(':')
        .map_or((spec, None), |(n, a)| (n, Some(a)));
    match (name, arg) {
        ("static", Some(cca)) => static_policy(cca, ctx),
        ("rotate", Some(n)) => rotate(n),
        ("rein", None) => rein(ctx),
        ("antelope", None) => learned(OBJECTIVE_ANTELOPE, ctx),
        ("outcome", None) => learned(OBJECTIVE_OUTCOME, ctx),
        ("probe", None) => probe(ctx),
        ("onnx", None) => onnx(ctx),
        ("tcprl", None) => tcprl(ctx),
        _ => Err(PolicyError::Unknown {
            name: spec.to_string(),
        }),
    }
}

fn static_policy(cca: &str, ctx: &PolicyContext<'_>) -> Result<PolicyFactory, PolicyError> {
    let candidate = ctx
        .candidates
        .iter()
        .position(|c| *c == cca)
        .ok_or_else(|| PolicyError::MissingCandidates {
            policy: format!("static:{cca}"),
            needs: cca.to_string(),
        })?;
    Ok(Arc::new(move |_: &FlowContext<'_>| {
        Box::new(StaticPolicy { candidate }) as Box<dyn SelectionPolicy>
    }))
}

/// `rotate:<n>`: asks for the next candidate every `n` reports (round robin), through the
/// hysteresis like any policy. For exercising swaps on a live datapath, not for production.
fn rotate(n: &str) -> Result<PolicyFactory, PolicyError> {
    let n: u64 = n
        .trim()
        .parse()
        .ok()
        .filter(|&n| n >= 1)
        .ok_or_else(|| PolicyError::Unknown {
            name: format!("rotate:{n} (needs a report count >= 1)"),
        })?;
    Ok(Arc::new(move |_: &FlowContext<'_>| {
        Box::new(EveryN { n }) as Box<dyn SelectionPolicy>
    }))
}

fn rein(ctx: &PolicyContext<'_>) -> Result<PolicyFactory, PolicyError> {
    if ReinPolicy::for_candidates(ctx.candidates).is_none() {
        return Err(PolicyError::MissingCandidates {
            policy: "rein".to_string(),
            needs: "cubic, bbr, westwood".to_string(),
        });
    }
    Ok(Arc::new(|flow: &FlowContext<'_>| {
        // The selector passes the candidates checked above, so this always finds them; a
        // static Cubic-or-first policy is the safe answer if it ever does not.
        match ReinPolicy::for_candidates(flow.candidates) {
            Some(p) => Box::new(p) as Box<dyn SelectionPolicy>,
            None => Box::new(StaticPolicy::default()),
        }
    }))
}

/// `antelope` or `outcome`: the models in `<selector.models>/<objective>/`, loaded now (a bad
/// or missing model is an error here, so a reload keeps the previous policy), with the
/// `[preferences]` port modes. Flows of one (re)load share the IP-level counts. With
/// `[selector.online]` (Antelope only, checked by the config), every finished data unit of
/// every flow becomes a sample and an [`OnlineLearner`] refits the models in the background;
/// it lives as long as this (re)load's factory.
fn learned(objective: &str, ctx: &PolicyContext<'_>) -> Result<PolicyFactory, PolicyError> {
    let model_err = |message: String| model_error(objective, message);
    let dir = ctx.model_path(objective, objective)?;
    let models = ModelSet::load(&dir).map_err(|e| model_err(e.to_string()))?;
    if models.objective != objective {
        return Err(model_err(format!(
            "{}: models predict `{}`",
            dir.display(),
            models.objective
        )));
    }
    let config = AntelopeConfig {
        preferences: modes(ctx.preferences),
        ..AntelopeConfig::for_objective(objective)
    };
    let Some(online) = ctx.online.filter(|_| objective == OBJECTIVE_ANTELOPE) else {
        let shared = Antelope::new(config, Arc::new(models));
        return Ok(Arc::new(move |flow: &FlowContext<'_>| {
            Box::new(shared.policy(flow)) as Box<dyn SelectionPolicy>
        }));
    };
    let base = match &online.base_samples {
        Some(path) => samples::read(path).map_err(|e| model_err(format!("base_samples: {e}")))?,
        None => Vec::new(),
    };
    let shared = Antelope::with_online(config, Arc::new(models));
    tracing::info!(
        period_secs = online.period.as_secs_f64(),
        window = online.window,
        base_samples = base.len(),
        save_models = ?online.save_models,
        "antelope online learning on"
    );
    let learner = Arc::new(OnlineLearner::spawn_saving(
        Arc::clone(&shared),
        base,
        online.period,
        online.window,
        online.save_models.clone(),
    ));
    Ok(Arc::new(move |flow: &FlowContext<'_>| {
        // The factory owns the learner: replacing the policy stops it.
        let _alive: &Arc<OnlineLearner> = &learner;
        Box::new(shared.policy(flow)) as Box<dyn SelectionPolicy>
    }))
}

/// `[preferences]` as the policies take them: destination port -> preference mode.
fn modes(preferences: &Preferences) -> HashMap<u32, Mode> {
    preferences
        .iter()
        .map(|(port, p)| {
            let mode = match p {
                Preference::Default => Mode::Default,
                Preference::Delay => Mode::Delay,
                Preference::Throughput => Mode::Throughput,
            };
            (u32::from(port), mode)
        })
        .collect()
}

/// `probe`: the probe policy's models in `<selector.models>/probe/` (`ccp-eval train probe`),
/// with the `[preferences]` port modes and the default margin; default-mode flows choose with
/// the later models in `<selector.models>/probe-later/` when that folder exists (none is
/// shipped: docs/selector.md, "A later choice"; a damaged set there is an error, not a silent
/// fallback); a default-mode flow that keeps its start may drain at the probe's end
/// (`probe::default_drain`); a flow to a /24 whose last probing flow moved over a standing
/// queue starts on that move's candidate without a probe (`probe::default_memory`, kept for
/// the agent's lifetime); with the kind model in `<selector.models>/probe-kind/` (shipped), a
/// default-mode flow it places among competitors moves to their kind's candidate at the
/// probe's end (`probe::kind`, at `probe::kind::DEFAULT_THRESHOLD`; a damaged model there, or
/// one trained on another start or probe window than the probe models', is an error). A flow asks for its one switch
/// on the report that ends its probe: configure `selector.hysteresis` with one agreeing
/// decision and no dwell to deploy it as evaluated (the loss hold may stay).
fn probe(ctx: &PolicyContext<'_>) -> Result<PolicyFactory, PolicyError> {
    use ccp_selector::probe::{
        DEFAULT_MARGIN, Probe, ProbeChoice, ProbeModels, ProbeOptions, default_drain,
        default_gates, default_handovers, default_memory, default_rules, default_trial,
        default_watch,
    };
    let load = |dir: &std::path::Path| {
        ProbeModels::load(dir).map_err(|e| model_error("probe", e.to_string()))
    };
    let models = load(&ctx.model_path("probe", "probe")?)?;
    let later_dir = ctx.model_path("probe", "probe-later")?;
    let later = if later_dir.exists() {
        Some(Arc::new(load(&later_dir)?))
    } else {
        None
    };
    let kind_dir = ctx.model_path("probe", "probe-kind")?;
    let kind = if kind_dir.exists() {
        let m = ccp_selector::probe::KindModel::load(&kind_dir)
            .map_err(|e| model_error("probe", e.to_string()))?;
        m.fits(&models)
            .map_err(|e| model_error("probe", format!("{}: {e}", kind_dir.display())))?;
        Some((Arc::new(m), ccp_selector::probe::kind::DEFAULT_THRESHOLD))
    } else {
        None
    };
    let shared = Probe::with_options(
        ProbeChoice::Predict {
            models: Arc::new(models),
            margin: DEFAULT_MARGIN,
            trial: default_trial(),
            watches: default_watch(),
            handovers: default_handovers(),
            later,
            gates: default_gates(),
            rules: default_rules(),
            kind,
            kind_skips: ccp_selector::probe::kind::default_skips(),
            kind_afresh: ccp_selector::probe::kind::default_afresh(),
            later_kind: None,
        },
        modes(ctx.preferences),
        ProbeOptions {
            delegate: None,
            drain: default_drain(),
            memory: default_memory(),
            short: ccp_selector::probe::default_short(),
        },
    );
    Ok(Arc::new(move |flow: &FlowContext<'_>| {
        Box::new(shared.policy(flow)) as Box<dyn SelectionPolicy>
    }))
}

/// `onnx`: the network in `<selector.models>/onnx/policy.onnx` (with its `policy.json`),
/// run with ONNX Runtime (located by `ORT_DYLIB_PATH` or the workspace `.venv`); flows start on
/// the first candidate.
fn onnx(ctx: &PolicyContext<'_>) -> Result<PolicyFactory, PolicyError> {
    let model_err = |message: String| model_error("onnx", message);
    let path = ctx.model_path("onnx", "onnx/policy.onnx")?;
    let model = ccp_selector::OnnxModel::load(&path, ctx.candidates)
        .map_err(|e| model_err(e.to_string()))?;
    Ok(ccp_selector::OnnxPolicy::factory(Arc::new(model), 0))
}

/// `tcprl`: TCP-RL's policy and change detector in `<selector.models>/tcprl/` (`tcprl.json`
/// with `policy.onnx` and `dnc.onnx`), run with ONNX Runtime; flows start on a candidate drawn
/// from their identity. The model was trained with every decision taking effect: configure
/// `selector.hysteresis` with one agreeing decision and no dwell to deploy it as trained.
fn tcprl(ctx: &PolicyContext<'_>) -> Result<PolicyFactory, PolicyError> {
    let model_err = |message: String| model_error("tcprl", message);
    let path = ctx.model_path("tcprl", "tcprl/tcprl.json")?;
    let model = ccp_selector::tcprl::TcpRlModel::load(&path, ctx.candidates)
        .map_err(|e| model_err(e.to_string()))?;
    Ok(ccp_selector::tcprl::TcpRlPolicy::factory(Arc::new(model)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::config::algorithms;

    fn algs() -> &'static [&'static str] {
        static ALGS: std::sync::OnceLock<Vec<&'static str>> = std::sync::OnceLock::new();
        ALGS.get_or_init(algorithms)
    }

    fn ctx<'a>(candidates: &'a [&'static str], prefs: &'a Preferences) -> PolicyContext<'a> {
        PolicyContext {
            candidates,
            models: None,
            preferences: prefs,
            online: None,
        }
    }

    #[test]
    fn static_and_rein_build_policies() {
        let prefs = Preferences::default();
        let c = ctx(algs(), &prefs);
        let f = build("static:vegas", &c).unwrap();
        let p = f(&FlowContext::for_candidates(algs()));
        assert_eq!(p.name(), "static");
        assert_eq!(algs()[p.initial()], "vegas");
        let f = build("rein", &c).unwrap();
        let p = f(&FlowContext::for_candidates(algs()));
        assert_eq!(p.name(), "rein");
        assert_eq!(algs()[p.initial()], "cubic");
    }

    #[test]
    fn rotate_asks_for_the_next_candidate_every_n_reports() {
        let prefs = Preferences::default();
        let c = ctx(algs(), &prefs);
        let f = build("rotate:3", &c).unwrap();
        let p = f(&FlowContext::for_candidates(algs()));
        assert_eq!(p.name(), "every-n");
    }

    #[test]
    fn unknown_policies_list_the_known_ones() {
        let prefs = Preferences::default();
        let c = ctx(algs(), &prefs);
        for bad in [
            "nope", "static", "rein:x", "static:", "rotate:0", "rotate:x", "rotate",
        ] {
            let e = build(bad, &c).err().unwrap();
            let msg = e.to_string();
            if bad == "static:" {
                assert!(matches!(e, PolicyError::MissingCandidates { .. }), "{msg}");
            } else {
                assert!(
                    msg.contains("static:<cca>") && msg.contains("rein"),
                    "{msg}"
                );
            }
        }
    }

    #[test]
    fn policies_check_their_candidates() {
        let prefs = Preferences::default();
        let few = ["reno", "cubic"];
        let c = ctx(&few, &prefs);
        assert!(matches!(
            build("rein", &c),
            Err(PolicyError::MissingCandidates { .. })
        ));
        assert!(matches!(
            build("static:bbr", &c),
            Err(PolicyError::MissingCandidates { .. })
        ));
        assert!(build("static:reno", &c).is_ok());
    }

    #[test]
    fn tcprl_loads_the_shipped_model_in_the_agents_candidate_order() {
        let prefs = Preferences::default();
        let mut c = ctx(algs(), &prefs);
        let e = build("tcprl", &c).err().unwrap();
        assert!(e.to_string().contains("selector.models is not set"), "{e}");
        let missing = std::env::temp_dir().join("ccp-agent-no-models");
        c.models = Some(&missing);
        let e = build("tcprl", &c).err().unwrap();
        assert!(e.to_string().contains("tcprl.json"), "{e}");
        let shipped = Path::new(env!("CARGO_MANIFEST_DIR")).join("../selector/models");
        c.models = Some(&shipped);
        match build("tcprl", &c) {
            Ok(f) => assert_eq!(f(&FlowContext::for_candidates(algs())).name(), "tcprl"),
            Err(e)
                if std::env::var_os("CCP_ONNX_REQUIRED").is_none()
                    && e.to_string().contains("ONNX Runtime library not found") =>
            {
                println!("skipping: {e}");
            }
            Err(e) => panic!("{e}"),
        }
    }

    #[test]
    fn learned_policies_load_their_models_or_say_why_not() {
        use ccp_selector::antelope::Sample;
        let prefs = Preferences::default();
        let dir = std::env::temp_dir().join(format!("ccp-agent-models-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut c = ctx(algs(), &prefs);
        let e = build("antelope", &c).err().unwrap();
        assert!(e.to_string().contains("selector.models is not set"), "{e}");
        c.models = Some(&dir);
        let e = build("antelope", &c).err().unwrap();
        assert!(e.to_string().contains("manifest.json"), "{e}");
        let samples: Vec<Sample> = (0..60)
            .map(|i| Sample {
                features: [f64::from(i), 20.0, 0.0, 50.0, 1e4, 8e3, 40.0],
                next_cca: ["cubic", "bbr"][i as usize % 2].into(),
                rewards: [f64::from(i % 2); 3],
            })
            .collect();
        ModelSet::train(&samples, 20)
            .unwrap()
            .save(&dir.join("antelope"))
            .unwrap();
        let f = build("antelope", &c).unwrap();
        assert_eq!(f(&FlowContext::for_candidates(algs())).name(), "antelope");
        // Antelope's models are not outcome models.
        std::fs::rename(dir.join("antelope"), dir.join("outcome")).unwrap();
        let e = build("outcome", &c).err().unwrap();
        assert!(e.to_string().contains("models predict `antelope`"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_probe_policy_loads_its_models_and_starts_flows_on_its_start() {
        use ccp_selector::probe::{
            KindModel, KindSample, N_FEATURES, ProbeModels, ProbeSample, ProbeWindow,
        };
        use std::collections::BTreeMap;
        let prefs: Preferences = [(5001, Preference::Delay)].into_iter().collect();
        let dir = std::env::temp_dir().join(format!("ccp-agent-probe-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let mut c = ctx(algs(), &prefs);
        c.models = Some(&dir);
        let e = build("probe", &c).err().unwrap();
        assert!(e.to_string().contains("manifest.json"), "{e}");
        let samples: Vec<ProbeSample> = (0..40)
            .map(|i| ProbeSample {
                mode: Mode::Default,
                target: "cubic".into(),
                features: [f64::from(i); N_FEATURES],
                gain: f64::from(i % 3) - 1.0,
                path: format!("path{}", i % 8),
            })
            .collect();
        let starts = BTreeMap::from([
            (Mode::Default, "bbr".to_string()),
            (Mode::Delay, "vegas".to_string()),
        ]);
        let models = ProbeModels::train(&samples, ProbeWindow::default(), starts).unwrap();
        models.save(&dir.join("probe")).unwrap();
        let f = build("probe", &c).unwrap();
        let p = f(&FlowContext::for_candidates(algs()));
        assert_eq!(p.name(), "probe");
        assert_eq!(algs()[p.initial()], "bbr");
        let mut delay = FlowContext::for_candidates(algs());
        delay.dst_port = 5001;
        assert_eq!(algs()[f(&delay).initial()], "vegas");
        // Later models load from probe-later/ when it exists; a damaged set there is an error.
        models.save(&dir.join("probe-later")).unwrap();
        assert!(build("probe", &c).is_ok());
        std::fs::write(dir.join("probe-later/manifest.json"), "{").unwrap();
        let e = build("probe", &c).err().unwrap();
        assert!(e.to_string().contains("probe-later"), "{e}");
        std::fs::remove_dir_all(dir.join("probe-later")).unwrap();
        // A kind model loads from probe-kind/ when it reads the probe models' probe; one
        // trained on flows started elsewhere, or probed over another window, is an error.
        let kinds: Vec<KindSample> = (0..60)
            .map(|i| {
                let kind = ["none", "cubic"][i % 2];
                KindSample {
                    features: [if i % 2 == 0 { 1.0 } else { 3.0 }; N_FEATURES],
                    kind: kind.to_string(),
                    scores: [("bbr", 0.0), ("cubic", if i % 2 == 0 { -1.0 } else { 1.0 })]
                        .into_iter()
                        .map(|(c, v)| (c.to_string(), v))
                        .collect(),
                }
            })
            .collect();
        let kind_dir = dir.join("probe-kind");
        KindModel::train(&kinds, "bbr", ProbeWindow::default(), None)
            .unwrap()
            .save(&kind_dir)
            .unwrap();
        assert!(build("probe", &c).is_ok());
        let longer = ProbeWindow {
            min_ms: 3_000,
            ..ProbeWindow::default()
        };
        for (start, window, says) in [
            ("copa", ProbeWindow::default(), "started on copa"),
            ("bbr", longer, "3000 ms"),
        ] {
            KindModel::train(&kinds, start, window, None)
                .unwrap()
                .save(&kind_dir)
                .unwrap();
            let e = build("probe", &c).err().unwrap().to_string();
            assert!(e.contains("probe-kind") && e.contains(says), "{e}");
        }
        let _ = std::fs::remove_dir_all(&dir);
    }
}
