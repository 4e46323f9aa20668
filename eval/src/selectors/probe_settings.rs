//! The settings of `selector-probe` that its environment variables change (`$CCP_PROBE_*`):
//! where its models are, its margin, trial, watches, later models, hand-overs, delegate, drain,
//! path memory, gates, rules, kind model and second look at the kind. Each is read when a run
//! builds its selectors; unset, the deployed policy's (`ccp_selector::probe::default_*`); a
//! value that cannot be used is reported once and the default kept.

use std::path::PathBuf;
use std::sync::{Arc, Mutex, OnceLock, PoisonError};

use ccp_selector::HysteresisConfig;
use ccp_selector::probe::{self, ProbeModels};
use ccp_selector::tcprl::TcpRlPolicy;

use super::{candidate_names, env_dir, env_f64, tcprl_model};

/// Where `selector-probe` reads its models: `$CCP_PROBE_MODELS`, else the shipped ones,
/// `selector/models/probe` (`make probe-model`).
pub fn probe_models_dir() -> PathBuf {
    env_dir("CCP_PROBE_MODELS", "../selector/models/probe")
}

/// The probe policy's models, loaded once per process (an error says why they cannot be used).
pub fn probe_models() -> Result<Arc<ProbeModels>, String> {
    static MODELS: OnceLock<Result<Arc<ProbeModels>, String>> = OnceLock::new();
    MODELS
        .get_or_init(|| {
            let dir = probe_models_dir();
            ProbeModels::load(&dir).map(Arc::new).map_err(|e| {
                format!(
                    "{e} (train with `ccp-eval gen-data selection-train --kind probe` and \
                     `ccp-eval train probe`, or `make probe-model`)"
                )
            })
        })
        .clone()
}

/// Where `selector-probe` reads its kind model ([`probe::kind`]): `$CCP_PROBE_KIND_MODELS`, else
/// the shipped one, `selector/models/probe-kind` (`make probe-kind-model`).
pub fn probe_kind_dir() -> PathBuf {
    env_dir("CCP_PROBE_KIND_MODELS", "../selector/models/probe-kind")
}

/// The competitors' kind of `selector-probe` ([`probe::kind`]) and its threshold:
/// `$CCP_PROBE_KIND` = `off` (none) or a threshold in (0, 1], else
/// [`probe::kind::DEFAULT_THRESHOLD`]; the model loaded once per process from
/// [`probe_kind_dir`]. A model that does not load, or does not read the probe models' probe
/// ([`probe::KindModel::fits`]: another start or window), is reported once and the policy runs
/// without it.
pub fn probe_kind() -> Option<(Arc<probe::KindModel>, f64)> {
    static MODEL: OnceLock<Result<Arc<probe::KindModel>, String>> = OnceLock::new();
    let threshold = kind_threshold()?;
    let model = MODEL
        .get_or_init(|| {
            let dir = probe_kind_dir();
            let m = probe::KindModel::load(&dir).map_err(|e| e.to_string())?;
            match probe_models() {
                Ok(p) => m
                    .fits(&p)
                    .map_err(|e| format!("{}: {e}", dir.display()))
                    .map(|()| Arc::new(m)),
                Err(_) => Ok(Arc::new(m)),
            }
        })
        .clone();
    match model {
        Ok(m) => Some((m, threshold)),
        Err(e) => {
            report_once(&format!("selector-probe runs without its kind model: {e}"));
            None
        }
    }
}

/// The kind's threshold: `$CCP_PROBE_KIND` = `off` (`None`) or a threshold in (0, 1], else
/// [`probe::kind::DEFAULT_THRESHOLD`].
fn kind_threshold() -> Option<f64> {
    match std::env::var("CCP_PROBE_KIND") {
        Ok(v) if v.trim() == "off" => None,
        Ok(v) => Some(match v.trim().parse::<f64>() {
            Ok(t) if t > 0.0 && t <= 1.0 => t,
            _ => {
                report_once(&format!(
                    "CCP_PROBE_KIND={v:?} ignored: not `off` or a threshold in (0, 1]"
                ));
                probe::kind::DEFAULT_THRESHOLD
            }
        }),
        Err(_) => Some(probe::kind::DEFAULT_THRESHOLD),
    }
}

