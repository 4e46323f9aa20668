//! The `onnx` policy against the shipped example model (`selector/models/example-onnx`): the
//! reference cases recorded by `train_onnx.py` (raw reports, ONNX Runtime's scores in Python,
//! sklearn's prediction) replayed through `OnnxPolicy`, and the error paths.
//!
//! Needs ONNX Runtime (`make venv`, or `ORT_DYLIB_PATH`). When it is absent the model tests
//! print one line and pass, unless `CCP_ONNX_REQUIRED` is set (the Makefile sets it), in which
//! case they fail.

#![allow(
    clippy::unwrap_used,
    reason = "test helpers; a failure is a test failure"
)]

use std::path::{Path, PathBuf};
use std::sync::Arc;

use ccp_algorithms::Measurement;
use ccp_algorithms::onnx::RuntimeError;
use ccp_selector::onnx::{OnnxError, OnnxModel, OnnxPolicy, argmax, resolve_library};
use ccp_selector::{Decision, Features, SelectionPolicy};
use serde::Deserialize;

fn model_path() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("models/example-onnx/policy.onnx")
}

#[derive(Deserialize)]
struct Report {
    now_us: u64,
    acked_bytes: u64,
    sacked_bytes: u64,
    lost_pkts: u64,
    timeout: bool,
    rtt_us: u64,
    min_rtt_us: u64,
    rate_incoming_bytes_per_sec: u64,
}

#[derive(Deserialize)]
struct Reference {
    name: String,
    current: usize,
    reports: Vec<Report>,
    input: Vec<f32>,
    scores: Vec<f32>,
    sklearn_argmax: usize,
}

#[derive(Deserialize)]
struct Sidecar {
    candidates: Vec<String>,
    references: Vec<Reference>,
}

