//! The `tcprl` policy against the shipped model (`selector/models/tcprl`, written by
//! `python -m ccp_suite.tcprl train`): ONNX Runtime reproduces the numpy networks' outputs
//! recorded at export (`reference.json`), a flow's decisions follow the steps, the DNC's
//! reset path runs, and bad models are clear errors.
//!
//! Needs ONNX Runtime (`make venv`, or `ORT_DYLIB_PATH`). When it is absent the model tests
//! print one line and pass, unless `CCP_ONNX_REQUIRED` is set (the Makefile sets it).

#![allow(
    clippy::unwrap_used,
    reason = "test helpers; a failure is a test failure"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ccp_algorithms::Measurement;
use ccp_selector::onnx::OnnxError;
use ccp_selector::tcprl::{TcpRlModel, TcpRlPolicy};
use ccp_selector::{Decision, Features, FlowContext, SelectionPolicy};
use serde::Deserialize;

fn dir() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/tcprl")
}

#[derive(Deserialize)]
struct Reference {
    obs: Vec<Vec<f32>>,
    probs: Vec<Vec<f32>>,
    h_last: Vec<f32>,
    c_last: Vec<f32>,
    dnc_x: Option<Vec<f32>>,
    dnc_p: Option<f32>,
}

#[derive(Deserialize)]
struct Names {
    candidates: Vec<String>,
}

fn names() -> Vec<&'static str> {
    let text = std::fs::read_to_string(dir().join("tcprl.json")).unwrap();
    let n: Names = serde_json::from_str(&text).unwrap();
    n.candidates
        .into_iter()
        .map(|s| &*Box::leak(s.into_boxed_str()))
        .collect()
}

fn load(candidates: &[&str]) -> Option<Arc<TcpRlModel>> {
    match TcpRlModel::load(&dir().join("tcprl.json"), candidates) {
        Ok(m) => Some(Arc::new(m)),
        Err(e) if e.is_library_missing() && std::env::var_os("CCP_ONNX_REQUIRED").is_none() => {
            println!("skipping tcprl model test: {e}");
            None
        }
        Err(e) => panic!("loading the tcprl model: {e}"),
    }
}

#[test]
fn onnx_runtime_reproduces_the_trained_networks() {
    let names = names();
    let Some(model) = load(&names) else { return };
    let text = std::fs::read_to_string(dir().join("reference.json")).unwrap();
    let r: Reference = serde_json::from_str(&text).unwrap();
    let hidden = model.sidecar().hidden;
    let (mut h, mut c) = (vec![0.0f32; hidden], vec![0.0f32; hidden]);
    let mut probs = vec![0.0f32; names.len()];
    for (obs, want) in r.obs.iter().zip(&r.probs) {
        model.policy_step(obs, &mut h, &mut c, &mut probs).unwrap();
        for (a, b) in probs.iter().zip(want) {
            assert!((a - b).abs() < 1e-4, "{probs:?} vs {want:?}");
        }
    }
    let close = |a: &[f32], b: &[f32]| a.iter().zip(b).all(|(x, y)| (x - y).abs() < 1e-4);
    assert!(close(&h, &r.h_last) && close(&c, &r.c_last));
    if let (Some(x), Some(p)) = (r.dnc_x, r.dnc_p) {
        assert!(model.has_dnc());
        let got = model.change_probability(&x).unwrap().unwrap();
        assert!((got - p).abs() < 1e-4, "{got} vs {p}");
    }
}

fn report(now_us: u64, lost: u64) -> Measurement {
    Measurement {
        now_us,
        acked_bytes: 60_000,
        lost_pkts: lost,
        rtt_us: 50_000,
        min_rtt_us: 50_000,
        rate_incoming_bytes_per_sec: 1_200_000,
        ..Measurement::default()
    }
}