/// The second look at the competitors' kind of `selector-probe` (`later_kind` of
/// [`probe::ProbeChoice::Predict`]): `$CCP_PROBE_LATER_KIND` = the directory of a kind model
/// trained at a later window (`gen-data --kind probe --probe-ms 5000`, then `train
/// probe-kind`), at the kind's threshold (`$CCP_PROBE_KIND`; its default when that is `off`);
/// unset or `off`: none, as deployed. A model that does not load, or that
/// [`probe::KindModel::fits_later`] refuses, is reported once and left out.
pub fn probe_later_kind() -> Option<(Arc<probe::KindModel>, f64)> {
    static MODEL: OnceLock<Option<Result<Arc<probe::KindModel>, String>>> = OnceLock::new();
    let model = MODEL
        .get_or_init(|| {
            let dir = std::env::var("CCP_PROBE_LATER_KIND").ok()?;
            if dir.trim() == "off" {
                return None;
            }
            let dir = PathBuf::from(dir.trim());
            Some(
                probe::KindModel::load(&dir)
                    .map_err(|e| e.to_string())
                    .and_then(|m| {
                        probe_models()
                            .and_then(|p| m.fits_later(&p))
                            .map_err(|e| format!("{}: {e}", dir.display()))
                            .map(|()| Arc::new(m))
                    }),
            )
        })
        .clone()?;
    let threshold = kind_threshold().unwrap_or(probe::kind::DEFAULT_THRESHOLD);
    match model {
        Ok(m) => Some((m, threshold)),
        Err(e) => {
            report_once(&format!(
                "selector-probe runs without its second look at the kind: {e}"
            ));
            None
        }
    }
}

/// The margin of `selector-probe`: `$CCP_PROBE_MARGIN` (a finite number, for a sweep on a
/// validation set; below 0, a trial is proposed even for a predicted loss), else
/// [`probe::DEFAULT_MARGIN`].
pub fn probe_margin() -> f64 {
    env_f64("CCP_PROBE_MARGIN")
        .filter(|g| g.is_finite())
        .unwrap_or(probe::DEFAULT_MARGIN)
}

/// The trial of `selector-probe`: `$CCP_PROBE_TRIAL=on` runs [`probe::Trial::default`] (with
/// `$CCP_PROBE_CONFIDENT` as its `confident_gain` when set), `off` none, else
/// [`probe::default_trial`].
pub fn probe_trial() -> Option<probe::Trial> {
    let on = || {
        let mut t = probe::Trial::default();
        if let Some(g) = env_f64("CCP_PROBE_CONFIDENT").filter(|g| !g.is_nan()) {
            t.confident_gain = g;
        }
        t
    };
    match std::env::var("CCP_PROBE_TRIAL").as_deref() {
        Ok("on") => Some(on()),
        Ok("off") => None,
        _ => probe::default_trial(),
    }
}

/// The competition watches of `selector-probe`: `$CCP_PROBE_WATCH` = `off`, or `;`-separated
/// watches, each `on` (the queue-only [`probe::Watch::default`]), `deployed` (those of
/// [`probe::default_watch`]) or a spec of [`probe::Watch::parse`]
/// (`<ratio>,<window ms>,<window RTTs>,<target>[,kept][,loss=<share>][,maxloss=<share>]
/// [,drained=<ratio>][,from=<candidate>][,probe=<feature>=<min>..<max>][,after=<ms>]`); unset:
/// [`probe::default_watch`]. A value that cannot be used is reported and ignored.
pub fn probe_watch() -> Vec<probe::Watch> {
    let Ok(value) = std::env::var("CCP_PROBE_WATCH") else {
        return probe::default_watch();
    };
    parse_watches(&value)
        .map_err(|e| report_once(&format!("CCP_PROBE_WATCH={value:?} ignored: {e}")))
        .unwrap_or_else(|()| probe::default_watch())
}

/// Parses [`probe_watch`]'s value.
fn parse_watches(value: &str) -> Result<Vec<probe::Watch>, String> {
    if value.trim() == "off" {
        return Ok(Vec::new());
    }
    let mut watches = Vec::new();
    for spec in value.split(';').map(str::trim) {
        match spec {
            "on" => watches.push(probe::Watch::default()),
            "deployed" => watches.extend(probe::default_watch()),
            spec => watches.push(probe::Watch::parse(spec)?),
        }
    }
    Ok(watches)
}

