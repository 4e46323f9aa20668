//! The `properties` scenario (`eval/scenarios/properties.toml`): its grid, and a shortened
//! run of two of its conditions through the runner whose rows show the defining properties
//! the table in `docs/algorithms.md` is made from (the finer checks, per algorithm, are in
//! `algorithms/tests/defining_properties.rs`).

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

use ccp_eval::results::FlowRow;
use ccp_eval::runner::{self, RunOptions};
use ccp_eval::scenario::Scenario;

fn scenario() -> Scenario {
    Scenario::load(&Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios/properties.toml"))
        .expect("properties.toml")
}

#[test]
fn the_grid_covers_three_rates_three_rtts_and_buffers_from_0_2_to_8_bdp() {
    let s = scenario();
    assert_eq!(s.conditions.len(), 36);
    let plan = runner::plan(&s, &RunOptions::default()).unwrap();
    assert_eq!(plan.len(), 36 * 9, "every algorithm on every condition");
    for id in ["bw10-rtt20-loss0-buf0.2bdp", "bw100-rtt100-loss0-buf8bdp"] {
        assert!(s.conditions.iter().any(|c| c.id == id), "{id}");
    }
}

fn row<'a>(rows: &'a [FlowRow], condition: &str, scheme: &str) -> &'a FlowRow {
    rows.iter()
        .find(|r| r.condition == condition && r.scheme == scheme && r.role == "main")
        .unwrap_or_else(|| panic!("no row for {scheme} on {condition}"))
}

#[test]
fn a_short_run_shows_the_delay_properties_and_the_buffer_fillers() {
    let mut s = scenario();
    s.duration_s = 12.0;
    let deep = "bw10-rtt20-loss0-buf4bdp";
    let one = "bw10-rtt50-loss0-buf1bdp";
    s.conditions.retain(|c| c.id == deep || c.id == one);
    assert_eq!(s.conditions.len(), 2);
    let opts = RunOptions {
        jobs: 2,
        schemes: Some(
            ["reno", "cubic", "bbr", "copa", "vegas"]
                .map(String::from)
                .to_vec(),
        ),
        ..RunOptions::default()
    };
    let plan = runner::plan(&s, &opts).unwrap();
    let out = runner::run(&s, &plan, &opts);
    assert_eq!(out.failed, 0);
    // One packet's time on the wire at 10 Mbit/s, ms (1514-byte frames).
    let pkt_ms = 1514.0 * 8.0 / 10e6 * 1e3;
    for cond in [deep, one] {
        let r = row(&out.rows, cond, "copa");
        // Copa: a standing queue of ~1/delta = 2 packets (slow start included in the mean).
        assert!(
            r.mean_qdelay_ms < 8.0 * pkt_ms,
            "copa on {cond}: mean queueing delay {:.2} ms",
            r.mean_qdelay_ms
        );
        let r = row(&out.rows, cond, "vegas");
        // Vegas: alpha..beta = 2..4 packets (plus the packet's own transmission).
        assert!(
            (1.5 * pkt_ms..=6.0 * pkt_ms).contains(&r.mean_qdelay_ms),
            "vegas on {cond}: mean queueing delay {:.2} ms",
            r.mean_qdelay_ms
        );
        for alg in ["reno", "cubic"] {
            let r = row(&out.rows, cond, alg);
            let buffer_ms = r.buffer_bytes as f64 * 8.0 / (r.bw_mbps * 1e6) * 1e3;
            assert!(
                r.p95_qdelay_ms > 0.7 * buffer_ms,
                "{alg} on {cond}: p95 queueing delay {:.1} ms, buffer {buffer_ms:.1} ms",
                r.p95_qdelay_ms
            );
        }
        let r = row(&out.rows, cond, "bbr");
        // BBR: about one BDP in flight, so well under a BDP of queue on average.
        assert!(
            r.mean_rtt_ms < 2.0 * r.rtt_ms,
            "bbr on {cond}: mean RTT {:.1} ms",
            r.mean_rtt_ms
        );
    }
    // On the 4-BDP buffer Copa loses nothing (its slow start overshoots into the buffer only).
    assert!(row(&out.rows, deep, "copa").loss_rate < 1e-3);
}
