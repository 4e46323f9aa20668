//! The results of a run as rows: one row per flow per run, the unit every table and plot is
//! built from. `results.csv` is these rows; its columns are documented on [`FlowRow`].
//!
//! [`read_csv`] is strict: a file cut off (in its header or in a row), a header without a
//! column the rows need, or a row that does not parse is an error naming the file and line,
//! never a silently shorter table.

use std::path::Path;

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use thiserror::Error;

/// One flow in one run of one condition with one scheme and one seed.
///
/// Units are in the column names. Empty cells mean "not applicable" (e.g. `fct_s` for a flow
/// that runs until the end).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FlowRow {
    /// Scenario name.
    pub scenario: String,
    /// Environment label within the scenario (e.g. `wan`, `dcn`, `cellular`; `default` if none).
    pub env: String,
    /// Condition id, unique within the scenario (e.g. `bw10-rtt40-loss0.01-buf1bdp`).
    pub condition: String,
    /// Bottleneck rate, Mbit/s (mean rate for traces; the first phase for changing paths).
    pub bw_mbps: f64,
    /// Base round-trip time, ms.
    pub rtt_ms: f64,
    /// Random loss probability.
    pub loss: f64,
    /// Bottleneck buffer, bytes.
    pub buffer_bytes: u64,
    /// The scheme under test in this run.
    pub scheme: String,
    /// Seed of the run.
    pub seed: u64,
    /// Flow index within the run.
    pub flow: usize,
    /// `main` for flows of the scheme under test, `cross` for cross traffic.
    pub role: String,
    /// The scheme this flow ran (differs from `scheme` for cross traffic).
    pub flow_scheme: String,
    /// Flow size, bytes (empty: runs until the end).
    pub size_bytes: Option<u64>,
    /// Start time, s.
    pub start_s: f64,
    /// Mean goodput over the flow's active time, Mbit/s.
    pub throughput_mbps: f64,
    /// Goodput over bottleneck capacity.
    pub utilization: f64,
    /// Mean RTT, ms.
    pub mean_rtt_ms: f64,
    /// 95th-percentile RTT, ms (simulator: of every ACK's sample; kernel: of the smoothed
    /// RTT every 10 ms).
    pub p95_rtt_ms: f64,
    /// 95th-percentile smoothed RTT (RFC 6298 srtt sampled every 10 ms), ms: the RTT
    /// metric both datapaths measure the same way (the kernel testbed's `tcpi_rtt`; the
    /// simulator's sender srtt), which `docs/calibration.md` compares.
    #[serde(default)]
    pub p95_srtt_ms: f64,
    /// Mean one-way queueing delay at the bottleneck, ms.
    pub mean_qdelay_ms: f64,
    /// 95th-percentile queueing delay, ms.
    pub p95_qdelay_ms: f64,
    /// Packets lost over packets sent.
    pub loss_rate: f64,
    /// Flow completion time, s (finite flows that completed).
    pub fct_s: Option<f64>,
    /// TCP-RL's reward: ln(throughput in Mbit/s / mean RTT in ms).
    pub reward: f64,
    /// Kleinrock's power: throughput (Mbit/s) / mean RTT (s).
    pub power: f64,
    /// Jain's index over the run's main flows.
    pub jain: f64,
    /// Retransmitted segments.
    pub retransmits: u64,
    /// Retransmission timeouts.
    pub timeouts: u64,
    /// CCP flows: seconds the datapath's built-in fallback rule, not the scheme, controlled
    /// the flow (no agent, agent silent, or its program not installed yet); 0 for built-in
    /// schemes and in kernel mode (where a run the agent never controlled fails instead).
    #[serde(default)]
    pub fallback_s: f64,
    /// CCP flows: times the agent took control from the fallback rule (1 when it controlled
    /// the flow throughout; more after the agent died and came back); 0 for built-in schemes.
    #[serde(default)]
    pub takeovers: u64,
    /// How the flow is scored (`reward`, `throughput`, `delay`, `friendly`, `fct`: the
    /// scenario's `objective`, `ccp_eval::scenario::Objective`); files written before the
    /// column read as `reward`.
    #[serde(default = "reward_objective")]
    pub objective: String,
    /// The flow's score under its objective, the number conditions rank schemes by; empty for
    /// files written before the column (their rank uses `reward`, which is the score of the
    /// `reward` objective).
    #[serde(default)]
    pub score: Option<f64>,
    /// `ok`; `failed: <why>` for a run that failed (its metrics are zero); `no-control:
    /// <why>` for a CCP flow its scheme never controlled; `no-delivery: <why>` for a flow that
    /// delivered nothing; `invalid: <why>` for metrics that cannot be right. Only `ok` rows
    /// count towards scheme metrics.
    pub status: String,
}

