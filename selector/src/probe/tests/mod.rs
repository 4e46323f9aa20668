use std::collections::BTreeMap;

use ccp_algorithms::Measurement;

use super::features::{FEATURE_SCHEMA_VERSION, LOSS, MIN_RTT, RATE_MAX, RTT_RATIO_LAST};
use super::*;

const NAMES: [&str; 3] = ["bbr", "copa", "vegas"];

/// A flow over [`NAMES`] to destination `port` (the preference modes' ports: 5001 delay,
/// 5002 throughput).
fn to_port(port: u32) -> FlowContext<'static> {
    FlowContext {
        dst_port: port,
        ..FlowContext::for_candidates(&NAMES)
    }
}

/// `ProbeChoice::Predict` on `models` with the default margin and nothing else (no trial,
/// watch, hand-over, later models, gates or rules), then the fields named set: `predict!(m, watch:
/// Some(w))`.
macro_rules! predict {
    ($models:expr $(, $field:ident: $value:expr)* $(,)?) => {{
        #[allow(unused_mut)]
        let mut choice = ProbeChoice::Predict {
            models: $models,
            margin: DEFAULT_MARGIN,
            trial: None,
            watches: Vec::new(),
            handovers: Vec::new(),
            later: None,
            gates: Vec::new(),
            rules: Vec::new(),
        };
        $(
            let value = $value;
            if let ProbeChoice::Predict { $field: slot, .. } = &mut choice {
                *slot = value;
            }
        )*
        choice
    }};
}

/// Synthetic training data: Copa gains 0.3 on a variable delivery rate (feature 8 > 0.3) and
/// loses 0.2 elsewhere; Vegas gains 0.2 where the queue grew past twice the base RTT
/// (feature 2 > 2) and loses 0.1 elsewhere.
fn samples(n: usize) -> Vec<ProbeSample> {
    let mut out = Vec::new();
    for i in 0..n {
        let mut x = [0.0; N_FEATURES];
        x[0] = 20.0 + (i % 7) as f64 * 10.0;
        x[2] = 1.0 + (i % 5) as f64 * 0.5;
        x[8] = (i % 4) as f64 * 0.15;
        let copa = if x[8] > 0.3 { 0.3 } else { -0.2 };
        let vegas = if x[2] > 2.0 { 0.2 } else { -0.1 };
        for (mode, k) in [(Mode::Default, 1.0), (Mode::Delay, 2.0)] {
            out.push(ProbeSample {
                mode,
                target: "copa".into(),
                features: x,
                gain: copa * k,
                path: format!("p{i}"),
            });
            out.push(ProbeSample {
                mode,
                target: "vegas".into(),
                features: x,
                gain: vegas * k,
                path: format!("p{i}"),
            });
            out.push(ProbeSample {
                mode,
                target: "bbr".into(),
                features: x,
                gain: 0.0,
                path: format!("p{i}"),
            });
        }
    }
    out
}

fn starts() -> BTreeMap<Mode, String> {
    BTreeMap::from([
        (Mode::Default, "bbr".to_string()),
        (Mode::Delay, "bbr".to_string()),
    ])
}

fn features(rtt_ratio_max: f64, rate_cv: f64) -> [f64; N_FEATURES] {
    let mut x = [0.0; N_FEATURES];
    x[0] = 50.0;
    x[2] = rtt_ratio_max;
    x[8] = rate_cv;
    x
}

#[test]
fn the_models_learn_the_gain_of_each_candidate_over_the_start() {
    let m = ProbeModels::train(&samples(400), ProbeWindow::default(), starts()).unwrap();
    // The start has no model: its gain is 0 by definition.
    assert_eq!(m.candidates(Mode::Default), vec!["copa", "vegas"]);
    assert_eq!(m.bags(), DEFAULT_BAGS);
    assert_eq!(m.samples(Mode::Default, "copa"), 400);
    let mut out = Vec::new();
    m.predict(Mode::Default, &NAMES, &features(1.0, 0.45), &mut out);
    assert!(out[0].abs() < 1e-12);
    assert!((out[1] - 0.3).abs() < 0.05, "copa {out:?}");
    assert!((out[2] + 0.1).abs() < 0.05, "vegas {out:?}");
    m.predict(Mode::Default, &NAMES, &features(3.0, 0.0), &mut out);
    assert!(
        (out[1] + 0.2).abs() < 0.05 && (out[2] - 0.2).abs() < 0.05,
        "{out:?}"
    );
    // The delay mode has its own models; the throughput mode falls back to the default's.
    m.predict(Mode::Delay, &NAMES, &features(3.0, 0.0), &mut out);
    assert!((out[2] - 0.4).abs() < 0.08, "{out:?}");
    m.predict(Mode::Throughput, &NAMES, &features(3.0, 0.0), &mut out);
    assert!((out[2] - 0.2).abs() < 0.05, "{out:?}");
    // An unknown candidate never wins.
    m.predict(
        Mode::Default,
        &["bbr", "nope"],
        &features(3.0, 0.0),
        &mut out,
    );
    assert!(out[1].is_infinite() && out[1] < 0.0);
}

#[test]
fn too_few_samples_or_no_start_train_nothing() {
    assert!(ProbeModels::train(&samples(5), ProbeWindow::default(), starts()).is_err());
    assert!(ProbeModels::train(&samples(400), ProbeWindow::default(), BTreeMap::new()).is_err());
}

