//! Reports: from flow rows (`results.csv`) and time series (`series.csv`) to `summary.json`,
//! `report.md` and SVG plots in `plots/`.
//!
//! # What the report contains and where each number comes from
//!
//! Only rows with status `ok` and role `main` ("counted flows") count towards scheme metrics.
//! A run is (scenario, condition, scheme, seed); a run with any row whose status is not `ok` is
//! listed under "Failed runs" with the status text of its first such row.
//!
//! - **Per-environment table** (Pantheon style), per scheme and `env`: means over counted flows
//!   of throughput, p95 RTT, mean RTT, mean queueing delay, loss rate, utilization and reward;
//!   the FCT mean is over finite flows that completed (`fct_s` present); Jain's index is
//!   averaged over runs (one value per run). Non-finite values are left out of every mean.
//! - **Per condition** (scenario + condition): each scheme's reward is the mean of `reward`
//!   (TCP-RL's ln(throughput Mbit/s / mean RTT ms)) over its counted flows of every seed. The
//!   best scheme has the highest reward; ranks are competition ranks (1 = best, rewards within a
//!   relative 1e-9 tie and share the better rank: 1, 1, 3). Reward loss is
//!   `(R_best - R) / |R_best|`: TCP-RL divides by `R_best`, which is positive in its units, but
//!   here rewards are negative whenever throughput/RTT < 1, and dividing by a negative `R_best`
//!   would flip the sign. The loss is 0 for rank 1 and undefined (`None`) if `R_best` is 0.
//! - **Best-scheme share** (TCP-RL Fig. 14): the share of conditions in which a scheme has rank 1
//!   (tied schemes all count, so shares may sum to more than 1).
//! - **Rank table** (Fig. 15): share of conditions at rank 1, top 3, top 5, and the median rank.
//!   **Reward-loss table** (Fig. 16): share of conditions with loss < 5, 10, 12 %. Shares are
//!   over all conditions; a condition where the scheme has no result counts against it.
//! - **Per-condition reward** is each flow's `score` under its objective (`objective` column;
//!   TCP-RL's reward unless the scenario names another), so a delay-sensitive flow is ranked
//!   by its delay objective.
//! - **Selection headroom** ([`headroom`]): the best single CCA overall, the per-condition
//!   oracle and each selector's share of the headroom captured, per condition, class and
//!   overall, with `headroom_cdf.svg`.
//! - **Plots**: `tput_vs_delay_<env>.svg` (throughput vs p95 RTT, scheme means and faint per-run
//!   points), `best_share.svg`, `rank_cdf.svg`, `reward_loss_cdf.svg`, and
//!   `series_<condition>.svg` (throughput and cwnd over time, first seed per scheme) for every
//!   condition with time-series rows.
//!
//! [`write_report`] writes a report for rows in memory; [`report_dirs`] merges the shards of one
//! scenario (directories with `results.csv` and optionally `series.csv`) and reports on them.

mod aggregate;
pub mod choices;
pub mod headroom;
mod markdown;
mod plots;
pub(crate) mod svg;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use thiserror::Error;

pub use headroom::{Headroom, HeadroomRow, SelectorHeadroom};

pub use aggregate::{
    BestShare, ConditionResult, ConditionScheme, Counts, EnvTable, FailedRun, RankStats,
    RewardLossStats, SchemeStats, Summary, summarize,
};

use crate::outdir;
use crate::results::{
    DecisionRow, FlowRow, ResultsError, SeriesRow, SwapRow, read_csv, read_rows, write_csv,
};

/// What a report is made from.
#[derive(Debug, Clone, Copy)]
pub struct ReportInput<'a> {
    /// Title of `report.md` and `summary.json`.
    pub title: &'a str,
    /// Flow rows (`results.csv`).
    pub rows: &'a [FlowRow],
    /// Time-series rows (`series.csv`); may be empty.
    pub series: &'a [SeriesRow],
}

