//! The report's plots, rendered to SVG strings (written to `plots/` by the caller).

use std::collections::{BTreeMap, BTreeSet, HashSet};

use super::aggregate::{RunPoint, Summary, run_points};
use super::svg::{Axis, Panel, Svg, color, fmt_pct_tick, fmt_tick};
use crate::results::{FlowRow, SeriesRow};

const W: f64 = 780.0;
const H: f64 = 470.0;
const LEFT: f64 = 80.0;
const TOP: f64 = 45.0;
const PW: f64 = 500.0;
const PH: f64 = 340.0;
const LEGEND_X: f64 = LEFT + PW + 25.0;

/// Most points drawn per series line; longer series are thinned evenly.
const MAX_LINE_POINTS: usize = 1500;

/// One rendered plot.
#[derive(Debug, Clone)]
pub(crate) struct Plot {
    /// What it shows (environment or condition label).
    pub(crate) label: String,
    /// Path relative to the report directory (`plots/...`).
    pub(crate) file: String,
    /// The SVG document.
    pub(crate) svg: String,
    /// A caption for `report.md`.
    pub(crate) caption: String,
}

/// All plots of a report.
#[derive(Debug, Clone)]
pub(crate) struct Plots {
    pub(crate) tput_delay: Vec<Plot>,
    pub(crate) best_share: Plot,
    pub(crate) rank_cdf: Plot,
    pub(crate) reward_loss_cdf: Plot,
    /// Headroom captured per condition (reports with selectors and single CCAs).
    pub(crate) headroom_cdf: Option<Plot>,
    pub(crate) series: Vec<Plot>,
}

impl Plots {
    /// Every plot, for writing.
    pub(crate) fn all(&self) -> impl Iterator<Item = &Plot> {
        self.tput_delay
            .iter()
            .chain([&self.best_share, &self.rank_cdf, &self.reward_loss_cdf])
            .chain(self.headroom_cdf.iter())
            .chain(self.series.iter())
    }
}

/// Scheme colours, fixed by the sorted scheme list (series-only schemes after it).
struct Colors(BTreeMap<String, &'static str>);

impl Colors {
    fn new(summary: &Summary, series: &[SeriesRow]) -> Self {
        let mut names: Vec<String> = summary.schemes.clone();
        let extra: BTreeSet<&str> = series
            .iter()
            .map(|s| s.scheme.as_str())
            .filter(|s| !summary.schemes.iter().any(|x| x == s))
            .collect();
        names.extend(extra.into_iter().map(str::to_string));
        Self(
            names
                .into_iter()
                .enumerate()
                .map(|(i, n)| (n, color(i)))
                .collect(),
        )
    }

    fn get(&self, scheme: &str) -> &'static str {
        self.0.get(scheme).copied().unwrap_or("#444444")
    }
}

/// A file-name-safe form of a label.
pub(crate) fn sanitize(s: &str) -> String {
    let out: String = s
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    if out.is_empty() { "_".to_string() } else { out }
}

/// Unique file names: a second use of a name gets a numeric suffix.
#[derive(Default)]
struct Names(HashSet<String>);

impl Names {
    fn take(&mut self, stem: &str) -> String {
        let mut name = format!("plots/{stem}.svg");
        let mut k = 2;
        while !self.0.insert(name.clone()) {
            name = format!("plots/{stem}-{k}.svg");
            k += 1;
        }
        name
    }
}

