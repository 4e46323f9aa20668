//! The `iw-web` report: per-policy statistics (TCP-RL Figs. 12-13), the issue's targets, the IW
//! over time, the group tree, CSVs and SVG plots.

use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use ccp_datapath::stats::percentile;

use super::{FlowRun, IwWebResult, Policy};

/// Statistics of one policy over every flow (or a subset).
#[derive(Debug, Clone, Copy, PartialEq, Default)]
pub struct Stats {
    /// Flows.
    pub flows: usize,
    /// Mean response time, ms.
    pub mean_ms: f64,
    /// Median response time, ms.
    pub p50_ms: f64,
    /// 80th percentile, ms.
    pub p80_ms: f64,
    /// 99th percentile, ms.
    pub p99_ms: f64,
    /// Mean per-flow throughput (size / response time), Mbit/s.
    pub tput_mbps: f64,
    /// Mean of the flows' mean RTTs, ms.
    pub rtt_ms: f64,
    /// Packets dropped / packets sent.
    pub loss: f64,
    /// Fraction of flows with at least one timeout.
    pub timeout_flows: f64,
}

/// Statistics of the runs selected by `keep` (arrival index).
pub fn stats(res: &IwWebResult, runs: &[FlowRun], keep: impl Fn(usize) -> bool) -> Stats {
    let mut rt = Vec::new();
    let (mut tput, mut rtt, mut dropped, mut sent, mut to) = (0.0, 0.0, 0u64, 0u64, 0usize);
    for (i, (r, a)) in runs.iter().zip(&res.arrivals).enumerate() {
        if !keep(i) {
            continue;
        }
        let o = &r.outcome;
        let ms = o.response_us as f64 / 1e3;
        rt.push(ms);
        let bits = f64::from(a.pkts) * f64::from(super::flowsim::MSS_BYTES) * 8.0;
        tput += bits / (o.response_us as f64 / 1e6) / 1e6;
        rtt += o.mean_rtt_us / 1e3;
        dropped += o.dropped;
        sent += o.sent;
        to += usize::from(o.timeouts > 0);
    }
    let n = rt.len();
    if n == 0 {
        return Stats::default();
    }
    rt.sort_by(f64::total_cmp);
    let nf = n as f64;
    Stats {
        flows: n,
        mean_ms: rt.iter().sum::<f64>() / nf,
        p50_ms: percentile(&rt, 500).unwrap_or(0.0),
        p80_ms: percentile(&rt, 800).unwrap_or(0.0),
        p99_ms: percentile(&rt, 990).unwrap_or(0.0),
        tput_mbps: tput / nf,
        rtt_ms: rtt / nf,
        loss: if sent == 0 {
            0.0
        } else {
            dropped as f64 / sent as f64
        },
        timeout_flows: to as f64 / nf,
    }
}

/// Relative improvement of `x` over `base` for a lower-is-better metric.
fn cut(x: f64, base: f64) -> f64 {
    if base > 0.0 { 1.0 - x / base } else { 0.0 }
}

/// Per-policy statistics over all flows, in [`Policy::ALL`] order.
pub fn summary(res: &IwWebResult) -> Vec<(Policy, Stats)> {
    res.runs
        .iter()
        .map(|(p, r)| (*p, stats(res, r, |_| true)))
        .collect()
}

/// One of the issue's targets.
#[derive(Debug, Clone, PartialEq)]
pub struct Target {
    /// What is asked.
    pub name: &'static str,
    /// Whether it is met.
    pub met: bool,
    /// The numbers behind it.
    pub detail: String,
}

/// `x` cuts the mean response time of `base` by at least 20 %.
fn cut_target(name: &'static str, x: Stats, base: Stats) -> Target {
    Target {
        name,
        met: cut(x.mean_ms, base.mean_ms) >= 0.2,
        detail: format!(
            "{:.1} % ({:.0} ms vs {:.0} ms)",
            100.0 * cut(x.mean_ms, base.mean_ms),
            x.mean_ms,
            base.mean_ms
        ),
    }
}