/// Why a report could not be made.
#[derive(Debug, Error)]
pub enum ReportError {
    /// Reading or writing a CSV file.
    #[error(transparent)]
    Results(#[from] ResultsError),
    /// File-system access.
    #[error("{path}: {source}")]
    Io {
        /// File or directory.
        path: PathBuf,
        /// Cause.
        source: std::io::Error,
    },
    /// Encoding `summary.json`.
    #[error("{path}: {source}")]
    Json {
        /// File.
        path: PathBuf,
        /// Cause.
        source: serde_json::Error,
    },
    /// A shard directory has no `results.csv`.
    #[error("{path}: no such file (every shard directory needs a results.csv)")]
    MissingResults {
        /// The missing file.
        path: PathBuf,
    },
    /// No shard directories were given.
    #[error("no result directories to report on")]
    NoInput,
    /// Two shards hold different rows for the same key.
    #[error("conflicting {what} for {key}: {first} and {second} differ")]
    Conflict {
        /// `results.csv row` or `series.csv row`.
        what: &'static str,
        /// The key both rows share.
        key: String,
        /// The file the first row came from.
        first: PathBuf,
        /// The file the second row came from.
        second: PathBuf,
    },
}

fn io_err(path: &Path) -> impl FnOnce(std::io::Error) -> ReportError + '_ {
    move |source| ReportError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// (scenario, condition, scheme, seed, flow).
type RowKey = (String, String, String, u64, usize);

/// A [`RowKey`] plus the time as [`order_bits`].
type SeriesKey = (String, String, String, u64, usize, u64);

/// Writes `summary.json`, `report.md` and `plots/*.svg` into `dir` (created if missing) and
/// returns the summary.
pub fn write_report(dir: &Path, input: &ReportInput) -> Result<Summary, ReportError> {
    write_report_ending(dir, input, "")
}

/// [`write_report`] with `ending` after the rest of `report.md`.
fn write_report_ending(
    dir: &Path,
    input: &ReportInput,
    ending: &str,
) -> Result<Summary, ReportError> {
    let plot_dir = dir.join("plots");
    std::fs::create_dir_all(&plot_dir).map_err(io_err(&plot_dir))?;
    let summary = summarize(input.title, input.rows);
    let plots = plots::render(&summary, input.rows, input.series);
    for p in plots.all() {
        let path = dir.join(&p.file);
        std::fs::write(&path, &p.svg).map_err(io_err(&path))?;
    }
    let md = dir.join("report.md");
    let mut text = markdown::render(&summary, &plots);
    text.push_str(ending);
    std::fs::write(&md, text).map_err(io_err(&md))?;
    let json_path = dir.join("summary.json");
    let mut json = serde_json::to_string_pretty(&summary).map_err(|source| ReportError::Json {
        path: json_path.clone(),
        source,
    })?;
    json.push('\n');
    std::fs::write(&json_path, json).map_err(io_err(&json_path))?;
    Ok(summary)
}

/// Reads `results.csv` (and `series.csv` if present) from every directory in `dirs` (shards of
/// one scenario), merges them, clears `out` of the files the harness owns ([`outdir`]; when
/// `out` is one of `dirs`, a run's selector files stay), writes the merged `results.csv` and
/// `series.csv` (the latter if any shard had one) and the report into `out`, and returns the
/// summary. When the directories hold selector runs (`swaps.csv`, `decisions.csv`) and the
/// candidates their moves left run alone (e.g. a selector's run beside its singles'),
/// `report.md` ends with what the moves earned, in all and per part of the policy
/// ([`choices::moves_table`], [`choices::moves_by_part_table`]).
///
/// Rows with the same (scenario, condition, scheme, seed, flow) — series rows also the same
/// time — appear once if identical; if they differ, the merge fails naming both files. Merged
/// rows are sorted by that key. The title is the scenario name(s).
pub fn report_dirs(dirs: &[PathBuf], out: &Path) -> Result<Summary, ReportError> {
    if dirs.is_empty() {
        return Err(ReportError::NoInput);
    }
    let mut rows: BTreeMap<RowKey, (FlowRow, PathBuf)> = BTreeMap::new();
    let mut series: BTreeMap<SeriesKey, (SeriesRow, PathBuf)> = BTreeMap::new();
    let mut any_series = false;
    for dir in dirs {
        let path = dir.join("results.csv");
        if !path.is_file() {
            return Err(ReportError::MissingResults { path });
        }
        for r in read_rows(&path)? {
            let key = (
                r.scenario.clone(),
                r.condition.clone(),
                r.scheme.clone(),
                r.seed,
                r.flow,
            );
            insert(&mut rows, key, r, &path, "results.csv row", |k| {
                format!(
                    "scenario {} condition {} scheme {} seed {} flow {}",
                    k.0, k.1, k.2, k.3, k.4
                )
            })?;
        }
        let spath = dir.join("series.csv");
        if spath.is_file() {
            any_series = true;
            for s in read_csv::<SeriesRow>(&spath)? {
                let key = (
                    s.scenario.clone(),
                    s.condition.clone(),
                    s.scheme.clone(),
                    s.seed,
                    s.flow,
                    order_bits(s.t_s),
                );
                insert(&mut series, key, s, &spath, "series.csv row", |k| {
                    format!(
                        "scenario {} condition {} scheme {} seed {} flow {} at some t_s",
                        k.0, k.1, k.2, k.3, k.4
                    )
                })?;
            }
        }
    }
    let rows: Vec<FlowRow> = rows.into_values().map(|v| v.0).collect();
    let series: Vec<SeriesRow> = series.into_values().map(|v| v.0).collect();
    let (swaps, decisions) = read_choices(dirs)?;
    std::fs::create_dir_all(out).map_err(io_err(out))?;
    // Everything is read: no file of an earlier report may stay beside this one.
    let same =
        |d: &PathBuf| matches!((d.canonicalize(), out.canonicalize()), (Ok(a), Ok(b)) if a == b);
    let what = if dirs.iter().any(same) {
        outdir::Clear::KeepRunOnly
    } else {
        outdir::Clear::All
    };
    outdir::clear(out, what).map_err(|(path, source)| ReportError::Io { path, source })?;
    write_csv(&out.join("results.csv"), &rows)?;
    if any_series {
        write_csv(&out.join("series.csv"), &series)?;
    }
    let mut scenarios: Vec<&str> = rows.iter().map(|r| r.scenario.as_str()).collect();
    scenarios.sort_unstable();
    scenarios.dedup();
    let title = if scenarios.is_empty() {
        "Scenario (no rows)".to_string()
    } else {
        format!("Scenario {}", scenarios.join(", "))
    };
    write_report_ending(
        out,
        &ReportInput {
            title: &title,
            rows: &rows,
            series: &series,
        },
        &moves_section(&swaps, &decisions, &rows).unwrap_or_default(),
    )
}

/// The selector runs' swaps and explained decisions of every directory that has them, each
/// directory read once (one given twice repeats none of its rows).
fn read_choices(dirs: &[PathBuf]) -> Result<(Vec<SwapRow>, Vec<DecisionRow>), ReportError> {
    let mut swaps: Vec<SwapRow> = Vec::new();
    let mut decisions: Vec<DecisionRow> = Vec::new();
    let mut read: Vec<PathBuf> = Vec::new();
    for dir in dirs {
        let canonical = dir.canonicalize().map_err(io_err(dir))?;
        if read.contains(&canonical) {
            continue;
        }
        read.push(canonical);
        let path = dir.join("swaps.csv");
        if path.is_file() {
            swaps.extend(read_csv::<SwapRow>(&path)?);
        }
        let path = dir.join("decisions.csv");
        if path.is_file() {
            decisions.extend(read_csv::<DecisionRow>(&path)?);
        }
    }
    Ok((swaps, decisions))
}

/// `report.md`'s closing section on what the selectors' moves earned against their start
/// candidates run alone, when some run moved and its start's run is among the rows.
fn moves_section(swaps: &[SwapRow], decisions: &[DecisionRow], rows: &[FlowRow]) -> Option<String> {
    let moves = choices::moves_table(swaps, rows)?;
    let mut md = format!(
        "\n## What the selectors' moves earned\n\nRuns in which a selector moved a flow, against \
         the same condition and seed run alone with the candidate it moved from (the swaps' cost \
         included; from the directories' `swaps.csv`):\n\n{moves}\n"
    );
    if let Some(parts) = choices::moves_by_part_paragraph(swaps, decisions, rows) {
        md.push_str(&parts);
    }
    Some(md)
}

/// Bits of a float that order like the float (for non-NaN values), for use in sort keys.
fn order_bits(v: f64) -> u64 {
    let b = v.to_bits();
    if b >> 63 == 1 { !b } else { b | (1 << 63) }
}

fn insert<K: Ord, V: std::fmt::Debug>(
    map: &mut BTreeMap<K, (V, PathBuf)>,
    key: K,
    value: V,
    path: &Path,
    what: &'static str,
    describe: impl Fn(&K) -> String,
) -> Result<(), ReportError> {
    match map.get(&key) {
        // Debug output compares floats by value and treats NaN as equal to NaN.
        Some((old, _)) if format!("{old:?}") == format!("{value:?}") => Ok(()),
        Some((_, first)) => Err(ReportError::Conflict {
            what,
            key: describe(&key),
            first: first.clone(),
            second: path.to_path_buf(),
        }),
        None => {
            map.insert(key, (value, path.to_path_buf()));
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests;
