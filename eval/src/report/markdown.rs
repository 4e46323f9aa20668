//! `report.md`: the summary as Markdown tables, with links to the plots.

use std::fmt::Write as _;

use super::aggregate::Summary;
use super::plots::{Plot, Plots};

/// Above this many conditions the per-condition table is folded into a `<details>` block.
const FOLD_CONDITIONS: usize = 60;

/// A number with about three significant digits; `-` if absent or not finite.
pub(crate) fn num(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let a = v.abs();
            if a >= 100.0 || a == 0.0 {
                format!("{v:.0}")
            } else if a >= 10.0 {
                format!("{v:.1}")
            } else if a >= 1.0 {
                format!("{v:.2}")
            } else {
                format!("{v:.3}")
            }
        }
        _ => "-".to_string(),
    }
}

/// A fraction as a percentage; `-` if absent or not finite.
pub(crate) fn pct(v: Option<f64>) -> String {
    match v {
        Some(v) if v.is_finite() => {
            let p = v * 100.0;
            if p.abs() >= 10.0 || p == 0.0 {
                format!("{p:.0}%")
            } else {
                format!("{p:.1}%")
            }
        }
        _ => "-".to_string(),
    }
}

/// Text with HTML markup characters escaped and line breaks flattened.
fn html(s: &str) -> String {
    s.replace('&', "&amp;")
        .replace('<', "&lt;")
        .replace('>', "&gt;")
        .replace(['\n', '\r'], " ")
}

/// Text safe inside a Markdown table cell.
fn cell(s: &str) -> String {
    html(s).replace('|', "\\|")
}

/// A name as a code span, safe inside a table cell.
pub(crate) fn code(s: &str) -> String {
    format!(
        "`{}`",
        s.replace('`', "'")
            .replace('|', "\\|")
            .replace(['\n', '\r'], " ")
    )
}

fn table(out: &mut String, header: &[&str], rows: &[Vec<String>]) {
    let _ = writeln!(out, "| {} |", header.join(" | "));
    let _ = writeln!(
        out,
        "|{}",
        header.iter().map(|_| "---|").collect::<String>()
    );
    for r in rows {
        let _ = writeln!(out, "| {} |", r.join(" | "));
    }
    out.push('\n');
}

fn image(out: &mut String, p: &Plot) {
    let _ = writeln!(
        out,
        "![{}]({})\n\n*{}*\n",
        cell(&p.label),
        p.file,
        p.caption
    );
}

/// Renders `report.md`.
pub(crate) fn render(s: &Summary, plots: &Plots) -> String {
    let mut out = String::new();
    let c = &s.counts;
    let _ = writeln!(out, "# {}\n", html(&s.title));
    let _ = writeln!(
        out,
        "- Runs: {} ({} ok, {} failed)\n- Flow rows: {} ({} counted: status `ok`, role `main`)\n\
         - Conditions with a result: {}\n- Schemes: {} ({})",
        c.runs,
        c.ok_runs,
        c.failed_runs,
        c.flows,
        c.main_flows_ok,
        c.conditions,
        c.schemes,
        s.schemes
            .iter()
            .map(|x| code(x))
            .collect::<Vec<_>>()
            .join(", ")
    );
    if c.nonfinite_rewards > 0 {
        let _ = writeln!(
            out,
            "- Counted flows with a non-finite reward (left out of reward means): {}",
            c.nonfinite_rewards
        );
    }
    if c.partly_fallback > 0 {
        let _ = writeln!(
            out,
            "- Counted flows partly driven by the datapath's fallback rule instead of their scheme: \
             {} ({:.1} s in all; column `fallback_s` of `results.csv`)",
            c.partly_fallback, c.fallback_s
        );
    }
    out.push_str(
        "\nOnly flows with status `ok` and role `main` count towards scheme metrics. Reward is TCP-RL's \
         ln(throughput in Mbit/s / mean RTT in ms), so it is negative whenever throughput/RTT < 1; \
         reward loss is therefore (R_best - R) / |R_best| (TCP-RL divides by R_best, which is positive in its units).\n\n",
    );

    env_section(&mut out, s, plots);
    headroom_section(&mut out, s, plots);
    share_sections(&mut out, s, plots);
    conditions_section(&mut out, s);
    tail_sections(&mut out, s, plots);
    out
}