fn sidecar() -> Sidecar {
    let text = std::fs::read_to_string(model_path().with_extension("json")).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// The example model, or `None` (after one printed line) when ONNX Runtime is absent and not
/// required.
fn load() -> Option<(Arc<OnnxModel>, Vec<&'static str>)> {
    let names: Vec<&'static str> = sidecar()
        .candidates
        .into_iter()
        .map(|s| &*Box::leak(s.into_boxed_str()))
        .collect();
    match OnnxModel::load(&model_path(), &names) {
        Ok(m) => Some((Arc::new(m), names)),
        Err(e) if e.is_library_missing() && std::env::var_os("CCP_ONNX_REQUIRED").is_none() => {
            println!("skipping onnx model test: {e}");
            None
        }
        Err(e) => panic!("loading the example model: {e}"),
    }
}

#[test]
fn example_model_loads_and_matches_its_sidecar() {
    let Some((model, names)) = load() else { return };
    assert_eq!(model.sidecar().candidates, names);
    // Every algorithm of the suite is a candidate (the nine and the learned LP-TCP, RL-TCP).
    assert_eq!(names.len(), ccp_algorithms::suite().len());
    assert_eq!(
        model.input_len(),
        model.sidecar().window * (ccp_selector::onnx::FEATURES.len() + names.len())
    );
}

#[test]
fn decisions_match_the_python_model_in_any_candidate_order() {
    let Some((_, model_names)) = load() else {
        return;
    };
    let refs = sidecar().references;
    assert!(refs.len() >= 3);
    // The model's order, the suite's (the agent's default: reno first) and the reverse: the
    // selector's candidates are mapped to the model's by name.
    let suite: Vec<&'static str> = ccp_algorithms::suite().iter().map(|c| c.name()).collect();
    assert_ne!(suite, model_names);
    let mut reversed = model_names.clone();
    reversed.reverse();
    for order in [model_names.clone(), suite, reversed] {
        let model = Arc::new(OnnxModel::load(&model_path(), &order).unwrap());
        let pos = |model_index: usize| {
            order
                .iter()
                .position(|n| *n == model_names[model_index])
                .unwrap()
        };
        for r in &refs {
            let current = pos(r.current);
            let mut policy = OnnxPolicy::new(model.clone(), current);
            let mut last = Decision::Stay;
            for (i, rep) in r.reports.iter().enumerate() {
                let m = Measurement {
                    now_us: rep.now_us,
                    acked_bytes: rep.acked_bytes,
                    sacked_bytes: rep.sacked_bytes,
                    lost_pkts: rep.lost_pkts,
                    timeout: rep.timeout,
                    rtt_us: rep.rtt_us,
                    min_rtt_us: rep.min_rtt_us,
                    rate_incoming_bytes_per_sec: rep.rate_incoming_bytes_per_sec,
                    ..Measurement::default()
                };
                last = policy.decide(&Features {
                    measurement: &m,
                    current,
                    candidates: &order,
                    now_us: rep.now_us,
                    srtt_us: rep.rtt_us,
                    reports: i as u64 + 1,
                });
            }
            // The Rust featurizer builds the same window as the Python mirror (in the model's
            // order)...
            for (a, b) in policy.window().iter().zip(&r.input) {
                assert!((a - b).abs() < 1e-5, "{}: window {a} vs {b}", r.name);
            }
            // ...the runtime gives the scores Python's onnxruntime gave, in the selector's
            // order...
            for (k, name) in order.iter().enumerate() {
                let m = model_names.iter().position(|n| n == name).unwrap();
                let (got, want) = (policy.scores()[k], r.scores[m]);
                assert!(
                    (got - want).abs() < 1e-4,
                    "{}: {name}: {got} vs {want}",
                    r.name
                );
            }
            // ...and the decision is sklearn's prediction (Stay when it is the current one).
            let best = pos(r.sklearn_argmax);
            assert_eq!(argmax(policy.scores()), Some(best), "{}", r.name);
            let want = if best == current {
                Decision::Stay
            } else {
                Decision::SwitchTo(best)
            };
            assert_eq!(last, want, "{} with {order:?}", r.name);
            assert_eq!(policy.errors(), 0);
        }
    }
}

#[test]
fn policy_stays_until_the_window_is_full() {
    let Some((model, names)) = load() else { return };
    let mut policy = OnnxPolicy::new(model.clone(), 0);
    let m = Measurement {
        now_us: 1,
        rtt_us: 50_000,
        lost_pkts: 5,
        acked_bytes: 1000,
        ..Measurement::default()
    };
    for i in 1..model.sidecar().window {
        let d = policy.decide(&Features {
            measurement: &m,
            current: 0,
            candidates: &names,
            now_us: i as u64,
            srtt_us: 50_000,
            reports: i as u64,
        });
        assert_eq!(d, Decision::Stay);
    }
    assert!(
        policy.scores().iter().all(|s| *s == 0.0),
        "no inference yet"
    );
}

#[test]
fn wrong_candidates_are_a_mismatch_naming_both() {
    let Some((_, names)) = load() else { return };
    let err = OnnxModel::load(&model_path(), &names[..8]).unwrap_err();
    let msg = err.to_string();
    assert!(
        matches!(
            err,
            OnnxError::Mismatch {
                what: "candidates",
                ..
            }
        ),
        "{msg}"
    );
    assert!(msg.contains("expected") && msg.contains("vivace"), "{msg}");
    // The same number of candidates, one different: refused, saying any order would do.
    let mut other = names.clone();
    other[8] = "reno";
    let msg = OnnxModel::load(&model_path(), &other)
        .unwrap_err()
        .to_string();
    assert!(
        msg.contains("candidates") && msg.contains("any order"),
        "{msg}"
    );
}

#[test]
fn wrong_input_length_is_an_error() {
    let Some((model, _)) = load() else { return };
    let mut scores = [0.0; 11];
    let err = model.scores(&[0.0; 3], &mut scores).unwrap_err();
    assert!(
        matches!(err, OnnxError::InputLength { found: 3, .. }),
        "{err}"
    );
}

/// A copy of the example model dir with the `.onnx` replaced by `bytes`.
fn corrupt_copy(tag: &str, bytes: &[u8]) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("ccp-onnx-{tag}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::copy(model_path().with_extension("json"), dir.join("policy.json")).unwrap();
    let p = dir.join("policy.onnx");
    std::fs::write(&p, bytes).unwrap();
    p
}

#[test]
fn corrupted_model_is_an_error_not_a_crash() {
    let Some((_, names)) = load() else { return };
    let good = std::fs::read(model_path()).unwrap();
    for (tag, bytes) in [
        ("garbage", b"this is not an onnx model".to_vec()),
        ("truncated", good[..good.len() / 2].to_vec()),
        ("empty", Vec::new()),
    ] {
        let p = corrupt_copy(tag, &bytes);
        let err = OnnxModel::load(&p, &names).unwrap_err();
        assert!(matches!(err, OnnxError::Model { .. }), "{tag}: {err}");
        let _ = std::fs::remove_dir_all(p.parent().unwrap());
    }
}

#[test]
fn missing_model_or_sidecar_is_an_io_error() {
    let names = ["reno"];
    let err = OnnxModel::load(Path::new("/nonexistent/policy.onnx"), &names).unwrap_err();
    assert!(matches!(err, OnnxError::Io { .. }), "{err}");
}

#[test]
fn missing_library_is_a_clear_error() {
    // An explicit path is checked before anything is loaded, whatever this process holds.
    let bogus = Path::new("/nonexistent/libonnxruntime.so");
    let err = resolve_library(Some(bogus)).unwrap_err();
    assert!(
        matches!(
            err,
            OnnxError::Runtime(RuntimeError::LibraryNotFound { .. })
        ),
        "{err}"
    );
    let msg = err.to_string();
    assert!(msg.contains("/nonexistent/libonnxruntime.so") && msg.contains("ORT_DYLIB_PATH"));
}

#[test]
fn bogus_dylib_path_in_a_fresh_process_is_a_load_error() {
    // A file that exists but is no library: only a process that has not loaded ONNX Runtime
    // yet sees the loader's error, so run this test binary again with the env set.
    if std::env::var_os("CCP_ONNX_CHILD").is_some() {
        let names: Vec<&'static str> = sidecar()
            .candidates
            .into_iter()
            .map(|s| &*Box::leak(s.into_boxed_str()))
            .collect();
        let err = OnnxModel::load(&model_path(), &names).unwrap_err();
        println!("CHILD-ERROR: {err}");
        assert!(
            matches!(err, OnnxError::Runtime(RuntimeError::LibraryLoad { .. })),
            "{err}"
        );
        return;
    }
    let out = std::process::Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "bogus_dylib_path_in_a_fresh_process_is_a_load_error",
            "--nocapture",
            "--test-threads=1",
        ])
        .env("CCP_ONNX_CHILD", "1")
        .env("ORT_DYLIB_PATH", model_path().with_extension("json"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "child failed: {stdout}");
    assert!(
        stdout.contains("CHILD-ERROR: cannot load ONNX Runtime"),
        "{stdout}"
    );
}