/// `x`'s mean response time is within 10 % of Optimal's.
fn optimal_target(name: &'static str, x: Stats, opt: Stats) -> Target {
    Target {
        name,
        met: opt.mean_ms > 0.0 && x.mean_ms / opt.mean_ms - 1.0 <= 0.1,
        detail: format!(
            "{:+.1} % ({:.0} ms vs {:.0} ms)",
            100.0 * (x.mean_ms / opt.mean_ms - 1.0),
            x.mean_ms,
            opt.mean_ms
        ),
    }
}

/// The issue's four targets (and the first two again for TCP-RL+), checked.
pub fn targets(sum: &[(Policy, Stats)]) -> Vec<Target> {
    let get = |p: Policy| {
        sum.iter()
            .find(|(q, _)| *q == p)
            .map(|(_, s)| *s)
            .unwrap_or_default()
    };
    let (t10, t200, nog, rl, plus, opt) = (
        get(Policy::Tcp10),
        get(Policy::Tcp200),
        get(Policy::RlNoGrouping),
        get(Policy::Rl),
        get(Policy::RlPlus),
        get(Policy::Optimal),
    );
    let others = [t10, nog, rl, plus, opt];
    vec![
        cut_target(
            "TCP-RL cuts mean response time by >= 20 % vs TCP-10",
            rl,
            t10,
        ),
        optimal_target(
            "TCP-RL within 10 % of Optimal (mean response time)",
            rl,
            opt,
        ),
        cut_target(
            "TCP-RL+ (ours) cuts mean response time by >= 20 % vs TCP-10",
            plus,
            t10,
        ),
        optimal_target(
            "TCP-RL+ (ours) within 10 % of Optimal (mean response time)",
            plus,
            opt,
        ),
        Target {
            name: "TCP-RL beats TCP-RL without grouping (mean response time)",
            met: rl.mean_ms < nog.mean_ms,
            detail: format!("{:.0} ms vs {:.0} ms", rl.mean_ms, nog.mean_ms),
        },
        Target {
            name: "TCP-200 has the highest RTT and the longest tail (p99)",
            met: others
                .iter()
                .all(|s| t200.rtt_ms > s.rtt_ms && t200.p99_ms > s.p99_ms),
            detail: format!(
                "TCP-200 RTT {:.0} ms (next {:.0} ms), p99 {:.0} ms (next {:.0} ms)",
                t200.rtt_ms,
                others.iter().map(|s| s.rtt_ms).fold(0.0, f64::max),
                t200.p99_ms,
                others.iter().map(|s| s.p99_ms).fold(0.0, f64::max)
            ),
        },
    ]
}

/// The group tree found by TCP-RL as indented text: each group with its IW and its subnets.
pub fn group_tree(res: &IwWebResult) -> String {
    let mut members: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for (s, g) in res.subnets.iter().zip(&res.subnet_group) {
        members.entry(g.as_str()).or_default().push(s.name.as_str());
    }
    let mut out = String::new();
    let mut printed: Vec<String> = Vec::new();
    let mut groups: Vec<_> = res.groups.iter().collect();
    groups.sort_by(|a, b| a.name.cmp(&b.name));
    for g in groups {
        let parts: Vec<&str> = g.name.split('/').collect();
        for depth in 0..parts.len().saturating_sub(1) {
            let prefix = parts[..=depth].join("/");
            if !printed.contains(&prefix) {
                let _ = writeln!(out, "{}{}", "  ".repeat(depth), parts[depth]);
                printed.push(prefix);
            }
        }
        let depth = parts.len().saturating_sub(1);
        let subnets = members.get(g.name.as_str()).map_or(0, Vec::len);
        let _ = writeln!(
            out,
            "{}{}  [group: IW {}{}, arms {:?}, {} leaves, {} subnets of the trace]",
            "  ".repeat(depth),
            parts.last().copied().unwrap_or(""),
            g.iw_pkts,
            if g.stale { " (stale)" } else { "" },
            g.arms_pkts,
            g.leaves,
            subnets
        );
    }
    if let Some(m) = members.get("(standard IW)") {
        let _ = writeln!(out, "(no group, standard IW 10): {}", m.join(", "));
    }
    out
}

