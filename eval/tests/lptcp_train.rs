//! LP-TCP's training end to end, small: `gen-data --kind lptcp` on a short shallow-buffer
//! scenario, `train lptcp` fits a 7-tree linfa forest and picks its threshold, and the model
//! file it writes makes LP-TCP act: on the same path it holds the window short of the buffer's
//! overflow, so it loses fewer packets than `NewReno` and delivers at least as much.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::Arc;

use ccp_algorithms::lptcp::{Forest, LpTcpConfig};
use ccp_algorithms::{AlgorithmConfig, Ccp};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowResult, FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, Simulation,
};
use ccp_eval::lptcp::{self, TrainOptions};
use ccp_eval::scenario::Scenario;

const SCENARIO: &str = r#"
name = "lptcp-tiny"
duration_s = 40
seeds = [1, 2]

[[conditions]]
env = "tiny"
bw_mbps = 10
rtt_ms = 40
buffer_pkts = 5

[[conditions]]
env = "tiny-lossy"
bw_mbps = 10
rtt_ms = 40
buffer_pkts = 5
loss = 0.0005
"#;

/// One flow of `config` for 40 s on 10 Mbit/s, 40 ms, a 5-packet buffer, random `loss`.
fn run<C: AlgorithmConfig + Send>(config: C, loss: f64) -> FlowResult {
    let cfg = SimConfig {
        seed: 3,
        duration_ns: 40_000_000_000,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: 10_000_000 },
            buffer_bytes: 5 * u64::from(1448 + ccp_datapath::sim::WIRE_OVERHEAD_BYTES),
            loss,
        },
        flows: vec![FlowSpec::bulk(
            Scheme::Ccp {
                alg: C::NAME.to_string(),
            },
            20_000_000,
        )],
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 0,
        datapath: DatapathConfig::default(),
    };
    let r = Simulation::new(cfg, Some(LockstepAgent::new(Ccp::new(config))))
        .unwrap()
        .run()
        .unwrap();
    r.flows.into_iter().next().unwrap()
}

#[test]
fn a_tiny_forest_trained_from_newreno_data_holds_the_window_before_losses() {
    let dir = tempfile::tempdir().unwrap();
    let scenario = Scenario::parse("lptcp-tiny.toml", SCENARIO, None).unwrap();
    let (rows, lost) = lptcp::gen_data(&scenario, "lptcp-tiny", dir.path(), 1).unwrap();
    assert!(rows > 1000 && lost > 20, "{rows} rows, {lost} lost");

    let models = dir.path().join("models");
    let opts = TrainOptions {
        trees: 7,
        max_depth: 8,
        jobs: 1,
        ..TrainOptions::default()
    };
    let summary = lptcp::train(dir.path(), &models, &scenario, "lptcp-tiny", opts).unwrap();
    let forest = Forest::load(&models.join(lptcp::MODEL_FILE)).unwrap();
    assert_eq!(forest.len(), 7);
    let file: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(models.join(lptcp::MODEL_FILE)).unwrap())
            .unwrap();
    let scores = file["thresholds"].as_array().unwrap();
    assert_eq!(scores.len(), 6, "the five listed thresholds and th0");
    let best = scores
        .iter()
        .map(|s| s["m_e"].as_f64().unwrap())
        .fold(f64::NEG_INFINITY, f64::max);
    let chosen = scores
        .iter()
        .find(|s| s["threshold"].as_f64() == Some(forest.threshold()))
        .unwrap();
    assert!(
        (chosen["m_e"].as_f64().unwrap() - best).abs() < 1e-12,
        "{summary}"
    );

    // The scenario's two paths (another seed): fewer drops, and no less throughput overall.
    let (mut drops, mut tput) = ([0u64; 2], [0.0f64; 2]);
    for loss in [0.0, 0.0005] {
        for (k, th) in [1.0, forest.threshold()].into_iter().enumerate() {
            let r = run(
                LpTcpConfig::with_model(Arc::new(forest.clone())).threshold(th),
                loss,
            );
            drops[k] += r.packets_dropped;
            tput[k] += r.throughput_bps(40_000_000_000) / 1e6;
        }
    }
    let [newreno, lp] = drops;
    assert!(
        lp < newreno,
        "LP-TCP dropped {lp} packets, NewReno {newreno}\n{summary}"
    );
    assert!(
        tput[1] >= tput[0],
        "LP-TCP {:.2} Mbit/s, NewReno {:.2} (sum of two paths)\n{summary}",
        tput[1],
        tput[0]
    );
}

#[test]
fn samples_of_another_schema_are_refused() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(lptcp::SAMPLES_FILE);
    std::fs::write(&path, "cwnd,lost\n1,0\n").unwrap();
    let e = lptcp::read_samples(&path).unwrap_err();
    assert!(e.contains("feature schema"), "{e}");
}
