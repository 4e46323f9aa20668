//! Path-change detection in the simulator: the RTT step of TCP-RL's `dynamic` path (20 -> 40 ms,
//! 20 -> 50 Mbit/s) blinds Copa for its 10-s minimum window; the selector's detector re-seats
//! it within a second. On fixed paths, with a loss-based or a delay-based candidate keeping a
//! queue, the detector stays silent.

#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};

use ccp_algorithms::{CopaConfig, CubicConfig, DynAlgorithmConfig};
use ccp_datapath::netem::PathChange as Phase;
use ccp_datapath::runtime::DatapathConfig;
use ccp_datapath::sim::{
    FlowSpec, LinkRate, LinkSpec, LockstepAgent, Scheme, SimConfig, SimResult, Simulation,
};
use ccp_selector::policy::FlowContext;
use ccp_selector::{
    Decision, EventKind, Features, PathChangeConfig, SelectionPolicy, Selector, SelectorLog,
    StaticPolicy,
};

const MS: u64 = 1_000_000;
const S: u64 = 1_000 * MS;

/// A selector that keeps candidate `start` (0: Copa, 1: Cubic) for the whole flow.
fn on(start: usize, detect: bool) -> Selector {
    let candidates: Vec<Box<dyn DynAlgorithmConfig>> = vec![
        Box::new(CopaConfig::default()),
        Box::new(CubicConfig::default()),
    ];
    Selector::new(
        candidates,
        Arc::new(move |_: &FlowContext<'_>| Box::new(StaticPolicy { candidate: start }) as _),
    )
    .with_path_change(detect.then(PathChangeConfig::default))
}

/// One flow for `secs` on `bps`, `rtt_ms`, a buffer of `buffer_bdp` BDPs, with `changes`.
fn run(
    sel: Selector,
    secs: u64,
    bps: u64,
    rtt_ms: u64,
    buffer_bdp: f64,
    changes: Vec<Phase>,
) -> (SimResult, Arc<SelectorLog>) {
    let log = sel.log();
    let bdp = bps as f64 / 8.0 * rtt_ms as f64 / 1e3;
    let cfg = SimConfig {
        seed: 3,
        duration_ns: secs * S,
        link: LinkSpec {
            rate: LinkRate::Constant { bps },
            buffer_bytes: (bdp * buffer_bdp) as u64,
            loss: 0.0,
        },
        flows: vec![FlowSpec::bulk(
            Scheme::Ccp {
                alg: "selector".to_string(),
            },
            rtt_ms * MS / 2,
        )],
        changes,
        agent_latency_ns: 0,
        ack_aggregation_ns: 0,
        sample_interval_ns: 100 * MS,
        datapath: DatapathConfig::default(),
    };
    let r = Simulation::new(cfg, Some(LockstepAgent::new(sel)))
        .expect("config")
        .run()
        .expect("run");
    (r, log)
}

/// Mean goodput of the only flow between `from` and `to` (ns), Mbit/s.
fn mbps_between(r: &SimResult, from: u64, to: u64) -> f64 {
    let at = |t: u64| {
        r.flows[0]
            .series
            .iter()
            .take_while(|s| s.t_ns <= t)
            .last()
            .map_or(0, |s| s.delivered_bytes)
    };
    (at(to) - at(from)) as f64 * 8.0 / ((to - from) as f64 / 1e9) / 1e6
}

fn path_changes(log: &SelectorLog) -> Vec<(u64, u64)> {
    log.events()
        .into_iter()
        .filter_map(|e| match e.kind {
            EventKind::PathChange { floor_us, .. } => Some((e.time_us, floor_us)),
            _ => None,
        })
        .collect()
}

/// At 10 s the path goes from 20 Mbit/s, 20 ms to 50 Mbit/s, 40 ms.
fn longer_path() -> Vec<Phase> {
    vec![Phase {
        at_ns: 10 * S,
        rate: Some(LinkRate::Constant { bps: 50_000_000 }),
        one_way_delay_ns: Some(20 * MS),
        loss: None,
        buffer_bytes: None,
    }]
}

#[test]
fn copa_is_reseated_within_a_second_of_an_rtt_step_and_runs_at_the_new_rate() {
    let (blind, blind_log) = run(on(0, false), 20, 20_000_000, 20, 1.0, longer_path());
    let (seen, log) = run(on(0, true), 20, 20_000_000, 20, 1.0, longer_path());
    assert!(path_changes(&blind_log).is_empty());
    let changes = path_changes(&log);
    assert_eq!(changes.len(), 1, "{changes:?}");
    let (t_us, floor_us) = changes[0];
    assert!(
        (10_000_000..11_000_000).contains(&t_us),
        "fired at {t_us} µs"
    );
    assert!((40_000..44_000).contains(&floor_us), "floor {floor_us} µs");
    assert_eq!(log.path_changes.load(Ordering::Relaxed), 1);
    assert_eq!(log.swaps.load(Ordering::Relaxed), 0);
    // Without the re-seat Copa stays near its old 19 Mbit/s until its minimum ages out at
    // ~20 s; re-seated, it takes the new 50.
    let (before, after) = (
        mbps_between(&blind, 12 * S, 19 * S),
        mbps_between(&seen, 12 * S, 19 * S),
    );
    assert!(before < 25.0, "blind Copa at {before:.1} Mbit/s");
    assert!(after > 40.0, "re-seated Copa at {after:.1} Mbit/s");
    // Up to the change the two runs are the same run.
    let delivered = |r: &SimResult| {
        r.flows[0]
            .series
            .iter()
            .take_while(|s| s.t_ns <= 10 * S)
            .map(|s| s.delivered_bytes)
            .collect::<Vec<_>>()
    };
    assert_eq!(delivered(&blind), delivered(&seen));
}

/// Stays on Copa and records the floors the selector tells it of.
struct Told(Arc<Mutex<Vec<u64>>>);

impl SelectionPolicy for Told {
    fn name(&self) -> &'static str {
        "told"
    }
    fn decide(&mut self, _: &Features<'_>) -> Decision {
        Decision::Stay
    }
    fn path_changed(&mut self, floor_us: u64) {
        self.0.lock().unwrap().push(floor_us);
    }
}