/// `m` saved to a fresh folder of the temporary directory named for `tag` and this process.
fn saved(m: &ProbeModels, tag: &str) -> std::path::PathBuf {
    let dir = std::env::temp_dir().join(format!("ccp-probe-{tag}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    m.save(&dir).unwrap();
    dir
}

#[test]
fn models_survive_a_save_and_load_and_bad_files_are_refused() {
    let m = ProbeModels::train_bags(&samples(200), ProbeWindow::default(), starts(), 3).unwrap();
    let dir = saved(&m, "models");
    let back = ProbeModels::load(&dir).unwrap();
    assert_eq!(back.window, m.window);
    assert_eq!(back.starts, m.starts);
    assert_eq!(back.bags(), 3);
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for x in [features(1.0, 0.45), features(3.0, 0.0), features(1.7, 0.2)] {
        m.predict(Mode::Default, &NAMES, &x, &mut a);
        back.predict(Mode::Default, &NAMES, &x, &mut b);
        assert_eq!(a, b);
    }
    let manifest = dir.join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    // Another feature schema, another format, no default start, a damaged booster.
    for (what, bad) in [
        (
            "feature_schema",
            text.replace(
                &format!("\"feature_schema\": {FEATURE_SCHEMA_VERSION}"),
                "\"feature_schema\": 9",
            ),
        ),
        (
            "not `probe-models`",
            text.replace("\"probe-models\"", "\"antelope-models\""),
        ),
        (
            "no start candidate",
            text.replace("\"default\": \"bbr\"", "\"throughput\": \"bbr\""),
        ),
        ("not a valid model manifest", "{".to_string()),
    ] {
        std::fs::write(&manifest, &bad).unwrap();
        let err = ProbeModels::load(&dir).unwrap_err().to_string();
        assert!(err.contains(what), "{what}: {err}");
    }
    std::fs::write(&manifest, &text).unwrap();
    let booster = dir.join("bag2").join("default-copa.json");
    let json = std::fs::read_to_string(&booster).unwrap();
    // A split on a feature the models do not have (Copa's gain depends on feature 8).
    let bad = json.replace("\"split_feature\":8", "\"split_feature\":99");
    assert_ne!(bad, json, "the booster has a split on feature 8");
    std::fs::write(&booster, bad).unwrap();
    let err = ProbeModels::load(&dir).unwrap_err().to_string();
    assert!(err.contains("split on feature 99"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Three paths alike in every feature: on one, 40 flows gain 1.0 by moving to Copa; on the
/// two others, 40 flows each lose 0.3. The mean gain (0.13) is positive, but a bag that did not
/// draw the first path predicts a loss, and one that drew it twice a larger gain.
fn disputed() -> Vec<ProbeSample> {
    let mut out = Vec::new();
    for (path, gain) in [("a", 1.0), ("b", -0.3), ("c", -0.3)] {
        for _ in 0..40 {
            out.push(ProbeSample {
                mode: Mode::Default,
                target: "copa".into(),
                features: features(1.0, 0.45),
                gain,
                path: path.into(),
            });
        }
    }
    out
}

#[test]
fn bags_resample_whole_paths_and_predict_their_mean() {
    let one = ProbeModels::train_bags(&disputed(), ProbeWindow::default(), starts(), 1).unwrap();
    let bags = ProbeModels::train_bags(&disputed(), ProbeWindow::default(), starts(), 8).unwrap();
    let x = features(1.0, 0.45);
    let (mut mean, mut k) = (Vec::new(), Vec::new());
    one.predict(Mode::Default, &NAMES, &x, &mut mean);
    assert_eq!(one.bags(), 1);
    assert!((mean[1] - 0.1333).abs() < 0.01, "{mean:?}");
    // Each bag saw a resample of the three paths: some without the gaining one.
    bags.predict(Mode::Default, &NAMES, &x, &mut mean);
    let mut per_bag = Vec::new();
    for b in 0..8 {
        bags.predict_in_bag(b, Mode::Default, &NAMES, &x, &mut k);
        assert!(
            k[0].abs() < f64::EPSILON,
            "the start's gain is 0 in every bag"
        );
        per_bag.push(k[1]);
    }
    assert!(per_bag.iter().any(|g| *g < 0.0), "{per_bag:?}");
    assert!(per_bag.iter().any(|g| *g > 0.3), "{per_bag:?}");
    let avg = per_bag.iter().sum::<f64>() / 8.0;
    assert!((mean[1] - avg).abs() < 1e-12, "{mean:?} {avg}");
    bags.predict_in_bag(8, Mode::Default, &NAMES, &x, &mut k);
    assert!(k.iter().all(|v| v.is_infinite()), "no bag 8: {k:?}");
    // Reproducible: the same samples give the same bags.
    let again = ProbeModels::train_bags(&disputed(), ProbeWindow::default(), starts(), 8).unwrap();
    let mut mean2 = Vec::new();
    again.predict(Mode::Default, &NAMES, &x, &mut mean2);
    assert_eq!(mean2, mean);

    // The policy acts on the mean (and explains with it).
    let probe = predicting(Arc::new(bags), mean[1] - 0.01);
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    run(&mut p, &mut current, 60, 0.45);
    assert_eq!(current, 1, "moved to Copa");
    assert!((p.explain().unwrap().scores[1] - mean[1]).abs() < 1e-12);
}

#[test]
fn a_format_1_set_loads_as_one_bag() {
    let m = ProbeModels::train_bags(&samples(200), ProbeWindow::default(), starts(), 1).unwrap();
    let dir = saved(&m, "v1");
    let manifest = dir.join("manifest.json");
    let mut v: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&manifest).unwrap()).unwrap();
    let bag = v["bags"][0].clone();
    let top = v.as_object_mut().unwrap();
    top.remove("bags");
    top.insert("format_version".into(), 1.into());
    top.insert("models".into(), bag["models"].clone());
    top.insert("samples".into(), bag["samples"].clone());
    std::fs::write(&manifest, serde_json::to_string(&v).unwrap()).unwrap();
    let back = ProbeModels::load(&dir).unwrap();
    assert_eq!(back.bags(), 1);
    let (mut before, mut after) = (Vec::new(), Vec::new());
    m.predict(Mode::Default, &NAMES, &features(3.0, 0.0), &mut before);
    back.predict(Mode::Default, &NAMES, &features(3.0, 0.0), &mut after);
    assert_eq!(before, after);
    // A version 2 manifest without bags, and a version from the future, are refused.
    o_write(&manifest, &v, |o| {
        o.insert("format_version".into(), 2.into());
    });
    let err = ProbeModels::load(&dir).unwrap_err().to_string();
    assert!(err.contains("no bags"), "{err}");
    o_write(&manifest, &v, |o| {
        o.insert("format_version".into(), 3.into());
    });
    let err = ProbeModels::load(&dir).unwrap_err().to_string();
    assert!(err.contains("format_version"), "{err}");
    let _ = std::fs::remove_dir_all(&dir);
}

/// Writes `v` to `path` after `edit` changed its top-level object.
fn o_write(
    path: &std::path::Path,
    v: &serde_json::Value,
    edit: impl FnOnce(&mut serde_json::Map<String, serde_json::Value>),
) {
    let mut v = v.clone();
    edit(v.as_object_mut().unwrap());
    std::fs::write(path, serde_json::to_string(&v).unwrap()).unwrap();
}

/// The policy's decision on report `reports` of the flow, `m`, the flow running `current` over
/// a smoothed RTT of `srtt_us`.
fn decide_on(
    p: &mut ProbePolicy,
    current: usize,
    m: &Measurement,
    srtt_us: u64,
    reports: u64,
) -> Decision {
    p.decide(&Features {
        measurement: m,
        current,
        candidates: &NAMES,
        now_us: m.now_us,
        srtt_us,
        reports,
    })
}

/// A probe policy over `models` with `margin`: no trial, watch, hand-over or later models, and
/// no preference ports.
fn predicting(models: Arc<ProbeModels>, margin: f64) -> Arc<Probe> {
    Probe::new(predict!(models, margin: margin), HashMap::new())
}

/// Feeds `reports` reports of a steady 10 Mbit/s, 50 ms path (rate variability `cv`: every
/// other report carries `1 + cv` or `1 - cv` of the rate) and returns the decisions.
fn run(p: &mut ProbePolicy, current: &mut usize, reports: u64, cv: f64) -> Vec<Decision> {
    run_scaled(p, current, reports, cv, [1.0; 3])
}

/// Models of 400 samples whose probe ends after 1 s and 10 minimum RTTs.
fn one_second_models() -> Arc<ProbeModels> {
    let window = ProbeWindow {
        min_ms: 1_000,
        rtts: 10,
    };
    Arc::new(ProbeModels::train(&samples(400), window, starts()).unwrap())
}

#[test]
fn a_flow_holds_through_its_probe_then_chooses_once() {
    let models = one_second_models();
    let probe = predicting(models.clone(), DEFAULT_MARGIN);
    // A variable delivery rate: Copa's predicted gain (0.3) beats the margin.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(p.initial(), 0, "starts on the default mode's start, bbr");
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.5);
    // 1 s at 50 ms from the first report: the 21st report ends the probe.
    assert!(d[..20].iter().all(|d| *d == Decision::Hold), "{d:?}");
    assert_eq!(d[20], Decision::SwitchTo(1));
    assert!(d[21..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!(p.chosen(), Some(1));
    let e = p.explain().unwrap();
    assert_eq!(e.features.len(), N_FEATURES);
    assert_eq!(e.scores.len(), NAMES.len());

    // A steady path: every predicted gain is negative, the flow stays.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.0);
    assert!(d[20..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!(current, 0);

    // A margin larger than any gain keeps every flow on its start.
    let cautious = predicting(models, 1.0);
    let mut p = cautious.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.5);
    assert!(
        !d.iter().any(|d| matches!(d, Decision::SwitchTo(_))),
        "{d:?}"
    );
}

#[test]
fn a_choice_is_asked_for_until_the_selector_makes_it() {
    let models =
        Arc::new(ProbeModels::train(&samples(400), ProbeWindow::default(), starts()).unwrap());
    let probe = predicting(models, DEFAULT_MARGIN);
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let m = |i: u64| Measurement {
        now_us: 50_000 * i,
        acked_bytes: if i.is_multiple_of(2) { 93_750 } else { 31_250 },
        rtt_us: 50_000,
        ..Measurement::default()
    };
    let mut last = Decision::Hold;
    for i in 1..=60 {
        let r = m(i);
        // The selector never makes the swap (say, a loss hold): the policy keeps asking.
        last = p.decide(&Features {
            measurement: &r,
            current: 0,
            candidates: &NAMES,
            now_us: r.now_us,
            srtt_us: 50_000,
            reports: i,
        });
    }
    assert_eq!(last, Decision::SwitchTo(1));
}

#[test]
fn a_forced_flow_records_its_probe_and_switches_to_its_target() {
    let sink = Arc::new(Mutex::new(Vec::new()));
    let probe = Probe::new(
        ProbeChoice::Force {
            window: ProbeWindow {
                min_ms: 1_000,
                rtts: 10,
            },
            start: "copa".into(),
            target: "vegas".into(),
            sink: sink.clone(),
        },
        HashMap::new(),
    );
    let mut ctx = FlowContext::for_candidates(&NAMES);
    ctx.sock_id = 7;
    let mut p = probe.policy(&ctx);
    assert_eq!(p.initial(), 1);
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 30, 0.0);
    assert_eq!(d[20], Decision::SwitchTo(2));
    assert_eq!(current, 2);
    let recs = sink.lock().unwrap().clone();
    assert_eq!(recs.len(), 1);
    assert_eq!(recs[0].sock_id, 7);
    assert_eq!(recs[0].at_us, 21 * 50_000);
    assert!((recs[0].features[0] - 50.0).abs() < 1e-9);
    // Forced to its own start: it stays, and still records.
    let stay = Probe::new(
        ProbeChoice::Force {
            window: ProbeWindow::default(),
            start: "copa".into(),
            target: "copa".into(),
            sink: sink.clone(),
        },
        HashMap::new(),
    );
    let mut p = stay.policy(&ctx);
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 60, 0.0);
    assert!(!d.iter().any(|d| matches!(d, Decision::SwitchTo(_))));
    assert_eq!(sink.lock().unwrap().len(), 2);
}

#[test]
fn a_delay_sensitive_flow_keeps_its_start_whatever_the_models_predict() {
    let probe = Probe::new(
        predict!(one_second_models()),
        HashMap::from([(5001, Mode::Delay)]),
    );
    let ctx = to_port(5001);
    // The variable path on which a default-mode flow moves to Copa (predicted +0.3); the
    // delay-mode models predict +0.6 for it.
    let mut p = probe.policy(&ctx);
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.5);
    assert!(
        !d.iter().any(|d| matches!(d, Decision::SwitchTo(_))),
        "{d:?}"
    );
    assert_eq!(p.chosen(), Some(0), "chose its start");
    let e = p.explain().unwrap();
    assert!(
        e.scores[1] - e.scores[0] > 0.4,
        "still scored: {:?}",
        e.scores
    );
}

fn handing_over(handovers: Vec<Handover>) -> Arc<Probe> {
    Probe::new(
        predict!(one_second_models(), trial: Some(Trial::default()), handovers: handovers),
        HashMap::from([(5001, Mode::Delay)]),
    )
}

#[test]
fn a_handover_starts_a_flow_on_its_start_and_moves_it_at_the_probes_end() {
    let delay = to_port(5001);
    let probe = handing_over(vec![Handover::parse("delay:vegas>copa").unwrap()]);
    let mut p = probe.policy(&delay);
    assert_eq!(
        p.initial(),
        2,
        "starts on Vegas, not the models' start (BBR)"
    );
    let mut current = p.initial();
    // A steady path: the delay models predict a loss for Copa (-0.4), the hand-over moves
    // the flow anyway, once, at the probe's end (report 21, 1.05 s), with no trial.
    let d = run(&mut p, &mut current, 60, 0.0);
    assert!(d[..20].iter().all(|d| *d == Decision::Hold), "{d:?}");
    assert_eq!(d[20], Decision::SwitchTo(1));
    assert!(d[21..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!(p.chosen(), Some(1));
    assert!(
        p.explain().unwrap().scores[1] < -0.3,
        "the models still score"
    );

    // Default-mode flows are not the hand-over's: the models' start, the models' choice.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(p.initial(), 0);
    let mut current = 0;
    let d = run(&mut p, &mut current, 60, 0.0);
    assert!(
        !d.iter().any(|d| matches!(d, Decision::SwitchTo(_))),
        "{d:?}"
    );

    // A hand-over to a candidate the selector does not have is ignored: the delay-sensitive
    // flow starts on the models' start and keeps it.
    let probe = handing_over(vec![Handover::parse("delay:vegas>cubic").unwrap()]);
    let mut p = probe.policy(&delay);
    assert_eq!(p.initial(), 0);
    let mut current = 0;
    let d = run(&mut p, &mut current, 60, 0.5);
    assert!(
        !d.iter().any(|d| matches!(d, Decision::SwitchTo(_))),
        "{d:?}"
    );
}

fn gated(gates: Vec<QueueGate>) -> Arc<Probe> {
    Probe::new(predict!(one_second_models(), gates: gates), HashMap::new())
}

#[test]
fn a_gated_candidate_needs_a_queue_that_never_drained() {
    assert_eq!(FEATURE_NAMES[DRAINED], "rtt_ratio_drained");
    // The variable path on which a flow moves to Copa (+0.3 predicted): its queue drains
    // (the RTT is at its floor), so a gate on Copa at 1.3 keeps the flow on its start (the
    // next best, Vegas, is predicted to lose), and one at 1.0 or on Vegas does not. Nothing is
    // lost on it, so a loss gate on Copa keeps the flow too.
    assert_eq!(FEATURE_NAMES[LOSS], "loss_per_kpkt");
    for (gate, moves) in [
        ("copa:1.3", false),
        ("copa:1", true),
        ("vegas:1.3", true),
        ("copa:loss=30", false),
        ("vegas:loss=30", true),
    ] {
        let probe = gated(vec![QueueGate::parse(gate).unwrap()]);
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 40, 0.5);
        let e = p.explain().unwrap();
        assert!((e.features[DRAINED] - 1.0).abs() < 1e-9, "{:?}", e.features);
        assert!(e.features[LOSS].abs() < 1e-9, "{:?}", e.features);
        assert_eq!(d.contains(&Decision::SwitchTo(1)), moves, "{gate}: {d:?}");
        assert_eq!(current, usize::from(moves), "{gate}");
        assert!(e.scores[1] > 0.2, "Copa still scored: {:?}", e.scores);
    }
}

fn ruled(rules: &[&str]) -> Arc<Probe> {
    let rules = rules.iter().map(|r| ProbeRule::parse(r).unwrap()).collect();
    Probe::new(
        predict!(one_second_models(), rules: rules),
        HashMap::from([(5001, Mode::Delay)]),
    )
}

#[test]
fn a_rule_whose_box_holds_the_flow_decides_before_the_models() {
    // The variable path on which the models move a flow to Copa (+0.3 predicted); its queue
    // drains (`rtt_ratio_drained` 1.0).
    for (rules, to) in [
        (vec!["vegas:rtt_ratio_drained=..1.5"], Some(2)),
        (vec!["vegas:rtt_ratio_drained=2.."], Some(1)),
        // The first rule that holds decides.
        (
            vec![
                "vegas:rtt_ratio_drained=2..",
                "vegas:rate_cv=0.2..,rtt_ratio_drained=..1.5",
            ],
            Some(2),
        ),
        // A rule on the start candidate keeps the flow there, as does `start`.
        (vec!["bbr:rtt_ratio_drained=..1.5"], None),
        (
            vec![
                "start:rtt_ratio_drained=..1.5",
                "vegas:rtt_ratio_drained=..1.5",
            ],
            None,
        ),
        // A rule on a candidate the selector does not have is passed over.
        (vec!["arc:rtt_ratio_drained=..1.5"], Some(1)),
    ] {
        let probe = ruled(&rules);
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 40, 0.5);
        let switches: Vec<&Decision> = d
            .iter()
            .filter(|d| matches!(d, Decision::SwitchTo(_)))
            .collect();
        match to {
            Some(c) => assert_eq!(switches, [&Decision::SwitchTo(c)], "{rules:?}"),
            None => assert!(switches.is_empty(), "{rules:?}: {d:?}"),
        }
        assert_eq!(current, to.unwrap_or(0), "{rules:?}");
        let e = p.explain().unwrap();
        assert!(e.scores[1] > 0.2, "the models still score: {:?}", e.scores);
    }
    // Rules are for default-mode flows: a delay-sensitive flow keeps its start.
    let probe = ruled(&["vegas:rtt_ratio_drained=..1.5"]);
    let mut p = probe.policy(&to_port(5001));
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 40, 0.5);
    assert!(
        !d.iter().any(|d| matches!(d, Decision::SwitchTo(_))),
        "{d:?}"
    );
}

#[test]
fn queue_gate_specs_parse_or_say_why_not() {
    assert_eq!(
        QueueGate::parse(" arc : 1.3 "),
        Ok(QueueGate {
            candidate: "arc".into(),
            min_drained: 1.3,
            min_loss_per_kpkt: 0.0,
        })
    );
    assert_eq!(
        QueueGate::parse("bbr: loss=30"),
        Ok(QueueGate {
            candidate: "bbr".into(),
            min_drained: 0.0,
            min_loss_per_kpkt: 30.0,
        })
    );
    for bad in [
        "arc",
        "arc:",
        ":1.3",
        "arc:x",
        "arc:0.5",
        "arc:inf",
        "arc:NaN",
        "bbr:loss=0",
        "bbr:loss=x",
        "bbr:loss=-3",
        "bbr:loss=inf",
        ":loss=30",
    ] {
        let e = QueueGate::parse(bad).unwrap_err();
        assert!(e.contains("not <candidate>:<ratio>"), "{bad}: {e}");
    }
}

#[test]
fn handover_specs_parse_or_say_why_not() {
    assert_eq!(
        Handover::parse(" throughput : bbr > copa "),
        Ok(Handover {
            mode: Mode::Throughput,
            start: "bbr".into(),
            then: "copa".into(),
        })
    );
    assert_eq!(
        default_handovers()[0],
        Handover::parse("delay:vegas>copa").unwrap()
    );
    for (bad, why) in [
        ("delay", "not <mode>"),
        ("delay:vegas", "not <mode>"),
        ("delay:>copa", "not <mode>"),
        ("slow:vegas>copa", "no preference mode"),
    ] {
        let e = Handover::parse(bad).unwrap_err();
        assert!(e.contains(why), "{bad}: {e}");
    }
}

#[test]
fn the_preference_mode_comes_from_the_port() {
    let models = Arc::new(
        ProbeModels::train(&samples(400), ProbeWindow::default(), {
            let mut s = starts();
            s.insert(Mode::Delay, "vegas".into());
            s
        })
        .unwrap(),
    );
    let probe = Probe::new(predict!(models), HashMap::from([(5001, Mode::Delay)]));
    let mut ctx = FlowContext::for_candidates(&NAMES);
    ctx.dst_port = 5001;
    let p = probe.policy(&ctx);
    assert_eq!(p.mode(), Mode::Delay);
    assert_eq!(p.initial(), 2);
    ctx.dst_port = 80;
    let p = probe.policy(&ctx);
    assert_eq!(p.mode(), Mode::Default);
    assert_eq!(p.initial(), 0);
}

/// As [`run`], but the delivery rate depends on the active candidate: `scale[c]` times the
/// path's 10 Mbit/s.
fn run_scaled(
    p: &mut ProbePolicy,
    current: &mut usize,
    reports: u64,
    cv: f64,
    scale: [f64; 3],
) -> Vec<Decision> {
    let mut out = Vec::new();
    for i in 1..=reports {
        let k = if i.is_multiple_of(2) {
            1.0 + cv
        } else {
            1.0 - cv
        };
        let m = Measurement {
            now_us: 50_000 * i,
            acked_bytes: (62_500.0 * k * scale[*current]) as u64,
            rtt_us: 50_000,
            min_rtt_us: 50_000,
            ..Measurement::default()
        };
        let d = decide_on(p, *current, &m, 50_000, i);
        if let Decision::SwitchTo(k) = d {
            *current = k;
        }
        out.push(d);
    }
    out
}

#[test]
fn a_trial_keeps_a_switch_that_measures_better_and_undoes_one_that_does_not() {
    let models = one_second_models();
    let trial = Trial {
        window_ms: 500,
        window_rtts: 1,
        settle_ms: 200,
        settle_rtts: 1,
        min_gain: 0.0,
        confident_gain: f64::INFINITY,
    };
    let probe = Probe::new(predict!(models.clone(), trial: Some(trial)), HashMap::new());
    // The models propose Copa (index 1) on a variable rate; Copa delivers 1.5x here.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run_scaled(&mut p, &mut current, 80, 0.5, [1.0, 1.5, 1.0]);
    let swaps: Vec<_> = d
        .iter()
        .filter(|d| matches!(d, Decision::SwitchTo(_)))
        .collect();
    assert_eq!(swaps, [&Decision::SwitchTo(1)], "{d:?}");
    // The switch comes after the probe (1 s) and the reference window (0.5 s).
    let at = d.iter().position(|d| *d == Decision::SwitchTo(1)).unwrap();
    assert!(at >= 30, "switched at report {at}");
    assert_eq!(p.chosen(), Some(1));
    assert_eq!(current, 1);
    let (reference, tried) = p.trial_scores();
    assert!(reference.is_some() && tried.is_some());

    // Copa delivers half as much: the flow goes back to its start and stays there.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run_scaled(&mut p, &mut current, 80, 0.5, [1.0, 0.5, 1.0]);
    let swaps: Vec<_> = d
        .iter()
        .filter(|d| matches!(d, Decision::SwitchTo(_)))
        .collect();
    assert_eq!(
        swaps,
        [&Decision::SwitchTo(1), &Decision::SwitchTo(0)],
        "{d:?}"
    );
    assert_eq!(p.chosen(), Some(0));
    assert_eq!(current, 0);
    assert!(d[d.len() - 10..].iter().all(|d| *d == Decision::Stay));

    // A proposal predicted to gain more than `confident_gain` is kept without a trial.
    let sure = Probe::new(
        predict!(
            models,
            trial: Some(Trial {
                confident_gain: 0.1,
                ..trial
            }),
        ),
        HashMap::new(),
    );
    let mut p = sure.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run_scaled(&mut p, &mut current, 80, 0.5, [1.0, 0.5, 1.0]);
    assert_eq!(d[20], Decision::SwitchTo(1), "{d:?}");
    assert_eq!(p.chosen(), Some(1));
}

#[test]
fn a_path_change_starts_the_watch_over_on_the_new_floor() {
    // The held-queue watch to Vegas; at report 41 the path becomes 100 ms long and the selector
    // says so: the watch measures against the new floor and never fires.
    let probe = watching(Watch {
        target: "vegas".into(),
        min_drained: 0.0,
        ..Watch::held_queue()
    });
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_with(&mut p, 0, 400, 40, true), None);
    // Not told, it moves at report 201 (`the_deployed_watches_tell_...`).
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_for(&mut p, 0, 400), Some((201, 2, true)));
}