/// The later models of `selector-probe` (default-mode flows choose with them at the end of
/// their longer window, [`probe::ProbeChoice::Predict`]): `$CCP_PROBE_LATER` = a model directory
/// (`gen-data --kind probe --probe-ms 5000`, `train probe`); unset or `off`: none (every flow
/// chooses at the probe's end, as deployed; docs/selector.md "A later choice"). Loaded once per
/// process; models that cannot be loaded are reported and left out.
pub fn probe_later() -> Option<Arc<ProbeModels>> {
    static LATER: OnceLock<Option<Arc<ProbeModels>>> = OnceLock::new();
    LATER
        .get_or_init(|| {
            let value = std::env::var("CCP_PROBE_LATER").ok()?;
            if value.trim() == "off" {
                return None;
            }
            ProbeModels::load(std::path::Path::new(value.trim()))
                .map_err(|e| report_once(&format!("CCP_PROBE_LATER={value:?} ignored: {e}")))
                .ok()
                .map(Arc::new)
        })
        .clone()
}

/// Prints `message` to standard error the first time this process asks (a setting that
/// cannot be used is read again for every run's selectors).
fn report_once(message: &str) {
    static REPORTED: Mutex<Vec<String>> = Mutex::new(Vec::new());
    let mut seen = REPORTED.lock().unwrap_or_else(PoisonError::into_inner);
    if !seen.iter().any(|m| m == message) {
        eprintln!("{message}");
        seen.push(message.to_string());
    }
}

/// The start-up hand-overs of `selector-probe`: `$CCP_PROBE_HANDOVER` = `off` (none) or
/// comma-separated specs of [`probe::Handover::parse`] (`<mode>:<start>><then>`, naming
/// candidates of [`candidate_names`]), else [`probe::default_handovers`]. A value that cannot
/// be used is reported and ignored.
pub fn probe_handovers() -> Vec<probe::Handover> {
    specs_from_env(
        "CCP_PROBE_HANDOVER",
        handovers_from,
        probe::default_handovers,
    )
}

/// The policy `selector-probe`'s default-mode flows hand over to at the probe's end
/// ([`probe::delegate`]): `$CCP_PROBE_DELEGATE` = `off` (none) or `tcprl:<min RTT ms>:<max
/// drained ratio>:<min rate Mbit/s>` (TCP-RL's policy, [`tcprl_model`]), else none. A value that cannot be used
/// (or a TCP-RL model that does not load) is reported and ignored.
pub fn probe_delegate() -> Option<probe::Delegate> {
    let value = std::env::var("CCP_PROBE_DELEGATE").ok()?;
    delegate_from(&value)
        .map_err(|e| report_once(&format!("CCP_PROBE_DELEGATE={value:?} ignored: {e}")))
        .ok()
        .flatten()
}

/// The delegate `value` asks for (`off`: none), or why it cannot be used.
fn delegate_from(value: &str) -> Result<Option<probe::Delegate>, String> {
    if value.trim() == "off" {
        return Ok(None);
    }
    let (name, gate) = value.trim().split_once(':').ok_or_else(|| {
        format!("{value:?}: not tcprl:<min RTT ms>:<max drained ratio>:<min rate Mbit/s>")
    })?;
    if name.trim() != "tcprl" {
        return Err(format!("{name:?}: the one delegate is tcprl"));
    }
    let gate = probe::DelegateGate::parse(gate)?;
    let model = tcprl_model()?;
    Ok(Some(probe::Delegate {
        name: "tcprl".into(),
        factory: TcpRlPolicy::factory(model),
        gate,
        // As `selector-tcprl` runs it: the policy was trained with every decision taking effect.
        hysteresis: HysteresisConfig::none(),
        max_swaps: env_f64("CCP_PROBE_DELEGATE_SWAPS")
            .filter(|n| n.is_finite() && *n >= 0.0)
            .map_or(2, |n| n as u32),
    }))
}

