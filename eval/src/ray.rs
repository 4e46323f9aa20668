//! `run SCENARIO --ray [ADDRESS]`: the scenario's shards as Ray tasks on a Ray cluster (an
//! existing one at ADDRESS, or a local one), merged back into the output of a local run.
//!
//! The plan is made here as for a local run; the Ray driver (`eval/ray/sweep.py`, run with the
//! project's Python: `$CCP_PYTHON`, else the checkout's `.venv/bin/python`) starts one task
//! per shard, each running `ccp-eval run ... --shard i/n --jobs 1` on a worker and sending
//! back its CSV files; a worker that dies is retried by Ray. The shards' rows are then put
//! back in plan order ([`merge`]), every planned run exactly once, so `results.csv`,
//! `series.csv`, `swaps.csv`, `decisions.csv` and the report are byte for byte those of a
//! local run (`eval/tests/ray.rs`). `docs/scale.md` says how to point it at a real cluster.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;

use crate::results::{self, DecisionRow, FlowRow, SeriesRow, SwapRow};
use crate::runner::{Job, RunOutput};
use crate::scenario::Scenario;

/// The driver, shipped inside the binary so an installed `ccp-eval` needs no source tree.
const DRIVER: &str = include_str!("../ray/sweep.py");

/// How to run on Ray.
#[derive(Debug, Clone)]
pub struct RayOptions {
    /// Cluster address (`ray://host:10001`, `host:6379`, `auto`); `None` starts a local cluster.
    pub address: Option<String>,
    /// Number of shards (Ray tasks).
    pub shards: usize,
    /// CPUs of the local cluster (ignored with an address).
    pub local_cpus: usize,
    /// Tests only: the first attempt of shard 0 dies mid-shard after creating this file.
    pub kill_marker: Option<PathBuf>,
}

impl RayOptions {
    /// `--ray [ADDRESS]` (empty: a local cluster of `jobs` CPUs, 0 = one per core) with
    /// `--ray-shards`; the test hook from `CCP_RAY_TEST_KILL_MARKER`.
    pub fn from_cli(address: String, shards: usize, jobs: usize) -> Self {
        Self {
            address: (!address.is_empty()).then_some(address),
            shards,
            local_cpus: if jobs == 0 {
                std::thread::available_parallelism().map_or(1, std::num::NonZero::get)
            } else {
                jobs
            },
            kill_marker: std::env::var_os("CCP_RAY_TEST_KILL_MARKER").map(PathBuf::from),
        }
    }
}

/// The Python that runs the driver.
pub fn python() -> PathBuf {
    std::env::var_os("CCP_PYTHON").map_or_else(
        || Path::new(env!("CARGO_MANIFEST_DIR")).join("../.venv/bin/python"),
        PathBuf::from,
    )
}

/// Runs `plan` (the jobs of `scenario`, named `scenario_arg` on the command line) on Ray;
/// `run_args` are the `ccp-eval run` arguments every shard gets (`--seed`, `--schemes`).
/// Shard files go to `work` (created, and removed again on success).
pub fn run(
    scenario_arg: &str,
    scenario: &Scenario,
    plan: &[Job],
    run_args: &[String],
    opts: &RayOptions,
    work: &Path,
) -> Result<RunOutput, String> {
    let shards = opts.shards.clamp(1, plan.len().max(1));
    let exe = std::env::current_exe().map_err(|e| format!("locating ccp-eval: {e}"))?;
    let builtin = crate::builtin::scenario(scenario_arg).is_some();
    // A local cluster shares this filesystem: a scenario file is passed by path (its relative
    // trace paths keep working); a remote cluster gets the file's text.
    let (name, text) = match (builtin, &opts.address) {
        (true, _) => (Some(scenario_arg.to_string()), None),
        (false, None) => (
            Some(
                std::fs::canonicalize(scenario_arg)
                    .map_err(|e| format!("{scenario_arg}: {e}"))?
                    .display()
                    .to_string(),
            ),
            None,
        ),
        (false, Some(_)) => (
            None,
            Some(
                std::fs::read_to_string(scenario_arg)
                    .map_err(|e| format!("{scenario_arg}: {e}"))?,
            ),
        ),
    };
    let mut args = run_args.to_vec();
    args.extend(["--jobs".to_string(), "1".to_string()]);
    if work.exists() {
        std::fs::remove_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    }
    std::fs::create_dir_all(work).map_err(|e| format!("{}: {e}", work.display()))?;
    let job = serde_json::json!({
        "ccp_eval": exe,
        "scenario": name,
        "scenario_text": text,
        "shards": shards,
        "address": opts.address,
        "local_cpus": opts.local_cpus.max(1),
        "run_args": args,
        "shards_dir": work,
        "kill_marker": opts.kill_marker,
    });
    let python = python();
    let status = Command::new(&python)
        .arg("-c")
        .arg(DRIVER)
        .arg(job.to_string())
        .status()
        .map_err(|e| {
            format!(
                "starting {} (set CCP_PYTHON to a Python with `ray`; `make venv` builds one): {e}",
                python.display()
            )
        })?;
    if !status.success() {
        return Err(format!("the Ray sweep failed ({status})"));
    }
    let shard_dirs: Vec<PathBuf> = (0..shards).map(|i| work.join(i.to_string())).collect();
    let out = merge(scenario, plan, &shard_dirs, shards)?;
    let _ = std::fs::remove_dir_all(work);
    Ok(out)
}