/// A steady 50-ms path for 2 s (the probe keeps bbr), then a competitor's queue holds every RTT
/// at 100 ms; every report (50 ms apart) acknowledges 62,500 bytes (43 packets) and loses
/// `lost_pkts`. Returns the watch's move: (report, candidate, afresh).
fn feed_queue(p: &mut ProbePolicy, lost_pkts: u64) -> Option<(u64, usize, bool)> {
    feed_queue_for(p, lost_pkts, 200)
}

/// [`feed_queue`] over `reports` reports.
fn feed_queue_for(p: &mut ProbePolicy, lost_pkts: u64, reports: u64) -> Option<(u64, usize, bool)> {
    feed_queue_after(p, lost_pkts, reports, 40)
}

/// [`feed_queue_for`] with the queue rising after report `rise` instead of 40.
fn feed_queue_after(
    p: &mut ProbePolicy,
    lost_pkts: u64,
    reports: u64,
    rise: u64,
) -> Option<(u64, usize, bool)> {
    feed_queue_with(p, lost_pkts, reports, rise, false)
}

/// [`feed_queue_after`]; with `path_change` the rise is a longer path, and the policy is told
/// so (as the selector's detector would) when it comes.
fn feed_queue_with(
    p: &mut ProbePolicy,
    lost_pkts: u64,
    reports: u64,
    rise: u64,
    path_change: bool,
) -> Option<(u64, usize, bool)> {
    let rtt = |i: u64| if i <= rise { 50_000 } else { 100_000 };
    let mut current = p.initial();
    let mut moved = None;
    for i in 1..=reports {
        if path_change && i == rise + 1 {
            p.path_changed(rtt(i));
        }
        let m = Measurement {
            now_us: 50_000 * i,
            acked_bytes: 62_500,
            lost_pkts: if i > rise { lost_pkts } else { 0 },
            rtt_us: rtt(i),
            min_rtt_us: rtt(i),
            ..Measurement::default()
        };
        let d = decide_on(p, current, &m, rtt(i), i);
        if let Decision::SwitchTo(k) = d {
            assert!(moved.is_none(), "one move, report {i}");
            moved = Some((i, k, p.afresh(k)));
            current = k;
        }
    }
    moved
}

