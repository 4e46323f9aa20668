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
            kind: None,
            kind_skips: Vec::new(),
            kind_afresh: Vec::new(),
            later_kind: None,
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
    assert_eq!((e.by, p.part()), ("models", Part::Models));

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
    assert_eq!(p.part(), Part::Forced);
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
    assert_eq!(p.explain().unwrap().by, "handover");

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

/// The switches among decisions `d`.
fn switches(d: &[Decision]) -> Vec<&Decision> {
    d.iter()
        .filter(|d| matches!(d, Decision::SwitchTo(_)))
        .collect()
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
    for (rules, to, by) in [
        (vec!["vegas:rtt_ratio_drained=..1.5"], Some(2), "rule"),
        (vec!["vegas:rtt_ratio_drained=2.."], Some(1), "models"),
        // The first rule that holds decides.
        (
            vec![
                "vegas:rtt_ratio_drained=2..",
                "vegas:rate_cv=0.2..,rtt_ratio_drained=..1.5",
            ],
            Some(2),
            "rule",
        ),
        // A rule on the start candidate keeps the flow there, as does `start`.
        (vec!["bbr:rtt_ratio_drained=..1.5"], None, "rule"),
        (
            vec![
                "start:rtt_ratio_drained=..1.5",
                "vegas:rtt_ratio_drained=..1.5",
            ],
            None,
            "rule",
        ),
        // A rule on a candidate the selector does not have is passed over.
        (vec!["arc:rtt_ratio_drained=..1.5"], Some(1), "models"),
    ] {
        let probe = ruled(&rules);
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 40, 0.5);
        let switches = switches(&d);
        match to {
            Some(c) => assert_eq!(switches, [&Decision::SwitchTo(c)], "{rules:?}"),
            None => assert!(switches.is_empty(), "{rules:?}: {d:?}"),
        }
        assert_eq!(current, to.unwrap_or(0), "{rules:?}");
        let e = p.explain().unwrap();
        assert!(e.scores[1] > 0.2, "the models still score: {:?}", e.scores);
        // A rule that holds decided; else the models.
        assert_eq!(e.by, by, "{rules:?}");
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
    assert_eq!(p.part(), Part::Trial);

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

mod models;
mod options;
mod watches;

/// A kind model over [`NAMES`] started on BBR: flows whose queue drained (`rtt_ratio_drained`
/// under 1.5) are labelled `drains` when `flag_drained`, the others `none`; `drains` scores best
/// on Vegas.
fn kind_model(flag_drained: bool) -> Arc<KindModel> {
    kind_model_over(flag_drained, ProbeWindow::default())
}

/// [`kind_model`] trained on probes of `window`.
fn kind_model_over(flag_drained: bool, window: ProbeWindow) -> Arc<KindModel> {
    let mut rng = ccp_algorithms::api::SplitMix64::new(3);
    let samples: Vec<KindSample> = (0..200)
        .map(|i| {
            let mut x = [0.0; N_FEATURES];
            for v in &mut x {
                *v = rng.next_f64();
            }
            x[DRAINED] = 0.9 + 2.0 * f64::from(i % 20) / 20.0;
            let drained = x[DRAINED] < 1.5;
            let kind = if drained == flag_drained {
                "drains"
            } else {
                "none"
            };
            let scores = NAMES
                .iter()
                .map(|c| ((*c).to_string(), if *c == "vegas" { 0.5 } else { 0.0 }))
                .collect();
            KindSample {
                features: x,
                kind: kind.into(),
                scores,
            }
        })
        .collect();
    Arc::new(KindModel::train(&samples, "bbr", window, None).unwrap())
}

#[test]
fn the_competitors_kind_decides_before_the_rules_and_the_models() {
    let keep = vec![ProbeRule::parse("start:rtt_ratio_drained=..1.5").unwrap()];
    // The variable path on which the models move a flow to Copa; its queue drains, and the
    // rule on that would keep the start.
    for (flag_drained, to) in [(true, Some(2)), (false, None)] {
        let probe = Probe::new(
            predict!(one_second_models(),
                rules: keep.clone(),
                kind: Some((kind_model(flag_drained), kind::DEFAULT_THRESHOLD))),
            HashMap::from([(5001, Mode::Delay)]),
        );
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 40, 0.5);
        let switches = switches(&d);
        match to {
            Some(c) => assert_eq!(switches, [&Decision::SwitchTo(c)], "{d:?}"),
            // Not flagged: the rule keeps the start, as without a kind model.
            None => assert!(switches.is_empty(), "{d:?}"),
        }
        assert_eq!(current, to.unwrap_or(0));
        // The kind decided; unflagged, the rule did.
        let by = if to.is_some() { Part::Kind } else { Part::Rule };
        assert_eq!(p.part(), by);
        // The kind is for default-mode flows: a delay-sensitive flow is not moved by it.
        let mut p = probe.policy(&to_port(5001));
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 40, 0.5);
        assert!(!d.contains(&Decision::SwitchTo(2)), "{d:?}");
    }
    // A default-mode flow on the variable path, under `choice`: its policy, where it ended and
    // its decisions.
    let variable_flow = |choice: ProbeChoice| {
        let probe = Probe::new(choice, HashMap::new());
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 40, 0.5);
        (p, current, d)
    };
    // A flow inside a skip box is not judged by the kind: the rule decides for it, and a box
    // that does not hold it leaves the kind deciding.
    for (skip, by) in [
        ("rtt_ratio_drained=..1.5", Part::Rule),
        ("rtt_ratio_drained=2..", Part::Kind),
    ] {
        let (p, current, d) = variable_flow(predict!(one_second_models(),
            rules: keep.clone(),
            kind: Some((kind_model(true), kind::DEFAULT_THRESHOLD)),
            kind_skips: vec![FeatureBox::parse(skip).unwrap()]));
        assert_eq!(p.part(), by, "{skip}: {d:?}");
        assert_eq!(current, if by == Part::Kind { 2 } else { 0 }, "{skip}");
    }
    // The kind's move is made afresh when its target is named, else it continues.
    for (afresh, expected) in [(vec!["vegas".to_string()], true), (Vec::new(), false)] {
        let (p, _, d) = variable_flow(predict!(one_second_models(),
            rules: keep.clone(),
            kind: Some((kind_model(true), kind::DEFAULT_THRESHOLD)),
            kind_afresh: afresh.clone()));
        assert_eq!(switches(&d), [&Decision::SwitchTo(2)], "{afresh:?}");
        assert_eq!(p.part(), Part::Kind);
        assert_eq!(p.afresh(2), expected, "{afresh:?}");
        assert!(!p.afresh_floor(2), "the kind's move keeps the flow's floor");
    }
    // A threshold of 1 moves nobody the model is not certain of.
    let (_, _, d) = variable_flow(predict!(one_second_models(),
        rules: keep,
        kind: Some((kind_model(true), 1.0))));
    assert!(!d.contains(&Decision::SwitchTo(2)), "{d:?}");
}