fn headroom_section(out: &mut String, s: &Summary, plots: &Plots) {
    let Some(h) = &s.headroom else { return };
    out.push_str("## Selection headroom\n\n");
    let _ = writeln!(
        out,
        "Best single CCA overall (B, the one to deploy): {}. Oracle: the best single CCA of each \
         condition in hindsight. Headroom = R_oracle - R_B (ln units; 0.1 is about 10 %). \
         Captured = (R_sel - R_B) / (R_oracle - R_B); `-` where the headroom is under {}. \
         \"Held out\" is the headroom against the seed-held-out oracle (each seed scored by \
         the single CCA best on the condition's other seeds: what knowing the condition, not \
         the seed's luck, is worth) and the share of it captured. \
         \"vs set best\" measures against the class's own best single CCA instead of B, and \
         \"beats\" says whether the selector's reward is above that CCA's. {} single CCAs; {} \
         conditions left out because a single CCA has no result in them.\n",
        code(&h.best_single),
        super::headroom::MIN_HEADROOM,
        h.singles.len(),
        h.incomplete_conditions
    );
    let mut header = vec![
        "set",
        "conditions",
        "with headroom",
        "R_B",
        "best single of set",
        "R",
        "R_oracle",
        "headroom",
        "held out",
    ];
    let sel_cols: Vec<String> = h
        .selectors
        .iter()
        .map(|x| format!("{} R / captured / held out / vs set best / beats", code(x)))
        .collect();
    header.extend(sel_cols.iter().map(String::as_str));
    let render_row = |r: &super::headroom::HeadroomRow| {
        let mut v = vec![
            code(&r.label),
            r.conditions.to_string(),
            r.conditions_with_headroom.to_string(),
            num(Some(r.r_best_single)),
            code(&r.best_in_set),
            num(Some(r.r_best_in_set)),
            num(Some(r.r_oracle)),
            num(Some(r.headroom)),
            num(r.headroom_held_out),
        ];
        for name in &h.selectors {
            v.push(match r.selectors.iter().find(|e| &e.scheme == name) {
                Some(e) => format!(
                    "{} / {} / {} / {} / {}",
                    num(Some(e.reward)),
                    pct(e.captured),
                    pct(e.captured_held_out),
                    pct(e.captured_vs_set_best),
                    if e.beats_best_in_set { "yes" } else { "no" }
                ),
                None => "-".into(),
            });
        }
        v
    };
    let rows: Vec<Vec<String>> = std::iter::once(&h.overall)
        .chain(&h.classes)
        .map(render_row)
        .collect();
    table(out, &header, &rows);
    let rows: Vec<Vec<String>> = h.conditions.iter().map(render_row).collect();
    out.push_str("<details><summary>Per condition</summary>\n\n");
    table(out, &header, &rows);
    out.push_str("</details>\n\n");
    if let Some(p) = &plots.headroom_cdf {
        image(out, p);
    }
}

fn env_section(out: &mut String, s: &Summary, plots: &Plots) {
    out.push_str("## Per-environment summary\n\n");
    out.push_str(
        "Means over counted flows (Jain: over runs; FCT: over finite flows that completed).\n\n",
    );
    for t in &s.envs {
        let _ = writeln!(out, "### Environment {}\n", code(&t.env));
        let rows: Vec<Vec<String>> = t
            .schemes
            .iter()
            .map(|x| {
                vec![
                    code(&x.scheme),
                    x.runs.to_string(),
                    x.flows.to_string(),
                    num(x.throughput_mbps),
                    num(x.p95_rtt_ms),
                    num(x.mean_rtt_ms),
                    num(x.mean_qdelay_ms),
                    pct(x.loss_rate),
                    pct(x.utilization),
                    num(x.reward),
                    if x.completed_flows > 0 {
                        format!("{} ({})", num(x.fct_s), x.completed_flows)
                    } else {
                        "-".into()
                    },
                    num(x.jain),
                ]
            })
            .collect();
        table(
            out,
            &[
                "Scheme",
                "Runs",
                "Flows",
                "Tput (Mbit/s)",
                "p95 RTT (ms)",
                "Mean RTT (ms)",
                "Queue delay (ms)",
                "Loss",
                "Util.",
                "Reward",
                "FCT (s) (flows)",
                "Jain",
            ],
            &rows,
        );
        if let Some(p) = plots.tput_delay.iter().find(|p| p.label == t.env) {
            image(out, p);
        }
    }
}