/// A point of a flow's time series (`series.csv`), written for scenarios that ask for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SeriesRow {
    /// Scenario name.
    pub scenario: String,
    /// Condition id.
    pub condition: String,
    /// Scheme under test.
    pub scheme: String,
    /// Seed.
    pub seed: u64,
    /// Flow index.
    pub flow: usize,
    /// Time, s.
    pub t_s: f64,
    /// Window, packets.
    pub cwnd_pkts: f64,
    /// Goodput over the last interval, Mbit/s.
    pub throughput_mbps: f64,
}

/// One selector swap (`swaps.csv`): the candidate in use changes at `t_s`.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct SwapRow {
    /// Scenario name.
    pub scenario: String,
    /// Condition id.
    pub condition: String,
    /// Scheme under test.
    pub scheme: String,
    /// Seed.
    pub seed: u64,
    /// The flow's datapath socket id (flows are numbered from 1 in start order).
    pub sock_id: u32,
    /// Time, s.
    pub t_s: f64,
    /// Candidate before.
    pub from: String,
    /// Candidate after.
    pub to: String,
}

/// One explained selector decision (`decisions.csv`): what a policy saw and how it scored the
/// candidates when it decided. Kept per flow: its first explained decision (the probe policy's
/// choice at the probe's end) and every later one that asked for another candidate.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct DecisionRow {
    /// Scenario name.
    pub scenario: String,
    /// Condition id.
    pub condition: String,
    /// Scheme under test.
    pub scheme: String,
    /// Seed.
    pub seed: u64,
    /// The flow's datapath socket id (flows are numbered from 1 in start order).
    pub sock_id: u32,
    /// Time, s.
    pub t_s: f64,
    /// Candidate in use.
    pub from: String,
    /// Candidate the decision asked for (`from` when it stays).
    pub to: String,
    /// The part of the policy that decided (the probe's: `ccp_selector::probe::Part`, e.g.
    /// `models`, `kind`, `watch`; a policy of one part names itself; empty in a file written
    /// before the column was).
    #[serde(default)]
    pub by: String,
    /// The policy's features, `;`-separated in the policy's own order (the probe's:
    /// `ccp_selector::probe::FEATURE_NAMES`).
    pub features: String,
    /// The policy's score per candidate, `;`-separated `<candidate>=<score>` (the probe's: each
    /// candidate's predicted gain over staying; higher is better).
    pub scores: String,
}

impl DecisionRow {
    /// The row of a decision whose leading columns are `head`'s (the run, the flow, the time
    /// and the candidates), with the part that decided (`by`) and the policy's `features` and
    /// `scores`.
    pub fn explaining(head: SwapRow, by: &str, features: String, scores: String) -> Self {
        let SwapRow {
            scenario,
            condition,
            scheme,
            seed,
            sock_id,
            t_s,
            from,
            to,
        } = head;
        Self {
            scenario,
            condition,
            scheme,
            seed,
            sock_id,
            t_s,
            from,
            to,
            by: by.to_string(),
            features,
            scores,
        }
    }
}

/// Why results could not be read or written.
#[derive(Debug, Error)]
pub enum ResultsError {
    /// File I/O.
    #[error("{path}: {source}")]
    Io {
        /// File.
        path: String,
        /// Cause.
        source: std::io::Error,
    },
    /// CSV encoding or decoding.
    #[error("{path}: {source}")]
    Csv {
        /// File.
        path: String,
        /// Cause.
        source: csv::Error,
    },
    /// A file that is cut off, lacks columns, or has a row that does not parse.
    #[error("{path}:{line}: {message}")]
    Malformed {
        /// File.
        path: String,
        /// 1-based line (1: the header).
        line: u64,
        /// What is wrong.
        message: String,
    },
}

/// Columns a file may lack because they were added after such files were first written; they
/// read as their default (`fallback_s`, `takeovers`, `p95_srtt_ms`, `objective`, `score` of
/// [`FlowRow`]; `by` of [`DecisionRow`]).
pub const ADDED_COLUMNS: &[&str] = &[
    "fallback_s",
    "takeovers",
    "p95_srtt_ms",
    "objective",
    "score",
    "by",
];

fn reward_objective() -> String {
    "reward".into()
}

impl FlowRow {
    /// The number conditions rank schemes by: `score`, or `reward` for rows without one.
    pub fn rank_score(&self) -> f64 {
        self.score.unwrap_or(self.reward)
    }
}

/// Writes rows as CSV with a header.
pub fn write_csv<T: Serialize>(path: &Path, rows: &[T]) -> Result<(), ResultsError> {
    let p = path.display().to_string();
    let mut w = csv::Writer::from_path(path).map_err(|source| ResultsError::Csv {
        path: p.clone(),
        source,
    })?;
    for r in rows {
        w.serialize(r).map_err(|source| ResultsError::Csv {
            path: p.clone(),
            source,
        })?;
    }
    w.flush()
        .map_err(|source| ResultsError::Io { path: p, source })
}

