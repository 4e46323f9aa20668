use std::sync::Arc;

use ccp_algorithms::Measurement;

use super::*;
use crate::policy::{Decision, Features, FlowContext, SelectionPolicy};

const NAMES: [&str; 3] = ["cubic", "bbr", "vegas"];

/// Samples where bbr earns more than cubic when the RTT is inflated (feature 0 > 2 x feature
/// 6), cubic otherwise; vegas always earns little.
fn synthetic(n: usize) -> Vec<Sample> {
    let mut out = Vec::new();
    for i in 0..n {
        let min = 20.0 + (i % 7) as f64 * 10.0;
        let inflated = i % 2 == 0;
        let srtt = if inflated { min * 3.0 } else { min * 1.1 };
        let features = [srtt, 20.0, 0.0, srtt, 10_000.0, 8_000.0, min];
        for (cca, good) in [("cubic", !inflated), ("bbr", inflated), ("vegas", false)] {
            let r = if good {
                0.9
            } else if cca == "vegas" {
                0.1
            } else {
                0.4
            };
            out.push(Sample {
                features,
                next_cca: cca.into(),
                rewards: [r, r * 2.0, r * 3.0],
            });
        }
    }
    out
}

fn report(now_us: u64, rtt_us: u64, acked_pkts: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes: acked_pkts * 1448,
        rtt_us,
        min_rtt_us: rtt_us,
        rate_incoming_bytes_per_sec: 1_000_000,
        ..Measurement::default()
    }
}

#[test]
fn a_unit_closes_at_n_acks_with_antelopes_seven_features() {
    let mut b = UnitBuilder::new(20, 1448);
    assert!(b.push(&report(50_000, 50_000, 8), 0, 50_000).is_none());
    assert!(
        b.push(&report(100_000, 60_000, 8), 50_000, 60_000)
            .is_none()
    );
    let u = b
        .push(&report(150_000, 40_000, 8), 100_000, 40_000)
        .unwrap();
    assert_eq!(u.index, 0);
    assert_eq!(u.acks, 24.0);
    assert!((u.avg_srtt_ms - 50.0).abs() < 1e-9);
    assert!((u.build_ms - 150.0).abs() < 1e-9);
    assert!((u.min_delay_ms - 40.0).abs() < 1e-9);
    assert!((u.max_pacing_kbps - 8_000.0).abs() < 1e-9);
    // 24 x 1448 bytes in 150 ms.
    assert!((u.send_rate_kbps - 24.0 * 1448.0 * 8.0 / 150.0).abs() < 1e-6);
    let u = b
        .push(&report(200_000, 50_000, 30), 150_000, 50_000)
        .unwrap();
    assert_eq!(u.index, 1);
    assert!((u.build_ms - 50.0).abs() < 1e-9);
}

#[test]
fn trained_models_rank_candidates_as_the_data_does_and_survive_a_round_trip() {
    let set = ModelSet::train(&synthetic(200), 20).unwrap();
    let mut scores = Vec::new();
    let inflated = [150.0, 20.0, 0.0, 150.0, 10_000.0, 8_000.0, 50.0];
    let flat = [55.0, 20.0, 0.0, 55.0, 10_000.0, 8_000.0, 50.0];
    set.predict(Mode::Default, &NAMES, &inflated, &mut scores);
    assert!(scores[1] > scores[0] && scores[0] > scores[2], "{scores:?}");
    set.predict(Mode::Default, &NAMES, &flat, &mut scores);
    assert!(scores[0] > scores[1], "{scores:?}");
    let dir = tempdir();
    set.save(dir.path()).unwrap();
    let back = ModelSet::load(dir.path()).unwrap();
    let mut again = Vec::new();
    back.predict(Mode::Default, &NAMES, &flat, &mut again);
    assert_eq!(scores, again);
    assert_eq!(back.samples(Mode::Delay, "bbr"), 200);
    // A candidate without a model never wins.
    back.predict(Mode::Default, &["reno", "cubic"], &flat, &mut again);
    assert_eq!(again[0], f64::NEG_INFINITY);
    // Features that are not finite score nothing, without a panic.
    let mut bad = flat;
    bad[0] = f64::NAN;
    back.predict(Mode::Default, &NAMES, &bad, &mut again);
    assert!(again.iter().all(|v| *v == f64::NEG_INFINITY), "{again:?}");
}

