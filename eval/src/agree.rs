//! `ccp-eval agree`: how well a simulator run agrees with a kernel-testbed run of the same
//! scenario (`docs/calibration.md`).
//!
//! A *cell* is one (condition, scheme) present in both runs with at least one `ok` main flow on
//! each side; its metrics are the means over the seeds of each side. A cell agrees on
//! utilization when `|sim - kernel| <= 5 %` of the kernel's, and on RTT when the 95th
//! percentile of the smoothed RTT (`p95_srtt_ms`: srtt every 10 ms on both sides) is within
//! 10 % of the kernel's. Kernel results written before the `p95_srtt_ms` column existed read it
//! from `p95_rtt_ms`, which on the kernel is the same srtt series.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::PathBuf;

use crate::results::{FlowRow, ResultsError, read_rows};

/// Utilization bound: relative difference.
pub const UTIL_BOUND: f64 = 0.05;
/// p95 smoothed-RTT bound: relative difference.
pub const RTT_BOUND: f64 = 0.10;

/// One side's means of a cell.
#[derive(Debug, Clone, Copy, Default, PartialEq)]
pub struct Side {
    /// Mean utilization.
    pub utilization: f64,
    /// Mean p95 smoothed RTT, ms.
    pub p95_srtt_ms: f64,
    /// Mean loss rate.
    pub loss_rate: f64,
    /// Runs averaged.
    pub runs: usize,
}

/// One (condition, scheme) on both sides.
#[derive(Debug, Clone, PartialEq)]
pub struct Cell {
    /// Condition id.
    pub condition: String,
    /// Scheme.
    pub scheme: String,
    /// Random loss of the condition.
    pub loss: f64,
    /// The simulator's means.
    pub sim: Side,
    /// The kernel's means.
    pub kernel: Side,
}

impl Cell {
    /// Relative utilization gap, sim against kernel.
    pub fn util_gap(&self) -> f64 {
        rel(self.sim.utilization, self.kernel.utilization)
    }

    /// Relative p95 smoothed-RTT gap.
    pub fn rtt_gap(&self) -> f64 {
        rel(self.sim.p95_srtt_ms, self.kernel.p95_srtt_ms)
    }

    /// Utilization within [`UTIL_BOUND`].
    pub fn util_ok(&self) -> bool {
        self.util_gap().abs() <= UTIL_BOUND
    }

    /// p95 smoothed RTT within [`RTT_BOUND`].
    pub fn rtt_ok(&self) -> bool {
        self.rtt_gap().abs() <= RTT_BOUND
    }
}

fn rel(a: f64, b: f64) -> f64 {
    if b > 0.0 {
        (a - b) / b
    } else if a == 0.0 {
        0.0
    } else {
        f64::INFINITY
    }
}

/// Means per (condition, scheme) of the `ok` main flows of `rows`.
fn sides(rows: &[FlowRow], kernel: bool) -> BTreeMap<(String, String), (f64, Side)> {
    let mut acc: BTreeMap<(String, String), (f64, Side)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.status == "ok" && r.role == "main") {
        let srtt = if kernel && r.p95_srtt_ms == 0.0 {
            r.p95_rtt_ms
        } else {
            r.p95_srtt_ms
        };
        let e = acc
            .entry((r.condition.clone(), r.scheme.clone()))
            .or_insert((r.loss, Side::default()));
        e.1.utilization += r.utilization;
        e.1.p95_srtt_ms += srtt;
        e.1.loss_rate += r.loss_rate;
        e.1.runs += 1;
    }
    for (_, s) in acc.values_mut() {
        let n = s.runs as f64;
        s.utilization /= n;
        s.p95_srtt_ms /= n;
        s.loss_rate /= n;
    }
    acc
}

/// The cells of a simulator run's rows against a kernel run's, in condition then scheme order.
pub fn cells(sim: &[FlowRow], kernel: &[FlowRow]) -> Vec<Cell> {
    let s = sides(sim, false);
    let k = sides(kernel, true);
    s.into_iter()
        .filter_map(|((condition, scheme), (loss, sim))| {
            let (_, kernel) = *k.get(&(condition.clone(), scheme.clone()))?;
            Some(Cell {
                condition,
                scheme,
                loss,
                sim,
                kernel,
            })
        })
        .collect()
}