/// The drain of `selector-probe`'s default-mode flows that keep their start
/// ([`probe::drain`]): `$CCP_PROBE_DRAIN` = `off` (none) or
/// `<min RTT ratio>:<max drained ratio>:<min BDP packets>:<BDPs>` ([`probe::Drain::parse`]),
/// else [`probe::default_drain`]. A value that cannot be used is reported and ignored.
pub fn probe_drain() -> Option<probe::Drain> {
    option_from_env("CCP_PROBE_DRAIN", probe::Drain::parse, probe::default_drain)
}

/// The path memory of `selector-probe` ([`probe::memory`]): `$CCP_PROBE_MEMORY` = `off` (none)
/// or `<prefix bits>:<agree>:<reprobe every>[:<min drained>]` ([`probe::Memory::parse`]), else
/// [`probe::default_memory`]. A value that cannot be used is reported and ignored. The memory
/// lives as long as the run's selector: one run's flows teach it, never another run's.
pub fn probe_memory() -> Option<probe::Memory> {
    option_from_env(
        "CCP_PROBE_MEMORY",
        probe::Memory::parse,
        probe::default_memory,
    )
}

/// The short flows' verdicts of `selector-probe`'s path memory
/// ([`probe::ProbeOptions::short`]): `$CCP_PROBE_SHORT` = `off` (none) or
/// `<agree>:<reprobe every>:<rule>` ([`probe::ShortFlows::parse`], e.g.
/// `2:8:vivace:loss_per_kpkt=600..`), else [`probe::default_short`]. A value that cannot be
/// used is reported and ignored.
pub fn probe_short() -> Option<probe::ShortFlows> {
    option_from_env(
        "CCP_PROBE_SHORT",
        probe::ShortFlows::parse,
        probe::default_short,
    )
}

/// The setting `var` asks for: unset, `default`; `off`, none; else what `parse` reads from it
/// (a value it refuses is reported and `default` used).
fn option_from_env<T>(
    var: &str,
    parse: fn(&str) -> Result<T, String>,
    default: fn() -> Option<T>,
) -> Option<T> {
    let Ok(value) = std::env::var(var) else {
        return default();
    };
    if value.trim() == "off" {
        return None;
    }
    parse(&value)
        .map_err(|e| report_once(&format!("{var}={value:?} ignored: {e}")))
        .ok()
        .or_else(default)
}

/// The queue gates `selector-probe` flows pass: `$CCP_PROBE_GATE` = `off` (none) or
/// comma-separated specs of [`probe::QueueGate::parse`] (`<candidate>:<ratio>`, e.g.
/// `arc:1.3`, or `<candidate>:loss=<per kpkt>`, e.g. `bbr:loss=50`), else
/// [`probe::default_gates`]. A value that cannot be used is reported and
/// ignored.
pub fn probe_gates() -> Vec<probe::QueueGate> {
    specs_from_env("CCP_PROBE_GATE", gates_from, probe::default_gates)
}

/// The rules `selector-probe` flows follow: `$CCP_PROBE_RULES` = `off` (none) or
/// `;`-separated specs of [`probe::ProbeRule::parse`] (e.g.
/// `reno:rtt_ratio_drained=1.05..1.45,loss_per_kpkt=0.3..40,rtt_cv=..0.2`), else
/// [`probe::default_rules`]. A value that cannot be used is reported and ignored.
pub fn probe_rules() -> Vec<probe::ProbeRule> {
    specs_from_env("CCP_PROBE_RULES", rules_from, probe::default_rules)
}

/// The boxes whose flows `selector-probe`'s kind model does not judge:
/// `$CCP_PROBE_KIND_SKIP` = `off` (none) or `;`-separated boxes of
/// [`probe::FeatureBox::parse`] (e.g. `min_rtt_ms=60..,loss_per_kpkt=0.5..40`), else
/// [`probe::kind::default_skips`]. A value that cannot be used is reported and ignored.
pub fn probe_kind_skips() -> Vec<probe::FeatureBox> {
    specs_from_env(
        "CCP_PROBE_KIND_SKIP",
        kind_skips_from,
        probe::kind::default_skips,
    )
}

