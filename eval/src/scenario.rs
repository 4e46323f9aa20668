//! Scenarios: network conditions, traffic and schemes, written in TOML.
//!
//! ```toml
//! name = "example"
//! duration_s = 30            # virtual seconds per run
//! seeds = [1, 2]             # or: repetitions = 3 (seeds 1..=3)
//! schemes = ["native-cubic"] # default: every available scheme
//! series_interval_ms = 100   # optional: write cwnd/throughput time series
//!
//! [[conditions]]             # an explicit condition ...
//! env = "wan"                # label used to group results (default "default")
//! bw_mbps = 120
//! rtt_ms = 100
//! loss = 0.0
//! buffer_bdp = 5.0           # or buffer_bytes = ..., or buffer_pkts = ...
//! # trace = "traces/lte.up"  # a mahimahi trace instead of bw_mbps (path relative to this file)
//! # cellular = { seed = 3, mean_mbps = 12 }  # a generated cellular trace instead
//! # phases = [{ at_s = 60, bw_mbps = 50, rtt_ms = 40, loss = 0.01 }]  # a changing path
//! # ack_aggregation_ms = 10 # ACKs released in bursts every 10 ms
//!
//! [grid]                     # ... and/or a grid: every combination
//! bw_mbps = [10, 50]
//! rtt_ms = [20, 80]
//! loss = [0.0, 0.01]
//! buffer_bdp = [1.0]
//!
//! [[flows]]                  # flows of the scheme under test (default: one bulk flow)
//! count = 1
//! start_s = 0.0
//! # size_bytes = 1_000_000  # finite flow
//! # on_off_s = [1.0, 0.5]   # application-limited: 1 s with data, 0.5 s without
//!
//! [[cross]]                  # cross traffic with a fixed scheme
//! scheme = "native-cubic"
//! count = 1
//! ```
//!
//! Every error names the file, the line and the field. Every numeric field has a range,
//! checked when the file loads (NaN and infinities never pass): the table is in `docs/eval.md`
//! ("Ranges"), the bounds are the constants below and in [`crate::traces`]. Upper bounds keep a
//! run's memory and time sane, including combinations: a condition's rate times `duration_s`
//! ([`MAX_PACKETS_PER_RUN`]), and a cellular trace's mean rate times its period
//! ([`crate::traces::MAX_OPPORTUNITIES`], computed before the trace is generated).

use std::path::{Path, PathBuf};

use ccp_datapath::sim::Trace;
use serde::Deserialize;
use thiserror::Error;
use toml::Spanned;

use crate::traces::CellularSpec;

/// A scenario file could not be used.
#[derive(Debug, Error)]
pub enum ScenarioError {
    /// The file could not be read.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// TOML syntax or an unknown/mistyped field (the message carries line and column).
    #[error("{path}: {message}")]
    Parse {
        /// File.
        path: String,
        /// The parser's message.
        message: String,
    },
    /// A value is out of range or inconsistent.
    #[error("{path}:{line}: {field}: {message}")]
    Invalid {
        /// File.
        path: String,
        /// 1-based line.
        line: usize,
        /// Field path, e.g. `conditions[2].bw_mbps`.
        field: String,
        /// What is wrong.
        message: String,
    },
}

/// How the buffer is sized.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Buffer {
    /// A multiple of the bandwidth-delay product.
    Bdp(f64),
    /// Bytes.
    Bytes(u64),
    /// Full-size frames (1514 bytes each on the wire: 1448 of payload and 66 of headers).
    Packets(u64),
}

/// Where the bottleneck rate comes from.
#[derive(Debug, Clone, PartialEq)]
pub enum RateSource {
    /// A constant rate, Mbit/s.
    Constant(f64),
    /// A mahimahi trace file, and its contents.
    TraceFile(PathBuf, Trace),
    /// A generated cellular trace.
    Cellular(CellularSpec),
}

/// A change of the path during a run.
#[derive(Debug, Clone, PartialEq)]
pub struct Phase {
    /// When, s.
    pub at_s: f64,
    /// New rate, Mbit/s.
    pub bw_mbps: Option<f64>,
    /// New base RTT, ms.
    pub rtt_ms: Option<f64>,
    /// New loss probability.
    pub loss: Option<f64>,
}

/// One network condition.
#[derive(Debug, Clone, PartialEq)]
pub struct Condition {
    /// Environment label.
    pub env: String,
    /// Unique id within the scenario.
    pub id: String,
    /// Bottleneck rate.
    pub rate: RateSource,
    /// Base RTT, ms.
    pub rtt_ms: f64,
    /// Random loss probability.
    pub loss: f64,
    /// Buffer.
    pub buffer: Buffer,
    /// Path changes.
    pub phases: Vec<Phase>,
    /// ACK aggregation interval, ms (0: none).
    pub ack_aggregation_ms: f64,
}

/// A group of flows.
#[derive(Debug, Clone, PartialEq)]
pub struct FlowGroup {
    /// Fixed scheme (cross traffic) or `None` (the scheme under test).
    pub scheme: Option<String>,
    /// How many.
    pub count: usize,
    /// Start time, s.
    pub start_s: f64,
    /// Gap between successive starts of the group's flows, s.
    pub stagger_s: f64,
    /// Bytes each (`None`: until the end).
    pub size_bytes: Option<u64>,
    /// Application on/off periods, s (`None`: always has data).
    pub on_off_s: Option<(f64, f64)>,
}