fn watching(watch: Watch) -> Arc<Probe> {
    Probe::new(
        predict!(one_second_models(), watches: vec![watch]),
        HashMap::from([(5001, Mode::Delay)]),
    )
}

#[test]
fn the_watch_moves_a_flow_that_stayed_once_a_queue_never_drains() {
    let probe = watching(Watch {
        target: "copa".into(),
        ..Watch::default()
    });
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    // The queue rises at report 41 (2.05 s); the watch has run since the probe ended at
    // report 21 and needs 3 s of it without a drained sample: report 101 (5.05 s).
    assert_eq!(feed_queue(&mut p, 0), Some((101, 1, true)));
    assert_eq!(p.chosen(), Some(1));
    assert!(!p.afresh(2), "only the watch's own move is made afresh");
    assert!(
        !p.afresh_floor(1),
        "the path's floor, unless the watch says otherwise"
    );

    // A delay-sensitive flow keeps its start: the watch is for the default mode.
    let ctx = to_port(5001);
    let mut p = probe.policy(&ctx);
    assert_eq!(feed_queue(&mut p, 0), None);

    // A watch with `fresh_floor` hands its target the flow's smoothed RTT as the floor, and
    // only its target.
    let probe = watching(Watch {
        target: "copa".into(),
        fresh_floor: true,
        ..Watch::default()
    });
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 0), Some((101, 1, true)));
    assert!(p.afresh_floor(1) && !p.afresh_floor(2));
    // ... and only afresh: a kept move continues from the handed-over state.
    let probe = watching(Watch {
        target: "copa".into(),
        afresh: false,
        fresh_floor: true,
        ..Watch::default()
    });
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 0), Some((101, 1, false)));
    assert!(!p.afresh_floor(1));
}