/// forust-ml evaluates a tree by following child indices without checks: a booster file whose
/// tree points back (a cycle) would hang `predict`, one whose split names a feature we do not
/// have would panic. `ModelSet::load` refuses both.
#[test]
fn boosters_whose_trees_cannot_be_evaluated_are_refused() {
    let dir = tempdir();
    ModelSet::train(&synthetic(200), 20)
        .unwrap()
        .save(dir.path())
        .unwrap();
    let file = dir.path().join("default-bbr.json");
    let good = std::fs::read_to_string(&file).unwrap();
    // 0: a child pointing at its own node, 1: a child past the end, 2: a feature we lack.
    let broken = |edit: u8| {
        let mut b = forust_ml::GradientBooster::from_json(&good).unwrap();
        let node = b.trees[0]
            .nodes
            .iter_mut()
            .find(|n| !n.is_leaf)
            .expect("a split");
        match edit {
            0 => node.left_child = node.num,
            1 => node.right_child = 10_000,
            _ => node.split_feature = 7,
        }
        std::fs::write(&file, b.json_dump().unwrap()).unwrap();
        ModelSet::load(dir.path()).unwrap_err().to_string()
    };
    let e = broken(0);
    assert!(e.contains("is not a later node"), "{e}");
    let e = broken(1);
    assert!(e.contains("is not a later node"), "{e}");
    let e = broken(2);
    assert!(e.contains("split on feature 7 of 7"), "{e}");
    std::fs::write(&file, good).unwrap();
    assert!(ModelSet::load(dir.path()).is_ok());
}

#[test]
fn bad_model_files_are_refused_with_the_reason() {
    let dir = tempdir();
    assert!(matches!(
        ModelSet::load(dir.path()),
        Err(ModelError::Io { .. })
    ));
    ModelSet::train(&synthetic(50), 20)
        .unwrap()
        .save(dir.path())
        .unwrap();
    let manifest = dir.path().join("manifest.json");
    let text = std::fs::read_to_string(&manifest).unwrap();
    std::fs::write(
        &manifest,
        text.replace("\"feature_schema\": 1", "\"feature_schema\": 9"),
    )
    .unwrap();
    let e = ModelSet::load(dir.path()).unwrap_err().to_string();
    assert!(e.contains("feature_schema is 9"), "{e}");
    std::fs::write(&manifest, "{ not json").unwrap();
    assert!(matches!(
        ModelSet::load(dir.path()),
        Err(ModelError::Manifest { .. })
    ));
    std::fs::write(&manifest, text).unwrap();
    std::fs::write(dir.path().join("default-bbr.json"), "garbage").unwrap();
    assert!(matches!(
        ModelSet::load(dir.path()),
        Err(ModelError::Booster { .. })
    ));
    assert!(matches!(
        ModelSet::train(&synthetic(3), 20),
        Err(ModelError::NoData(_))
    ));
}

#[test]
fn samples_csv_round_trips_and_names_the_bad_line() {
    let dir = tempdir();
    let path = dir.path().join("s.csv");
    let mut text = samples::header();
    for s in synthetic(2) {
        text.push('\n');
        samples::write_line(&mut text, &s);
    }
    std::fs::write(&path, &text).unwrap();
    assert_eq!(samples::read(&path).unwrap(), synthetic(2));
    std::fs::write(&path, format!("{text}\n1,2,3")).unwrap();
    let e = samples::read(&path).unwrap_err().to_string();
    assert!(e.contains(":8:"), "{e}");
}