#[test]
fn a_flow_decides_once_per_step_in_any_candidate_order() {
    let mut names = names();
    // The selector may list the candidates in another order than the model.
    names.reverse();
    let Some(model) = load(&names) else { return };
    let step_us = match model.step() {
        ccp_selector::tcprl::StepLength::Seconds(s) => (s * 1e6) as u64,
        ccp_selector::tcprl::StepLength::Rtts(k) => (k * 50_000.0) as u64,
    };
    let mut p = TcpRlPolicy::new(model, 7);
    let mut current = p.initial();
    assert!(current < names.len());
    let mut decided = 0;
    let mut now = 0;
    for i in 0..200u64 {
        now += 50_000;
        let m = report(now, u64::from(i % 17 == 0));
        let d = p.decide(&Features {
            measurement: &m,
            current,
            candidates: &names,
            now_us: now,
            srtt_us: 50_000,
            reports: i + 1,
        });
        if p.explain().is_some() && decided == 0 {
            decided = 1;
        }
        if let Decision::SwitchTo(k) = d {
            assert!(k < names.len() && k != current);
            current = k;
        }
    }
    assert_eq!(p.errors(), 0);
    let probs = p.probabilities();
    assert!((probs.iter().sum::<f32>() - 1.0).abs() < 1e-4, "{probs:?}");
    assert_eq!(
        decided,
        1,
        "no step ended in {} s of reports (step {step_us} us)",
        now / 1_000_000
    );
}

#[test]
fn bad_models_are_clear_errors() {
    let names = names();
    // Other candidates.
    let e = TcpRlModel::load(&dir().join("tcprl.json"), &["cubic", "bbr"]).unwrap_err();
    assert!(e.to_string().contains("candidates"), "{e}");
    // A sidecar that is not JSON, and one naming a missing network.
    let tmp = std::env::temp_dir().join(format!("ccp-tcprl-{}", std::process::id()));
    std::fs::create_dir_all(&tmp).unwrap();
    std::fs::write(tmp.join("tcprl.json"), "{ not json").unwrap();
    let e = TcpRlModel::load(&tmp.join("tcprl.json"), &names).unwrap_err();
    assert!(matches!(e, OnnxError::Sidecar { .. }), "{e}");
    let mut side: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("tcprl.json")).unwrap()).unwrap();
    side["step"] = serde_json::json!({"rtts": -1.0});
    std::fs::write(tmp.join("tcprl.json"), side.to_string()).unwrap();
    let e = TcpRlModel::load(&tmp.join("tcprl.json"), &names).unwrap_err();
    assert!(e.to_string().contains("step"), "{e}");
    side["step"] = serde_json::json!({"seconds": 1.0});
    side["policy"] = serde_json::json!("missing.onnx");
    std::fs::write(tmp.join("tcprl.json"), side.to_string()).unwrap();
    let e = TcpRlModel::load(&tmp.join("tcprl.json"), &names).unwrap_err();
    assert!(e.to_string().contains("missing.onnx"), "{e}");
    let _ = std::fs::remove_dir_all(&tmp);
}

/// A copy of the shipped model with `edit` applied to its sidecar, removed when dropped.
fn with_sidecar(edit: impl FnOnce(&mut serde_json::Value)) -> tempfile::TempDir {
    let tmp = tempfile::Builder::new()
        .prefix("ccp-tcprl-side-")
        .tempdir()
        .unwrap();
    for f in ["policy.onnx", "dnc.onnx"] {
        std::fs::copy(dir().join(f), tmp.path().join(f)).unwrap();
    }
    let mut side: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir().join("tcprl.json")).unwrap()).unwrap();
    edit(&mut side);
    std::fs::write(tmp.path().join("tcprl.json"), side.to_string()).unwrap();
    tmp
}

/// A copy of the shipped model whose sidecar's `start` is `start` (`None`: no such field).
fn with_start(start: Option<&str>) -> tempfile::TempDir {
    with_sidecar(|side| match start {
        Some(s) => side["start"] = serde_json::json!(s),
        None => {
            side.as_object_mut().unwrap().remove("start");
        }
    })
}