#[test]
fn the_deployed_watch_moves_only_when_the_queue_also_overflows() {
    assert_eq!(default_watch()[0], Watch::overflowing_queue());
    let probe = watching(Watch {
        target: "copa".into(),
        ..Watch::overflowing_queue()
    });
    // 4 packets lost of 47 a report (8.5 %): a queue that overflows steadily. Its window is
    // 2 s, so the move comes 2 s after the queue rose (report 41): report 81.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 4), Some((81, 1, true)));
    // The same queue without losses (or with 1 of 44, 2.3 %) is not an overflowing one.
    for lost in [0, 1] {
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        assert_eq!(feed_queue(&mut p, lost), None, "{lost} lost a report");
    }
}

#[test]
fn the_deployed_watches_tell_an_overflowing_queue_from_a_held_one() {
    assert_eq!(
        default_watch(),
        vec![Watch::overflowing_queue(), Watch::held_queue()]
    );
    // The two deployed watches, with targets among the test's candidates: BBR for the
    // overflowing queue, Vegas for the held one (whose probe test is left out first: this
    // path's queue drained during the probe).
    let probe = Probe::new(
        predict!(
            one_second_models(),
            watches: vec![
                Watch {
                    target: "bbr".into(),
                    ..Watch::overflowing_queue()
                },
                Watch {
                    target: "vegas".into(),
                    min_drained: 0.0,
                    ..Watch::held_queue()
                },
            ],
        ),
        HashMap::new(),
    );
    // The flow keeps bbr at the probe's end (the test's models), so the overflowing watch's
    // target is its own candidate and only the held-queue watch runs. The queue rises at
    // report 41 (2.05 s); held without losses, the move comes 8 s later, at report 201.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_for(&mut p, 0, 400), Some((201, 2, true)));
    // The same queue losing 1 packet of 44 a report (2.3 %) is neither held nor overflowing.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_for(&mut p, 1, 400), None);
    // With the deployed probe test the held-queue watch never starts here: the queue came
    // after the probe, which saw it drain.
    let gated = watching(Watch {
        target: "vegas".into(),
        ..Watch::held_queue()
    });
    let mut p = gated.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_for(&mut p, 0, 400), None);
    // A queue there from report 11 (0.55 s) on, through the probe's last RTTs: the watch
    // starts once the probe has ended (the first report 1 s after the flow's first, report
    // 21; it counts from the next) and moves the flow 8 s later.
    let mut p = gated.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue_after(&mut p, 0, 400, 10), Some((182, 2, true)));
}

