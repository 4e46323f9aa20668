//! The probe's models: fitting, bags, and their files (saving, loading, refusing bad ones).

use super::*;

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
    // Features that are not finite (no probe gives them) predict no move, without a panic.
    let mut bad = features(3.0, 0.0);
    bad[2] = f64::NAN;
    m.predict(Mode::Default, &NAMES, &bad, &mut out);
    assert!(
        out[0].abs() < 1e-12 && out[1..].iter().all(|v| *v == f64::NEG_INFINITY),
        "{out:?}"
    );
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
