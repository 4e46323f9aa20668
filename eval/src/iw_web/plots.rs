//! SVG plots of the `iw-web` report: polylines on linear or log axes, written with the report's
//! SVG writer (`report::svg`) in its compact style; no `NaN` or infinity reaches the
//! file: non-finite points are skipped.

use super::{IwWebResult, Policy};
use crate::report::svg::{Axis, Panel, Style, Svg, fmt_tick};

const COLORS: [&str; 6] = [
    "#7f7f7f", "#d62728", "#ff7f0e", "#1f77b4", "#9467bd", "#2ca02c",
];

fn color(p: Policy) -> &'static str {
    let i = Policy::ALL.iter().position(|q| *q == p).unwrap_or(0);
    COLORS[i % COLORS.len()]
}

/// The axis from `min` to `max` as given (a log axis from `10^min` to `10^max`).
fn axis(min: f64, max: f64, log: bool) -> Axis {
    let (min, max) = if log {
        (10f64.powf(min), 10f64.powf(max))
    } else {
        (min, max)
    };
    Axis {
        min,
        max,
        log,
        integer: false,
    }
}

/// Frame, grid and labels; `xt`/`yt` are (value, label) ticks; the y label sits above the
/// panel.
fn axes(doc: &mut Svg, p: &Panel, xt: &[(f64, String)], yt: &[(f64, String)], xl: &str, yl: &str) {
    doc.rect((p.left, p.top), (p.width, p.height), "none", "#333");
    for (v, l) in xt {
        if let Some((x, _)) = p.map(*v, p.y.min) {
            doc.line((x, p.top), (x, p.top + p.height), "#e5e5e5", 1.0);
            doc.text(x, p.top + p.height + 15.0, l, 11.0, "middle", "");
        }
    }
    for (v, l) in yt {
        if let Some((_, y)) = p.map(p.x.min, *v) {
            doc.line((p.left, y), (p.left + p.width, y), "#e5e5e5", 1.0);
            doc.text(p.left - 6.0, y + 4.0, l, 11.0, "end", "");
        }
    }
    doc.text(
        p.left + p.width / 2.0,
        p.top + p.height + 32.0,
        xl,
        12.0,
        "middle",
        "",
    );
    doc.text(p.left + 4.0, p.top - 6.0, yl, 12.0, "start", "");
}

/// Width of every plotted line, px.
const LINE_WIDTH: f64 = 1.8;

/// A line sample and a label per entry, one per line from (x, y).
fn legend(doc: &mut Svg, x: f64, y: f64, entries: &[(String, &str, &str)]) {
    for (i, (label, col, dash)) in entries.iter().enumerate() {
        let yy = y + 16.0 * i as f64;
        doc.polyline(
            &[(x, yy - 4.0), (x + 24.0, yy - 4.0)],
            col,
            LINE_WIDTH,
            Some(dash),
        );
        doc.text(x + 30.0, yy, label, 11.0, "start", "");
    }
}

fn linear_ticks(max: f64, n: usize) -> Vec<(f64, String)> {
    let raw = max / n as f64;
    let mag = 10f64.powf(raw.log10().floor());
    let step = [1.0, 2.0, 5.0, 10.0]
        .iter()
        .map(|m| m * mag)
        .find(|s| *s >= raw)
        .unwrap_or(mag * 10.0);
    (0..=n * 2)
        .map(|k| k as f64 * step)
        .take_while(|v| *v <= max + 1e-9)
        .map(|v| (v, fmt_tick(v)))
        .collect()
}

fn dash(p: Policy) -> &'static str {
    match p {
        Policy::RlNoGrouping => "2 3",
        Policy::Optimal => "7 4",
        _ => "none",
    }
}