/// The candidates `selector-probe`'s kind model hands a flow to afresh:
/// `$CCP_PROBE_KIND_AFRESH` = `off` (none) or comma-separated candidates, else
/// [`probe::kind::default_afresh`]. A value that cannot be used is reported and ignored.
pub fn probe_kind_afresh() -> Vec<String> {
    specs_from_env(
        "CCP_PROBE_KIND_AFRESH",
        kind_afresh_from,
        probe::kind::default_afresh,
    )
}

/// The candidates `value` names (`off`: none), or why they cannot be used.
fn kind_afresh_from(value: &str, candidates: &[&str]) -> Result<Vec<String>, String> {
    specs(
        value,
        candidates,
        |c| Ok(c.trim().to_string()),
        |c| vec![c.as_str()],
    )
}

/// The boxes `value` asks for (`off`: none), or why they cannot be used.
fn kind_skips_from(value: &str, candidates: &[&str]) -> Result<Vec<probe::FeatureBox>, String> {
    separated_specs(value, ';', candidates, probe::FeatureBox::parse, |_| {
        Vec::new()
    })
}

/// The rules `value` asks for (`off`: none), or why they cannot be used (`;`-separated: a
/// rule's ranges are comma-separated; its candidate may be `start`).
fn rules_from(value: &str, candidates: &[&str]) -> Result<Vec<probe::ProbeRule>, String> {
    separated_specs(value, ';', candidates, probe::ProbeRule::parse, |r| {
        (r.candidate != probe::rule::START)
            .then_some(r.candidate.as_str())
            .into_iter()
            .collect()
    })
}

/// The specs `var` asks for, read by `from` over [`candidate_names`], else `default`.
fn specs_from_env<T>(
    var: &str,
    from: fn(&str, &[&str]) -> Result<Vec<T>, String>,
    default: fn() -> Vec<T>,
) -> Vec<T> {
    match std::env::var(var) {
        Ok(value) => from(&value, &candidate_names()).unwrap_or_else(|e| {
            report_once(&format!("{var}={value:?} ignored: {e}"));
            default()
        }),
        Err(_) => default(),
    }
}

/// The specs of a comma-separated `value` (`off`: none), each parsed by `parse` and naming
/// only `candidates` (those `named` gives), or why they cannot be used.
fn specs<T>(
    value: &str,
    candidates: &[&str],
    parse: fn(&str) -> Result<T, String>,
    named: fn(&T) -> Vec<&str>,
) -> Result<Vec<T>, String> {
    separated_specs(value, ',', candidates, parse, named)
}

/// [`specs`] of a `value` separated by `separator`.
fn separated_specs<T>(
    value: &str,
    separator: char,
    candidates: &[&str],
    parse: fn(&str) -> Result<T, String>,
    named: fn(&T) -> Vec<&str>,
) -> Result<Vec<T>, String> {
    if value.trim() == "off" {
        return Ok(Vec::new());
    }
    let specs = value
        .split(separator)
        .map(parse)
        .collect::<Result<Vec<_>, _>>()?;
    for name in specs.iter().flat_map(named) {
        if !candidates.contains(&name) {
            return Err(format!("{name:?} is not a candidate ({candidates:?})"));
        }
    }
    Ok(specs)
}

/// The gates `value` asks for (`off`: none), or why it cannot be used.
fn gates_from(value: &str, candidates: &[&str]) -> Result<Vec<probe::QueueGate>, String> {
    specs(value, candidates, probe::QueueGate::parse, |g| {
        vec![g.candidate.as_str()]
    })
}

/// The hand-overs `value` asks for (`off`: none), or why it cannot be used.
fn handovers_from(value: &str, candidates: &[&str]) -> Result<Vec<probe::Handover>, String> {
    specs(value, candidates, probe::Handover::parse, |h| {
        vec![h.start.as_str(), h.then.as_str()]
    })
}

#[cfg(test)]
mod tests {
    use ccp_selector::antelope::Mode;

    use super::*;

