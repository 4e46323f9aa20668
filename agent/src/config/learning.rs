//! `[iw.learning]`: the settings of the IW learning loop (read when `iw.learn = true`).
//!
//! Every key is optional; the defaults are TCP-RL's online parameters (`PAPERS.md` §1.1,
//! "Parameters used") and the controller's documented choices (`iw_controller` crate doc).
//! Durations are seconds (fractions allowed, so tests can run iterations of a second).
//! `first_grouping_secs`, `standard_iw_until_grouped`, `scale_from_means`,
//! `max_step_multiplier` and `warm_start` are our additions to TCP-RL (see `iw_controller` and
//! `docs/iw.md`); their defaults keep the paper's behaviour.

use std::collections::hash_map::DefaultHasher;
use std::hash::{Hash, Hasher};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use iw_controller::GeoDb;
use iw_controller::IwConfig;
use iw_controller::bandit::BanditConfig;
use iw_controller::grouping::{GroupingConfig, Level};
use serde::Deserialize;

use super::{ConfigError, field};

/// Default cap on flow records taken per learning iteration (more are counted and dropped).
pub const DEFAULT_MAX_RECORDS_PER_ITERATION: usize = 100_000;
/// Default age, seconds, at which a flow still open is recorded with what it has so far.
pub const DEFAULT_LONG_FLOW_SECS: f64 = 10.0;
/// Longest duration accepted anywhere in `[iw.learning]`, seconds (one year).
const MAX_SECS: f64 = 365.0 * 24.0 * 3600.0;

/// The validated `[iw.learning]` section.
#[derive(Debug, Clone)]
pub struct LearnSettings {
    /// `geo`: the network-feature database (`start,end,subnet,isp,province`); empty without
    /// one, so every address is unknown and learns in the group `All`.
    pub geo: Arc<GeoDb>,
    /// Where `geo` was read from.
    pub geo_path: Option<PathBuf>,
    /// Hash of the feature file's bytes: a reload with another file restarts the learning.
    geo_fingerprint: u64,
    /// The controller's parameters (its IW bounds are `iw.default_iw` and `iw.max_iw`).
    pub controller: IwConfig,
    /// `records`: CSV file every flow record is appended to (created at load if missing).
    pub records: Option<PathBuf>,
    /// `save_table`: the learned table is written there after every iteration, in the format
    /// of `iw.table` (written to `<file>.tmp`, then renamed).
    pub save_table: Option<PathBuf>,
    /// `max_records_per_iteration`: flow records taken per iteration; more are dropped and
    /// counted.
    pub max_records_per_iteration: usize,
    /// `long_flow_secs` in µs: a flow still open at this age is recorded then (with its bytes
    /// and time so far) instead of at its close.
    pub long_flow_us: u64,
}

impl PartialEq for LearnSettings {
    fn eq(&self, other: &Self) -> bool {
        self.geo_path == other.geo_path
            && self.geo_fingerprint == other.geo_fingerprint
            && self.controller == other.controller
            && self.records == other.records
            && self.save_table == other.save_table
            && self.max_records_per_iteration == other.max_records_per_iteration
            && self.long_flow_us == other.long_flow_us
    }
}

/// `[iw.learning]` as written.
#[derive(Debug, Deserialize, Default)]
#[serde(deny_unknown_fields)]
pub(super) struct RawLearning {
    geo: Option<PathBuf>,
    iteration_secs: Option<f64>,
    alpha: Option<f64>,
    xi: Option<f64>,
    gamma: Option<f64>,
    initial_arms: Option<Vec<i64>>,
    step: Option<i64>,
    levels: Option<Vec<String>>,
    grouping_period_secs: Option<f64>,
    bin_secs: Option<f64>,
    min_samples: Option<i64>,
    max_jitter: Option<f64>,
    stale_iterations: Option<i64>,
    records: Option<PathBuf>,
    save_table: Option<PathBuf>,
    max_records_per_iteration: Option<i64>,
    long_flow_secs: Option<f64>,
    max_step_multiplier: Option<i64>,
    first_grouping_secs: Option<f64>,
    standard_iw_until_grouped: Option<bool>,
    scale_from_means: Option<bool>,
    warm_start: Option<bool>,
}

/// A duration in seconds -> µs: finite, at least 1 ms, at most a year.
fn secs(name: &str, value: Option<f64>, default_us: u64) -> Result<u64, ConfigError> {
    match value {
        None => Ok(default_us),
        Some(s) if s.is_finite() && (0.001..=MAX_SECS).contains(&s) => Ok((s * 1e6).round() as u64),
        Some(s) => Err(field(
            &format!("iw.learning.{name}"),
            format!("must be a number of seconds in [0.001, {MAX_SECS}], got {s}"),
        )),
    }
}