#[test]
fn the_policy_holds_within_a_unit_decides_at_its_end_and_learns_the_prefix() {
    let antelope = Antelope::with_online(
        AntelopeConfig::default(),
        Arc::new(ModelSet::train(&synthetic(200), 20).unwrap()),
    );
    let ctx = FlowContext {
        dst_ip: 0x0A00_0005,
        ..FlowContext::for_candidates(&NAMES)
    };
    let mut p = antelope.policy(&ctx);
    let start = antelope.models().start_candidate.clone().unwrap();
    assert_eq!(
        NAMES[p.initial()],
        start,
        "unknown prefix: the models' start candidate"
    );
    let decide = |p: &mut AntelopePolicy, now: u64, rtt: u64, pkts: u64, current| {
        let m = report(now, rtt, pkts);
        p.decide(&Features {
            measurement: &m,
            current,
            candidates: &NAMES,
            now_us: now,
            srtt_us: rtt,
            reports: 1,
        })
    };
    assert_eq!(decide(&mut p, 50_000, 50_000, 10, 0), Decision::Hold);
    // The unit closes with the RTT inflated 3x over the minimum: bbr.
    assert_eq!(
        decide(&mut p, 100_000, 150_000, 10, 0),
        Decision::SwitchTo(1)
    );
    let e = p.explain().unwrap();
    assert_eq!(e.features.len(), 7);
    assert_eq!(e.scores.len(), 3);
    assert_eq!(e.by, "antelope", "a policy of one part names itself");
    // The next unit leaves a sample: unit-0 features, the candidate that ran unit 1.
    assert_eq!(decide(&mut p, 150_000, 150_000, 25, 1), Decision::Stay);
    let s = antelope.samples();
    assert_eq!(s.len(), 1);
    assert_eq!(s[0].next_cca, "bbr");
    // The /24 now starts new flows on bbr, by IP-level prediction.
    assert_eq!(antelope.predict_start(0x0A00_00FE), Some("bbr"));
    let q = antelope.policy(&FlowContext {
        dst_ip: 0x0A00_00FE,
        ..FlowContext::for_candidates(&NAMES)
    });
    assert_eq!(q.initial(), 1);
    assert_eq!(antelope.predict_start(0x0B00_0001), None);
}

#[test]
fn explore_asks_for_random_other_candidates() {
    let cfg = AntelopeConfig {
        choose: Choose::Explore { switch_prob: 1.0 },
        ..AntelopeConfig::default()
    };
    let antelope = Antelope::with_online(cfg, Arc::default());
    let mut p = antelope.policy(&FlowContext::for_candidates(&NAMES));
    let mut seen = [false; 3];
    for k in 0..60u64 {
        let m = report((k + 1) * 50_000, 50_000, 25);
        let d = p.decide(&Features {
            measurement: &m,
            current: 0,
            candidates: &NAMES,
            now_us: m.now_us,
            srtt_us: 50_000,
            reports: k + 1,
        });
        match d {
            Decision::SwitchTo(i) => seen[i] = true,
            other => panic!("{other:?}"),
        }
    }
    assert_eq!(seen, [false, true, true]);
}

