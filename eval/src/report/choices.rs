//! What the selector chose: the candidate in use over time per flow (Antelope Fig. 7), the
//! share of time on each candidate per environment (Antelope Table III), and what the runs
//! with a move earned against their start candidate run alone, from `swaps.csv` (and per part
//! of the policy that asked for the move, from `decisions.csv`).
//!
//! A flow's candidate before its first swap is that swap's `from`; a flow with no swap has no
//! row in `swaps.csv` and is left out of the shares (its start candidate is not recorded).

use std::collections::BTreeMap;
use std::fmt::Write as _;

use super::svg::{Axis, Panel, Svg, fmt_tick};
use crate::results::{DecisionRow, FlowRow, SwapRow};

/// One flow's candidate over time: (start time, candidate) steps, then the end time.
struct Timeline<'a> {
    steps: Vec<(f64, &'a str)>,
}

type FlowKey<'a> = (&'a str, &'a str, u64, u32);

/// Each condition's environment, from the flow rows.
fn env_of(rows: &[FlowRow]) -> BTreeMap<&str, &str> {
    rows.iter()
        .map(|r| (r.condition.as_str(), r.env.as_str()))
        .collect()
}

/// The table rows a run of `env` and `scheme` counts in: its environment's and `all`'s.
fn env_and_all<'a>(env: &str, scheme: &'a str) -> [(String, &'a str); 2] {
    [(env.to_string(), scheme), ("all".to_string(), scheme)]
}

/// The rows of a table keyed by (environment, scheme): the environments first, `all` last.
fn envs_then_all<'m, 's, V>(
    acc: &'m BTreeMap<(String, &'s str), V>,
) -> impl Iterator<Item = (&'m str, &'s str, &'m V)> {
    let (all, envs): (Vec<_>, Vec<_>) = acc.iter().partition(|((env, _), _)| env == "all");
    envs.into_iter()
        .chain(all)
        .map(|((env, scheme), v)| (env.as_str(), *scheme, v))
}

fn timelines(swaps: &[SwapRow]) -> BTreeMap<FlowKey<'_>, Timeline<'_>> {
    let mut out: BTreeMap<FlowKey<'_>, Timeline<'_>> = BTreeMap::new();
    for s in swaps {
        let t = out
            .entry((s.condition.as_str(), s.scheme.as_str(), s.seed, s.sock_id))
            .or_insert_with(|| Timeline {
                steps: vec![(0.0, s.from.as_str())],
            });
        t.steps.push((s.t_s, s.to.as_str()));
    }
    out
}

/// Share of time on each candidate, per (environment, scheme), as a markdown table.
pub fn time_share_table(swaps: &[SwapRow], rows: &[FlowRow], duration_s: f64) -> String {
    let env_of = env_of(rows);
    let mut time: BTreeMap<(&str, &str), BTreeMap<&str, f64>> = BTreeMap::new();
    for ((cond, scheme, _, _), t) in timelines(swaps) {
        let env = env_of.get(cond).copied().unwrap_or("?");
        let acc = time.entry((env, scheme)).or_default();
        for (i, (start, cca)) in t.steps.iter().enumerate() {
            let end = t.steps.get(i + 1).map_or(duration_s, |s| s.0);
            *acc.entry(cca).or_insert(0.0) += (end - start).max(0.0);
        }
    }
    let mut md =
        String::from("| Env | Scheme | Share of flow time per candidate |\n|---|---|---|\n");
    for ((env, scheme), per) in &time {
        let total: f64 = per.values().sum();
        let mut v: Vec<(&str, f64)> = per
            .iter()
            .map(|(c, t)| (*c, *t / total.max(1e-9)))
            .collect();
        v.sort_by(|a, b| b.1.total_cmp(&a.1));
        let cells: Vec<String> = v
            .iter()
            .filter(|(_, s)| *s >= 0.005)
            .map(|(c, s)| format!("{c} {:.0} %", s * 100.0))
            .collect();
        let _ = writeln!(md, "| {env} | `{scheme}` | {} |", cells.join(", "));
    }
    md
}

/// What the moves earned, per (environment, selector scheme), as a markdown table: over the
/// runs (condition, seed) in which the selector moved a flow to another candidate, the mean
/// score of the run's flows under test against the same condition and seed run with the
/// candidate the run's first move left (its start) alone, so the moves' gain net of what
/// they cost; with how many runs gained and lost. Runs whose start was not run alone are left
/// out. `None` when no run moved or none has its start's run.
pub fn moves_table(swaps: &[SwapRow], rows: &[FlowRow]) -> Option<String> {
    // (env, scheme) -> (sum of gains, runs, gained, lost); "all" too.
    let mut acc: BTreeMap<(String, &str), Gains> = BTreeMap::new();
    for run in moved_runs(swaps, rows) {
        for key in env_and_all(run.env, run.scheme) {
            acc.entry(key).or_default().add(run.gain);
        }
    }
    if acc.is_empty() {
        return None;
    }
    let mut md = String::from(
        "| Env | Scheme | runs with a move | mean score against the start alone | gained / lost |\n|---|---|---|---|---|\n",
    );
    for (env, scheme, g) in envs_then_all(&acc) {
        let _ = writeln!(md, "| {env} | `{scheme}` | {} |", g.cells());
    }
    Some(md)
}