/// IW in force over time for a few subnets: TCP-RL, TCP-RL w/o grouping and Optimal.
pub fn iw_over_time(res: &IwWebResult) -> String {
    let shown = super::report::shown_subnets(res);
    let (width, panel_h) = (820.0, 170.0);
    let height = 70.0 + panel_h * shown.len() as f64 + 40.0;
    let mut doc = Svg::with_style(
        width,
        height,
        "IW chosen over time (per subnet)",
        Style::COMPACT,
    );
    let hours = res.config.duration_us as f64 / 3.6e9;
    let bin_h = res.config.bin_us as f64 / 3.6e9;
    for (row, &k) in shown.iter().enumerate() {
        let ymax = res
            .iw_timeline
            .iter()
            .flat_map(|(_, tl)| tl.get(k).into_iter().flatten())
            .fold(20.0_f64, |m, &v| m.max(f64::from(v)))
            * 1.05;
        let panel = Panel {
            left: 70.0,
            top: 60.0 + panel_h * row as f64,
            width: 560.0,
            height: panel_h - 50.0,
            x: axis(0.0, hours, false),
            y: axis(0.0, ymax, false),
        };
        let sub = &res.subnets[k];
        let label = format!(
            "{} ({}{}, {:.0} Mbit/s, RTT {:.0} ms, buffer {} pkts)",
            sub.name,
            sub.class,
            if sub.light { ", light" } else { "" },
            sub.base_rate_bps / 1e6,
            2.0 * sub.base_delay_us / 1e3,
            sub.buffer_pkts
        );
        axes(
            &mut doc,
            &panel,
            &linear_ticks(hours, 8),
            &linear_ticks(ymax, 4),
            if row + 1 == shown.len() {
                "virtual time, h"
            } else {
                ""
            },
            &format!("IW, packets: {label}"),
        );
        for (pol, tl) in &res.iw_timeline {
            let Some(series) = tl.get(k) else { continue };
            let mut pts = Vec::new();
            for (b, &iw) in series.iter().enumerate() {
                let y = f64::from(iw);
                pts.extend(panel.map(b as f64 * bin_h, y));
                pts.extend(panel.map((b as f64 + 1.0) * bin_h, y));
            }
            doc.polyline(&pts, color(*pol), LINE_WIDTH, Some(dash(*pol)));
        }
    }
    let entries: Vec<(String, &str, &str)> = res
        .iw_timeline
        .iter()
        .map(|(p, _)| (p.name().to_string(), color(*p), dash(*p)))
        .collect();
    legend(&mut doc, 650.0, 80.0, &entries);
    doc.finish()
}

/// CDF of response times per policy (log x).
pub fn response_cdf(res: &IwWebResult) -> String {
    let mut d = Svg::with_style(
        820.0,
        480.0,
        "Response time CDF (all flows)",
        Style::COMPACT,
    );
    let mut all: Vec<(Policy, Vec<f64>)> = Vec::new();
    let (mut lo, mut hi) = (f64::INFINITY, 0.0_f64);
    for (p, runs) in &res.runs {
        let mut v: Vec<f64> = runs
            .iter()
            .map(|r| r.outcome.response_us as f64 / 1e3)
            .collect();
        v.sort_by(f64::total_cmp);
        if let (Some(a), Some(b)) = (v.first(), v.last()) {
            lo = lo.min(*a);
            hi = hi.max(*b);
        }
        all.push((*p, v));
    }
    let (lo, hi) = if lo.is_finite() && hi > lo {
        (lo.max(1.0).log10().floor(), hi.log10().ceil())
    } else {
        (0.0, 1.0)
    };
    let p = Panel {
        left: 70.0,
        top: 50.0,
        width: 560.0,
        height: 360.0,
        x: axis(lo, hi.max(lo + 1.0), true),
        y: axis(0.0, 1.0, false),
    };
    let xt: Vec<(f64, String)> = (lo as i32..=hi as i32)
        .map(|e| (10f64.powi(e), format!("{}", 10f64.powi(e))))
        .collect();
    let yt: Vec<(f64, String)> = (0..=5)
        .map(|k| (f64::from(k) * 0.2, format!("{:.1}", f64::from(k) * 0.2)))
        .collect();
    axes(
        &mut d,
        &p,
        &xt,
        &yt,
        "response time, ms (log)",
        "fraction of flows",
    );
    for (pol, v) in &all {
        let n = v.len();
        let step = (n / 400).max(1);
        let pts: Vec<(f64, f64)> = v
            .iter()
            .enumerate()
            .filter(|(i, _)| i % step == 0 || *i + 1 == n)
            .filter_map(|(i, &x)| p.map(x.max(1e-3), (i + 1) as f64 / n as f64))
            .collect();
        d.polyline(&pts, color(*pol), LINE_WIDTH, Some("none"));
    }
    let entries: Vec<(String, &str, &str)> = Policy::ALL
        .iter()
        .map(|p| (p.name().to_string(), color(*p), "none"))
        .collect();
    legend(&mut d, 650.0, 80.0, &entries);
    d.finish()
}