/// Models whose window ends after 2 s, trained on flows where a switch to Vegas gains 0.3
/// whatever the path.
fn two_second_models() -> Arc<ProbeModels> {
    later_models(2_000)
}

/// [`two_second_models`] with a window of `min_ms`.
fn later_models(min_ms: u64) -> Arc<ProbeModels> {
    let mut later: Vec<ProbeSample> = samples(400);
    for s in &mut later {
        s.gain = if s.target == "vegas" { 0.3 } else { -0.2 };
    }
    let window = ProbeWindow { min_ms, rtts: 10 };
    Arc::new(ProbeModels::train(&later, window, starts()).unwrap())
}

fn looking_later(later: Option<Arc<ProbeModels>>, prefs: HashMap<u32, Mode>) -> Arc<Probe> {
    Probe::new(predict!(one_second_models(), later: later), prefs)
}

#[test]
fn default_mode_flows_choose_with_the_later_models_at_their_window() {
    // A steady path: at the probe's end (1 s) the flow keeps bbr; at 2 s the later models
    // move it to Vegas.
    let probe = looking_later(Some(two_second_models()), HashMap::new());
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 60, 0.0);
    assert_eq!(d[20], Decision::Stay, "the probe's end: stays");
    // 2 s from the first report: the 41st report.
    assert!(d[21..40].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!(d[40], Decision::SwitchTo(2), "at 2 s: Vegas; {d:?}");
    assert!(d[41..].iter().all(|d| *d == Decision::Stay), "{d:?}");
    assert_eq!(p.chosen(), Some(2));
    assert!(
        p.explain().unwrap().scores[2] > 0.2,
        "explained by the later models"
    );

    // Without later models the flow keeps its start.
    let probe = looking_later(None, HashMap::new());
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    run(&mut p, &mut current, 60, 0.0);
    assert_eq!(current, 0);

    // A variable rate, where the probe's models would move to Copa at 1 s: the flow waits for
    // the later models, which say Vegas.
    let probe = looking_later(Some(two_second_models()), HashMap::new());
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 60, 0.5);
    assert_eq!(d[20], Decision::Stay, "{d:?}");
    assert_eq!(d[40], Decision::SwitchTo(2), "{d:?}");

    // A throughput-sensitive flow chooses at the probe's end with the probe's models.
    let probe = looking_later(
        Some(two_second_models()),
        HashMap::from([(5002, Mode::Throughput)]),
    );
    let mut ctx = FlowContext::for_candidates(&NAMES);
    ctx.dst_port = 5002;
    let mut p = probe.policy(&ctx);
    let mut current = p.initial();
    let d = run(&mut p, &mut current, 60, 0.5);
    assert_eq!(d[20], Decision::SwitchTo(1), "{d:?}");
    assert_eq!(current, 1);
}