/// What each part of the policy earned with its moves, per (environment, selector scheme,
/// part), as a markdown table: [`moves_table`]'s runs, each counted for the part that asked
/// for its first move (`decisions.csv`'s `by`: the latest decision of the moved flow asking
/// for that move, at or before it). A run's later moves count for its first move's part; a
/// run whose first move no decision explains (or one from before `decisions.csv` named the
/// part) counts for `-`. `None` when no run with a move had its start run alone.
pub fn moves_by_part_table(
    swaps: &[SwapRow],
    decisions: &[DecisionRow],
    rows: &[FlowRow],
) -> Option<String> {
    // The decisions asking for a switch, per flow: (time, from, to, part).
    let mut asks: BTreeMap<FlowKey<'_>, Vec<(f64, &str, &str, &str)>> = BTreeMap::new();
    for d in decisions.iter().filter(|d| d.from != d.to) {
        asks.entry((d.condition.as_str(), d.scheme.as_str(), d.seed, d.sock_id))
            .or_default()
            .push((d.t_s, d.from.as_str(), d.to.as_str(), d.by.as_str()));
    }
    let part = |s: &SwapRow| {
        asks.get(&(s.condition.as_str(), s.scheme.as_str(), s.seed, s.sock_id))
            .and_then(|v| {
                v.iter()
                    .filter(|(t, from, to, _)| *t <= s.t_s && (*from, *to) == (&*s.from, &*s.to))
                    .max_by(|a, b| a.0.total_cmp(&b.0))
            })
            .map(|(_, _, _, by)| *by)
            .filter(|by| !by.is_empty())
            .unwrap_or("-")
    };
    // (env, scheme, part) -> gains; "all" too, after the environments.
    let mut acc: BTreeMap<(bool, String, &str, &str), Gains> = BTreeMap::new();
    for run in moved_runs(swaps, rows) {
        let by = part(run.first);
        for (all, env) in [(false, run.env), (true, "all")] {
            acc.entry((all, env.to_string(), run.scheme, by))
                .or_default()
                .add(run.gain);
        }
    }
    if acc.is_empty() {
        return None;
    }
    let mut md = String::from(
        "| Env | Scheme | part | runs with a move | mean score against the start alone | gained / lost |\n|---|---|---|---|---|---|\n",
    );
    for ((_, env, scheme, by), g) in &acc {
        let _ = writeln!(md, "| {env} | `{scheme}` | {by} | {} |", g.cells());
    }
    Some(md)
}

/// [`moves_by_part_table`] under the sentence that says what it counts, for `selector.md` and a
/// merged `report.md`; `None` as for the table.
pub fn moves_by_part_paragraph(
    swaps: &[SwapRow],
    decisions: &[DecisionRow],
    rows: &[FlowRow],
) -> Option<String> {
    moves_by_part_table(swaps, decisions, rows).map(|parts| {
        format!(
            "The same runs, each counted for the part of the policy that asked for its first \
             move (`decisions.csv`'s `by`; `-`: no decision explains it):\n\n{parts}\n"
        )
    })
}

/// The sum of a set of runs' gains, how many, and how many gained and lost.
#[derive(Debug, Default)]
struct Gains {
    sum: f64,
    runs: usize,
    gained: usize,
    lost: usize,
}

impl Gains {
    fn add(&mut self, gain: f64) {
        self.sum += gain;
        self.runs += 1;
        self.gained += usize::from(gain > 0.0);
        self.lost += usize::from(gain < 0.0);
    }

    /// The table's cells: runs, mean gain, gained / lost.
    fn cells(&self) -> String {
        format!(
            "{} | {:+.3} | {} / {}",
            self.runs,
            self.sum / self.runs.max(1) as f64,
            self.gained,
            self.lost
        )
    }
}

/// A run (condition, scheme, seed) in which the selector moved a flow, with its start run
/// alone.
struct MovedRun<'a> {
    scheme: &'a str,
    env: &'a str,
    /// The run's first move (its `from` is the start).
    first: &'a SwapRow,
    /// The mean score of the run's flows under test minus the start's alone.
    gain: f64,
}

/// The runs with a move whose start (the `from` of the first move) was run alone on the same
/// condition and seed.
fn moved_runs<'a>(swaps: &'a [SwapRow], rows: &'a [FlowRow]) -> Vec<MovedRun<'a>> {
    // The first move of each run.
    let mut firsts: BTreeMap<(&str, &str, u64), &SwapRow> = BTreeMap::new();
    for s in swaps.iter().filter(|s| s.from != s.to) {
        let e = firsts
            .entry((s.condition.as_str(), s.scheme.as_str(), s.seed))
            .or_insert(s);
        if s.t_s < e.t_s {
            *e = s;
        }
    }
    // Mean score and environment of each run's flows under test.
    let mut runs: BTreeMap<(&str, &str, u64), (f64, usize, &str)> = BTreeMap::new();
    for r in rows.iter().filter(|r| super::aggregate::counted(r)) {
        let e = runs
            .entry((r.condition.as_str(), r.scheme.as_str(), r.seed))
            .or_insert((0.0, 0, r.env.as_str()));
        e.0 += r.rank_score();
        e.1 += 1;
    }
    let mean = |k: &(&str, &str, u64)| runs.get(k).map(|(s, n, env)| (s / *n as f64, *env));
    firsts
        .into_iter()
        .filter_map(|((cond, scheme, seed), first)| {
            let (with, env) = mean(&(cond, scheme, seed))?;
            let (alone, _) = mean(&(cond, first.from.as_str(), seed))?;
            Some(MovedRun {
                scheme,
                env,
                first,
                gain: with - alone,
            })
        })
        .collect()
}

