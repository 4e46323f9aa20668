//! The runner end to end on the built-in `quick` scenario (shortened): determinism byte for
//! byte, sharding, and bad input.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use ccp_eval::results::{self, FlowRow};
use ccp_eval::runner::{self, RunOptions};
use ccp_eval::scenario::Scenario;

fn quick(duration_s: f64) -> Scenario {
    let mut s = ccp_eval::builtin::scenario("quick").unwrap().unwrap();
    s.duration_s = duration_s;
    s
}

fn run_csv(s: &Scenario, opts: &RunOptions) -> (Vec<FlowRow>, Vec<u8>) {
    let plan = runner::plan(s, opts).unwrap();
    let out = runner::run(s, &plan, opts);
    assert_eq!(
        out.failed,
        0,
        "{:?}",
        out.rows.iter().map(|r| &r.status).collect::<Vec<_>>()
    );
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("results.csv");
    results::write_csv(&p, &out.rows).unwrap();
    (out.rows, std::fs::read(&p).unwrap())
}

#[test]
fn same_scenario_twice_gives_identical_results_csv() {
    let s = quick(4.0);
    let opts = RunOptions {
        jobs: 2,
        ..RunOptions::default()
    };
    let (rows, a) = run_csv(&s, &opts);
    let (_, b) = run_csv(&s, &opts);
    assert_eq!(a, b, "results.csv must not depend on thread scheduling");
    let schemes: std::collections::BTreeSet<_> = rows.iter().map(|r| r.scheme.clone()).collect();
    assert_eq!(
        schemes.len(),
        ccp_eval::schemes::defaults().len(),
        "every scheme runs"
    );
    assert_eq!(rows.len(), s.conditions.len() * schemes.len());
    for r in &rows {
        assert!(r.throughput_mbps > 0.0 && r.utilization <= 1.01, "{r:?}");
        assert!(
            r.mean_rtt_ms >= r.rtt_ms * 0.99,
            "RTT below the base RTT: {r:?}"
        );
    }
}

#[test]
fn shards_partition_the_plan() {
    let s = quick(2.0);
    let all = RunOptions {
        jobs: 1,
        ..RunOptions::default()
    };
    let (full, _) = run_csv(&s, &all);
    let mut merged = Vec::new();
    for k in 0..3 {
        let (rows, _) = run_csv(
            &s,
            &RunOptions {
                shard: Some((k, 3)),
                ..all.clone()
            },
        );
        merged.extend(rows);
    }
    let key = |r: &FlowRow| (r.condition.clone(), r.scheme.clone(), r.seed, r.flow);
    merged.sort_by_key(key);
    let mut full_sorted = full.clone();
    full_sorted.sort_by_key(key);
    assert_eq!(merged, full_sorted);
}

#[test]
fn unknown_schemes_and_bad_shards_are_refused() {
    let s = quick(1.0);
    let e = runner::plan(
        &s,
        &RunOptions {
            schemes: Some(vec!["warp-drive".into()]),
            ..RunOptions::default()
        },
    );
    assert!(e.unwrap_err().to_string().contains("warp-drive"));
    let e = runner::plan(
        &s,
        &RunOptions {
            shard: Some((3, 3)),
            ..RunOptions::default()
        },
    );
    assert!(e.is_err());
}