#[test]
fn argmax_takes_the_first_maximum_and_skips_nan() {
    assert_eq!(argmax(&[0.1, 0.5, 0.5]), Some(1));
    assert_eq!(argmax(&[f32::NAN, 0.2]), Some(1));
    assert_eq!(argmax(&[]), None);
}

#[test]
fn onnx_policy_drives_the_selector_in_the_simulator() {
    use ccp_algorithms::DynAlgorithmConfig;
    use ccp_datapath::runtime::DatapathConfig;
    use ccp_datapath::sim::{
        FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, Simulation,
    };
    use ccp_selector::{EventKind, HysteresisConfig, Selector};

    const MS: u64 = 1_000_000;
    let Some((model, names)) = load() else { return };
    // In the model's candidate order.
    // The suite lists Reno first; the model was trained with Cubic first.
    let mut candidates: Vec<Box<dyn DynAlgorithmConfig>> = ccp_algorithms::suite();
    candidates.swap(0, 1);
    let sel = Selector::new(candidates, OnnxPolicy::factory(model, 1))
        .with_hysteresis(HysteresisConfig::default());
    assert_eq!(sel.names(), names);
    let log = sel.log();
    let cfg = SimConfig {
        seed: 11,
        duration_ns: 10_000 * MS,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: 10_000_000 },
            buffer_bytes: 62_500,
            loss: 0.01,
        },
        flows: vec![FlowSpec::bulk(
            Scheme::Ccp {
                alg: "selector".to_string(),
            },
            25 * MS,
        )],
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 10 * MS,
        datapath: DatapathConfig::default(),
    };
    let r = Simulation::new(cfg, Some(LockstepAgent::new(sel)))
        .unwrap()
        .run()
        .unwrap();
    let decisions = log
        .events()
        .iter()
        .filter(|e| matches!(e.kind, EventKind::Decision { .. }))
        .count();
    let swaps = log.swap_events().len();
    let util = r.flows[0].throughput_bps(r.duration_ns) / 10_000_000.0;
    println!("onnx in sim: {decisions} decisions, {swaps} swaps, utilization {util:.2}");
    assert!(decisions > 50, "{decisions} decisions");
    assert!(util > 0.2, "utilization {util}");
}