/// How often the selector moved each flow, per (environment, selector scheme), as a markdown
/// table: the flows with a move, how many moved once, twice and three times or more, the most
/// moves in one flow, and the re-seats (a flow's own candidate installed again after a path
/// change or a drain: rows of `swaps.csv` that are not moves). Issue 17's "at most 3 swaps per
/// flow" reads off the "most" column. `None` when no flow moved or was re-seated.
pub fn moves_per_flow_table(swaps: &[SwapRow], rows: &[FlowRow]) -> Option<String> {
    let env = env_of(rows);
    // (condition, scheme, seed, flow) -> (moves, re-seats).
    let mut flows: BTreeMap<(&str, &str, u64, u32), (usize, usize)> = BTreeMap::new();
    for s in swaps {
        let e = flows
            .entry((s.condition.as_str(), s.scheme.as_str(), s.seed, s.sock_id))
            .or_default();
        if s.from == s.to {
            e.1 += 1;
        } else {
            e.0 += 1;
        }
    }
    if flows.is_empty() {
        return None;
    }
    // (env, scheme) -> [flows with a move, once, twice, 3+, most, re-seats]; "all" too.
    let mut acc: BTreeMap<(String, &str), [usize; 6]> = BTreeMap::new();
    for (&(cond, scheme, _, _), &(moves, reseats)) in &flows {
        let e = env.get(cond).copied().unwrap_or("-");
        for key in env_and_all(e, scheme) {
            let a = acc.entry(key).or_default();
            a[0] += usize::from(moves > 0);
            a[1] += usize::from(moves == 1);
            a[2] += usize::from(moves == 2);
            a[3] += usize::from(moves >= 3);
            a[4] = a[4].max(moves);
            a[5] += reseats;
        }
    }
    let mut md = String::from(
        "| Env | Scheme | flows with a move | once | twice | 3 or more | most in a flow | re-seats |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (env, scheme, [moved, once, twice, more, most, reseats]) in envs_then_all(&acc) {
        let _ = writeln!(
            md,
            "| {env} | `{scheme}` | {moved} | {once} | {twice} | {more} | {most} | {reseats} |"
        );
    }
    Some(md)
}

/// The candidate in use over time for every flow of `condition` (one line per flow and
/// scheme), as an SVG step plot; `None` if the condition has no swaps.
pub fn cca_over_time_svg(swaps: &[SwapRow], condition: &str, duration_s: f64) -> Option<String> {
    let lines: Vec<_> = timelines(swaps)
        .into_iter()
        .filter(|(k, _)| k.0 == condition)
        .collect();
    if lines.is_empty() {
        return None;
    }
    let mut names: Vec<&str> = lines
        .iter()
        .flat_map(|(_, t)| t.steps.iter().map(|s| s.1))
        .collect();
    names.sort_unstable();
    names.dedup();
    let level = |c: &str| names.iter().position(|n| *n == c).unwrap_or(0) as f64;
    let mut svg = Svg::new(
        900.0,
        420.0,
        &format!("Candidate in use over time: {condition}"),
    );
    let p = Panel {
        left: 110.0,
        top: 45.0,
        width: 520.0,
        height: 300.0,
        x: Axis::linear(0.0, duration_s),
        y: Axis::linear(-0.5, names.len() as f64 - 0.5),
    };
    svg.axes(&p, "time (s)", "", Some(fmt_tick), |_| String::new());
    for (i, n) in names.iter().enumerate() {
        if let Some((x, y)) = p.map(0.0, i as f64) {
            svg.text(x - 8.0, y + 4.0, n, 11.0, "end", "");
        }
    }
    let mut legend = Vec::new();
    for (k, ((_, scheme, seed, sock), t)) in lines.iter().enumerate() {
        let mut pts = Vec::new();
        for (i, (start, cca)) in t.steps.iter().enumerate() {
            let end = t.steps.get(i + 1).map_or(duration_s, |s| s.0);
            let y = level(cca) + 0.08 * k as f64;
            pts.extend(p.map(*start, y));
            pts.extend(p.map(end, y));
        }
        let col = super::svg::color(k);
        svg.polyline(&pts, col, 2.0, None);
        legend.push((format!("{scheme} seed {seed} flow {sock}"), col));
    }
    svg.legend(650.0, 60.0, &legend);
    Some(svg.finish())
}
