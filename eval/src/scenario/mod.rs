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
//! # trace_offset_s = 40     # start a trace 40 s in (another segment of the same recording)
//! # cross = [{ scheme = "native-cubic", count = 2 }]  # this condition's own traffic: `flows`
//! #                          # and `cross` here replace the scenario's groups for it
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
//! # sizes = "web"           # finite flows, each size drawn from the web-search mix
//! # objective = "delay"     # how these flows are scored (see `Objective`; default "reward")
//! # port = 5001             # destination port (a selector's preference mode is chosen by it)
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
use thiserror::Error;

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
    /// This condition's own flows of the scheme under test (`None`: the scenario's).
    pub flows: Option<Vec<FlowGroup>>,
    /// This condition's own cross traffic (`None`: the scenario's).
    pub cross: Option<Vec<FlowGroup>>,
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
    /// Each flow's size is drawn from the web-search mix (`iw_web::workload::flow_size_pkts`)
    /// with the run's seed, instead of `size_bytes`.
    pub web_sizes: bool,
    /// How the group's flows are scored.
    pub objective: Objective,
    /// Destination port of the group's flows (80 unless given).
    pub port: u16,
}

/// How a flow is scored: the `score` column of `results.csv`, which ranks schemes per
/// condition. Every objective is a logarithm, so a difference of 0.1 is a ~10 % ratio in the
/// quantity scored, whatever the condition.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum Objective {
    /// TCP-RL's reward, ln(throughput Mbit/s / mean RTT ms).
    #[default]
    Reward,
    /// Throughput-sensitive (Antelope's throughput mode: delay does not count): ln(Mbit/s).
    Throughput,
    /// Delay-sensitive (Antelope's delay mode): ln(Mbit/s) - 2 ln(p95 RTT ms), the tail
    /// delay weighing twice the throughput.
    Delay,
    /// Competition: the throughput counted is the flow's own up to the fair share `f` (the
    /// mean goodput of the run's flows that run to the end) and falls as it takes more,
    /// `min(x, f^2 / x)`: taking twice the fair share counts as getting half of it, so share
    /// and friendliness both count. ln(that Mbit/s / mean RTT ms).
    Friendly,
    /// Finite flows: -ln(flow completion time in s); a flow that did not finish counts the
    /// time from its start to the end of the run.
    Fct,
}

impl Objective {
    /// Every objective.
    pub const ALL: [Objective; 5] = [
        Objective::Reward,
        Objective::Throughput,
        Objective::Delay,
        Objective::Friendly,
        Objective::Fct,
    ];

    /// The name in scenario files and `results.csv`.
    pub fn name(self) -> &'static str {
        match self {
            Objective::Reward => "reward",
            Objective::Throughput => "throughput",
            Objective::Delay => "delay",
            Objective::Friendly => "friendly",
            Objective::Fct => "fct",
        }
    }

    /// Parses [`Objective::name`].
    pub fn parse(s: &str) -> Option<Self> {
        Self::ALL.into_iter().find(|o| o.name() == s)
    }
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

/// The destination port of a flow whose group names none.
pub const DEFAULT_PORT: u16 = 80;

mod limits;
mod parse;
mod raw;
#[cfg(test)]
mod tests;

pub use limits::*;
use parse::{condition, flow_totals, grid, groups, seeds, series_interval};
use raw::{RawScenario, Src};

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
                web_sizes: false,
                objective: Objective::Reward,
                port: DEFAULT_PORT,
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

    /// Every scheme named in the scenario (under test and cross traffic, the conditions' own
    /// groups too).
    pub fn named_schemes(&self) -> Vec<String> {
        let mut v: Vec<String> = self.schemes.clone().unwrap_or_default();
        v.extend(self.traffic_schemes());
        v.sort();
        v.dedup();
        v
    }

    /// The fixed schemes of the flow groups (cross traffic and any group naming its scheme),
    /// the conditions' own groups too: what every run needs whatever the schemes under test.
    pub fn traffic_schemes(&self) -> Vec<String> {
        let mut v = Vec::new();
        let groups = self.conditions.iter().flat_map(|c| {
            c.flows
                .iter()
                .chain(c.cross.iter())
                .flatten()
                .chain(self.flows.iter().chain(&self.cross))
        });
        v.extend(groups.filter_map(|g| g.scheme.clone()));
        v.sort();
        v.dedup();
        v
    }

    /// The flows of the scheme under test in `cond` (its own groups, else the scenario's).
    pub fn flows_of<'a>(&'a self, cond: &'a Condition) -> &'a [FlowGroup] {
        cond.flows.as_deref().unwrap_or(&self.flows)
    }

    /// The cross traffic in `cond` (its own groups, else the scenario's).
    pub fn cross_of<'a>(&'a self, cond: &'a Condition) -> &'a [FlowGroup] {
        cond.cross.as_deref().unwrap_or(&self.cross)
    }
}
