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
//! Every error names the file, the line and the field.

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
    series_interval_ms: u64,
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
    start_s: f64,
    #[serde(default)]
    stagger_s: f64,
    #[serde(default)]
    size_bytes: Option<u64>,
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

fn prob(x: f64) -> bool {
    (0.0..1.0).contains(&x)
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
        check(
            &src,
            &raw.duration_s,
            "duration_s",
            |x: &f64| pos(*x),
            "must be a positive number of seconds",
        )?;
        let seeds = seeds(&src, &raw)?;

        let mut conditions = Vec::new();
        for (i, c) in raw.conditions.iter().enumerate() {
            conditions.push(condition(&src, i, c, base)?);
        }
        if let Some(g) = &raw.grid {
            conditions.extend(grid(&src, g)?);
        }
        if conditions.is_empty() {
            return Err(ScenarioError::Invalid {
                path: path.to_string(),
                line: 1,
                field: "conditions".into(),
                message: "a scenario needs [[conditions]] or a [grid]".into(),
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
        let mut flows = groups(&src, &raw.flows, "flows", false)?;
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
        let cross = groups(&src, &raw.cross, "cross", true)?;
        Ok(Scenario {
            name: raw.name,
            duration_s: *raw.duration_s.get_ref(),
            seeds,
            schemes: raw.schemes,
            series_interval_ms: raw.series_interval_ms,
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
                |v| !v.is_empty(),
                "needs at least one seed",
            )?;
            s.get_ref().clone()
        }
        (None, Some(r)) => {
            let ok = |&n: &u64| (1..=10_000).contains(&n);
            check(src, r, "repetitions", ok, "must be 1..=10000")?;
            (1..=*r.get_ref()).collect()
        }
        (None, None) => vec![1],
        (Some(s), Some(_)) => {
            return Err(src.invalid(s, "seeds".into(), "give seeds or repetitions, not both"));
        }
    })
}

fn groups(
    src: &Src<'_>,
    v: &[RawFlows],
    what: &str,
    cross: bool,
) -> Result<Vec<FlowGroup>, ScenarioError> {
    v.iter()
        .enumerate()
        .map(|(i, f)| {
            check(
                src,
                &f.count,
                format!("{what}[{i}].count"),
                |&n| n <= 10_000,
                "at most 10000",
            )?;
            if cross && f.scheme.is_none() {
                let field = format!("{what}[{i}].scheme");
                return Err(src.invalid(&f.count, field, "cross traffic needs a scheme"));
            }
            if let Some(oo) = &f.on_off_s {
                let ok = |v: &[f64; 2]| v.iter().all(|&x| pos(x));
                check(
                    src,
                    oo,
                    format!("{what}[{i}].on_off_s"),
                    ok,
                    "both periods must be > 0 s",
                )?;
            }
            Ok(FlowGroup {
                scheme: f.scheme.clone(),
                count: *f.count.get_ref(),
                start_s: f.start_s.max(0.0),
                stagger_s: f.stagger_s.max(0.0),
                size_bytes: f.size_bytes,
                on_off_s: f
                    .on_off_s
                    .as_ref()
                    .map(|v| (v.get_ref()[0], v.get_ref()[1])),
            })
        })
        .collect()
}

fn condition(
    src: &Src<'_>,
    i: usize,
    c: &RawCondition,
    base: Option<&Path>,
) -> Result<Condition, ScenarioError> {
    let f = |name: &str| format!("conditions[{i}].{name}");
    check(
        src,
        &c.rtt_ms,
        f("rtt_ms"),
        |x: &f64| pos(*x),
        "must be a positive number of ms",
    )?;
    let rate = rate_source(src, c, base, &f)?;
    let loss = match &c.loss {
        Some(l) => {
            check(
                src,
                l,
                f("loss"),
                |x: &f64| prob(*x),
                "must be a probability in [0, 1)",
            )?;
            *l.get_ref()
        }
        None => 0.0,
    };
    let buffer = buffer(src, c, &f)?;
    let ack_aggregation_ms = match &c.ack_aggregation_ms {
        Some(a) => {
            let ok = |x: &f64| x.is_finite() && *x >= 0.0;
            check(src, a, f("ack_aggregation_ms"), ok, "must be >= 0 ms")?;
            *a.get_ref()
        }
        None => 0.0,
    };
    let phases = phases(src, c, &f)?;
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
        check(
            src,
            b,
            f("bw_mbps"),
            |x: &f64| pos(*x),
            "must be a positive rate in Mbit/s",
        )?;
        RateSource::Constant(*b.get_ref())
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
        let trace = Trace::load(&p).map_err(|e| src.invalid(t, f("trace"), &e.to_string()))?;
        RateSource::TraceFile(p, trace)
    } else if let Some(cell) = &c.cellular {
        check(
            src,
            cell,
            f("cellular.mean_mbps"),
            |s| pos(s.mean_mbps),
            "must be positive",
        )?;
        RateSource::Cellular(cell.get_ref().clone())
    } else {
        return Err(src.invalid(&c.rtt_ms, f("bw_mbps"), "missing rate"));
    })
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
) -> Result<Vec<Phase>, ScenarioError> {
    let mut phases = Vec::new();
    for (j, p) in c.phases.iter().enumerate() {
        let r = p.get_ref();
        let ok = r.at_s.is_finite()
            && r.at_s >= 0.0
            && r.bw_mbps.is_none_or(pos)
            && r.rtt_ms.is_none_or(pos)
            && r.loss.is_none_or(prob);
        if !ok {
            return Err(src.invalid(
                p,
                f(&format!("phases[{j}]")),
                "at_s >= 0, bw_mbps and rtt_ms > 0, loss in [0, 1)",
            ));
        }
        phases.push(Phase {
            at_s: r.at_s,
            bw_mbps: r.bw_mbps,
            rtt_ms: r.rtt_ms,
            loss: r.loss,
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

fn grid(src: &Src<'_>, g: &RawGrid) -> Result<Vec<Condition>, ScenarioError> {
    let all = |v: &Spanned<Vec<f64>>, field: &str, ok: fn(f64) -> bool, msg: &str| {
        check(
            src,
            v,
            format!("grid.{field}"),
            |xs| !xs.is_empty() && xs.iter().all(|&x| ok(x)),
            msg,
        )
    };
    all(&g.bw_mbps, "bw_mbps", pos, "every rate must be positive")?;
    all(&g.rtt_ms, "rtt_ms", pos, "every RTT must be positive")?;
    let losses = match &g.loss {
        Some(l) => {
            all(l, "loss", prob, "every loss must be in [0, 1)")?;
            l.get_ref().clone()
        }
        None => vec![0.0],
    };
    let buffers = match &g.buffer_bdp {
        Some(b) => {
            all(
                b,
                "buffer_bdp",
                pos,
                "every buffer must be a positive multiple of the BDP",
            )?;
            b.get_ref().clone()
        }
        None => vec![1.0],
    };
    let mut out = Vec::new();
    for &bw in g.bw_mbps.get_ref() {
        for &rtt in g.rtt_ms.get_ref() {
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
}