#[test]
fn the_watch_and_the_later_choice_the_first_to_come_decides() {
    let probe = |later_ms: u64| {
        Probe::new(
            predict!(
                one_second_models(),
                watches: vec![Watch {
                    target: "copa".into(),
                    ..Watch::default()
                }],
                later: Some(later_models(later_ms)),
            ),
            HashMap::new(),
        )
    };
    // The watch fires at report 101 (5.05 s): before a 6-s later choice, which is then not
    // made (one move only), and after a 3-s one, which ends the watch.
    let mut p = probe(6_000).policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 0), Some((101, 1, true)));
    let mut p = probe(3_000).policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 0), Some((61, 2, false)));
}

mod options;

/// A 50-ms path whose delivery rate varies by half every other report (the test's models move
/// the flow from bbr to copa at the probe's end, report 21), each report acknowledging 43
/// packets and, from report `from` on, losing `lost` of them. Returns the moves.
fn feed_variable_losses(p: &mut ProbePolicy, lost: u64, from: u64) -> Vec<(u64, usize, bool)> {
    let mut current = p.initial();
    let mut moves = Vec::new();
    for i in 1..=200_u64 {
        let k = if i.is_multiple_of(2) { 1.5 } else { 0.5 };
        let m = Measurement {
            now_us: 50_000 * i,
            acked_bytes: (62_500.0 * k) as u64,
            lost_pkts: if i >= from { lost } else { 0 },
            rtt_us: 50_000,
            min_rtt_us: 50_000,
            ..Measurement::default()
        };
        let d = decide_on(p, current, &m, 50_000, i);
        if let Decision::SwitchTo(c) = d {
            moves.push((i, c, p.afresh(c)));
            current = c;
        }
    }
    moves
}