#[test]
fn the_policy_is_told_the_new_floor_when_the_candidate_is_reseated() {
    let told = Arc::new(Mutex::new(Vec::new()));
    let sink = told.clone();
    let sel = Selector::new(
        vec![Box::new(CopaConfig::default()) as Box<dyn DynAlgorithmConfig>],
        Arc::new(move |_: &FlowContext<'_>| Box::new(Told(sink.clone())) as _),
    )
    .with_path_change(Some(PathChangeConfig::default()));
    let (_, log) = run(sel, 20, 20_000_000, 20, 1.0, longer_path());
    let changes = path_changes(&log);
    assert_eq!(changes.len(), 1, "{changes:?}");
    assert_eq!(*told.lock().unwrap(), vec![changes[0].1]);
}

#[test]
fn fixed_paths_with_standing_queues_never_fire() {
    for (start, buffer_bdp, rtt_ms, bps) in [
        (0, 1.0, 20, 20_000_000),
        (0, 4.0, 100, 10_000_000),
        (1, 1.0, 20, 20_000_000),
        (1, 4.0, 50, 50_000_000),
        (1, 8.0, 10, 5_000_000),
    ] {
        let (_, log) = run(on(start, true), 30, bps, rtt_ms, buffer_bdp, Vec::new());
        assert!(
            path_changes(&log).is_empty(),
            "candidate {start}, {buffer_bdp} BDP, {rtt_ms} ms, {bps} bit/s: {:?}",
            path_changes(&log)
        );
    }
}