    #[test]
    fn probe_watches_parse_or_say_what_is_wrong() {
        assert_eq!(parse_watches("off"), Ok(Vec::new()));
        assert_eq!(parse_watches("deployed"), Ok(probe::default_watch()));
        let mut both = probe::default_watch();
        both.push(probe::Watch::default());
        assert_eq!(parse_watches(" deployed ; on "), Ok(both));
        assert_eq!(
            parse_watches("1.3,8000,30,arc,maxloss=0.005,drained=1.5"),
            Ok(vec![probe::Watch::held_queue()])
        );
        let err = parse_watches("deployed;1.3,8000,30").unwrap_err();
        assert!(err.contains("expected"), "{err}");
    }

    #[test]
    fn handover_values_name_candidates_or_say_why_not() {
        let names = candidate_names();
        assert_eq!(handovers_from(" off ", &names), Ok(Vec::new()));
        let two = handovers_from("delay:vegas>copa, throughput:bbr>copa", &names).unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(two[0], probe::default_handovers()[0]);
        assert_eq!(two[1].mode, Mode::Throughput);
        let e = handovers_from("delay:vegsa>copa", &names).unwrap_err();
        assert!(e.contains("\"vegsa\" is not a candidate"), "{e}");
        let e = handovers_from("delay=vegas>copa", &names).unwrap_err();
        assert!(e.contains("not <mode>"), "{e}");
    }

    #[test]
    fn rule_values_name_candidates_or_say_why_not() {
        let names = candidate_names();
        assert_eq!(rules_from(" off ", &names), Ok(Vec::new()));
        let two = rules_from(
            "reno:rtt_ratio_drained=1.05..1.45,rtt_cv=..0.2; bbr:loss_per_kpkt=50..",
            &names,
        )
        .unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(
            (two[0].candidate.as_str(), two[0].ranges.len()),
            ("reno", 2)
        );
        assert_eq!(two[1].to_string(), "bbr:loss_per_kpkt=50..");
        assert_eq!(
            rules_from("start:min_rtt_ms=80..", &names).map(|r| r.len()),
            Ok(1)
        );
        let e = rules_from("rneo:rtt_cv=..0.2", &names).unwrap_err();
        assert!(e.contains("\"rneo\" is not a candidate"), "{e}");
        let e = rules_from("reno:rtt_cv<0.2", &names).unwrap_err();
        assert!(e.contains("is not <feature>"), "{e}");
    }

    #[test]
    fn kind_skip_values_are_boxes_or_say_why_not() {
        let names = candidate_names();
        assert_eq!(kind_skips_from("off", &names), Ok(Vec::new()));
        let two = kind_skips_from(
            "min_rtt_ms=60..,loss_per_kpkt=0.5..40; rtt_cv=..0.2",
            &names,
        )
        .unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(two[0].to_string(), "min_rtt_ms=60..,loss_per_kpkt=0.5..40");
        let e = kind_skips_from("min_rtt_ms>60", &names).unwrap_err();
        assert!(e.contains("is not <feature>"), "{e}");
        let e = kind_skips_from("bbr:min_rtt_ms=60..", &names).unwrap_err();
        assert!(e.contains("no feature \"bbr:min_rtt_ms\""), "{e}");
    }

    #[test]
    fn kind_afresh_values_name_candidates_or_say_why_not() {
        let names = candidate_names();
        assert_eq!(kind_afresh_from("off", &names), Ok(Vec::new()));
        assert_eq!(
            kind_afresh_from(" bbr, arc ", &names),
            Ok(vec!["bbr".to_string(), "arc".to_string()])
        );
        let e = kind_afresh_from("bbr,bbbr", &names).unwrap_err();
        assert!(e.contains("\"bbbr\" is not a candidate"), "{e}");
    }

    #[test]
    fn gate_values_name_candidates_or_say_why_not() {
        let names = candidate_names();
        assert_eq!(gates_from("off", &names), Ok(Vec::new()));
        let two = gates_from("arc:1.3, bbr:2", &names).unwrap();
        assert_eq!(two.len(), 2);
        assert_eq!(
            (two[0].candidate.as_str(), two[0].min_drained),
            ("arc", 1.3)
        );
        let e = gates_from("acr:1.3", &names).unwrap_err();
        assert!(e.contains("\"acr\" is not a candidate"), "{e}");
        let e = gates_from("arc=1.3", &names).unwrap_err();
        assert!(e.contains("not <candidate>:<ratio>"), "{e}");
    }
}