/// Reads rows written by [`write_csv`]. The file must end with a line end (the writer ends
/// every line; a file without one was cut off), its header must name every column of `T`
/// (but [`ADDED_COLUMNS`]), and every row must parse; otherwise the error names the line.
pub fn read_csv<T: DeserializeOwned>(path: &Path) -> Result<Vec<T>, ResultsError> {
    let p = path.display().to_string();
    let bytes = std::fs::read(path).map_err(|source| ResultsError::Io {
        path: p.clone(),
        source,
    })?;
    let bad = |line: u64, message: String| ResultsError::Malformed {
        path: p.clone(),
        line,
        message,
    };
    if bytes.is_empty() {
        return Err(bad(1, "empty file: no header".into()));
    }
    if !bytes.ends_with(b"\n") {
        let line = bytes.split(|&b| b == b'\n').count() as u64;
        let what = if line == 1 { "header" } else { "row" };
        return Err(bad(
            line,
            format!("cut off: the last {what} has no line end (an interrupted write?)"),
        ));
    }
    let mut reader = csv::Reader::from_reader(bytes.as_slice());
    let header = reader
        .headers()
        .map_err(|e| bad(1, format!("header: {}", csv_message(&e, None))))?
        .clone();
    let missing: Vec<&str> = struct_fields::<T>()
        .iter()
        .filter(|f| !ADDED_COLUMNS.contains(f) && !header.iter().any(|h| h == **f))
        .copied()
        .collect();
    if !missing.is_empty() {
        return Err(bad(
            1,
            format!(
                "the header lacks column(s) {} (cut off, or not a file `ccp-eval` wrote)",
                missing.join(", ")
            ),
        ));
    }
    let mut rows = Vec::new();
    for (i, row) in reader.deserialize().enumerate() {
        rows.push(row.map_err(|e| {
            // Rows hold no line breaks, so row i is on line i + 2 when csv does not say.
            let line = e.position().map_or(i as u64 + 2, csv::Position::line);
            bad(line, csv_message(&e, Some(&header)))
        })?);
    }
    Ok(rows)
}

/// What a row's `status` may say: `ok`, or one of these prefixes and why.
pub const STATUS_PREFIXES: &[&str] = &["failed:", "no-control:", "no-delivery:", "invalid:"];

/// Reads a `results.csv` ([`read_csv`]) and checks every row's `status` is one `ccp-eval`
/// writes (`ok` or a prefix of [`STATUS_PREFIXES`]), so a row cut inside its last field is
/// an error, not a status of its own.
pub fn read_rows(path: &Path) -> Result<Vec<FlowRow>, ResultsError> {
    let rows: Vec<FlowRow> = read_csv(path)?;
    if let Some((i, r)) = rows
        .iter()
        .enumerate()
        .find(|(_, r)| r.status != "ok" && !STATUS_PREFIXES.iter().any(|p| r.status.starts_with(p)))
    {
        return Err(ResultsError::Malformed {
            path: path.display().to_string(),
            line: i as u64 + 2,
            message: format!(
                "status {:?} is not `ok` nor starts with one of {} (cut off or corrupted)",
                r.status,
                STATUS_PREFIXES.join(" ")
            ),
        });
    }
    Ok(rows)
}

/// A csv error without its position (the caller gives the line), with column names.
fn csv_message(e: &csv::Error, header: Option<&csv::StringRecord>) -> String {
    match e.kind() {
        csv::ErrorKind::UnequalLengths {
            expected_len, len, ..
        } => format!("the row has {len} fields, the header {expected_len} (cut off or corrupted)"),
        csv::ErrorKind::Deserialize { err, .. } => {
            let column = err
                .field()
                .and_then(|i| header?.get(usize::try_from(i).ok()?));
            match column {
                Some(c) => format!("column `{c}`: {}", err.kind()),
                None => err.to_string(),
            }
        }
        _ => e.to_string(),
    }
}

/// The field names of the struct `T`, as serde knows them (the columns [`write_csv`] writes).
fn struct_fields<T: DeserializeOwned>() -> &'static [&'static str] {
    /// A deserializer that only records the field list a struct asks for.
    struct Probe<'a>(&'a mut &'static [&'static str]);

    impl<'de> serde::Deserializer<'de> for Probe<'_> {
        type Error = serde::de::value::Error;

        fn deserialize_any<V: serde::de::Visitor<'de>>(
            self,
            _: V,
        ) -> Result<V::Value, Self::Error> {
            Err(serde::de::Error::custom("not a struct"))
        }

        fn deserialize_struct<V: serde::de::Visitor<'de>>(
            self,
            _name: &'static str,
            fields: &'static [&'static str],
            _visitor: V,
        ) -> Result<V::Value, Self::Error> {
            *self.0 = fields;
            Err(serde::de::Error::custom("fields recorded"))
        }

        serde::forward_to_deserialize_any! {
            bool i8 i16 i32 i64 i128 u8 u16 u32 u64 u128 f32 f64 char str string bytes byte_buf
            option unit unit_struct newtype_struct seq tuple tuple_struct map enum identifier
            ignored_any
        }
    }

    let mut fields: &'static [&'static str] = &[];
    // The probe always fails; it is called for the field list it records.
    let _ = T::deserialize(Probe(&mut fields));
    fields
}