/// Pairs a kernel scheme with a simulator scheme of another name (the kernel's own BBR,
/// `native-bbr`, has no built-in twin in the simulator; its pair is our CCP `bbr`): the
/// simulator's `sim_scheme` rows are added again under `kernel_scheme`, so the cell of
/// `kernel_scheme` compares the two.
pub fn pair(sim: &mut Vec<FlowRow>, kernel_scheme: &str, sim_scheme: &str) {
    let copies: Vec<FlowRow> = sim
        .iter()
        .filter(|r| r.scheme == sim_scheme)
        .map(|r| FlowRow {
            scheme: kernel_scheme.to_string(),
            ..r.clone()
        })
        .collect();
    sim.extend(copies);
}

/// Parses `KERNEL=SIM` (the `--pair` of `ccp-eval agree`).
pub fn parse_pair(s: &str) -> Result<(String, String), String> {
    match s.split_once('=') {
        Some((k, v)) if !k.trim().is_empty() && !v.trim().is_empty() => {
            Ok((k.trim().to_string(), v.trim().to_string()))
        }
        _ => Err(format!("--pair wants KERNEL_SCHEME=SIM_SCHEME, got {s:?}")),
    }
}

/// Reads `results.csv` of every directory.
pub fn read_dirs(dirs: &[PathBuf]) -> Result<Vec<FlowRow>, ResultsError> {
    let mut rows = Vec::new();
    for d in dirs {
        rows.extend(read_rows(&d.join("results.csv"))?);
    }
    Ok(rows)
}

fn pct(x: f64) -> String {
    if x.is_finite() {
        format!("{:+.1} %", 100.0 * x)
    } else {
        "n/a".into()
    }
}

/// A selection of cells.
type Sel = Box<dyn Fn(&Cell) -> bool>;