/// The second look at the kind: a flow that kept its start at the probe's end (1 s) moves to
/// the kind's candidate at the end of the later model's window (2 s), once; a flow the probe
/// moved, a flow the model does not flag and a delay-sensitive flow are left alone. A model
/// whose window is not longer than the probe's, or started on another candidate, does not fit.
#[test]
fn a_second_look_at_the_kind_moves_a_flow_that_kept_its_start() {
    let later = ProbeWindow {
        min_ms: 2_000,
        rtts: 10,
    };
    let models = one_second_models();
    for (flag_drained, to) in [(true, Some(2)), (false, None)] {
        let probe = Probe::new(
            predict!(models.clone(),
                later_kind: Some((kind_model_over(flag_drained, later), kind::DEFAULT_THRESHOLD))),
            HashMap::from([(5001, Mode::Delay)]),
        );
        // A steady path: the models keep the start at the probe's end.
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 60, 0.0);
        assert_eq!(d[20], Decision::Stay, "{d:?}");
        match to {
            Some(c) => {
                assert_eq!(switches(&d), [&Decision::SwitchTo(c)], "{d:?}");
                // 2 s at 50 ms from the first report: the 41st report.
                assert_eq!(d[40], Decision::SwitchTo(c), "{d:?}");
                assert_eq!(p.chosen(), Some(c));
                assert_eq!(p.explain().unwrap().by, "later-kind");
            }
            None => assert!(switches(&d).is_empty(), "{d:?}"),
        }
        // A flow the probe moved (to Copa, on a variable rate) keeps that choice.
        let mut p = probe.policy(&FlowContext::for_candidates(&NAMES));
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 60, 0.5);
        assert_eq!(switches(&d), [&Decision::SwitchTo(1)], "{d:?}");
        // A delay-sensitive flow takes no second look.
        let mut p = probe.policy(&to_port(5001));
        let mut current = p.initial();
        let d = run(&mut p, &mut current, 60, 0.0);
        assert!(!d.contains(&Decision::SwitchTo(2)), "{d:?}");
    }
    assert!(kind_model_over(true, later).fits_later(&models).is_ok());
    let e = kind_model_over(true, models.window)
        .fits_later(&models)
        .unwrap_err();
    assert!(e.contains("not longer"), "{e}");
    let e = kind_model_over(true, later)
        .fits_later(&Arc::new(
            ProbeModels::train(
                &samples(400),
                later,
                BTreeMap::from([
                    (Mode::Default, "copa".to_string()),
                    (Mode::Delay, "bbr".to_string()),
                ]),
            )
            .unwrap(),
        ))
        .unwrap_err();
    assert!(e.contains("started on bbr"), "{e}");
}