/// Subnets shown in the IW-over-time plot: the heaviest of each access class, and one light.
pub fn shown_subnets(res: &IwWebResult) -> Vec<usize> {
    let mut out = Vec::new();
    for class in ["fibre", "dsl", "mobile"] {
        if let Some((i, _)) = res
            .subnets
            .iter()
            .enumerate()
            .filter(|(_, s)| s.class == class && !s.light)
            .max_by(|a, b| a.1.flows_per_bin.total_cmp(&b.1.flows_per_bin))
        {
            out.push(i);
        }
    }
    if let Some(i) = res.subnets.iter().position(|s| s.light) {
        out.push(i);
    }
    out
}

fn csv_summary(sum: &[(Policy, Stats)]) -> String {
    let base = sum.first().map(|(_, s)| *s).unwrap_or_default();
    let opt = sum.last().map(|(_, s)| *s).unwrap_or_default();
    let mut out = String::from(
        "policy,flows,mean_ms,p50_ms,p80_ms,p99_ms,throughput_mbps,rtt_ms,loss,timeout_flows,\
         mean_cut_vs_tcp10,p50_cut_vs_tcp10,p80_cut_vs_tcp10,p99_cut_vs_tcp10,\
         throughput_gain_vs_tcp10,mean_vs_optimal\n",
    );
    for (p, s) in sum {
        let _ = writeln!(
            out,
            "{},{},{:.3},{:.3},{:.3},{:.3},{:.4},{:.3},{:.6},{:.6},{:.4},{:.4},{:.4},{:.4},{:.4},{:.4}",
            p.name(),
            s.flows,
            s.mean_ms,
            s.p50_ms,
            s.p80_ms,
            s.p99_ms,
            s.tput_mbps,
            s.rtt_ms,
            s.loss,
            s.timeout_flows,
            cut(s.mean_ms, base.mean_ms),
            cut(s.p50_ms, base.p50_ms),
            cut(s.p80_ms, base.p80_ms),
            cut(s.p99_ms, base.p99_ms),
            if base.tput_mbps > 0.0 {
                s.tput_mbps / base.tput_mbps - 1.0
            } else {
                0.0
            },
            if opt.mean_ms > 0.0 {
                s.mean_ms / opt.mean_ms - 1.0
            } else {
                0.0
            }
        );
    }
    out
}

fn csv_subnets(res: &IwWebResult) -> String {
    let mut out = String::from(
        "subnet,province,isp,class,light,rate_mbps,one_way_delay_ms,buffer_pkts,flows,group",
    );
    for p in Policy::ALL {
        let _ = write!(out, ",mean_ms_{}", p.name().replace([' ', '/'], "_"));
    }
    out.push('\n');
    for (k, s) in res.subnets.iter().enumerate() {
        let flows = res.arrivals.iter().filter(|a| a.subnet == k).count();
        let _ = write!(
            out,
            "{},{},{},{},{},{:.2},{:.2},{},{},{}",
            s.name,
            s.province,
            s.isp,
            s.class,
            s.light,
            s.base_rate_bps / 1e6,
            s.base_delay_us / 1e3,
            s.buffer_pkts,
            flows,
            res.subnet_group.get(k).map_or("", String::as_str)
        );
        for (_, runs) in &res.runs {
            let st = stats(res, runs, |i| res.arrivals[i].subnet == k);
            let _ = write!(out, ",{:.3}", st.mean_ms);
        }
        out.push('\n');
    }
    out
}

