//! ARC's unit tests: the flow with and without a model, both inference modes, hot reload.
//!
//! Tests that run the shipped actor (`models/arc/actor.onnx`) need ONNX Runtime; without it
//! they print one line and pass, unless `CCP_ONNX_REQUIRED` is set (the Makefile sets it).

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU32, Ordering};

use super::*;
use crate::api::Pacing;

fn start(seed: u64) -> FlowStart {
    FlowStart {
        sock_id: 9,
        mss_bytes: 1448,
        init_cwnd_bytes: 14_480,
        seed,
    }
}

/// The shipped actor, or `None` (skip) when ONNX Runtime is missing and not required.
fn shipped() -> Option<PathBuf> {
    let model = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/arc/actor.onnx");
    if let Err(e) = crate::onnx::resolve_library(None)
        && std::env::var_os("CCP_ONNX_REQUIRED").is_none()
    {
        eprintln!("skipped: {e}");
        return None;
    }
    Some(model)
}

/// A fresh directory under the system's temporary directory.
fn scratch(tag: &str) -> PathBuf {
    static N: AtomicU32 = AtomicU32::new(0);
    let d = std::env::temp_dir().join(format!(
        "ccp-arc-{tag}-{}-{}",
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    ));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).expect("scratch dir");
    d
}

fn copy_model(from: &Path, dir: &Path) -> PathBuf {
    let to = dir.join("actor.onnx");
    std::fs::copy(from, &to).expect("copy model");
    std::fs::copy(from.with_extension("json"), to.with_extension("json")).expect("copy sidecar");
    to
}

/// A report every 50 ms of a 10 Mbit/s, 100 ms path: `queue` adds to the RTT.
fn report(k: u64, queue_us: u64, lost: u64) -> Measurement {
    Measurement {
        now_us: 100_000 + k * 50_000,
        acked_bytes: 60_000,
        lost_pkts: lost,
        rtt_us: 100_000 + queue_us,
        min_rtt_us: 100_000 + queue_us,
        rate_incoming_bytes_per_sec: 1_200_000,
        rate_outgoing_bytes_per_sec: 1_250_000,
        inflight_bytes: 120_000,
        cwnd_bytes: 140_000,
        ..Measurement::default()
    }
}