#[test]
fn the_online_learner_refits_in_the_background() {
    let antelope = Antelope::with_online(AntelopeConfig::default(), Arc::default());
    {
        let mut sink = antelope.samples.as_ref().unwrap().lock().unwrap();
        sink.extend(synthetic(100));
    }
    let tmp = tempdir();
    let save = tmp.path().join("online");
    let learner = OnlineLearner::spawn_saving(
        Arc::clone(&antelope),
        synthetic(30),
        std::time::Duration::from_millis(20),
        10_000,
        Some(save.clone()),
    );
    for _ in 0..500 {
        if learner.refits() > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(learner.refits() >= 1);
    // `synthetic(n)` gives n samples for each of three candidates.
    assert_eq!(learner.samples(), 300);
    // The 30 offline samples and the 100 online ones.
    assert_eq!(antelope.models().samples(Mode::Default, "bbr"), 130);
    assert_eq!(learner.save_errors(), 0);
    drop(learner);
    let saved = ModelSet::load(&save).unwrap();
    assert_eq!(saved.samples(Mode::Default, "bbr"), 130);
    // A second learner replaces the saved set whole.
    {
        let mut sink = antelope.samples.as_ref().unwrap().lock().unwrap();
        sink.extend(synthetic(50));
    }
    let learner = OnlineLearner::spawn_saving(
        Arc::clone(&antelope),
        Vec::new(),
        std::time::Duration::from_millis(20),
        10_000,
        Some(save.clone()),
    );
    for _ in 0..500 {
        if learner.refits() > 0 {
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(10));
    }
    assert!(learner.refits() >= 1);
    drop(learner);
    assert_eq!(
        ModelSet::load(&save).unwrap().samples(Mode::Default, "bbr"),
        50
    );
    let siblings: Vec<_> = std::fs::read_dir(save.parent().unwrap())
        .unwrap()
        .map(|e| e.unwrap().file_name())
        .collect();
    assert_eq!(siblings.len(), 1, "{siblings:?}");
}

/// A directory of its own under the temporary directory, removed when dropped.
fn tempdir() -> tempfile::TempDir {
    tempfile::Builder::new()
        .prefix("antelope-test-")
        .tempdir()
        .unwrap()
}

/// Samples where vegas has the best delay-mode label and bbr the best default one.
fn per_mode(n: usize) -> Vec<Sample> {
    let mut out = synthetic(n);
    for s in &mut out {
        s.rewards[1] = if s.next_cca == "vegas" { 5.0 } else { -5.0 };
    }
    out
}

#[test]
fn each_mode_starts_on_its_own_best_candidate_and_a_missing_mode_uses_the_default() {
    let set = ModelSet::train_for(&per_mode(200), 20, "outcome", &Mode::ALL).unwrap();
    assert_eq!(set.start_for(Mode::Delay), Some("vegas"));
    // Default labels: cubic and bbr each earn 0.9 half the time: the first of the best.
    let default = set.start_for(Mode::Default).unwrap().to_string();
    assert_ne!(default, "vegas");
    let dir = tempdir();
    set.save(dir.path()).unwrap();
    let back = ModelSet::load(dir.path()).unwrap();
    assert_eq!(back.start_for(Mode::Delay), Some("vegas"));
    let antelope = Antelope::new(
        AntelopeConfig {
            preferences: [(5001, Mode::Delay)].into_iter().collect(),
            ..AntelopeConfig::default()
        },
        Arc::new(back),
    );
    let flow = |port| FlowContext {
        dst_port: port,
        ..FlowContext::for_candidates(&NAMES)
    };
    let delay = antelope.policy(&flow(5001));
    assert_eq!(delay.mode(), Mode::Delay);
    assert_eq!(NAMES[delay.initial()], "vegas");
    assert_eq!(NAMES[antelope.policy(&flow(80)).initial()], default);

    // A set fitted for the default mode only: a delay flow starts and predicts as a default
    // one would.
    let only = ModelSet::train_for(&per_mode(200), 20, "outcome", &[Mode::Default]).unwrap();
    assert_eq!(only.start_for(Mode::Delay), Some(default.as_str()));
    let x = [150.0, 20.0, 0.0, 150.0, 10_000.0, 8_000.0, 50.0];
    let (mut a, mut b) = (Vec::new(), Vec::new());
    only.predict(Mode::Delay, &NAMES, &x, &mut a);
    only.predict(Mode::Default, &NAMES, &x, &mut b);
    assert_eq!(a, b);
    assert!(a.iter().all(|v| v.is_finite()));
}