/// The run a row belongs to: (condition, scheme, seed).
type RunKey<'a> = (&'a str, &'a str, u64);

fn series_key(r: &SeriesRow) -> RunKey<'_> {
    (&r.condition, &r.scheme, r.seed)
}

fn swap_key(r: &SwapRow) -> RunKey<'_> {
    (&r.condition, &r.scheme, r.seed)
}

fn decision_key(r: &DecisionRow) -> RunKey<'_> {
    (&r.condition, &r.scheme, r.seed)
}

/// The rows of a shard's optional file `name` in `dir` (none when the shard wrote none), each
/// with its run's plan index from `locate` (`what` names a row in its errors).
fn shard_file<T: serde::de::DeserializeOwned>(
    dir: &Path,
    name: &str,
    what: &str,
    key: fn(&T) -> RunKey<'_>,
    locate: impl Fn(&str, &str, u64, &str) -> Result<usize, String>,
) -> Result<Vec<(usize, T)>, String> {
    let path = dir.join(name);
    if !path.is_file() {
        return Ok(Vec::new());
    }
    results::read_csv::<T>(&path)
        .map_err(|e| e.to_string())?
        .into_iter()
        .map(|r| {
            let (cond, scheme, seed) = key(&r);
            Ok((locate(cond, scheme, seed, what)?, r))
        })
        .collect()
}

/// The shards' rows in plan order, as a local run returns them. Each row must belong to a
/// planned run of its shard, and each planned run must come back exactly once.
pub fn merge(
    scenario: &Scenario,
    plan: &[Job],
    shard_dirs: &[PathBuf],
    shards: usize,
) -> Result<RunOutput, String> {
    let index: HashMap<(&str, &str, u64), usize> = plan
        .iter()
        .enumerate()
        .map(|(i, j)| {
            let cond = scenario.conditions[j.condition].id.as_str();
            ((cond, j.scheme.as_str(), j.seed), i)
        })
        .collect();
    let locate = |cond: &str, scheme: &str, seed: u64, shard: usize, what: &str| {
        let i = *index.get(&(cond, scheme, seed)).ok_or_else(|| {
            format!("shard {shard}: {what} of an unplanned run ({cond}, {scheme}, seed {seed})")
        })?;
        if plan[i].index % shards != shard {
            return Err(format!(
                "shard {shard}: {what} of run {} belongs to shard {}",
                plan[i].index,
                plan[i].index % shards
            ));
        }
        Ok(i)
    };
    let mut rows: Vec<(usize, FlowRow)> = Vec::new();
    let mut series: Vec<(usize, SeriesRow)> = Vec::new();
    let mut swaps: Vec<(usize, SwapRow)> = Vec::new();
    let mut decisions: Vec<(usize, DecisionRow)> = Vec::new();
    let mut seen: HashMap<(usize, usize), usize> = HashMap::new();
    for (shard, dir) in shard_dirs.iter().enumerate() {
        let path = dir.join("results.csv");
        for r in results::read_rows(&path).map_err(|e| e.to_string())? {
            let i = locate(&r.condition, &r.scheme, r.seed, shard, "a result")?;
            if let Some(first) = seen.insert((i, r.flow), shard) {
                return Err(format!(
                    "run {} flow {} came back twice (shards {first} and {shard})",
                    plan[i].index, r.flow
                ));
            }
            rows.push((i, r));
        }
        let at = |cond: &str, scheme: &str, seed: u64, what: &str| {
            locate(cond, scheme, seed, shard, what)
        };
        series.extend(shard_file(
            dir,
            "series.csv",
            "a series row",
            series_key,
            at,
        )?);
        swaps.extend(shard_file(dir, "swaps.csv", "a swap", swap_key, at)?);
        decisions.extend(shard_file(
            dir,
            "decisions.csv",
            "a decision",
            decision_key,
            at,
        )?);
    }
    let mut has_rows = vec![false; plan.len()];
    let mut failed = vec![false; plan.len()];
    for (i, r) in &rows {
        has_rows[*i] = true;
        failed[*i] |= r.status.starts_with("failed:");
    }
    if let Some(i) = has_rows.iter().position(|h| !h) {
        return Err(format!(
            "run {} ({}, {}, seed {}) came back from no shard",
            plan[i].index, scenario.conditions[plan[i].condition].id, plan[i].scheme, plan[i].seed
        ));
    }
    // Stable sorts: within a run, rows keep the order the shard wrote them in.
    rows.sort_by_key(|(i, _)| *i);
    series.sort_by_key(|(i, _)| *i);
    swaps.sort_by_key(|(i, _)| *i);
    decisions.sort_by_key(|(i, _)| *i);
    Ok(RunOutput {
        rows: rows.into_iter().map(|(_, r)| r).collect(),
        series: series.into_iter().map(|(_, s)| s).collect(),
        swaps: swaps.into_iter().map(|(_, s)| s).collect(),
        decisions: decisions.into_iter().map(|(_, d)| d).collect(),
        runs: plan.len(),
        failed: failed.iter().filter(|f| **f).count(),
        packets: 0,
    })
}