/// Drives one flow of a policy over `model` for 800 reports every 50 ms whose loss, rate (from
/// `rate` bytes/s up) and RTT (from `rtt_us` up) vary, and returns, for each step that ended,
/// the candidate active before it, the step's probabilities (selector order) and the decision.
fn steps(
    model: Arc<TcpRlModel>,
    names: &[&'static str],
    rate: u64,
    rtt_us: u64,
) -> Vec<(usize, Vec<f32>, Decision)> {
    let mut p = TcpRlPolicy::new(model, 11);
    let mut current = p.initial();
    let mut out = Vec::new();
    let mut last_probs = p.probabilities().to_vec();
    for i in 0..800u64 {
        let now = (i + 1) * 50_000;
        let mut m = report(now, u64::from(i % 7 == 0) * (i % 5));
        m.rate_incoming_bytes_per_sec = rate + (i * 7_919 % 23) * rate / 20;
        m.acked_bytes = rate / 20;
        m.min_rtt_us = rtt_us;
        m.rtt_us = rtt_us + (i * 104_729 % 31) * rtt_us / 10;
        let d = p.decide(&Features {
            measurement: &m,
            current,
            candidates: names,
            now_us: now,
            srtt_us: 50_000,
            reports: i + 1,
        });
        if p.probabilities() != last_probs.as_slice() {
            last_probs = p.probabilities().to_vec();
            out.push((current, last_probs.clone(), d));
        }
        if let Decision::SwitchTo(k) = d {
            current = k;
        }
    }
    assert_eq!(p.errors(), 0);
    out
}

#[test]
fn the_switch_margin_keeps_a_flow_on_a_candidate_rated_nearly_as_high() {
    let names = names();
    if load(&names).is_none() {
        return;
    }
    // No DNC, so every step's decision is the policy network's.
    let margin = 0.15f32;
    let run = |m: f32| {
        let side = with_sidecar(|s| {
            s["dnc"] = serde_json::Value::Null;
            s["switch_margin"] = serde_json::json!(m);
        });
        let model = Arc::new(TcpRlModel::load(&side.path().join("tcprl.json"), &names).unwrap());
        // Paths of 5 and 20 Mbit/s at 10 and 40 ms, where the policy rates several alike.
        let mut all = steps(model.clone(), &names, 600_000, 10_000);
        all.extend(steps(model, &names, 2_500_000, 40_000));
        all
    };
    let greedy = run(0.0);
    assert!(greedy.len() >= 30, "{} steps", greedy.len());
    let best = |probs: &[f32]| (0..probs.len()).max_by(|&a, &b| probs[a].total_cmp(&probs[b]));
    let mut held = 0;
    for (current, probs, d) in &greedy {
        // Margin 0: TCP-RL's argmax, every time.
        let b = best(probs).unwrap();
        let want = if b == *current {
            Decision::Stay
        } else {
            Decision::SwitchTo(b)
        };
        assert_eq!(*d, want, "{probs:?} on {current}");
    }
    let held_run = run(margin);
    for (current, probs, d) in &held_run {
        let b = best(probs).unwrap();
        let gap = probs[b] - probs[*current];
        if let Decision::SwitchTo(k) = d {
            assert!(*k == b && gap >= margin, "{probs:?} on {current}");
        } else {
            assert!(b == *current || gap < margin, "{probs:?} on {current}");
            held += usize::from(b != *current);
        }
    }
    let swaps = |s: &[(usize, Vec<f32>, Decision)]| {
        s.iter()
            .filter(|x| matches!(x.2, Decision::SwitchTo(_)))
            .count()
    };
    assert!(
        held > 0,
        "the margin never held a flow: {} greedy swaps",
        swaps(&greedy)
    );
    assert!(swaps(&held_run) < swaps(&greedy));
    // Out of range: a clear error.
    let side = with_sidecar(|s| s["switch_margin"] = serde_json::json!(1.5));
    let e = TcpRlModel::load(&side.path().join("tcprl.json"), &names).unwrap_err();
    assert!(e.to_string().contains("switch_margin"), "{e}");
}

#[test]
fn a_flow_starts_on_the_sidecars_start_or_on_a_draw_that_varies_by_flow() {
    let names = names();
    if load(&names).is_none() {
        return;
    }
    let starts = |side: &Path| -> Vec<&str> {
        let model = Arc::new(TcpRlModel::load(&side.join("tcprl.json"), &names).unwrap());
        let factory = TcpRlPolicy::factory(model);
        // Flows that differ only in the source port (the simulator's runs differ there).
        (0..24u32)
            .map(|port| {
                let ctx = FlowContext {
                    src_port: 10_000 + port,
                    ..FlowContext::for_candidates(&names)
                };
                names[factory(&ctx).initial()]
            })
            .collect()
    };
    for (tag, start) in [("absent", None), ("random", Some("random"))] {
        let drawn = starts(with_start(start).path());
        let distinct: std::collections::BTreeSet<_> = drawn.iter().collect();
        assert!(distinct.len() >= 4, "{tag}: {drawn:?}");
    }
    assert!(
        starts(with_start(Some("vegas")).path())
            .iter()
            .all(|s| *s == "vegas")
    );
    let side = with_start(Some("no-such-cca"));
    let e = TcpRlModel::load(&side.path().join("tcprl.json"), &names).unwrap_err();
    assert!(e.to_string().contains("start"), "{e}");
}
