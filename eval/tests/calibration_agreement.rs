//! The simulator against the kernel runs it is calibrated on (`eval/kernel-runs/`,
//! `docs/calibration/loss-and-recovery.md`, "third pass"): `calibrate-tcp` through the
//! simulator, compared cell by cell with the kernel's rows by `ccp-eval agree`'s rule
//! (utilization within 5 %, p95 srtt within 10 %, means over seeds 1 and 2). The simulator is
//! deterministic, so the counts are exact: a change to the simulator or to the algorithms that
//! takes a cell out of bounds fails here, with the cells that miss.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used)]

use std::path::Path;

use ccp_eval::agree;
use ccp_eval::runner::{self, RunOptions};
use ccp_eval::scenario::Scenario;

fn manifest() -> &'static Path {
    Path::new(env!("CARGO_MANIFEST_DIR"))
}

#[test]
fn the_simulator_stays_within_bounds_of_the_kernel_in_70_of_80_cells_and_10_of_16_of_its_bbr() {
    let s = Scenario::load(&manifest().join("scenarios/calibrate-tcp.toml"))
        .expect("calibrate-tcp.toml");
    let opts = RunOptions {
        jobs: 2,
        ..RunOptions::default()
    };
    let plan = runner::plan(&s, &opts).unwrap();
    assert_eq!(plan.len(), 160, "16 conditions x 5 schemes x 2 seeds");
    let out = runner::run(&s, &plan, &opts);
    assert_eq!(out.failed, 0);
    let kernel = agree::read_dirs(&[
        manifest().join("kernel-runs/ctcp-kernel-s1"),
        manifest().join("kernel-runs/ctcp-kernel-s2"),
    ])
    .expect("the kernel runs' results.csv");
    let cells = agree::cells(&out.rows, &kernel);
    assert_eq!(cells.len(), 80, "every cell has both sides");
    let both = |c: &&agree::Cell| c.util_ok() && c.rtt_ok();
    let lossy = cells.iter().filter(|c| c.loss > 0.0).filter(both).count();
    let clean = cells.iter().filter(|c| c.loss == 0.0).filter(both).count();
    let misses = outside_bounds(&cells);
    // docs/calibration/loss-and-recovery.md, third pass: 36 loss-free and 36 lossy cells
    // within both bounds;
    // since SACK compression ("SACK compression", 2026-11-29): 36 and 34 (two lossy CCP Reno
    // cells left the utilization bound by under a point, -5.6 and -5.8 %, a loss-free CCP BBR
    // cell the p95 bound, +10.5 %, and a loss-free native-reno cell came in, +29.6 -> +1.6 %).
    assert!(
        clean >= 36 && lossy >= 34,
        "within both bounds: {clean}/40 loss-free, {lossy}/40 lossy; misses:\n{}",
        misses.join("\n")
    );

    // The kernel's own BBR (`native-bbr`, tcp_bbr) against our CCP BBR in the simulator
    // (docs/calibration.md, "the kernel's own BBR").
    let native = agree::read_dirs(&[
        manifest().join("kernel-runs/ctcp-kbbr-s1"),
        manifest().join("kernel-runs/ctcp-kbbr-s2"),
    ])
    .expect("the kernel BBR runs' results.csv");
    let mut sim = out.rows.clone();
    agree::pair(&mut sim, "native-bbr", "bbr");
    let cells: Vec<agree::Cell> = agree::cells(&sim, &native)
        .into_iter()
        .filter(|c| c.scheme == "native-bbr")
        .collect();
    assert_eq!(cells.len(), 16, "every native-bbr cell has both sides");
    let within = cells.iter().filter(both).count();
    let misses = outside_bounds(&cells);
    assert!(
        within >= NATIVE_BBR_WITHIN,
        "native-bbr within both bounds: {within}/16; misses:\n{}",
        misses.join("\n")
    );
}

/// The cells outside either bound, one line each.
fn outside_bounds(cells: &[agree::Cell]) -> Vec<String> {
    cells
        .iter()
        .filter(|c| !(c.util_ok() && c.rtt_ok()))
        .map(|c| {
            format!(
                "{} {}: utilization {:+.1} %, p95 srtt {:+.1} %",
                c.condition,
                c.scheme,
                100.0 * c.util_gap(),
                100.0 * c.rtt_gap()
            )
        })
        .collect()
}

/// Cells of the kernel's own BBR within both bounds of our CCP BBR in the simulator.
const NATIVE_BBR_WITHIN: usize = 10;