/// The agreement table and its counts, as markdown.
pub fn markdown(cells: &[Cell]) -> String {
    let mut out = String::new();
    let _ = writeln!(
        out,
        "| condition | scheme | utilization sim / kernel | gap | p95 srtt sim / kernel, ms | gap | loss sim / kernel | within |"
    );
    let _ = writeln!(out, "|---|---|---|---|---|---|---|---|");
    for c in cells {
        let within = match (c.util_ok(), c.rtt_ok()) {
            (true, true) => "both",
            (true, false) => "util",
            (false, true) => "rtt",
            (false, false) => "neither",
        };
        let _ = writeln!(
            out,
            "| {} | {} | {:.3} / {:.3} | {} | {:.1} / {:.1} | {} | {:.2} / {:.2} % | {} |",
            c.condition,
            c.scheme,
            c.sim.utilization,
            c.kernel.utilization,
            pct(c.util_gap()),
            c.sim.p95_srtt_ms,
            c.kernel.p95_srtt_ms,
            pct(c.rtt_gap()),
            100.0 * c.sim.loss_rate,
            100.0 * c.kernel.loss_rate,
            within
        );
    }
    let _ = writeln!(out);
    let count = |f: &dyn Fn(&Cell) -> bool, sel: &dyn Fn(&Cell) -> bool| {
        let n = cells.iter().filter(|c| sel(c)).count();
        let k = cells.iter().filter(|c| sel(c) && f(c)).count();
        format!("{k}/{n}")
    };
    let _ = writeln!(
        out,
        "| cells | utilization within {:.0} % | p95 srtt within {:.0} % | both |",
        100.0 * UTIL_BOUND,
        100.0 * RTT_BOUND
    );
    let _ = writeln!(out, "|---|---|---|---|");
    let mut groups: Vec<(String, Sel)> = vec![
        ("loss-free".into(), Box::new(|c: &Cell| c.loss == 0.0)),
        ("lossy".into(), Box::new(|c: &Cell| c.loss > 0.0)),
        ("all".into(), Box::new(|_: &Cell| true)),
    ];
    let mut schemes: Vec<&str> = cells.iter().map(|c| c.scheme.as_str()).collect();
    schemes.sort_unstable();
    schemes.dedup();
    for s in schemes {
        let name = s.to_string();
        groups.push((format!("`{s}`"), Box::new(move |c: &Cell| c.scheme == name)));
    }
    for (name, sel) in &groups {
        let _ = writeln!(
            out,
            "| {name} | {} | {} | {} |",
            count(&|c| c.util_ok(), sel.as_ref()),
            count(&|c| c.rtt_ok(), sel.as_ref()),
            count(&|c| c.util_ok() && c.rtt_ok(), sel.as_ref()),
        );
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_pair_compares_a_kernel_scheme_with_a_simulator_scheme_of_another_name() {
        let mut sim = vec![row("c", "bbr", 0.0, 0.90, 30.0, 30.0)];
        let kernel = vec![
            row("c", "native-bbr", 0.0, 0.93, 31.0, 31.0),
            row("c", "bbr", 0.0, 0.91, 30.0, 30.0),
        ];
        assert_eq!(cells(&sim, &kernel).len(), 1);
        pair(&mut sim, "native-bbr", "bbr");
        let c = cells(&sim, &kernel);
        assert_eq!(c.len(), 2);
        let native = c.iter().find(|c| c.scheme == "native-bbr").unwrap();
        assert!((native.sim.utilization - 0.90).abs() < 1e-12);
        assert!((native.kernel.utilization - 0.93).abs() < 1e-12);
        assert_eq!(
            parse_pair("native-bbr=bbr"),
            Ok(("native-bbr".into(), "bbr".into()))
        );
        assert!(parse_pair("bbr").is_err());
        assert!(parse_pair("=bbr").is_err());
    }

    fn row(cond: &str, scheme: &str, loss: f64, util: f64, srtt: f64, rtt: f64) -> FlowRow {
        FlowRow {
            scenario: "s".into(),
            env: "e".into(),
            condition: cond.into(),
            bw_mbps: 10.0,
            rtt_ms: 20.0,
            loss,
            buffer_bytes: 1,
            scheme: scheme.into(),
            seed: 1,
            flow: 0,
            role: "main".into(),
            flow_scheme: scheme.into(),
            size_bytes: None,
            start_s: 0.0,
            throughput_mbps: 0.0,
            utilization: util,
            mean_rtt_ms: 0.0,
            p95_rtt_ms: rtt,
            p95_srtt_ms: srtt,
            mean_qdelay_ms: 0.0,
            p95_qdelay_ms: 0.0,
            loss_rate: 0.0,
            fct_s: None,
            reward: 0.0,
            power: 0.0,
            jain: 1.0,
            retransmits: 0,
            timeouts: 0,
            fallback_s: 0.0,
            takeovers: 0,
            objective: "reward".into(),
            score: None,
            status: "ok".into(),
        }
    }

    #[test]
    fn cells_average_seeds_and_apply_the_bounds() {
        let sim = vec![
            row("a", "reno", 0.0, 0.90, 40.0, 99.0),
            row("a", "reno", 0.0, 0.94, 44.0, 99.0),
            row("b", "reno", 0.01, 0.50, 30.0, 99.0),
            row("c", "reno", 0.0, 0.5, 30.0, 99.0),
        ];
        // Kernel rows from before the srtt column: p95_rtt_ms is the srtt there.
        let kernel = vec![
            row("a", "reno", 0.0, 0.95, 0.0, 40.0),
            row("b", "reno", 0.01, 0.40, 0.0, 30.0),
        ];
        let c = cells(&sim, &kernel);
        assert_eq!(c.len(), 2, "c has no kernel side");
        assert!((c[0].sim.utilization - 0.92).abs() < 1e-12);
        assert!(c[0].util_ok(), "0.92 vs 0.95 is -3.2 %");
        assert!(c[0].rtt_ok(), "42 vs 40 ms is +5 %");
        assert!(!c[1].util_ok(), "0.50 vs 0.40 is +25 %");
        let md = markdown(&c);
        assert!(md.contains("| loss-free | 1/1 | 1/1 | 1/1 |"), "{md}");
        assert!(md.contains("| lossy | 0/1 | 1/1 | 0/1 |"), "{md}");
    }
}