#[test]
fn without_a_model_it_is_not_ready_and_holds_its_initial_window() {
    let dir = scratch("none");
    let cfg = ArcConfig::with_model(dir.join("missing.onnx"));
    let err = cfg.ready().unwrap_err();
    assert!(err.contains("missing.json") || err.contains("missing"), "{err}");
    assert!(err.contains("make arc-model"), "{err}");
    for mode in [Inference::Deferred, Inference::Worker] {
        let mut f = ArcCc::new(&cfg.clone().inference(mode), &start(1));
        let c = f.activate(&Handoff::flow_start(&start(1)));
        assert_eq!(c.cwnd_bytes, Some(14_480));
        for k in 0..5 {
            let c = f.on_report(&report(k, 0, 0));
            assert_eq!(c.cwnd_bytes, Some(14_480), "{mode:?}");
            assert_eq!(c.pacing, Some(Pacing::Unpaced));
        }
    }
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn a_bad_interval_or_exploration_is_refused() {
    let cfg = ArcConfig::default().interval_rtts(0.0);
    assert!(cfg.ready().unwrap_err().contains("interval"));
    let cfg = ArcConfig::default().exploring(f64::NAN);
    assert!(cfg.ready().unwrap_err().contains("exploration"));
    // Programs: RTT/2 by default, the suite's.
    assert_eq!(
        AlgorithmConfig::programs(&ArcConfig::default())[0].name,
        crate::programs::PER_HALF_RTT.name
    );
    assert_eq!(
        AlgorithmConfig::programs(&ArcConfig::default().interval_rtts(1.0))[0].name,
        crate::programs::PER_RTT.name
    );
}

#[test]
fn deferred_applies_each_action_one_decision_later_and_is_deterministic() {
    let Some(model) = shipped() else { return };
    let cfg = ArcConfig::with_model(&model).inference(Inference::Deferred);
    cfg.ready().expect("the shipped actor loads");
    let actor = cfg.store().current().expect("actor");
    let run = |seed| {
        let mut f = ArcCc::new(&cfg, &start(seed));
        f.activate(&Handoff::flow_start(&start(seed)));
        let first = f.on_report(&report(0, 0, 0));
        // Nothing applied at the first report: its answer comes with the second.
        assert_eq!(first.pacing, Some(Pacing::Unpaced));
        let mut state = Vec::new();
        f.observer.state_into(&mut state);
        let expected = actor.act(&state).expect("act");
        let second = f.on_report(&report(1, 0, 0));
        assert!((f.action() - expected).abs() < 1e-6, "{} vs {expected}", f.action());
        assert!(matches!(second.pacing, Some(Pacing::BytesPerSec(r)) if r > 0));
        let mut controls = vec![first, second];
        for k in 2..40 {
            controls.push(f.on_report(&report(k, (k % 7) * 5_000, k % 3)));
        }
        controls
    };
    assert_eq!(run(3), run(3));
}

#[test]
fn worker_answers_off_the_report_path_and_the_rate_holds_meanwhile() {
    let Some(model) = shipped() else { return };
    let cfg = ArcConfig::with_model(&model).inference(Inference::Worker);
    cfg.ready().expect("the shipped actor loads");
    let mut f = ArcCc::new(&cfg, &start(1));
    f.activate(&Handoff::flow_start(&start(1)));
    let first = f.on_report(&report(0, 0, 0));
    assert_eq!(first.pacing, Some(Pacing::Unpaced));
    // Reports keep coming; the answer of the worker shows up at one of them (bounded wait,
    // not a timing assertion).
    let mut applied = None;
    for k in 1..2_000 {
        let c = f.on_report(&report(k, 0, 0));
        if let Some(Pacing::BytesPerSec(r)) = c.pacing {
            applied = Some((k, r));
            break;
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    let (k, rate) = applied.expect("the worker answered within 10 s");
    assert!(k >= 1 && rate > 0);
    assert_eq!(f.inference_errors(), 0);
    // Between answers the rate holds: every control carries the rate in force.
    let c = f.on_report(&report(5_000, 0, 0));
    assert!(matches!(c.pacing, Some(Pacing::BytesPerSec(r)) if r > 0));
}

#[test]
fn a_new_model_is_picked_up_and_a_bad_one_keeps_the_old() {
    let Some(model) = shipped() else { return };
    let dir = scratch("reload");
    let path = copy_model(&model, &dir);
    let store = ModelStore::open(&path);
    store.ready().expect("loads");
    let v0 = store.current().expect("actor").version();
    assert_eq!(store.refresh(), Refresh::Unchanged);

    // A broken model file: the old actor stays, the error is kept and names the file.
    std::fs::write(&path, b"not an onnx model").expect("write");
    match store.refresh() {
        Refresh::Failed(e) => assert!(e.contains("actor.onnx"), "{e}"),
        other => panic!("expected a failure, got {other:?}"),
    }
    assert_eq!(store.current().expect("still an actor").version(), v0);
    assert!(store.last_error().is_some());
    assert_eq!(store.refresh(), Refresh::Unchanged, "a failed file is not retried");

    // A sidecar of another schema fails the same way.
    std::fs::copy(&model, &path).expect("restore");
    let side = path.with_extension("json");
    let text = std::fs::read_to_string(&side).expect("sidecar");
    let json: serde_json::Value = serde_json::from_str(&text).expect("json");
    let mut bad = json.clone();
    bad["schema_version"] = 99.into();
    std::fs::write(&side, bad.to_string()).expect("write");
    assert!(matches!(store.refresh(), Refresh::Failed(e) if e.contains("schema_version")));

    // A good new version replaces the old one.
    let mut next = json;
    next["version"] = (v0 + 41).into();
    std::fs::write(&side, next.to_string()).expect("write");
    assert_eq!(store.refresh(), Refresh::Reloaded(v0 + 41));
    assert_eq!(store.current().expect("actor").version(), v0 + 41);
    assert!(store.last_error().is_none());
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn hostile_model_files_are_errors_not_panics() {
    let Some(model) = shipped() else { return };
    let dir = scratch("hostile");
    let path = copy_model(&model, &dir);
    let side = path.with_extension("json");
    for text in ["", "{", "[]", "{\"schema_version\": 1}", "null"] {
        std::fs::write(&side, text).expect("write");
        let e = Actor::load(&path).unwrap_err();
        assert!(e.to_string().contains("actor.json"), "{e}");
    }
    std::fs::copy(model.with_extension("json"), &side).expect("restore");
    let text = std::fs::read_to_string(&side).expect("sidecar");
    let mut json: serde_json::Value = serde_json::from_str(&text).expect("json");
    json["history"] = 3.into();
    std::fs::write(&side, json.to_string()).expect("write");
    let e = Actor::load(&path).unwrap_err();
    assert!(e.to_string().contains("input"), "{e}");
    let _ = std::fs::remove_dir_all(&dir);
}

#[test]
fn decisions_are_recorded_with_the_applied_action() {
    #[derive(Default)]
    struct Sink(std::sync::Mutex<Vec<Decision>>);
    impl TrajectorySink for Sink {
        fn record(&self, d: &Decision) {
            self.0.lock().expect("lock").push(d.clone());
        }
    }
    let Some(model) = shipped() else { return };
    let sink = std::sync::Arc::new(Sink::default());
    let cfg = ArcConfig::with_model(&model)
        .inference(Inference::Deferred)
        .exploring(0.3)
        .recording(sink.clone());
    let mut f = ArcCc::new(&cfg, &start(5));
    f.activate(&Handoff::flow_start(&start(5)));
    for k in 0..10 {
        f.on_report(&report(k, 0, 0));
    }
    let d = sink.0.lock().expect("lock");
    assert_eq!(d.len(), 10);
    assert!(d[0].action.is_nan(), "nothing applied at the first report");
    assert_eq!(d[3].step, 3);
    assert_eq!(d[3].state.len(), 70);
    // Exploration: the applied action differs from the actor's, within [-1, 1].
    assert!(d[1..].iter().all(|x| (-1.0..=1.0).contains(&x.action)));
    assert!(d[1..].iter().any(|x| (x.action - x.actor_action).abs() > 1e-3));
    // The state of step k + 1 carries the action applied at step k as its last action.
    assert!((d[4].state[69] - d[3].action).abs() < 1e-6);
}