fn csv_timeline(res: &IwWebResult) -> String {
    let mut out = String::from("bin,time_h,subnet,policy,iw_pkts\n");
    let bin_h = res.config.bin_us as f64 / 3.6e9;
    for (p, tl) in &res.iw_timeline {
        for (k, series) in tl.iter().enumerate() {
            for (b, iw) in series.iter().enumerate() {
                let _ = writeln!(
                    out,
                    "{b},{:.4},{},{},{iw}",
                    b as f64 * bin_h,
                    res.subnets[k].name,
                    p.name()
                );
            }
        }
    }
    out
}

/// Per-policy statistics over the flows of the second half of the trace.
pub fn late_summary(res: &IwWebResult) -> Vec<(Policy, Stats)> {
    let half = res.config.duration_us / 2;
    res.runs
        .iter()
        .map(|(p, r)| (*p, stats(res, r, |i| res.arrivals[i].start_us >= half)))
        .collect()
}

/// The statistics of the second half of the trace (after learning).
fn late_table(res: &IwWebResult, md: &mut String) {
    let half = res.config.duration_us / 2;
    let _ = writeln!(
        md,
        "\nSecond half of the trace only (after {:.0} h of learning; TCP-RL's A/B numbers are \
         from a converged deployment):\n\n\
         | policy | mean ms | p50 ms | p80 ms | p99 ms | mean cut vs TCP-10 | vs Optimal |\n\
         |---|---:|---:|---:|---:|---:|---:|",
        half as f64 / 3.6e9
    );
    let late = late_summary(res);
    let late_base = late.first().map(|(_, s)| *s).unwrap_or_default();
    let late_opt = late.last().map(|(_, s)| *s).unwrap_or_default();
    for (p, s) in &late {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:+.1} % | {:+.1} % |",
            p.name(),
            s.mean_ms,
            s.p50_ms,
            s.p80_ms,
            s.p99_ms,
            100.0 * cut(s.mean_ms, late_base.mean_ms),
            100.0 * (s.mean_ms / late_opt.mean_ms - 1.0)
        );
    }
}

/// Mean response time per access class and policy.
fn class_table(res: &IwWebResult, md: &mut String) {
    let _ = writeln!(md, "\n## Mean response time by access class, ms\n");
    let _ = write!(md, "| class | flows |");
    for p in Policy::ALL {
        let _ = write!(md, " {} |", p.name());
    }
    let _ = writeln!(md, "\n|---|---:|{}", "---:|".repeat(Policy::ALL.len()));
    for class in ["fibre", "dsl", "mobile"] {
        let keep = |i: usize| res.subnets[res.arrivals[i].subnet].class == class;
        let mut row = String::new();
        let mut flows = 0;
        for (_, runs) in &res.runs {
            let s = stats(res, runs, keep);
            flows = s.flows;
            let _ = write!(row, " {:.0} |", s.mean_ms);
        }
        let _ = writeln!(md, "| {class} | {flows} |{row}");
    }
}