#[test]
fn a_watch_from_the_probes_choice_leaves_it_where_it_loses_a_band_of_packets() {
    let from_copa = || {
        Watch::parse(
            "1,2000,10,vegas,kept,loss=0.03,maxloss=0.08,from=copa,probe=loss_per_kpkt=..50",
        )
        .unwrap()
    };
    let probe = watching(from_copa());
    // 2 of 45 packets lost a report from report 41 (4.4 %): the watch's 2-s window (41
    // reports) first loses 3 % at report 68 (28 lossy reports of the 41).
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    let moves = feed_variable_losses(&mut p, 2, 41);
    assert_eq!(moves.len(), 2, "{moves:?}");
    assert_eq!(moves[0], (21, 1, false), "the probe's choice");
    let (at, to, afresh) = moves[1];
    assert!(at == 68 && to == 2 && !afresh, "{moves:?}");
    assert_eq!(p.chosen(), Some(2));
    // No losses, or more than the band (6 of 49, 12 %) in every report the watch sees: the
    // flow stays on copa.
    for lost in [0, 6] {
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        assert_eq!(
            feed_variable_losses(&mut p, lost, 22).len(),
            1,
            "{lost} lost"
        );
    }
    // A probe that lost 2 of 45 packets (44 per thousand) lies in the box; one that lost 4 of
    // 47 (85 per thousand) does not, and its flow is never watched.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_variable_losses(&mut p, 2, 1).len(), 2);
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_variable_losses(&mut p, 4, 1).len(), 1);
    // A flow that kept its start (a steady path) is not on copa: never watched.
    let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 2), None);
    // Nor is one another watch moved to copa: the queue watch's move is the only one.
    let both = Probe::new(
        predict!(
            one_second_models(),
            watches: vec![
                Watch {
                    target: "copa".into(),
                    ..Watch::default()
                },
                from_copa(),
            ],
        ),
        HashMap::new(),
    );
    let mut p = both.policy(&FlowContext::for_candidates(&NAMES));
    assert_eq!(feed_queue(&mut p, 2), Some((101, 1, true)));
}
