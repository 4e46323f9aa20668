//! From the file's fields to the validated parts of a [`Scenario`]: seeds, flow groups,
//! conditions (rate source, buffer, phases), the grid.

use std::path::{Path, PathBuf};

use ccp_datapath::sim::Trace;
use toml::Spanned;

use super::limits::{
    ACK_AGGREGATION_MS, BUFFER_BDP, BW_MBPS, CELLULAR_MEAN_MBPS, CELLULAR_PERIOD_S, CELLULAR_SIGMA,
    LOSS, MAX_BUFFER_BYTES, MAX_BUFFER_PKTS, MAX_CONDITIONS, MAX_DURATION_S, MAX_FLOWS_PER_RUN,
    MAX_GRID_VALUES, MAX_PHASES, MAX_SEEDS, MAX_SERIES_POINTS, MAX_SIZE_BYTES,
    MAX_TRACE_FILE_BYTES, MAX_TRACE_MS, ON_OFF_S, RTT_MS, Range, in_range, in_range_at,
    packets_per_run,
};
use super::raw::{RawCondition, RawFlows, RawGrid, RawScenario, Src, check, fmt_num, pos};
use super::{
    Buffer, Condition, DEFAULT_PORT, FlowGroup, Objective, Phase, RateSource, ScenarioError,
};

pub(super) fn seeds(src: &Src<'_>, raw: &RawScenario) -> Result<Vec<u64>, ScenarioError> {
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
pub(super) fn series_interval(
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

pub(super) fn groups(
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
            let (web_sizes, objective, port) = group_extras(src, f, &field)?;
            Ok(FlowGroup {
                scheme: f.scheme.clone(),
                count: *f.count.get_ref(),
                start_s,
                stagger_s,
                size_bytes: f.size_bytes.as_ref().map(|b| *b.get_ref()),
                on_off_s,
                web_sizes,
                objective,
                port,
            })
        })
        .collect()
}

/// A group's `sizes`, `objective` and `port`: (web-like sizes, objective, port).
fn group_extras(
    src: &Src<'_>,
    f: &RawFlows,
    field: &dyn Fn(&str) -> String,
) -> Result<(bool, Objective, u16), ScenarioError> {
    let web_sizes = match &f.sizes {
        Some(v) if v.get_ref() == "web" => {
            if f.size_bytes.is_some() {
                return Err(src.invalid(v, field("sizes"), "give sizes or size_bytes, not both"));
            }
            true
        }
        Some(v) => {
            return Err(src.invalid(
                v,
                field("sizes"),
                &format!("unknown size mix {:?} (known: \"web\")", v.get_ref()),
            ));
        }
        None => false,
    };
    let objective = match &f.objective {
        Some(v) => Objective::parse(v.get_ref()).ok_or_else(|| {
            let known: Vec<&str> = Objective::ALL.iter().map(|o| o.name()).collect();
            src.invalid(
                v,
                field("objective"),
                &format!(
                    "unknown objective {:?} (known: {})",
                    v.get_ref(),
                    known.join(", ")
                ),
            )
        })?,
        None => Objective::Reward,
    };
    let port = match &f.port {
        Some(v) => {
            check(src, v, field("port"), |&p| p >= 1, "must be in [1, 65535]")?;
            *v.get_ref()
        }
        None => DEFAULT_PORT,
    };
    Ok((web_sizes, objective, port))
}

/// At least one flow of the scheme under test, and at most [`MAX_FLOWS_PER_RUN`] in a run.
pub(super) fn flow_totals(
    src: &Src<'_>,
    raw: &RawScenario,
    flows: &[FlowGroup],
    cross: &[FlowGroup],
) -> Result<(), ScenarioError> {
    let at = raw
        .flows
        .iter()
        .chain(&raw.cross)
        .last()
        .map_or(raw.duration_s.span(), |g| g.count.span());
    totals(src, at, "flows", flows, cross)
}

/// At least one flow of the scheme under test, at most [`MAX_FLOWS_PER_RUN`] in a run;
/// `at` is where an error points, `field` what it names.
pub(super) fn totals(
    src: &Src<'_>,
    at: std::ops::Range<usize>,
    field: &str,
    flows: &[FlowGroup],
    cross: &[FlowGroup],
) -> Result<(), ScenarioError> {
    let main: usize = flows.iter().map(|g| g.count).sum();
    let all = main + cross.iter().map(|g| g.count).sum::<usize>();
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
        field: field.into(),
        message,
    })
}

pub(super) fn condition(
    src: &Src<'_>,
    i: usize,
    c: &RawCondition,
    base: Option<&Path>,
    duration_s: f64,
) -> Result<Condition, ScenarioError> {
    let f = |name: &str| format!("conditions[{i}].{name}");
    in_range(src, &c.rtt_ms, f("rtt_ms"), RTT_MS)?;
    let mut rate = rate_source(src, c, base, &f)?;
    if let Some(o) = &c.trace_offset_s {
        let RateSource::TraceFile(_, trace) = &mut rate else {
            return Err(src.invalid(o, f("trace_offset_s"), "only a trace file has an offset"));
        };
        let period_s = trace.period_ns as f64 / 1e9;
        let r = Range::below(0.0, period_s, "s (within the trace's period)");
        let offset_s = in_range(src, o, f("trace_offset_s"), r)?;
        *trace = rotate(trace, (offset_s * 1e9) as u64);
    }
    let own = |v: &Option<Spanned<Vec<RawFlows>>>, what: &str, cross: bool| {
        v.as_ref()
            .map(|g| groups(src, g.get_ref(), &f(what), cross, duration_s))
            .transpose()
    };
    let own_flows = own(&c.flows, "flows", false)?;
    let own_cross = own(&c.cross, "cross", true)?;
    if let Some(fl) = &own_flows {
        let at = c.flows.as_ref().map_or(0..0, Spanned::span);
        totals(
            src,
            at,
            &f("flows"),
            fl,
            own_cross.as_deref().unwrap_or(&[]),
        )?;
    }
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
        flows: own_flows,
        cross: own_cross,
    })
}

/// The same trace started `offset_ns` into its period (another segment of the recording,
/// still repeating with the same period).
pub(super) fn rotate(trace: &Trace, offset_ns: u64) -> Trace {
    let period = trace.period_ns.max(1);
    let offset = offset_ns % period;
    let mut ops: Vec<u64> = trace
        .opportunities_ns
        .iter()
        .map(|&t| (t + period - offset) % period)
        .collect();
    ops.sort_unstable();
    Trace {
        opportunities_ns: ops,
        period_ns: period,
    }
}

pub(super) fn rate_source(
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
pub(super) fn trace_file(p: &Path) -> Result<Trace, String> {
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
pub(super) fn buffer_limits(
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

pub(super) fn buffer(
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

pub(super) fn phases(
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

pub(super) fn buffer_label(b: Buffer) -> String {
    match b {
        Buffer::Bdp(x) => format!("{}bdp", fmt_num(x)),
        Buffer::Bytes(n) => format!("{n}B"),
        Buffer::Packets(n) => format!("{n}pkt"),
    }
}

pub(super) fn grid(
    src: &Src<'_>,
    g: &RawGrid,
    duration_s: f64,
) -> Result<Vec<Condition>, ScenarioError> {
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
                        flows: None,
                        cross: None,
                    });
                }
            }
        }
    }
    Ok(out)
}