fn unit_interval(name: &str, value: Option<f64>, default: f64) -> Result<f64, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) if (0.0..=1.0).contains(&v) => Ok(v),
        Some(v) => Err(field(
            &format!("iw.learning.{name}"),
            format!("must be in [0, 1], got {v}"),
        )),
    }
}

fn count(name: &str, value: Option<i64>, min: u64, default: u64) -> Result<u64, ConfigError> {
    match value {
        None => Ok(default),
        Some(v) => u64::try_from(v).ok().filter(|v| *v >= min).ok_or_else(|| {
            field(
                &format!("iw.learning.{name}"),
                format!("must be an integer >= {min}, got {v}"),
            )
        }),
    }
}

fn level(name: &str) -> Option<Level> {
    match name {
        "province" => Some(Level::Province),
        "isp" => Some(Level::Isp),
        "subnet" => Some(Level::Subnet),
        _ => None,
    }
}

/// Validates `raw`; `default_iw` and `max_iw` come from `[iw]`, paths are taken from `base`.
pub(super) fn learn_settings(
    raw: RawLearning,
    base: &Path,
    default_iw: u32,
    max_iw: u32,
) -> Result<LearnSettings, ConfigError> {
    let d = IwConfig::default();
    let stale = count(
        "stale_iterations",
        raw.stale_iterations,
        1,
        u64::from(d.stale_iterations),
    )?;
    let controller = IwConfig {
        bandit: bandit(&raw, max_iw)?,
        grouping: grouping(&raw)?,
        iteration_us: secs("iteration_secs", raw.iteration_secs, d.iteration_us)?,
        default_iw_pkts: default_iw,
        max_iw_pkts: max_iw,
        stale_iterations: u32::try_from(stale).unwrap_or(u32::MAX),
        first_grouping_us: raw
            .first_grouping_secs
            .map(|f| secs("first_grouping_secs", Some(f), 0))
            .transpose()?,
        standard_iw_until_grouped: raw.standard_iw_until_grouped.unwrap_or(false),
        warm_start: raw.warm_start.unwrap_or(false),
    };
    controller
        .validate()
        .map_err(|e| field("iw.learning", e.to_string()))?;
    let (geo, geo_path, geo_fingerprint) = geo(raw.geo.as_deref(), base)?;
    let (records, save_table) = outputs(raw.records, raw.save_table, base)?;
    let max_records = count(
        "max_records_per_iteration",
        raw.max_records_per_iteration,
        1,
        DEFAULT_MAX_RECORDS_PER_ITERATION as u64,
    )?;
    Ok(LearnSettings {
        geo: Arc::new(geo),
        geo_path,
        geo_fingerprint,
        controller,
        records,
        save_table,
        max_records_per_iteration: usize::try_from(max_records).unwrap_or(usize::MAX),
        long_flow_us: secs(
            "long_flow_secs",
            raw.long_flow_secs,
            (DEFAULT_LONG_FLOW_SECS * 1e6) as u64,
        )?,
    })
}

fn bandit(raw: &RawLearning, max_iw: u32) -> Result<BanditConfig, ConfigError> {
    let db = BanditConfig::default();
    let gamma = match raw.gamma {
        None => db.gamma,
        Some(g) if g > 0.0 && g <= 1.0 => g,
        Some(g) => {
            return Err(field(
                "iw.learning.gamma",
                format!("must be in (0, 1], got {g}"),
            ));
        }
    };
    let xi = match raw.xi {
        None => db.xi,
        Some(x) if x.is_finite() && x > 0.0 => x,
        Some(x) => {
            return Err(field(
                "iw.learning.xi",
                format!("must be a finite number > 0, got {x}"),
            ));
        }
    };
    let initial_arms_pkts = match &raw.initial_arms {
        None => db.initial_arms_pkts.clone(),
        Some(list) => {
            let mut arms: Vec<u32> = Vec::new();
            for &a in list {
                let Some(a) = u32::try_from(a).ok().filter(|a| (1..=max_iw).contains(a)) else {
                    return Err(field(
                        "iw.learning.initial_arms",
                        format!("arm {a} must be in 1..={max_iw} (iw.max_iw)"),
                    ));
                };
                if arms.contains(&a) {
                    return Err(field(
                        "iw.learning.initial_arms",
                        format!("arm {a} is listed twice"),
                    ));
                }
                arms.push(a);
            }
            if arms.is_empty() {
                return Err(field("iw.learning.initial_arms", "needs at least one arm"));
            }
            arms
        }
    };
    let mult = count("max_step_multiplier", raw.max_step_multiplier, 1, 1)?;
    let max_step_multiplier = u32::try_from(mult)
        .ok()
        .filter(|m| *m <= max_iw)
        .ok_or_else(|| {
            field(
                "iw.learning.max_step_multiplier",
                format!("must be in 1..={max_iw}"),
            )
        })?;
    let delta_pkts = count("step", raw.step, 0, u64::from(db.delta_pkts))?;
    let delta_pkts = u32::try_from(delta_pkts)
        .ok()
        .filter(|s| *s <= max_iw)
        .ok_or_else(|| field("iw.learning.step", format!("must be in 0..={max_iw}")))?;
    Ok(BanditConfig {
        alpha: unit_interval("alpha", raw.alpha, db.alpha)?,
        xi,
        gamma,
        initial_arms_pkts,
        delta_pkts,
        max_iw_pkts: max_iw,
        max_step_multiplier,
        scale_from_means: raw.scale_from_means.unwrap_or(false),
        ..db
    })
}