/// The report as markdown (also the body of `docs/iw.md`'s results section).
pub fn markdown(res: &IwWebResult, runtime_s: f64) -> String {
    let sum = summary(res);
    let base = sum.first().map(|(_, s)| *s).unwrap_or_default();
    let opt = sum.last().map(|(_, s)| *s).unwrap_or_default();
    let c = &res.config;
    let mut md = String::new();
    let _ = writeln!(md, "# iw-web: TCP-RL initial windows on short web flows\n");
    let _ = writeln!(
        md,
        "{} subnets ({} provinces x {} ISPs x {} subnets), {:.1} virtual hours, {} flows, \
         {} bins of {} min; TCP-RL grouping every {} min (S_min {}, T {}); sender {:?}; \
         Optimal over IWs {:?}. TCP-RL+ (ours): standard IW until a first grouping after 2 \
         bins, reward scaled by the extremes of iteration means. About {} flows simulated and {} served from the memo (two \
         threads may both simulate the same flow); {:.1} s wall time.\n",
        res.subnets.len(),
        c.population.provinces,
        c.population.isps_per_province,
        c.population.subnets_per_isp,
        c.duration_us as f64 / 3.6e9,
        res.arrivals.len(),
        c.bins(),
        c.bin_us / 60_000_000,
        c.grouping_period_us / 60_000_000,
        c.min_samples,
        c.max_jitter,
        c.sender,
        c.candidates_pkts,
        res.simulated.0,
        res.simulated.1,
        runtime_s
    );
    let _ = writeln!(
        md,
        "| policy | mean ms | p50 ms | p80 ms | p99 ms | tput Mbit/s | RTT ms | loss | flows w/ RTO | \
         mean cut vs TCP-10 | p50 / p80 / p99 cut | tput gain | vs Optimal |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"
    );
    for (p, s) in &sum {
        let _ = writeln!(
            md,
            "| {} | {:.0} | {:.0} | {:.0} | {:.0} | {:.2} | {:.0} | {:.2} % | {:.2} % | {:+.1} % | \
             {:+.1} / {:+.1} / {:+.1} % | {:+.1} % | {:+.1} % |",
            p.name(),
            s.mean_ms,
            s.p50_ms,
            s.p80_ms,
            s.p99_ms,
            s.tput_mbps,
            s.rtt_ms,
            100.0 * s.loss,
            100.0 * s.timeout_flows,
            100.0 * cut(s.mean_ms, base.mean_ms),
            100.0 * cut(s.p50_ms, base.p50_ms),
            100.0 * cut(s.p80_ms, base.p80_ms),
            100.0 * cut(s.p99_ms, base.p99_ms),
            100.0 * (s.tput_mbps / base.tput_mbps - 1.0),
            100.0 * (s.mean_ms / opt.mean_ms - 1.0)
        );
    }
    late_table(res, &mut md);
    let _ = writeln!(md, "\n## Targets (issue 6)\n");
    for (label, sum) in [("whole trace", sum), ("second half", late_summary(res))] {
        let _ = writeln!(md, "On the {label}:\n");
        for t in targets(&sum) {
            let _ = writeln!(
                md,
                "- **{}**: {}: {}",
                t.name,
                if t.met { "met" } else { "NOT met" },
                t.detail
            );
        }
        md.push('\n');
    }
    class_table(res, &mut md);
    let _ = writeln!(
        md,
        "\n## Groups found by TCP-RL ({} grouping runs)\n\n```\n{}```\n",
        res.regroupings,
        group_tree(res)
    );
    let _ = writeln!(
        md,
        "Files: `summary.csv` (the table above), `subnets.csv` (each subnet's path, group and \
         mean response time per policy), `iw_timeline.csv` (IW per subnet and bin for TCP-RL, \
         TCP-RL w/o grouping, TCP-RL+ and Optimal), `iw_over_time.svg`, `response_cdf.svg`.\n\n\
         ![IW over time](iw_over_time.svg)\n\n![Response-time CDF](response_cdf.svg)"
    );
    md
}

/// Writes `report.md`, the CSVs and the plots into `out`.
pub fn write(res: &IwWebResult, out: &Path, runtime_s: f64) -> std::io::Result<()> {
    std::fs::create_dir_all(out)?;
    let sum = summary(res);
    std::fs::write(out.join("summary.csv"), csv_summary(&sum))?;
    std::fs::write(out.join("subnets.csv"), csv_subnets(res))?;
    std::fs::write(out.join("iw_timeline.csv"), csv_timeline(res))?;
    std::fs::write(
        out.join("iw_over_time.svg"),
        super::plots::iw_over_time(res),
    )?;
    std::fs::write(
        out.join("response_cdf.svg"),
        super::plots::response_cdf(res),
    )?;
    std::fs::write(out.join("report.md"), markdown(res, runtime_s))?;
    Ok(())
}