/// Renders every plot.
pub(crate) fn render(summary: &Summary, rows: &[FlowRow], series: &[SeriesRow]) -> Plots {
    let colors = Colors::new(summary, series);
    let mut names = Names::default();
    let runs = run_points(rows);
    let tput_delay = summary
        .envs
        .iter()
        .map(|t| {
            let env_runs: Vec<&RunPoint> = runs.iter().filter(|r| r.env == t.env).collect();
            let means: Vec<(String, f64, f64)> = t
                .schemes
                .iter()
                .filter_map(|s| Some((s.scheme.clone(), s.p95_rtt_ms?, s.throughput_mbps?)))
                .collect();
            let (svg, log_x) = tput_vs_delay(&t.env, &means, &env_runs, &colors);
            Plot {
                label: t.env.clone(),
                file: names.take(&format!("tput_vs_delay_{}", sanitize(&t.env))),
                svg,
                caption: format!(
                    "Throughput vs. 95th-percentile RTT in environment {}: large points are each scheme's \
                     mean over its flows, faint points are single runs (mean over the run's main flows). \
                     The x axis is {} and not inverted: lower delay is to the left, so better is up and left.",
                    super::markdown::code(&t.env),
                    if log_x { "logarithmic" } else { "linear" }
                ),
            }
        })
        .collect();
    let best_share = Plot {
        label: "best share".into(),
        file: names.take("best_share"),
        svg: best_share_svg(summary, &colors),
        caption:
            "Share of conditions in which each scheme has the highest reward (TCP-RL Fig. 14); \
                  tied schemes all count as best."
                .into(),
    };
    let rank_cdf = Plot {
        label: "rank CDF".into(),
        file: names.take("rank_cdf"),
        svg: rank_cdf_svg(summary, &colors),
        caption: "CDF over conditions of each scheme's rank (1 = best; TCP-RL Fig. 15). A curve that ends \
                  below 100 % means the scheme has no reward in some conditions."
            .into(),
    };
    let (loss_svg, clipped) = reward_loss_cdf_svg(summary, &colors);
    let reward_loss_cdf = Plot {
        label: "reward loss CDF".into(),
        file: names.take("reward_loss_cdf"),
        svg: loss_svg,
        caption: format!(
            "CDF over conditions of each scheme's reward loss (R_best - R) / |R_best| (TCP-RL Fig. 16).{}",
            if clipped {
                " The x axis stops at 100 %; larger losses lie beyond its right edge."
            } else {
                ""
            }
        ),
    };
    let headroom_cdf = summary.headroom.as_ref().map(|h| {
        let (svg, clipped) = headroom_cdf_svg(h, &colors);
        Plot {
            label: "headroom captured CDF".into(),
            file: names.take("headroom_cdf"),
            svg,
            caption: format!(
                "CDF over the conditions with headroom (the best single CCA in hindsight beats \
                 the best single overall, {}, by at least {}) of each selector's share of that \
                 headroom captured, (R_sel - R_best_single) / (R_oracle - R_best_single): 0 is \
                 the best single's reward, 100 % the oracle's.{}",
                super::markdown::code(&h.best_single),
                super::headroom::MIN_HEADROOM,
                if clipped {
                    " The x axis spans -100 % to 150 %; values beyond lie at its edges (below: \
                     counted at the left edge; above: beyond the right edge)."
                } else {
                    ""
                }
            ),
        }
    });
    let series = series_plots(series, &colors, &mut names);
    Plots {
        tput_delay,
        best_share,
        rank_cdf,
        reward_loss_cdf,
        headroom_cdf,
        series,
    }
}

fn legend_entries<'a>(
    schemes: impl Iterator<Item = &'a str>,
    colors: &Colors,
) -> Vec<(String, &'static str)> {
    schemes.map(|s| (s.to_string(), colors.get(s))).collect()
}

fn tput_vs_delay(
    env: &str,
    means: &[(String, f64, f64)],
    runs: &[&RunPoint],
    colors: &Colors,
) -> (String, bool) {
    let xs: Vec<f64> = runs
        .iter()
        .map(|r| r.p95_rtt_ms)
        .chain(means.iter().map(|m| m.1))
        .collect();
    let ys: Vec<f64> = runs
        .iter()
        .map(|r| r.throughput_mbps)
        .chain(means.iter().map(|m| m.2))
        .collect();
    let pos: Vec<f64> = xs
        .iter()
        .copied()
        .filter(|v| v.is_finite() && *v > 0.0)
        .collect();
    let lo = pos.iter().copied().fold(f64::INFINITY, f64::min);
    let hi = pos.iter().copied().fold(f64::NEG_INFINITY, f64::max);
    let log_x = pos.len() == xs.len() && !pos.is_empty() && hi / lo > 20.0;
    let x = if log_x {
        Axis::fit_log(&xs)
    } else {
        Axis::fit(&xs, false)
    };
    let panel = Panel {
        left: LEFT,
        top: TOP,
        width: PW,
        height: PH,
        x,
        y: Axis::fit(&ys, true),
    };
    let mut svg = Svg::new(W, H, &format!("Throughput vs. delay ({env})"));
    svg.axes(
        &panel,
        "95th-percentile RTT (ms)",
        "Throughput (Mbit/s)",
        Some(fmt_tick),
        fmt_tick,
    );
    for r in runs {
        if let Some(p) = panel.map(r.p95_rtt_ms, r.throughput_mbps) {
            svg.circle(p, 2.5, colors.get(&r.scheme), 0.3, None);
        }
    }
    for (scheme, d, t) in means {
        if let Some(p) = panel.map(*d, *t) {
            let tip = format!("{scheme}: {t:.3} Mbit/s, p95 RTT {d:.3} ms");
            svg.circle(p, 6.5, colors.get(scheme), 0.95, Some(&tip));
            svg.text(p.0 + 9.0, p.1 - 7.0, scheme, 10.0, "start", "");
        }
    }
    if means.is_empty() && runs.is_empty() {
        svg.note(&panel, "no data");
    }
    svg.legend(
        LEGEND_X,
        TOP + 10.0,
        &legend_entries(means.iter().map(|m| m.0.as_str()), colors),
    );
    (svg.finish(), log_x)
}