/// A validated scenario.
#[derive(Debug, Clone, PartialEq)]
pub struct Scenario {
    /// Name.
    pub name: String,
    /// Virtual seconds per run.
    pub duration_s: f64,
    /// Seeds; each condition and scheme runs once per seed.
    pub seeds: Vec<u64>,
    /// Schemes to run (`None`: all available).
    pub schemes: Option<Vec<String>>,
    /// Time-series interval, ms (0: none).
    pub series_interval_ms: u64,
    /// Conditions.
    pub conditions: Vec<Condition>,
    /// Flows of the scheme under test.
    pub flows: Vec<FlowGroup>,
    /// Cross traffic.
    pub cross: Vec<FlowGroup>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawScenario {
    name: String,
    #[serde(default)]
    description: Option<String>,
    duration_s: Spanned<f64>,
    #[serde(default)]
    seeds: Option<Spanned<Vec<u64>>>,
    #[serde(default)]
    repetitions: Option<Spanned<u64>>,
    #[serde(default)]
    schemes: Option<Vec<String>>,
    #[serde(default)]
    series_interval_ms: Option<Spanned<u64>>,
    #[serde(default)]
    conditions: Vec<RawCondition>,
    #[serde(default)]
    grid: Option<RawGrid>,
    #[serde(default)]
    flows: Vec<RawFlows>,
    #[serde(default)]
    cross: Vec<RawFlows>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawCondition {
    #[serde(default)]
    env: Option<String>,
    #[serde(default)]
    id: Option<String>,
    #[serde(default)]
    bw_mbps: Option<Spanned<f64>>,
    #[serde(default)]
    trace: Option<Spanned<String>>,
    #[serde(default)]
    cellular: Option<Spanned<CellularSpec>>,
    rtt_ms: Spanned<f64>,
    #[serde(default)]
    loss: Option<Spanned<f64>>,
    #[serde(default)]
    buffer_bdp: Option<Spanned<f64>>,
    #[serde(default)]
    buffer_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    buffer_pkts: Option<Spanned<u64>>,
    #[serde(default)]
    phases: Vec<Spanned<RawPhase>>,
    #[serde(default)]
    ack_aggregation_ms: Option<Spanned<f64>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawPhase {
    at_s: f64,
    #[serde(default)]
    bw_mbps: Option<f64>,
    #[serde(default)]
    rtt_ms: Option<f64>,
    #[serde(default)]
    loss: Option<f64>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawGrid {
    #[serde(default)]
    env: Option<String>,
    bw_mbps: Spanned<Vec<f64>>,
    rtt_ms: Spanned<Vec<f64>>,
    #[serde(default)]
    loss: Option<Spanned<Vec<f64>>>,
    #[serde(default)]
    buffer_bdp: Option<Spanned<Vec<f64>>>,
}

#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
struct RawFlows {
    #[serde(default)]
    scheme: Option<String>,
    #[serde(default = "one")]
    count: Spanned<usize>,
    #[serde(default)]
    start_s: Option<Spanned<f64>>,
    #[serde(default)]
    stagger_s: Option<Spanned<f64>>,
    #[serde(default)]
    size_bytes: Option<Spanned<u64>>,
    #[serde(default)]
    on_off_s: Option<Spanned<[f64; 2]>>,
}

fn one() -> Spanned<usize> {
    Spanned::new(0..0, 1)
}

/// Turns byte offsets into line numbers for error messages.
struct Src<'a> {
    path: &'a str,
    text: &'a str,
}

impl Src<'_> {
    fn line(&self, offset: usize) -> usize {
        self.text
            .get(..offset)
            .map_or(1, |t| t.matches('\n').count() + 1)
    }

    fn invalid<T>(&self, span: &Spanned<T>, field: String, message: &str) -> ScenarioError {
        ScenarioError::Invalid {
            path: self.path.to_string(),
            line: self.line(span.span().start),
            field,
            message: message.to_string(),
        }
    }
}

fn check<T>(
    src: &Src<'_>,
    v: &Spanned<T>,
    field: impl Into<String>,
    ok: impl Fn(&T) -> bool,
    msg: &str,
) -> Result<(), ScenarioError> {
    if ok(v.get_ref()) {
        Ok(())
    } else {
        Err(src.invalid(v, field.into(), msg))
    }
}

fn fmt_num(x: f64) -> String {
    let s = format!("{x}");
    s.trim_end_matches(".0").to_string()
}

fn pos(x: f64) -> bool {
    x.is_finite() && x > 0.0
}

/// Longest run: a day of simulated time, s.
pub const MAX_DURATION_S: f64 = 86_400.0;
/// Most seeds (a `seeds` list or `repetitions`).
pub const MAX_SEEDS: usize = 10_000;
/// Most conditions in a scenario (listed and grid together).
pub const MAX_CONDITIONS: usize = 100_000;
/// Most values in one `[grid]` list.
pub const MAX_GRID_VALUES: usize = 1_000;
/// Most phases of one condition.
pub const MAX_PHASES: usize = 1_000;
/// Most flows in one run (every `[[flows]]` and `[[cross]]` group together).
pub const MAX_FLOWS_PER_RUN: usize = 10_000;
/// Largest finite flow, bytes (1 TB).
pub const MAX_SIZE_BYTES: u64 = 1_000_000_000_000;
/// Largest `buffer_bytes` (1 GB).
pub const MAX_BUFFER_BYTES: u64 = 1_000_000_000;
/// Largest `buffer_pkts`.
pub const MAX_BUFFER_PKTS: u64 = 1_000_000;
/// Most time-series points per flow (`duration_s` over `series_interval_ms`).
pub const MAX_SERIES_POINTS: f64 = 100_000.0;
/// Most packets the bottleneck can carry in one run: the condition's highest rate (a phase's,
/// or a trace's mean) times `duration_s`, over 1500-byte packets. The simulator keeps a few
/// bytes per packet (every RTT and queueing-delay sample), so this is about 2 GB per run, and
/// about a minute at its 4-5 M packets/s.
pub const MAX_PACKETS_PER_RUN: f64 = 2.5e8;
/// Largest trace file read, bytes.
pub const MAX_TRACE_FILE_BYTES: u64 = 256 << 20;
/// Latest timestamp in a trace file, ms (a day).
pub const MAX_TRACE_MS: u64 = 86_400_000;

/// The range of a numeric field: finite, between two bounds, each open or closed.
#[derive(Debug, Clone, Copy)]
struct Range {
    lo: f64,
    lo_open: bool,
    hi: f64,
    hi_open: bool,
    unit: &'static str,
}

impl Range {
    /// `[lo, hi]`.
    const fn closed(lo: f64, hi: f64, unit: &'static str) -> Self {
        Self {
            lo,
            lo_open: false,
            hi,
            hi_open: false,
            unit,
        }
    }

    /// `(lo, hi]`.
    const fn above(lo: f64, hi: f64, unit: &'static str) -> Self {
        Self {
            lo_open: true,
            ..Self::closed(lo, hi, unit)
        }
    }

    /// `[lo, hi)`.
    const fn below(lo: f64, hi: f64, unit: &'static str) -> Self {
        Self {
            hi_open: true,
            ..Self::closed(lo, hi, unit)
        }
    }

    fn contains(self, x: f64) -> bool {
        x.is_finite()
            && if self.lo_open {
                x > self.lo
            } else {
                x >= self.lo
            }
            && if self.hi_open {
                x < self.hi
            } else {
                x <= self.hi
            }
    }

    fn message(self) -> String {
        format!(
            "must be a finite number in {}{}, {}{}{}{}",
            if self.lo_open { '(' } else { '[' },
            fmt_num(self.lo),
            fmt_num(self.hi),
            if self.hi_open { ')' } else { ']' },
            if self.unit.is_empty() { "" } else { " " },
            self.unit
        )
    }
}

const DURATION_S: Range = Range::above(0.0, MAX_DURATION_S, "s (a day of simulated time)");
const BW_MBPS: Range = Range::closed(0.01, 100_000.0, "Mbit/s");
const RTT_MS: Range = Range::closed(0.01, 10_000.0, "ms");
const LOSS: Range = Range::below(0.0, 1.0, "(a probability)");
const BUFFER_BDP: Range = Range::above(0.0, 1_000.0, "BDPs");
const ACK_AGGREGATION_MS: Range = Range::closed(0.0, 1_000.0, "ms");
const ON_OFF_S: Range = Range::closed(0.001, MAX_DURATION_S, "s");
const CELLULAR_MEAN_MBPS: Range = Range::closed(
    crate::traces::MIN_MEAN_MBPS,
    crate::traces::MAX_MEAN_MBPS,
    "Mbit/s",
);
const CELLULAR_PERIOD_S: Range = Range::closed(
    crate::traces::MIN_PERIOD_S,
    crate::traces::MAX_PERIOD_S,
    "s",
);
const CELLULAR_SIGMA: Range = Range::closed(0.0, crate::traces::MAX_SIGMA, "");

/// Checks a float field against its range and returns it.
fn in_range(
    src: &Src<'_>,
    v: &Spanned<f64>,
    field: impl Into<String>,
    r: Range,
) -> Result<f64, ScenarioError> {
    in_range_at(src, v, *v.get_ref(), field, r)
}

/// Checks `x`, a value inside `at` (a list or a table), against its range.
fn in_range_at<T>(
    src: &Src<'_>,
    at: &Spanned<T>,
    x: f64,
    field: impl Into<String>,
    r: Range,
) -> Result<f64, ScenarioError> {
    if r.contains(x) {
        Ok(x)
    } else {
        Err(src.invalid(at, field.into(), &r.message()))
    }
}

/// Checks the packets a condition's bottleneck can carry in a run ([`MAX_PACKETS_PER_RUN`]).
fn packets_per_run<T>(
    src: &Src<'_>,
    at: &Spanned<T>,
    field: String,
    peak_mbps: f64,
    duration_s: f64,
) -> Result<(), ScenarioError> {
    let packets = peak_mbps * 1e6 * duration_s / (1500.0 * 8.0);
    if packets <= MAX_PACKETS_PER_RUN {
        return Ok(());
    }
    Err(src.invalid(
        at,
        field,
        &format!(
            "{} Mbit/s for duration_s = {} s is {packets:.3e} packets through the bottleneck in \
             one run; at most {MAX_PACKETS_PER_RUN:.1e} (the simulator keeps every packet's \
             delay samples): shorten the run or lower the rate",
            fmt_num(peak_mbps),
            fmt_num(duration_s)
        ),
    ))
}

impl Scenario {
    /// Reads and validates a scenario file.
    pub fn load(path: &Path) -> Result<Self, ScenarioError> {
        let name = path.display().to_string();
        let text = std::fs::read_to_string(path).map_err(|source| ScenarioError::Io {
            path: name.clone(),
            source,
        })?;
        Self::parse(&name, &text, path.parent())
    }

    /// Parses scenario text; `path` labels errors, `base` resolves relative trace paths.
    pub fn parse(path: &str, text: &str, base: Option<&Path>) -> Result<Self, ScenarioError> {
        let raw: RawScenario = toml::from_str(text).map_err(|e| ScenarioError::Parse {
            path: path.to_string(),
            message: e.to_string(),
        })?;
        let src = Src { path, text };
        let _ = raw.description;
        let duration_s = in_range(&src, &raw.duration_s, "duration_s", DURATION_S)?;
        let seeds = seeds(&src, &raw)?;
        let series_interval_ms =
            series_interval(&src, raw.series_interval_ms.as_ref(), duration_s)?;

        let mut conditions = Vec::new();
        for (i, c) in raw.conditions.iter().enumerate() {
            conditions.push(condition(&src, i, c, base, duration_s)?);
        }
        if let Some(g) = &raw.grid {
            conditions.extend(grid(&src, g, duration_s)?);
        }
        if conditions.is_empty() || conditions.len() > MAX_CONDITIONS {
            return Err(ScenarioError::Invalid {
                path: path.to_string(),
                line: 1,
                field: "conditions".into(),
                message: format!(
                    "a scenario needs 1 to {MAX_CONDITIONS} conditions ([[conditions]] and \
                     [grid] together), found {}",
                    conditions.len()
                ),
            });
        }
        let mut seen = std::collections::HashSet::new();
        for c in &conditions {
            if !seen.insert(c.id.clone()) {
                return Err(ScenarioError::Invalid {
                    path: path.to_string(),
                    line: 1,
                    field: "conditions".into(),
                    message: format!("two conditions have the id `{}`", c.id),
                });
            }
        }
        let mut flows = groups(&src, &raw.flows, "flows", false, duration_s)?;
        if flows.is_empty() {
            flows.push(FlowGroup {
                scheme: None,
                count: 1,
                start_s: 0.0,
                stagger_s: 0.0,
                size_bytes: None,
                on_off_s: None,
            });
        }
        let cross = groups(&src, &raw.cross, "cross", true, duration_s)?;
        flow_totals(&src, &raw, &flows, &cross)?;
        Ok(Scenario {
            name: raw.name,
            duration_s,
            seeds,
            schemes: raw.schemes,
            series_interval_ms,
            conditions,
            flows,
            cross,
        })
    }

    /// Every scheme named in the scenario (under test and cross traffic).
    pub fn named_schemes(&self) -> Vec<String> {
        let mut v: Vec<String> = self.schemes.clone().unwrap_or_default();
        v.extend(self.cross.iter().filter_map(|g| g.scheme.clone()));
        v.extend(self.flows.iter().filter_map(|g| g.scheme.clone()));
        v
    }
}

fn seeds(src: &Src<'_>, raw: &RawScenario) -> Result<Vec<u64>, ScenarioError> {
    Ok(match (&raw.seeds, &raw.repetitions) {
        (Some(s), None) => {
            check(
                src,
                s,
                "seeds",
                |v| (1..=MAX_SEEDS).contains(&v.len()),
                &format!("needs 1 to {MAX_SEEDS} seeds"),
            )?;
            let mut seen = std::collections::HashSet::new();
            if let Some(d) = s.get_ref().iter().find(|&&x| !seen.insert(x)) {
                return Err(src.invalid(s, "seeds".into(), &format!("seed {d} is listed twice")));
            }
            s.get_ref().clone()
        }
        (None, Some(r)) => {
            let ok = |&n: &u64| (1..=MAX_SEEDS as u64).contains(&n);
            check(
                src,
                r,
                "repetitions",
                ok,
                &format!("must be 1..={MAX_SEEDS}"),
            )?;
            (1..=*r.get_ref()).collect()
        }
        (None, None) => vec![1],
        (Some(s), Some(_)) => {
            return Err(src.invalid(s, "seeds".into(), "give seeds or repetitions, not both"));
        }
    })
}

/// `series_interval_ms`: 0 (no series), or at least 1 ms with at most [`MAX_SERIES_POINTS`]
/// points per flow over the run.
fn series_interval(
    src: &Src<'_>,
    v: Option<&Spanned<u64>>,
    duration_s: f64,
) -> Result<u64, ScenarioError> {
    let Some(v) = v else { return Ok(0) };
    let ms = *v.get_ref();
    // Whole milliseconds, so the smallest interval allowed is a whole number too.
    let min_ms = (duration_s * 1000.0 / MAX_SERIES_POINTS).ceil().max(1.0);
    if ms == 0 || (ms as f64 >= min_ms && ms as f64 <= MAX_DURATION_S * 1000.0) {
        return Ok(ms);
    }
    Err(src.invalid(
        v,
        "series_interval_ms".into(),
        &format!(
            "must be 0 (no series) or in [{}, {}] ms: at most {} points per flow over \
             duration_s = {} s",
            fmt_num(min_ms),
            fmt_num(MAX_DURATION_S * 1000.0),
            fmt_num(MAX_SERIES_POINTS),
            fmt_num(duration_s)
        ),
    ))
}

fn groups(
    src: &Src<'_>,
    v: &[RawFlows],
    what: &str,
    cross: bool,
    duration_s: f64,
) -> Result<Vec<FlowGroup>, ScenarioError> {
    v.iter()
        .enumerate()
        .map(|(i, f)| {
            let field = |name: &str| format!("{what}[{i}].{name}");
            check(
                src,
                &f.count,
                field("count"),
                |&n| n <= MAX_FLOWS_PER_RUN,
                &format!("must be in [0, {MAX_FLOWS_PER_RUN}]"),
            )?;
            if cross && f.scheme.is_none() {
                return Err(src.invalid(&f.count, field("scheme"), "cross traffic needs a scheme"));
            }
            // A flow starts before the run ends.
            let start = Range::below(0.0, duration_s, "s (before the end of the run)");
            let start_s = match &f.start_s {
                Some(v) => in_range(src, v, field("start_s"), start)?,
                None => 0.0,
            };
            let stagger_s = match &f.stagger_s {
                Some(v) => {
                    let r = Range::closed(0.0, duration_s, "s (at most duration_s)");
                    let x = in_range(src, v, field("stagger_s"), r)?;
                    let last = start_s + x * f.count.get_ref().saturating_sub(1) as f64;
                    if !start.contains(last) {
                        return Err(src.invalid(
                            v,
                            field("stagger_s"),
                            &format!(
                                "the group's last flow would start at {} s, not before the end \
                                 of the run ({} s)",
                                fmt_num(last),
                                fmt_num(duration_s)
                            ),
                        ));
                    }
                    x
                }
                None => 0.0,
            };
            if let Some(b) = &f.size_bytes {
                check(
                    src,
                    b,
                    field("size_bytes"),
                    |n| (1..=MAX_SIZE_BYTES).contains(n),
                    &format!("must be in [1, {MAX_SIZE_BYTES}] bytes"),
                )?;
            }
            let on_off_s = match &f.on_off_s {
                Some(oo) => {
                    let [on, off] = *oo.get_ref();
                    let on = in_range_at(src, oo, on, field("on_off_s[0]"), ON_OFF_S)?;
                    let off = in_range_at(src, oo, off, field("on_off_s[1]"), ON_OFF_S)?;
                    Some((on, off))
                }
                None => None,
            };
            Ok(FlowGroup {
                scheme: f.scheme.clone(),
                count: *f.count.get_ref(),
                start_s,
                stagger_s,
                size_bytes: f.size_bytes.as_ref().map(|b| *b.get_ref()),
                on_off_s,
            })
        })
        .collect()
}

/// At least one flow of the scheme under test, and at most [`MAX_FLOWS_PER_RUN`] in a run.
fn flow_totals(
    src: &Src<'_>,
    raw: &RawScenario,
    flows: &[FlowGroup],
    cross: &[FlowGroup],
) -> Result<(), ScenarioError> {
    let main: usize = flows.iter().map(|g| g.count).sum();
    let all = main + cross.iter().map(|g| g.count).sum::<usize>();
    let at = raw
        .flows
        .iter()
        .chain(&raw.cross)
        .last()
        .map_or(raw.duration_s.span(), |g| g.count.span());
    let message = if main == 0 {
        "the [[flows]] groups have no flow (every count is 0)".to_string()
    } else if all > MAX_FLOWS_PER_RUN {
        format!(
            "{all} flows in a run ([[flows]] and [[cross]] together); at most {MAX_FLOWS_PER_RUN}"
        )
    } else {
        return Ok(());
    };
    Err(ScenarioError::Invalid {
        path: src.path.to_string(),
        line: src.line(at.start),
        field: "flows".into(),
        message,
    })
}

fn condition(
    src: &Src<'_>,
    i: usize,
    c: &RawCondition,
    base: Option<&Path>,
    duration_s: f64,
) -> Result<Condition, ScenarioError> {
    let f = |name: &str| format!("conditions[{i}].{name}");
    in_range(src, &c.rtt_ms, f("rtt_ms"), RTT_MS)?;
    let rate = rate_source(src, c, base, &f)?;
    let loss = match &c.loss {
        Some(l) => in_range(src, l, f("loss"), LOSS)?,
        None => 0.0,
    };
    let buffer = buffer(src, c, &f)?;
    buffer_limits(src, c, &f)?;
    let ack_aggregation_ms = match &c.ack_aggregation_ms {
        Some(a) => in_range(src, a, f("ack_aggregation_ms"), ACK_AGGREGATION_MS)?,
        None => 0.0,
    };
    let phases = phases(src, c, &f, duration_s)?;
    let base_mbps = match &rate {
        RateSource::Constant(b) => *b,
        RateSource::TraceFile(_, t) => t.mean_bps() as f64 / 1e6,
        RateSource::Cellular(s) => s.mean_mbps,
    };
    let peak_mbps = phases
        .iter()
        .filter_map(|p| p.bw_mbps)
        .fold(base_mbps, f64::max);
    match (&c.bw_mbps, &c.trace, &c.cellular) {
        (Some(b), _, _) => packets_per_run(src, b, f("bw_mbps"), peak_mbps, duration_s)?,
        (_, Some(t), _) => packets_per_run(src, t, f("trace"), peak_mbps, duration_s)?,
        (_, _, Some(cell)) => packets_per_run(src, cell, f("cellular"), peak_mbps, duration_s)?,
        _ => {}
    }
    let id = c.id.clone().unwrap_or_else(|| {
        let rate = match &rate {
            RateSource::Constant(b) => format!("bw{}", fmt_num(*b)),
            RateSource::TraceFile(p, _) => {
                format!(
                    "trace-{}",
                    p.file_name()
                        .map(|n| n.to_string_lossy().to_string())
                        .unwrap_or_default()
                )
            }
            RateSource::Cellular(s) => format!("cell{}-{}", fmt_num(s.mean_mbps), s.seed),
        };
        let mut id = format!(
            "{rate}-rtt{}-loss{}-buf{}",
            fmt_num(c.rtt_ms.get_ref().to_owned()),
            fmt_num(loss),
            buffer_label(buffer)
        );
        if !phases.is_empty() {
            id = format!("{id}-{}phases", phases.len() + 1);
        }
        id
    });
    Ok(Condition {
        env: c.env.clone().unwrap_or_else(|| "default".into()),
        id,
        rate,
        rtt_ms: *c.rtt_ms.get_ref(),
        loss,
        buffer,
        phases,
        ack_aggregation_ms,
    })
}

fn rate_source(
    src: &Src<'_>,
    c: &RawCondition,
    base: Option<&Path>,
    f: &dyn Fn(&str) -> String,
) -> Result<RateSource, ScenarioError> {
    let sources = usize::from(c.bw_mbps.is_some())
        + usize::from(c.trace.is_some())
        + usize::from(c.cellular.is_some());
    if sources != 1 {
        return Err(src.invalid(
            &c.rtt_ms,
            f("bw_mbps"),
            "give exactly one of bw_mbps, trace, cellular",
        ));
    }
    Ok(if let Some(b) = &c.bw_mbps {
        RateSource::Constant(in_range(src, b, f("bw_mbps"), BW_MBPS)?)
    } else if let Some(t) = &c.trace {
        let p = PathBuf::from(t.get_ref());
        let p = if p.is_relative() {
            base.map_or(p.clone(), |b| b.join(&p))
        } else {
            p
        };
        if !p.is_file() {
            return Err(src.invalid(t, f("trace"), &format!("no trace file at {}", p.display())));
        }
        // Read it now, so a malformed trace is a bad-input error before anything runs.
        let trace = trace_file(&p).map_err(|e| src.invalid(t, f("trace"), &e))?;
        RateSource::TraceFile(p, trace)
    } else if let Some(cell) = &c.cellular {
        let spec = cell.get_ref();
        let field = |name: &str| f(&format!("cellular.{name}"));
        in_range_at(
            src,
            cell,
            spec.mean_mbps,
            field("mean_mbps"),
            CELLULAR_MEAN_MBPS,
        )?;
        in_range_at(
            src,
            cell,
            spec.period_s,
            field("period_s"),
            CELLULAR_PERIOD_S,
        )?;
        in_range_at(src, cell, spec.sigma, field("sigma"), CELLULAR_SIGMA)?;
        // Before anything is generated: the trace holds mean rate x period of opportunities.
        let ops = spec.opportunities();
        if ops > crate::traces::MAX_OPPORTUNITIES as f64 {
            return Err(src.invalid(
                cell,
                f("cellular"),
                &format!(
                    "mean_mbps = {} over period_s = {} s makes a trace of {ops:.3e} delivery \
                     opportunities; at most {:.0e}: lower the mean rate or the period",
                    fmt_num(spec.mean_mbps),
                    fmt_num(spec.period_s),
                    crate::traces::MAX_OPPORTUNITIES as f64
                ),
            ));
        }
        RateSource::Cellular(spec.clone())
    } else {
        return Err(src.invalid(&c.rtt_ms, f("bw_mbps"), "missing rate"));
    })
}

/// Reads a mahimahi trace file within [`MAX_TRACE_FILE_BYTES`], timestamps up to
/// [`MAX_TRACE_MS`] and at most [`crate::traces::MAX_OPPORTUNITIES`] lines.
fn trace_file(p: &Path) -> Result<Trace, String> {
    let name = p.display().to_string();
    let len = std::fs::metadata(p)
        .map_err(|e| format!("{name}: {e}"))?
        .len();
    if len > MAX_TRACE_FILE_BYTES {
        return Err(format!(
            "{name}: {len} bytes; trace files are read up to {MAX_TRACE_FILE_BYTES} bytes"
        ));
    }
    let text = std::fs::read_to_string(p).map_err(|e| format!("{name}: {e}"))?;
    let mut opportunities = 0u64;
    for (i, line) in text.lines().enumerate() {
        // Lines that are not numbers are left to the parser's own error.
        if let Ok(ms) = line.trim().parse::<u64>() {
            opportunities += 1;
            if ms > MAX_TRACE_MS {
                return Err(format!(
                    "{name}:{}: timestamp {ms} ms is past {MAX_TRACE_MS} ms (a day)",
                    i + 1
                ));
            }
        }
    }
    if opportunities > crate::traces::MAX_OPPORTUNITIES {
        return Err(format!(
            "{name}: {opportunities} delivery opportunities; at most {}",
            crate::traces::MAX_OPPORTUNITIES
        ));
    }
    Trace::parse(&name, &text).map_err(|e| e.to_string())
}

/// Upper bounds of the buffer fields (their lower bounds and meaning are [`buffer`]'s).
fn buffer_limits(
    src: &Src<'_>,
    c: &RawCondition,
    f: &dyn Fn(&str) -> String,
) -> Result<(), ScenarioError> {
    if let Some(b) = &c.buffer_bdp {
        in_range(src, b, f("buffer_bdp"), BUFFER_BDP)?;
    }
    if let Some(b) = &c.buffer_bytes {
        check(
            src,
            b,
            f("buffer_bytes"),
            |&n| n <= MAX_BUFFER_BYTES,
            &format!("must be at most {MAX_BUFFER_BYTES} bytes"),
        )?;
    }
    if let Some(b) = &c.buffer_pkts {
        check(
            src,
            b,
            f("buffer_pkts"),
            |&n| n <= MAX_BUFFER_PKTS,
            &format!("must be at most {MAX_BUFFER_PKTS} packets"),
        )?;
    }
    Ok(())
}

fn buffer(
    src: &Src<'_>,
    c: &RawCondition,
    f: &dyn Fn(&str) -> String,
) -> Result<Buffer, ScenarioError> {
    Ok(match (&c.buffer_bdp, &c.buffer_bytes, &c.buffer_pkts) {
        (Some(b), None, None) => {
            check(
                src,
                b,
                f("buffer_bdp"),
                |x: &f64| pos(*x),
                "must be a positive multiple of the BDP",
            )?;
            Buffer::Bdp(*b.get_ref())
        }
        (None, Some(b), None) => {
            check(
                src,
                b,
                f("buffer_bytes"),
                |&n| n >= crate::runner::FRAME_BYTES,
                "must hold at least one full-size frame (1514 bytes: 1448 of payload and 66 of \
                 headers)",
            )?;
            Buffer::Bytes(*b.get_ref())
        }
        (None, None, Some(b)) => {
            check(
                src,
                b,
                f("buffer_pkts"),
                |&n| n >= 1,
                "must hold at least one packet",
            )?;
            Buffer::Packets(*b.get_ref())
        }
        (None, None, None) => Buffer::Bdp(1.0),
        _ => {
            return Err(src.invalid(
                &c.rtt_ms,
                f("buffer_bdp"),
                "give one of buffer_bdp, buffer_bytes, buffer_pkts",
            ));
        }
    })
}

fn phases(
    src: &Src<'_>,
    c: &RawCondition,
    f: &dyn Fn(&str) -> String,
    duration_s: f64,
) -> Result<Vec<Phase>, ScenarioError> {
    if c.phases.len() > MAX_PHASES {
        return Err(src.invalid(
            &c.phases[MAX_PHASES],
            f("phases"),
            &format!("at most {MAX_PHASES} phases"),
        ));
    }
    let at = Range::closed(0.0, duration_s, "s (at most duration_s)");
    let mut phases = Vec::new();
    for (j, p) in c.phases.iter().enumerate() {
        let r = p.get_ref();
        let field = |name: &str| f(&format!("phases[{j}].{name}"));
        let opt = |x: Option<f64>, name: &str, range: Range| {
            x.map(|x| in_range_at(src, p, x, field(name), range))
                .transpose()
        };
        phases.push(Phase {
            at_s: in_range_at(src, p, r.at_s, field("at_s"), at)?,
            bw_mbps: opt(r.bw_mbps, "bw_mbps", BW_MBPS)?,
            rtt_ms: opt(r.rtt_ms, "rtt_ms", RTT_MS)?,
            loss: opt(r.loss, "loss", LOSS)?,
        });
    }
    Ok(phases)
}

fn buffer_label(b: Buffer) -> String {
    match b {
        Buffer::Bdp(x) => format!("{}bdp", fmt_num(x)),
        Buffer::Bytes(n) => format!("{n}B"),
        Buffer::Packets(n) => format!("{n}pkt"),
    }
}

fn grid(src: &Src<'_>, g: &RawGrid, duration_s: f64) -> Result<Vec<Condition>, ScenarioError> {
    let all = |v: &Spanned<Vec<f64>>, field: &str, range: Range| {
        let n = v.get_ref().len();
        if !(1..=MAX_GRID_VALUES).contains(&n) {
            return Err(src.invalid(
                v,
                format!("grid.{field}"),
                &format!("needs 1 to {MAX_GRID_VALUES} values, found {n}"),
            ));
        }
        for (k, &x) in v.get_ref().iter().enumerate() {
            in_range_at(src, v, x, format!("grid.{field}[{k}]"), range)?;
        }
        Ok(v.get_ref().clone())
    };
    let rates = all(&g.bw_mbps, "bw_mbps", BW_MBPS)?;
    let rtts = all(&g.rtt_ms, "rtt_ms", RTT_MS)?;
    let losses = match &g.loss {
        Some(l) => all(l, "loss", LOSS)?,
        None => vec![0.0],
    };
    let buffers = match &g.buffer_bdp {
        Some(b) => all(b, "buffer_bdp", BUFFER_BDP)?,
        None => vec![1.0],
    };
    let peak = rates.iter().copied().fold(0.0, f64::max);
    packets_per_run(src, &g.bw_mbps, "grid.bw_mbps".into(), peak, duration_s)?;
    // Counted before anything is built.
    let n = rates.len() * rtts.len() * losses.len() * buffers.len();
    if n > MAX_CONDITIONS {
        return Err(src.invalid(
            &g.bw_mbps,
            "grid".into(),
            &format!("{n} combinations; at most {MAX_CONDITIONS} conditions"),
        ));
    }
    let mut out = Vec::new();
    for &bw in &rates {
        for &rtt in &rtts {
            for &loss in &losses {
                for &buf in &buffers {
                    out.push(Condition {
                        env: g.env.clone().unwrap_or_else(|| "default".into()),
                        id: format!(
                            "bw{}-rtt{}-loss{}-buf{}",
                            fmt_num(bw),
                            fmt_num(rtt),
                            fmt_num(loss),
                            buffer_label(Buffer::Bdp(buf))
                        ),
                        rate: RateSource::Constant(bw),
                        rtt_ms: rtt,
                        loss,
                        buffer: Buffer::Bdp(buf),
                        phases: Vec::new(),
                        ack_aggregation_ms: 0.0,
                    });
                }
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grid_and_list_expand() {
        let s = Scenario::parse(
            "t.toml",
            r#"
name = "t"
duration_s = 5
repetitions = 2
[[conditions]]
env = "wan"
bw_mbps = 120
rtt_ms = 100
buffer_bdp = 5
[grid]
bw_mbps = [1, 5]
rtt_ms = [10, 20, 40]
loss = [0, 0.01]
"#,
            None,
        )
        .unwrap();
        assert_eq!(s.conditions.len(), 1 + 2 * 3 * 2);
        assert_eq!(s.seeds, vec![1, 2]);
        assert_eq!(s.conditions[0].id, "bw120-rtt100-loss0-buf5bdp");
        assert_eq!(s.flows.len(), 1);
    }

    #[test]
    fn errors_name_file_line_and_field() {
        let text = "name = \"t\"\nduration_s = 5\n[[conditions]]\nbw_mbps = -3\nrtt_ms = 10\n";
        let e = Scenario::parse("bad.toml", text, None)
            .unwrap_err()
            .to_string();
        assert!(e.starts_with("bad.toml:4: conditions[0].bw_mbps:"), "{e}");
        let e = Scenario::parse(
            "bad.toml",
            "name = \"t\"\nduration_s = 5\nbogus = 1\n",
            None,
        )
        .unwrap_err()
        .to_string();
        assert!(
            e.contains("bad.toml") && e.contains("line 3") && e.contains("bogus"),
            "{e}"
        );
        let text =
            "name = \"t\"\nduration_s = 5\n[[conditions]]\ntrace = \"nope.txt\"\nrtt_ms = 10\n";
        let e = Scenario::parse("bad.toml", text, None)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("bad.toml:4: conditions[0].trace: no trace file"),
            "{e}"
        );
    }

    const BASE: &str = "name = \"t\"\nduration_s = 5\n";
    const COND: &str = "[[conditions]]\nbw_mbps = 10\nrtt_ms = 20\n";

    /// The field and message of the range error `text` gives (it must give one).
    fn invalid(text: &str) -> (String, String) {
        match Scenario::parse("r.toml", text, None) {
            Err(ScenarioError::Invalid { field, message, .. }) => (field, message),
            Err(e) => panic!("not a range error: {e}\n{text}"),
            Ok(_) => panic!("accepted:\n{text}"),
        }
    }

    #[test]
    #[expect(clippy::too_many_lines, reason = "one table of cases, a few per field")]
    fn every_numeric_field_rejects_nan_infinity_and_out_of_range_values() {
        // Before this fix `duration_s = 1e12` ran forever, `stagger_s = inf` and `start_s =
        // nan` were accepted, and most fields had no upper bound.
        let top = |line: &str| format!("name = \"t\"\n{line}\n{COND}");
        let cond = |lines: &str| format!("{BASE}[[conditions]]\n{lines}\n");
        let with =
            |lines: &str| format!("{BASE}[[conditions]]\nbw_mbps = 10\nrtt_ms = 20\n{lines}\n");
        let flows = |lines: &str| format!("{BASE}{COND}[[flows]]\n{lines}\n");
        let cross =
            |lines: &str| format!("{BASE}{COND}[[cross]]\nscheme = \"native-cubic\"\n{lines}\n");
        let cases: Vec<(String, &str, &str)> = vec![
            (top("duration_s = nan"), "duration_s", "86400"),
            (top("duration_s = inf"), "duration_s", "86400"),
            (top("duration_s = 1e12"), "duration_s", "86400"),
            (top("duration_s = 0"), "duration_s", "(0, 86400]"),
            (format!("{BASE}seeds = [1, 2, 1]\n{COND}"), "seeds", "twice"),
            (format!("{BASE}seeds = []\n{COND}"), "seeds", "10000"),
            (
                format!("{BASE}repetitions = 20000\n{COND}"),
                "repetitions",
                "10000",
            ),
            (
                format!("{BASE}series_interval_ms = 9223372036854775807\n{COND}"),
                "series_interval_ms",
                "86400000",
            ),
            (
                format!("name = \"t\"\nduration_s = 86400\nseries_interval_ms = 1\n{COND}"),
                "series_interval_ms",
                "[864, 86400000] ms",
            ),
            (
                cond("bw_mbps = nan\nrtt_ms = 20"),
                "conditions[0].bw_mbps",
                "100000",
            ),
            (
                cond("bw_mbps = inf\nrtt_ms = 20"),
                "conditions[0].bw_mbps",
                "100000",
            ),
            (
                cond("bw_mbps = 1e12\nrtt_ms = 20"),
                "conditions[0].bw_mbps",
                "100000",
            ),
            (
                cond("bw_mbps = 10\nrtt_ms = nan"),
                "conditions[0].rtt_ms",
                "10000",
            ),
            (
                cond("bw_mbps = 10\nrtt_ms = 1e9"),
                "conditions[0].rtt_ms",
                "10000",
            ),
            (with("loss = nan"), "conditions[0].loss", "[0, 1)"),
            (with("loss = 1.0"), "conditions[0].loss", "[0, 1)"),
            (
                with("ack_aggregation_ms = inf"),
                "conditions[0].ack_aggregation_ms",
                "1000",
            ),
            (
                with("ack_aggregation_ms = 1e6"),
                "conditions[0].ack_aggregation_ms",
                "1000",
            ),
            (with("buffer_bdp = 1e9"), "conditions[0].buffer_bdp", "1000"),
            (
                with("buffer_bytes = 1_000_000_000_000"),
                "conditions[0].buffer_bytes",
                "1000000000",
            ),
            (
                with("buffer_pkts = 100_000_000"),
                "conditions[0].buffer_pkts",
                "1000000",
            ),
            (
                cond("cellular = { seed = 1, mean_mbps = 1e12 }\nrtt_ms = 20"),
                "conditions[0].cellular.mean_mbps",
                "10000",
            ),
            (
                cond("cellular = { seed = 1, mean_mbps = nan }\nrtt_ms = 20"),
                "conditions[0].cellular.mean_mbps",
                "10000",
            ),
            (
                cond("cellular = { seed = 1, mean_mbps = 10, period_s = 1e12 }\nrtt_ms = 20"),
                "conditions[0].cellular.period_s",
                "3600",
            ),
            (
                cond("cellular = { seed = 1, mean_mbps = 10, period_s = inf }\nrtt_ms = 20"),
                "conditions[0].cellular.period_s",
                "3600",
            ),
            (
                cond("cellular = { seed = 1, mean_mbps = 10, sigma = nan }\nrtt_ms = 20"),
                "conditions[0].cellular.sigma",
                "[0, 3]",
            ),
            (
                with("phases = [{ at_s = nan }]"),
                "conditions[0].phases[0].at_s",
                "[0, 5]",
            ),
            (
                with("phases = [{ at_s = 6 }]"),
                "conditions[0].phases[0].at_s",
                "[0, 5]",
            ),
            (
                with("phases = [{ at_s = 1 }, { at_s = 2, bw_mbps = inf }]"),
                "conditions[0].phases[1].bw_mbps",
                "100000",
            ),
            (
                with("phases = [{ at_s = 1, rtt_ms = nan }]"),
                "conditions[0].phases[0].rtt_ms",
                "10000",
            ),
            (
                with("phases = [{ at_s = 1, loss = 2 }]"),
                "conditions[0].phases[0].loss",
                "[0, 1)",
            ),
            (
                format!("{BASE}[grid]\nbw_mbps = [10, nan]\nrtt_ms = [20]\n"),
                "grid.bw_mbps[1]",
                "100000",
            ),
            (
                format!("{BASE}[grid]\nbw_mbps = [10]\nrtt_ms = [inf]\n"),
                "grid.rtt_ms[0]",
                "10000",
            ),
            (
                format!("{BASE}[grid]\nbw_mbps = [10]\nrtt_ms = [20]\nloss = [1.5]\n"),
                "grid.loss[0]",
                "[0, 1)",
            ),
            (
                format!("{BASE}[grid]\nbw_mbps = [10]\nrtt_ms = [20]\nbuffer_bdp = [1e9]\n"),
                "grid.buffer_bdp[0]",
                "1000",
            ),
            (flows("count = 20000"), "flows[0].count", "10000"),
            (flows("start_s = nan"), "flows[0].start_s", "[0, 5)"),
            (flows("start_s = -1"), "flows[0].start_s", "[0, 5)"),
            (flows("start_s = 5"), "flows[0].start_s", "[0, 5)"),
            (flows("stagger_s = inf"), "flows[0].stagger_s", "[0, 5]"),
            (
                flows("count = 5\nstagger_s = 2"),
                "flows[0].stagger_s",
                "would start at 8 s",
            ),
            (
                flows("size_bytes = 0"),
                "flows[0].size_bytes",
                "1000000000000",
            ),
            (
                flows("size_bytes = 10_000_000_000_000"),
                "flows[0].size_bytes",
                "1000000000000",
            ),
            (
                flows("on_off_s = [nan, 1]"),
                "flows[0].on_off_s[0]",
                "86400",
            ),
            (
                flows("on_off_s = [1, inf]"),
                "flows[0].on_off_s[1]",
                "86400",
            ),
            (flows("count = 0"), "flows", "no flow"),
            (cross("start_s = inf"), "cross[0].start_s", "[0, 5)"),
            (cross("stagger_s = nan"), "cross[0].stagger_s", "[0, 5]"),
            (
                cross("count = 9000\n[[cross]]\nscheme = \"native-reno\"\ncount = 9000"),
                "flows",
                "10000",
            ),
        ];
        for (text, field, bound) in &cases {
            let (f, m) = invalid(text);
            assert_eq!(&f, field, "{text}\n{m}");
            assert!(m.contains(bound), "{field}: `{m}` does not say `{bound}`");
        }
    }

    #[test]
    fn memory_hungry_cellular_traces_are_rejected_before_they_are_generated() {
        // Each within its own range, but 10 Gbit/s for an hour is 3e9 opportunities (24 GB);
        // before this fix the runner allocated it (and `mean_mbps = 1e12` aborted).
        let text = format!(
            "{BASE}[[conditions]]\ncellular = {{ seed = 1, mean_mbps = 10000, period_s = 3600 }}\nrtt_ms = 20\n"
        );
        let (field, message) = invalid(&text);
        assert_eq!(field, "conditions[0].cellular");
        assert!(
            message.contains("opportunities") && message.contains("1e7"),
            "{message}"
        );
        // The largest allowed period at a typical LTE rate is fine.
        let ok = format!(
            "{BASE}[[conditions]]\ncellular = {{ seed = 1, mean_mbps = 24, period_s = 3600 }}\nrtt_ms = 20\n"
        );
        Scenario::parse("ok.toml", &ok, None).unwrap();
    }

    #[test]
    fn rate_times_duration_is_bounded() {
        let text = "name = \"t\"\nduration_s = 86400\n[[conditions]]\nbw_mbps = 10\nrtt_ms = 20\nphases = [{ at_s = 10, bw_mbps = 1000 }]\n";
        let (field, message) = invalid(text);
        assert_eq!(field, "conditions[0].bw_mbps");
        assert!(
            message.contains("1000 Mbit/s") && message.contains("2.5e8"),
            "{message}"
        );
        let grid =
            "name = \"t\"\nduration_s = 86400\n[grid]\nbw_mbps = [10, 10000]\nrtt_ms = [20]\n";
        assert_eq!(invalid(grid).0, "grid.bw_mbps");
        // A day at 10 Mbit/s is fine.
        let day = "name = \"t\"\nduration_s = 86400\n[[conditions]]\nbw_mbps = 10\nrtt_ms = 20\n";
        Scenario::parse("ok.toml", day, None).unwrap();
    }

    #[test]
    fn a_huge_grid_is_rejected_before_it_is_expanded() {
        let values = vec!["1"; 1000].join(", ");
        let text = format!("{BASE}[grid]\nbw_mbps = [{values}]\nrtt_ms = [{values}]\n");
        let (field, message) = invalid(&text);
        assert_eq!(field, "grid");
        assert!(message.contains("1000000 combinations"), "{message}");
    }

    #[test]
    fn trace_files_are_bounded_before_they_are_parsed() {
        // Before this fix a timestamp past u64::MAX / 10^6 ms overflowed while parsing.
        let dir = tempfile::tempdir().unwrap();
        std::fs::write(dir.path().join("t.up"), "0\n5\n100000000000000\n").unwrap();
        let text = format!("{BASE}[[conditions]]\ntrace = \"t.up\"\nrtt_ms = 20\n");
        let e = Scenario::parse("r.toml", &text, Some(dir.path()))
            .unwrap_err()
            .to_string();
        assert!(
            e.starts_with("r.toml:4: conditions[0].trace:")
                && e.contains("t.up:3:")
                && e.contains("86400000 ms"),
            "{e}"
        );
    }

    #[test]
    fn shipped_scenarios_are_within_the_ranges() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("scenarios");
        let mut n = 0;
        for entry in std::fs::read_dir(&dir).unwrap() {
            let p = entry.unwrap().path();
            if p.extension().is_some_and(|e| e == "toml") {
                Scenario::load(&p).unwrap_or_else(|e| panic!("{e}"));
                n += 1;
            }
        }
        assert!(n >= 7, "{n} scenarios");
    }
}
