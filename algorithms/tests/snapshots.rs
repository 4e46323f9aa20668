//! Trajectory snapshots: each algorithm's window (packets, to 0.1) every 100 ms on a seeded
//! 10 Mbit/s, 50 ms path with a 1-BDP drop-tail buffer, for 10 s, compared with the committed
//! file `tests/snapshots/<name>.txt`, so a change in dynamics shows up in review.
//!
//! `UPDATE_SNAPSHOTS=1 cargo test -p ccp-algorithms --test snapshots` rewrites the files.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::fmt::Write as _;
use std::path::PathBuf;

use ccp_algorithms::arc::Inference;
use ccp_algorithms::{
    AlgorithmConfig, ArcConfig, BbrConfig, C2tcpConfig, Ccp, CopaConfig, CubicConfig,
    IllinoisConfig, LpTcpConfig, RenoConfig, RlTcpConfig, VegasConfig, VivaceConfig,
    WestwoodConfig,
};
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, Simulation,
};

const MS: u64 = 1_000_000;
const MSS: u32 = 1448;
const LINK_BPS: u64 = 10_000_000;
/// 10 Mbit/s x 50 ms.
const BDP_BYTES: u64 = LINK_BPS / 8 / 20;

/// The window trajectory: one `time_s cwnd_packets` line per 100 ms sample.
fn trajectory<C: AlgorithmConfig + Send>(config: C) -> String {
    let cfg = SimConfig {
        seed: 7,
        duration_ns: 10_000 * MS,
        link: LinkSpec {
            rate: LinkRate::Constant { bps: LINK_BPS },
            buffer_bytes: BDP_BYTES,
            loss: 0.0,
        },
        flows: vec![FlowSpec::bulk(
            Scheme::Ccp {
                alg: C::NAME.to_string(),
            },
            25 * MS,
        )],
        changes: Vec::new(),
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 100 * MS,
        datapath: DatapathConfig::default(),
    };
    let r = Simulation::new(cfg, Some(LockstepAgent::new(Ccp::new(config))))
        .expect("config")
        .run()
        .expect("run");
    let mut out = String::new();
    for s in &r.flows[0].series {
        let pkts = f64::from(s.cwnd_bytes) / f64::from(MSS);
        writeln!(out, "{:.1} {:.1}", s.t_ns as f64 / 1e9, pkts).expect("write");
    }
    out
}

fn check(name: &str, actual: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(format!("{name}.txt"));
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some_and(|v| v == "1") {
        std::fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        std::fs::write(&path, actual).expect("write snapshot");
        return;
    }
    let expected = std::fs::read_to_string(&path).unwrap_or_else(|e| {
        panic!(
            "{}: {e}; generate it with UPDATE_SNAPSHOTS=1 cargo test -p ccp-algorithms --test snapshots",
            path.display()
        )
    });
    if expected == actual {
        return;
    }
    let (exp, act): (Vec<&str>, Vec<&str>) = (expected.lines().collect(), actual.lines().collect());
    let mut diff = String::new();
    let mut shown = 0;
    for i in 0..exp.len().max(act.len()) {
        let (e, a) = (exp.get(i).copied(), act.get(i).copied());
        if e != a {
            writeln!(
                diff,
                "  line {}: expected {:?}, got {:?}",
                i + 1,
                e.unwrap_or("<end>"),
                a.unwrap_or("<end>")
            )
            .expect("write");
            shown += 1;
            if shown == 8 {
                diff.push_str("  ...\n");
                break;
            }
        }
    }
    panic!(
        "{name}: the cwnd trajectory differs from {} ({} vs {} lines):\n{diff}\
         If the change is intended, review it and rerun with UPDATE_SNAPSHOTS=1 \
         cargo test -p ccp-algorithms --test snapshots",
        path.display(),
        exp.len(),
        act.len()
    );
}

#[test]
fn reno_trajectory() {
    check("reno", &trajectory(RenoConfig::default()));
}

#[test]
fn cubic_trajectory() {
    check("cubic", &trajectory(CubicConfig::default()));
}

#[test]
fn bbr_trajectory() {
    check("bbr", &trajectory(BbrConfig::default()));
}

#[test]
fn copa_trajectory() {
    check("copa", &trajectory(CopaConfig::default()));
}

#[test]
fn vegas_trajectory() {
    check("vegas", &trajectory(VegasConfig::default()));
}

#[test]
fn westwood_trajectory() {
    check("westwood", &trajectory(WestwoodConfig::default()));
}

#[test]
fn illinois_trajectory() {
    check("illinois", &trajectory(IllinoisConfig::default()));
}

#[test]
fn c2tcp_trajectory() {
    check("c2tcp", &trajectory(C2tcpConfig::default()));
}

#[test]
fn vivace_trajectory() {
    check("vivace", &trajectory(VivaceConfig::default()));
}

/// LP-TCP with the test forest (`tests/fixtures/lptcp-forest.json`, trained on the 150 ms
/// paper path; here it holds the window where it predicts a loss on a 50 ms path).
#[test]
fn lptcp_trajectory() {
    let forest = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("tests/fixtures/lptcp-forest.json");
    check(
        "lptcp",
        &trajectory(LpTcpConfig::load(&forest).expect("test forest")),
    );
}

/// RL-TCP learning from an empty table (its exploration drawn from the flow's seed).
#[test]
fn rltcp_trajectory() {
    check("rltcp", &trajectory(RlTcpConfig::default()));
}

/// ARC with its shipped actor (`models/arc/actor.onnx`), inline (the simulator's deterministic
/// mode); needs ONNX Runtime (skipped without it unless `CCP_ONNX_REQUIRED` is set).
#[test]
fn arc_trajectory() {
    let actor = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("models/arc/actor.onnx");
    let cfg = ArcConfig::with_model(actor).inference(Inference::Deferred);
    if let Err(e) = cfg.ready() {
        assert!(
            std::env::var_os("CCP_ONNX_REQUIRED").is_none(),
            "ARC's actor does not load: {e}"
        );
        eprintln!("skipped: {e}");
        return;
    }
    check("arc", &trajectory(cfg));
}