fn share_sections(out: &mut String, s: &Summary, plots: &Plots) {
    let n = s.counts.conditions;
    out.push_str("## Best-scheme share\n\n");
    let _ = writeln!(
        out,
        "Share of the {n} conditions in which each scheme has the highest mean reward (ties count for each tied scheme).\n"
    );
    let rows: Vec<Vec<String>> = s
        .best_share
        .iter()
        .map(|b| vec![code(&b.scheme), b.best_in.to_string(), pct(Some(b.share))])
        .collect();
    table(out, &["Scheme", "Best in", "Share"], &rows);
    image(out, &plots.best_share);

    out.push_str("## Rank\n\n");
    let _ = writeln!(
        out,
        "Rank 1 = best; tied schemes share the better rank. Shares are over all {n} conditions; \
         the median is over the conditions in which the scheme has a result (`Evaluated`).\n"
    );
    let rows: Vec<Vec<String>> = s
        .ranks
        .iter()
        .map(|r| {
            vec![
                code(&r.scheme),
                r.evaluated.to_string(),
                pct(Some(r.top1)),
                pct(Some(r.top3)),
                pct(Some(r.top5)),
                num(r.median_rank),
            ]
        })
        .collect();
    table(
        out,
        &[
            "Scheme",
            "Evaluated",
            "Rank 1",
            "Top 3",
            "Top 5",
            "Median rank",
        ],
        &rows,
    );
    image(out, &plots.rank_cdf);

    out.push_str("## Reward loss\n\n");
    let _ = writeln!(
        out,
        "Reward loss = (R_best - R) / |R_best| per condition; shares are over all {n} conditions.\n"
    );
    let rows: Vec<Vec<String>> = s
        .reward_loss
        .iter()
        .map(|r| {
            vec![
                code(&r.scheme),
                r.evaluated.to_string(),
                pct(Some(r.under_5pct)),
                pct(Some(r.under_10pct)),
                pct(Some(r.under_12pct)),
                pct(r.median),
            ]
        })
        .collect();
    table(
        out,
        &[
            "Scheme",
            "Evaluated",
            "< 5 %",
            "< 10 %",
            "< 12 %",
            "Median loss",
        ],
        &rows,
    );
    image(out, &plots.reward_loss_cdf);
}

fn conditions_section(out: &mut String, s: &Summary) {
    out.push_str("## Per-condition results\n\n");
    out.push_str(
        "Each scheme's cell: rank (reward loss); `-` if it has no result in the condition.\n\n",
    );
    let multi = s
        .conditions
        .iter()
        .any(|x| x.scenario != s.conditions[0].scenario);
    let names: Vec<String> = s.schemes.iter().map(|x| code(x)).collect();
    let mut header: Vec<&str> = vec!["Condition", "Env", "Best", "R_best"];
    header.extend(names.iter().map(String::as_str));
    let rows: Vec<Vec<String>> = s
        .conditions
        .iter()
        .map(|x| {
            let name = if multi {
                format!("{}/{}", x.scenario, x.condition)
            } else {
                x.condition.clone()
            };
            let mut r = vec![
                cell(&name),
                cell(&x.env),
                cell(&x.best.join(", ")),
                num(Some(x.best_reward)),
            ];
            for sc in &s.schemes {
                r.push(
                    x.schemes
                        .iter()
                        .find(|e| &e.scheme == sc)
                        .map_or("-".into(), |e| {
                            format!("{} ({})", e.rank, pct(e.reward_loss))
                        }),
                );
            }
            r
        })
        .collect();
    if s.conditions.len() > FOLD_CONDITIONS {
        let _ = writeln!(
            out,
            "<details><summary>{} conditions</summary>\n",
            s.conditions.len()
        );
        table(out, &header, &rows);
        out.push_str("</details>\n\n");
    } else {
        table(out, &header, &rows);
    }
}

fn tail_sections(out: &mut String, s: &Summary, plots: &Plots) {
    if !plots.series.is_empty() {
        out.push_str("## Time series\n\n");
        for p in &plots.series {
            image(out, p);
        }
    }

    out.push_str("## Failed runs\n\n");
    if s.failed.is_empty() {
        out.push_str("None.\n");
    } else {
        let rows: Vec<Vec<String>> = s
            .failed
            .iter()
            .map(|f| {
                vec![
                    cell(&f.scenario),
                    cell(&f.condition),
                    code(&f.scheme),
                    f.seed.to_string(),
                    cell(&f.status),
                ]
            })
            .collect();
        table(
            out,
            &["Scenario", "Condition", "Scheme", "Seed", "Status"],
            &rows,
        );
    }
}