fn grouping(raw: &RawLearning) -> Result<Option<GroupingConfig>, ConfigError> {
    let dg = GroupingConfig::default();
    let levels = match &raw.levels {
        None => dg.levels.clone(),
        Some(names) => {
            let mut out = Vec::new();
            for n in names {
                let l = level(n).ok_or_else(|| {
                    field(
                        "iw.learning.levels",
                        format!("unknown level {n:?} (known: province, isp, subnet)"),
                    )
                })?;
                if out.contains(&l) {
                    return Err(field(
                        "iw.learning.levels",
                        format!("{n:?} is listed twice"),
                    ));
                }
                out.push(l);
            }
            out
        }
    };
    if levels.is_empty() {
        return Ok(None);
    }
    let max_jitter = match raw.max_jitter {
        None => dg.max_jitter,
        Some(j) if j.is_finite() && j >= 0.0 => j,
        Some(j) => {
            return Err(field(
                "iw.learning.max_jitter",
                format!("must be a finite number >= 0, got {j}"),
            ));
        }
    };
    let g = GroupingConfig {
        levels,
        bin_us: secs("bin_secs", raw.bin_secs, dg.bin_us)?,
        period_us: secs(
            "grouping_period_secs",
            raw.grouping_period_secs,
            dg.period_us,
        )?,
        min_samples: count("min_samples", raw.min_samples, 1, dg.min_samples)?,
        max_jitter,
    };
    if g.period_us < g.bin_us {
        return Err(field(
            "iw.learning.grouping_period_secs",
            "must be at least iw.learning.bin_secs",
        ));
    }
    Ok(Some(g))
}

/// The feature database, where it came from and a hash of its bytes.
fn geo(path: Option<&Path>, base: &Path) -> Result<(GeoDb, Option<PathBuf>, u64), ConfigError> {
    let Some(p) = path else {
        return Ok((GeoDb::default(), None, 0));
    };
    let path = base.join(p);
    let bytes = std::fs::read(&path).map_err(|e| {
        field(
            "iw.learning.geo",
            format!("cannot read {}: {e}", path.display()),
        )
    })?;
    let db = GeoDb::from_csv_reader(bytes.as_slice())
        .map_err(|e| field("iw.learning.geo", format!("{}: {e}", path.display())))?;
    let mut h = DefaultHasher::new();
    bytes.hash(&mut h);
    Ok((db, Some(path), h.finish()))
}

/// `records` (opened for appending now, created if missing) and `save_table` (its folder
/// must exist).
fn outputs(
    records: Option<PathBuf>,
    save_table: Option<PathBuf>,
    base: &Path,
) -> Result<(Option<PathBuf>, Option<PathBuf>), ConfigError> {
    let records = records.map(|p| base.join(p));
    if let Some(r) = &records {
        std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(r)
            .map_err(|e| {
                field(
                    "iw.learning.records",
                    format!("cannot open {} for appending: {e}", r.display()),
                )
            })?;
    }
    let save_table = save_table.map(|p| base.join(p));
    if let Some(s) = &save_table {
        let parent = s.parent().filter(|p| !p.as_os_str().is_empty());
        if parent.is_some_and(|p| !p.is_dir()) || s.is_dir() {
            return Err(field(
                "iw.learning.save_table",
                format!("{}: not a file in an existing folder", s.display()),
            ));
        }
    }
    Ok((records, save_table))
}