fn best_share_svg(summary: &Summary, colors: &Colors) -> String {
    let n = summary.best_share.len();
    let max = summary
        .best_share
        .iter()
        .map(|b| b.share)
        .fold(0.0, f64::max);
    let y = Axis::fit(&[0.0, max.max(0.1)], true);
    let panel = Panel {
        left: LEFT,
        top: TOP,
        width: PW,
        height: PH,
        x: Axis::linear(0.0, n.max(1) as f64),
        y,
    };
    let mut svg = Svg::new(W, H, "Best-scheme share");
    svg.axes(
        &panel,
        "",
        "Share of conditions where best",
        None,
        fmt_pct_tick,
    );
    let slot = PW / n.max(1) as f64;
    for (i, b) in summary.best_share.iter().enumerate() {
        let x0 = LEFT + slot * (i as f64 + 0.15);
        if let (Some((_, ytop)), Some((_, ybase))) = (panel.map(0.0, b.share), panel.map(0.0, 0.0))
        {
            let col = colors.get(&b.scheme);
            svg.rect((x0, ytop), (slot * 0.7, ybase - ytop), col, col);
            svg.text(
                x0 + slot * 0.35,
                ytop - 4.0,
                &format!("{:.0}%", b.share * 100.0),
                10.0,
                "middle",
                "",
            );
        }
        let (lx, ly) = (x0 + slot * 0.35, TOP + PH + 14.0);
        let rot = format!(r#"transform="rotate(-30 {lx:.2} {ly:.2})""#);
        svg.text(lx, ly, &b.scheme, 11.0, "end", &rot);
    }
    if n == 0 {
        svg.note(&panel, "no data");
    }
    svg.legend(
        LEGEND_X,
        TOP + 10.0,
        &legend_entries(summary.best_share.iter().map(|b| b.scheme.as_str()), colors),
    );
    svg.finish()
}

/// Line width of the `i`-th of `n` lines: earlier lines are wider, so a line drawn over an
/// identical one leaves its edges visible.
fn stacked_width(i: usize, n: usize) -> f64 {
    1.25 + 2.5 * n.saturating_sub(1 + i) as f64 / n.saturating_sub(1).max(1) as f64
}

/// A CDF as a step line: `values` sorted ascending, `total` the denominator.
fn cdf_points(panel: &Panel, values: &[f64], total: usize) -> Vec<(f64, f64)> {
    let mut pts = Vec::new();
    let total = total.max(1) as f64;
    let mut push = |x: f64, y: f64| {
        if let Some(p) = panel.map(x, y) {
            pts.push(p);
        }
    };
    push(panel.x.min, 0.0);
    let mut share = 0.0;
    let mut start = 0;
    while start < values.len() {
        let value = values[start];
        if value > panel.x.max {
            break;
        }
        // Sorted ascending: the run of equal values ends at the first larger one.
        let end = start + values[start..].iter().take_while(|&&w| w <= value).count();
        let at = value.max(panel.x.min);
        push(at, share);
        share = end as f64 / total;
        push(at, share);
        start = end;
    }
    push(panel.x.max, share);
    pts
}

fn cdf_svg(
    title: &str,
    xlabel: &str,
    x: Axis,
    xfmt: fn(f64) -> String,
    curves: &[(String, Vec<f64>)],
    total: usize,
    colors: &Colors,
) -> String {
    let panel = Panel {
        left: LEFT,
        top: TOP,
        width: PW,
        height: PH,
        x,
        y: Axis::linear(0.0, 1.0),
    };
    let mut svg = Svg::new(W, H, title);
    svg.axes(
        &panel,
        xlabel,
        "Share of conditions",
        Some(xfmt),
        fmt_pct_tick,
    );
    for (i, (scheme, values)) in curves.iter().enumerate() {
        let pts = cdf_points(&panel, values, total);
        svg.polyline(
            &pts,
            colors.get(scheme),
            stacked_width(i, curves.len()),
            None,
        );
    }
    if total == 0 {
        svg.note(&panel, "no data");
    }
    svg.legend(
        LEGEND_X,
        TOP + 10.0,
        &legend_entries(curves.iter().map(|c| c.0.as_str()), colors),
    );
    svg.finish()
}

fn per_scheme<F: Fn(&super::aggregate::ConditionScheme) -> Option<f64>>(
    summary: &Summary,
    f: F,
) -> Vec<(String, Vec<f64>)> {
    summary
        .schemes
        .iter()
        .map(|s| {
            let mut v: Vec<f64> = summary
                .conditions
                .iter()
                .filter_map(|c| c.schemes.iter().find(|e| &e.scheme == s).and_then(&f))
                .filter(|v| v.is_finite())
                .collect();
            v.sort_by(f64::total_cmp);
            (s.clone(), v)
        })
        .collect()
}

fn rank_cdf_svg(summary: &Summary, colors: &Colors) -> String {
    let curves = per_scheme(summary, |e| Some(e.rank as f64));
    let mut x = Axis::linear(1.0, summary.schemes.len().max(2) as f64);
    x.integer = true;
    cdf_svg(
        "Rank CDF",
        "Rank (1 = best)",
        x,
        fmt_tick,
        &curves,
        summary.conditions.len(),
        colors,
    )
}

fn reward_loss_cdf_svg(summary: &Summary, colors: &Colors) -> (String, bool) {
    let curves = per_scheme(summary, |e| e.reward_loss);
    let max = curves
        .iter()
        .flat_map(|c| c.1.iter().copied())
        .fold(0.0, f64::max);
    let clipped = max > 1.0;
    let x = Axis::fit(&[0.0, max.clamp(0.01, 1.0)], true);
    let svg = cdf_svg(
        "Reward-loss CDF",
        "Reward loss (R_best - R) / |R_best|",
        x,
        fmt_pct_tick,
        &curves,
        summary.conditions.len(),
        colors,
    );
    (svg, clipped)
}

/// Lowest and highest share captured the headroom CDF shows.
const CAPTURED_RANGE: (f64, f64) = (-1.0, 1.5);

fn headroom_cdf_svg(h: &super::headroom::Headroom, colors: &Colors) -> (String, bool) {
    let with: Vec<&super::headroom::HeadroomRow> = h
        .conditions
        .iter()
        .filter(|c| c.headroom >= super::headroom::MIN_HEADROOM)
        .collect();
    let curves: Vec<(String, Vec<f64>)> = h
        .selectors
        .iter()
        .map(|s| {
            let mut v: Vec<f64> = with
                .iter()
                .filter_map(|c| c.selectors.iter().find(|e| &e.scheme == s)?.captured)
                .filter(|v| v.is_finite())
                .collect();
            v.sort_by(f64::total_cmp);
            (s.clone(), v)
        })
        .collect();
    let clipped = curves
        .iter()
        .flat_map(|c| c.1.iter())
        .any(|&v| !(CAPTURED_RANGE.0..=CAPTURED_RANGE.1).contains(&v));
    let svg = cdf_svg(
        "Headroom captured CDF",
        "Share of the headroom captured (R_sel - R_best_single) / (R_oracle - R_best_single)",
        Axis::linear(CAPTURED_RANGE.0, CAPTURED_RANGE.1),
        fmt_pct_tick,
        &curves,
        with.len(),
        colors,
    );
    (svg, clipped)
}

/// A time series point: (t, throughput, cwnd).
type Point3 = (f64, f64, f64);

/// One line of a series plot: scheme, flow, points.
type Line = (String, usize, Vec<Point3>);

fn series_plots(series: &[SeriesRow], colors: &Colors, names: &mut Names) -> Vec<Plot> {
    // (scenario, condition) -> scheme -> first seed.
    let mut first_seed: BTreeMap<(&str, &str), BTreeMap<&str, u64>> = BTreeMap::new();
    for s in series {
        let e = first_seed
            .entry((&s.scenario, &s.condition))
            .or_default()
            .entry(&s.scheme)
            .or_insert(s.seed);
        *e = (*e).min(s.seed);
    }
    let multi_scenario = first_seed
        .keys()
        .map(|k| k.0)
        .collect::<BTreeSet<_>>()
        .len()
        > 1;
    let mut out = Vec::new();
    for ((scenario, condition), seeds) in &first_seed {
        // scheme -> flow -> points (t, throughput, cwnd)
        let mut lines: BTreeMap<(&str, usize), Vec<Point3>> = BTreeMap::new();
        for s in series.iter().filter(|s| {
            s.scenario == *scenario
                && s.condition == *condition
                && seeds.get(s.scheme.as_str()) == Some(&s.seed)
        }) {
            lines.entry((&s.scheme, s.flow)).or_default().push((
                s.t_s,
                s.throughput_mbps,
                s.cwnd_pkts,
            ));
        }
        let lines: Vec<Line> = lines
            .into_iter()
            .map(|((scheme, flow), mut pts)| {
                pts.sort_by(|a, b| a.0.total_cmp(&b.0));
                let stride = pts.len().div_ceil(MAX_LINE_POINTS).max(1);
                let pts = pts.into_iter().step_by(stride).collect();
                (scheme.to_string(), flow, pts)
            })
            .collect();
        let label = if multi_scenario {
            format!("{scenario}/{condition}")
        } else {
            (*condition).to_string()
        };
        let seed_list: Vec<String> = seeds
            .iter()
            .map(|(s, seed)| format!("{}: seed {seed}", super::markdown::code(s)))
            .collect();
        out.push(Plot {
            file: names.take(&format!("series_{}", sanitize(&label.replace('/', "_")))),
            svg: series_svg(&label, &lines, seeds.keys().copied(), colors),
            caption: format!(
                "Throughput (top) and congestion window (bottom) over time in {}, first seed per scheme \
                 ({}); dashed lines are flows after the first.",
                super::markdown::code(&label),
                seed_list.join(", ")
            ),
            label,
        });
    }
    out
}

fn series_svg<'a>(
    label: &str,
    lines: &[Line],
    schemes: impl Iterator<Item = &'a str>,
    colors: &Colors,
) -> String {
    let ph = 165.0;
    let top2 = TOP + ph + 70.0;
    let ts: Vec<f64> = lines.iter().flat_map(|l| l.2.iter().map(|p| p.0)).collect();
    let tputs: Vec<f64> = lines.iter().flat_map(|l| l.2.iter().map(|p| p.1)).collect();
    let cwnds: Vec<f64> = lines.iter().flat_map(|l| l.2.iter().map(|p| p.2)).collect();
    let x = Axis::fit(&ts, false);
    let p1 = Panel {
        left: LEFT,
        top: TOP,
        width: PW,
        height: ph,
        x,
        y: Axis::fit(&tputs, true),
    };
    let p2 = Panel {
        left: LEFT,
        top: top2,
        width: PW,
        height: ph,
        x,
        y: Axis::fit(&cwnds, true),
    };
    let mut svg = Svg::new(W, top2 + ph + 60.0, &format!("Time series: {label}"));
    svg.axes(
        &p1,
        "Time (s)",
        "Throughput (Mbit/s)",
        Some(fmt_tick),
        fmt_tick,
    );
    svg.axes(&p2, "Time (s)", "cwnd (packets)", Some(fmt_tick), fmt_tick);
    for (i, (scheme, flow, pts)) in lines.iter().enumerate() {
        let width = stacked_width(i, lines.len());
        let dash = (*flow > 0).then_some("5 3");
        let a: Vec<(f64, f64)> = pts.iter().filter_map(|p| p1.map(p.0, p.1)).collect();
        let b: Vec<(f64, f64)> = pts.iter().filter_map(|p| p2.map(p.0, p.2)).collect();
        svg.polyline(&a, colors.get(scheme), width, dash);
        svg.polyline(&b, colors.get(scheme), width, dash);
    }
    svg.legend(LEGEND_X, TOP + 10.0, &legend_entries(schemes, colors));
    svg.finish()
}
