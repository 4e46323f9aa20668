//! Tests of the report: aggregation, shard merging, and well-formed SVG.

use std::path::{Path, PathBuf};

use super::*;

fn row(cond: &str, env: &str, scheme: &str, seed: u64, reward: f64) -> FlowRow {
    FlowRow {
        scenario: "synthetic".into(),
        env: env.into(),
        condition: cond.into(),
        bw_mbps: 10.0,
        rtt_ms: 40.0,
        loss: 0.0,
        buffer_bytes: 50_000,
        scheme: scheme.into(),
        seed,
        flow: 0,
        role: "main".into(),
        flow_scheme: scheme.into(),
        size_bytes: None,
        start_s: 0.0,
        throughput_mbps: 5.0 + reward,
        utilization: 0.5,
        mean_rtt_ms: 45.0,
        p95_rtt_ms: 50.0 + 10.0 * reward,
        p95_srtt_ms: 50.0,
        mean_qdelay_ms: 2.5,
        p95_qdelay_ms: 5.0,
        loss_rate: 0.001,
        fct_s: None,
        reward,
        power: 100.0,
        jain: 1.0,
        retransmits: 0,
        timeouts: 0,
        fallback_s: 0.0,
        takeovers: 0,
        objective: "reward".into(),
        score: None,
        status: "ok".into(),
    }
}

/// 3 schemes x 4 conditions x 2 seeds; per-condition mean rewards:
/// c1: a 2, b 1, c 0.5 | c2: a -1, b -1 (tie), c -2 | c3: a 2.9, b 3, c 1 | c4: a 0.96, b 0.5, c 1.
/// Seeds are R + 0.1 and R - 0.1. b's seed 2 in c4 failed (with a huge reward that must not
/// count), and every run has a cross flow with a huge reward that must not count either.
fn synthetic() -> Vec<FlowRow> {
    let table: [(&str, &str, [f64; 3]); 4] = [
        ("c1", "wan", [2.0, 1.0, 0.5]),
        ("c2", "wan", [-1.0, -1.0, -2.0]),
        ("c3", "dcn", [2.9, 3.0, 1.0]),
        ("c4", "dcn", [0.96, 0.5, 1.0]),
    ];
    let mut rows = Vec::new();
    for (cond, env, rewards) in table {
        for (scheme, r) in ["a", "b", "c"].into_iter().zip(rewards) {
            for seed in [1, 2] {
                let mut main = row(
                    cond,
                    env,
                    scheme,
                    seed,
                    if seed == 1 { r + 0.1 } else { r - 0.1 },
                );
                if cond == "c4" && scheme == "b" && seed == 2 {
                    main.status = "failed: boom | agent died".into();
                    main.reward = 100.0;
                    main.fct_s = Some(1.0);
                }
                if cond == "c1" && scheme == "a" {
                    main.fct_s = Some(if seed == 1 { 2.0 } else { 4.0 });
                    main.size_bytes = Some(1_000_000);
                }
                let mut cross = row(cond, env, scheme, seed, 50.0);
                cross.flow = 1;
                cross.role = "cross".into();
                cross.flow_scheme = "cubic".into();
                cross.status = main.status.clone();
                rows.push(main);
                rows.push(cross);
            }
        }
    }
    rows
}

fn close(a: f64, b: f64) -> bool {
    (a - b).abs() < 1e-6
}

#[test]
fn aggregation() {
    let rows = synthetic();
    let s = summarize("t", &rows);
    assert_eq!(s.schemes, vec!["a", "b", "c"]);
    assert_eq!(s.counts.runs, 24);
    assert_eq!(s.counts.failed_runs, 1);
    assert_eq!(s.counts.ok_runs, 23);
    assert_eq!(s.counts.flows, 48);
    assert_eq!(s.counts.main_flows_ok, 23);
    assert_eq!(s.counts.conditions, 4);
    assert_eq!(s.failed.len(), 1);
    assert_eq!(s.failed[0].scheme, "b");
    assert_eq!(s.failed[0].condition, "c4");
    assert_eq!(s.failed[0].status, "failed: boom | agent died");

    let cond = |c: &str| s.conditions.iter().find(|x| x.condition == c).unwrap();
    let entry = |c: &str, sc: &str| {
        cond(c)
            .schemes
            .iter()
            .find(|e| e.scheme == sc)
            .unwrap()
            .clone()
    };
    // c1: plain order, positive rewards.
    assert_eq!(cond("c1").best, vec!["a"]);
    assert_eq!(
        (
            entry("c1", "a").rank,
            entry("c1", "b").rank,
            entry("c1", "c").rank
        ),
        (1, 2, 3)
    );
    assert!(close(entry("c1", "b").reward_loss.unwrap(), 0.5));
    // c2: a tie at the top with negative rewards; loss divides by |R_best|.
    assert_eq!(cond("c2").best, vec!["a", "b"]);
    assert_eq!(
        (
            entry("c2", "a").rank,
            entry("c2", "b").rank,
            entry("c2", "c").rank
        ),
        (1, 1, 3)
    );
    assert!(close(entry("c2", "c").reward_loss.unwrap(), 1.0));
    assert_eq!(entry("c2", "b").reward_loss, Some(0.0));
    // c3
    assert!(close(entry("c3", "a").reward_loss.unwrap(), 0.1 / 3.0));
    // c4: b's failed seed is left out (its mean is seed 1 only).
    assert_eq!(entry("c4", "b").seeds, 1);
    assert!(close(entry("c4", "b").reward, 0.6));
    assert_eq!(cond("c4").best, vec!["c"]);
    assert_eq!(entry("c4", "b").rank, 3);

    let best = |sc: &str| s.best_share.iter().find(|b| b.scheme == sc).unwrap().share;
    assert!(close(best("a"), 0.5) && close(best("b"), 0.5) && close(best("c"), 0.25));
    let rank = |sc: &str| s.ranks.iter().find(|b| b.scheme == sc).unwrap().clone();
    assert!(close(rank("a").top1, 0.5) && close(rank("a").top3, 1.0));
    assert_eq!(rank("a").median_rank, Some(1.5));
    assert_eq!(rank("b").median_rank, Some(1.5));
    assert_eq!(rank("c").median_rank, Some(3.0));
    assert!(close(rank("c").top1, 0.25));
    let loss = |sc: &str| {
        s.reward_loss
            .iter()
            .find(|b| b.scheme == sc)
            .unwrap()
            .clone()
    };
    assert!(close(loss("a").under_5pct, 1.0));
    assert!(close(loss("b").under_5pct, 0.5));
    assert!(close(loss("b").under_12pct, 0.5));
    assert!(close(loss("c").under_10pct, 0.25));

    // Per-env table: the failed run and cross flows are left out.
    let dcn = s.envs.iter().find(|e| e.env == "dcn").unwrap();
    let b = dcn.schemes.iter().find(|x| x.scheme == "b").unwrap();
    assert_eq!((b.runs, b.flows), (3, 3));
    assert!(close(b.reward.unwrap(), (3.1 + 2.9 + 0.6) / 3.0));
    assert_eq!(b.fct_s, None);
    let wan = s.envs.iter().find(|e| e.env == "wan").unwrap();
    let a = wan.schemes.iter().find(|x| x.scheme == "a").unwrap();
    assert_eq!((a.fct_s, a.completed_flows), (Some(3.0), 2));
    assert_eq!(a.jain, Some(1.0));
}

#[test]
fn flows_partly_under_the_fallback_rule_are_counted_and_said() {
    let mut rows = synthetic();
    rows[0].fallback_s = 1.5;
    rows[2].fallback_s = 0.5;
    let s = summarize("t", &rows);
    assert_eq!(s.counts.partly_fallback, 2);
    assert!(close(s.counts.fallback_s, 2.0));
    let md = super::markdown::render(&s, &super::plots::render(&s, &rows, &[]));
    assert!(
        md.contains(
            "partly driven by the datapath's fallback rule instead of their scheme: 2 (2.0 s"
        ),
        "{md}"
    );
}

#[test]
fn reward_loss_edge_cases() {
    assert_eq!(aggregate::reward_loss(0.0, 0.0), Some(0.0));
    assert_eq!(aggregate::reward_loss(0.0, -1.0), None);
    assert!(close(aggregate::reward_loss(-2.0, -3.0).unwrap(), 0.5));
    assert_eq!(aggregate::median(&mut []), None);
    assert_eq!(aggregate::median(&mut [3.0, 1.0, 2.0]), Some(2.0));
}

/// A minimal well-formedness check: starts with `<svg`, tags balance, no NaN or infinity.
fn check_svg(path: &Path) {
    let text = std::fs::read_to_string(path).unwrap();
    let name = path.display();
    assert!(text.starts_with("<svg"), "{name}: does not start with <svg");
    assert!(
        !text.contains("NaN") && !text.contains("inf"),
        "{name}: non-finite number"
    );
    let mut stack: Vec<String> = Vec::new();
    let mut rest = text.as_str();
    while let Some(i) = rest.find('<') {
        let end = i + rest[i..]
            .find('>')
            .unwrap_or_else(|| panic!("{name}: unclosed tag"));
        let tag = &rest[i + 1..end];
        assert!(!tag.contains('<'), "{name}: '<' inside a tag: {tag}");
        if let Some(close) = tag.strip_prefix('/') {
            assert_eq!(
                stack.pop().as_deref(),
                Some(close.trim()),
                "{name}: mismatched </{close}>"
            );
        } else if !tag.ends_with('/') {
            let tname: String = tag.chars().take_while(|c| !c.is_whitespace()).collect();
            stack.push(tname);
        }
        // Text between tags must not hold a raw '>' or an unescaped '&'.
        let next = rest[end + 1..]
            .find('<')
            .map_or(rest.len(), |j| end + 1 + j);
        let between = &rest[end + 1..next];
        assert!(!between.contains('>'), "{name}: raw '>' in text");
        for (k, _) in between.match_indices('&') {
            let ent = &between[k..];
            assert!(
                ["&amp;", "&lt;", "&gt;", "&quot;", "&apos;"]
                    .iter()
                    .any(|e| ent.starts_with(e)),
                "{name}: raw '&' in text"
            );
        }
        rest = &rest[end + 1..];
    }
    assert!(stack.is_empty(), "{name}: unclosed {stack:?}");
}

fn series(cond: &str, scheme: &str, seed: u64, n: usize) -> Vec<SeriesRow> {
    (0..n)
        .map(|i| SeriesRow {
            scenario: "synthetic".into(),
            condition: cond.into(),
            scheme: scheme.into(),
            seed,
            flow: 0,
            t_s: i as f64 * 0.1,
            cwnd_pkts: 10.0 + i as f64,
            throughput_mbps: if i == 3 { f64::NAN } else { i as f64 },
        })
        .collect()
}

fn svgs(dir: &Path) -> Vec<PathBuf> {
    let mut v: Vec<PathBuf> = std::fs::read_dir(dir.join("plots"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    v.sort();
    v
}

#[test]
fn svgs_are_well_formed() {
    let mut rows = synthetic();
    // Hostile values: non-finite metrics, markup in names.
    let mut odd = row(
        "bw10/rtt<40> & \"x\"",
        "cell<ular>",
        "<script>",
        1,
        f64::NAN,
    );
    odd.p95_rtt_ms = f64::INFINITY;
    odd.throughput_mbps = f64::NEG_INFINITY;
    rows.push(odd);
    let mut ser = series("c1", "a", 1, 40);
    ser.extend(series("c1", "b", 2, 40));
    ser.extend(series("c1", "a", 2, 40)); // a later seed: not drawn
    ser.extend(series("bw10/rtt<40> & \"x\"", "<script>", 1, 5));
    let dir = tempfile::tempdir().unwrap();
    let s = write_report(
        dir.path(),
        &ReportInput {
            title: "t <&>",
            rows: &rows,
            series: &ser,
        },
    )
    .unwrap();
    assert_eq!(s.counts.nonfinite_rewards, 1);
    let files = svgs(dir.path());
    let names: Vec<String> = files
        .iter()
        .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
        .collect();
    for want in [
        "best_share.svg",
        "rank_cdf.svg",
        "reward_loss_cdf.svg",
        "tput_vs_delay_wan.svg",
        "series_c1.svg",
    ] {
        assert!(
            names.iter().any(|n| n == want),
            "missing {want} in {names:?}"
        );
    }
    assert!(
        names
            .iter()
            .any(|n| n.starts_with("tput_vs_delay_cell_ular_"))
    );
    assert!(names.iter().any(|n| n.starts_with("series_bw10_rtt_40")));
    for f in &files {
        check_svg(f);
    }
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    for n in &names {
        assert!(
            md.contains(&format!("(plots/{n})")),
            "report.md does not link {n}"
        );
    }
    assert!(md.contains("## Failed runs") && md.contains("failed: boom \\| agent died"));
    assert!(!md.contains("<details>"));
    let json: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(dir.path().join("summary.json")).unwrap())
            .unwrap();
    assert_eq!(json["counts"]["failed_runs"], 1);

    // An empty report is still a report.
    let empty = tempfile::tempdir().unwrap();
    let s = write_report(
        empty.path(),
        &ReportInput {
            title: "empty",
            rows: &[],
            series: &[],
        },
    )
    .unwrap();
    assert_eq!(s.counts.runs, 0);
    for f in svgs(empty.path()) {
        check_svg(&f);
    }
}

#[test]
fn many_conditions_fold() {
    let rows: Vec<FlowRow> = (0..61)
        .flat_map(|i| {
            ["a", "b"].map(|sc| {
                row(
                    &format!("c{i}"),
                    "wan",
                    sc,
                    1,
                    if sc == "a" { 1.0 } else { 0.5 },
                )
            })
        })
        .collect();
    let dir = tempfile::tempdir().unwrap();
    write_report(
        dir.path(),
        &ReportInput {
            title: "many",
            rows: &rows,
            series: &[],
        },
    )
    .unwrap();
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("<details>") && md.contains("</details>"));
}

#[test]
fn report_dirs_merges_shards() {
    let rows = synthetic();
    let (a_rows, b_rows): (Vec<FlowRow>, Vec<FlowRow>) = rows
        .iter()
        .cloned()
        .partition(|r| r.condition == "c1" || r.condition == "c2");
    let shard_a = tempfile::tempdir().unwrap();
    let shard_b = tempfile::tempdir().unwrap();
    // Shard b also holds a copy of shard a's first rows: identical duplicates merge.
    let mut b_with_dup = b_rows.clone();
    b_with_dup.extend(a_rows.iter().take(3).cloned());
    write_csv(&shard_a.path().join("results.csv"), &a_rows).unwrap();
    write_csv(
        &shard_a.path().join("series.csv"),
        &series("c1", "a", 1, 10),
    )
    .unwrap();
    write_csv(&shard_b.path().join("results.csv"), &b_with_dup).unwrap();
    let out = tempfile::tempdir().unwrap();
    let dirs = vec![shard_a.path().to_path_buf(), shard_b.path().to_path_buf()];
    let s = report_dirs(&dirs, out.path()).unwrap();
    assert_eq!(s.counts.flows, rows.len());
    assert_eq!(s.counts.conditions, 4);
    assert_eq!(s.title, "Scenario synthetic");
    let merged: Vec<FlowRow> = read_csv(&out.path().join("results.csv")).unwrap();
    assert_eq!(merged.len(), rows.len());
    let merged_series: Vec<SeriesRow> = read_csv(&out.path().join("series.csv")).unwrap();
    assert_eq!(merged_series.len(), 10);
    for f in [
        "report.md",
        "summary.json",
        "plots/best_share.svg",
        "plots/series_c1.svg",
    ] {
        assert!(out.path().join(f).is_file(), "missing {f}");
    }

    // A conflicting duplicate names both files.
    let mut conflicting = b_rows;
    let mut changed = a_rows[0].clone();
    changed.throughput_mbps += 1.0;
    conflicting.push(changed);
    write_csv(&shard_b.path().join("results.csv"), &conflicting).unwrap();
    let err = report_dirs(&dirs, out.path()).unwrap_err();
    let msg = err.to_string();
    assert!(matches!(err, ReportError::Conflict { .. }), "{msg}");
    assert!(
        msg.contains(&shard_a.path().join("results.csv").display().to_string()),
        "{msg}"
    );
    assert!(
        msg.contains(&shard_b.path().join("results.csv").display().to_string()),
        "{msg}"
    );

    // A shard without results.csv is named.
    let bare = tempfile::tempdir().unwrap();
    let err = report_dirs(&[bare.path().to_path_buf()], out.path()).unwrap_err();
    assert!(err.to_string().contains("results.csv"), "{err}");
    assert!(matches!(
        report_dirs(&[], out.path()),
        Err(ReportError::NoInput)
    ));
}

/// Writes `text` as `results.csv` of a fresh directory and reports on it: the error text.
fn report_error(text: &[u8]) -> (String, String) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("results.csv");
    std::fs::write(&path, text).unwrap();
    let out = tempfile::tempdir().unwrap();
    let err = report_dirs(&[dir.path().to_path_buf()], out.path()).map_or_else(
        |e| e.to_string(),
        |s| format!("accepted: {} flows", s.counts.flows),
    );
    (path.display().to_string(), err)
}

#[test]
fn cut_off_or_incomplete_results_are_refused_naming_file_and_line() {
    // Before this fix the first three were accepted as a report with fewer (or no) rows.
    let dir = tempfile::tempdir().unwrap();
    let good = dir.path().join("results.csv");
    let mut rows = synthetic()[..3].to_vec();
    rows[0].throughput_mbps = 123.25;
    write_csv(&good, &rows).unwrap();
    let text = std::fs::read(&good).unwrap();
    let header_len = text.iter().position(|&b| b == b'\n').unwrap() + 1;
    let second_row = header_len + text[header_len..].iter().position(|&b| b == b'\n').unwrap() + 1;
    let cases: [(&[u8], &str, &str); 8] = [
        (&text[..100], ":1:", "cut off"),
        (
            b"scenario,env,condition\n",
            ":1:",
            "lacks column(s) bw_mbps",
        ),
        (b"", ":1:", "empty"),
        // A row cut inside its last field.
        (&text[..second_row - 2], ":2:", "cut off"),
        // A row cut and followed by others.
        (
            &[&text[..header_len + 40], b"\n", &text[header_len..]].concat(),
            ":2:",
            "fields",
        ),
        (&[&text[..header_len], b"x,y\n"].concat(), ":2:", "fields"),
        (
            &String::from_utf8(text.clone())
                .unwrap()
                .replacen(",123.25,", ",fast,", 1)
                .into_bytes(),
            ":2:",
            "column `throughput_mbps`",
        ),
        // A row cut inside its status that still ends in a line end.
        (
            &[&text[..second_row - 2], b"\n"].concat(),
            ":2:",
            "status \"o\"",
        ),
    ];
    for (bytes, line, what) in cases {
        let (path, err) = report_error(bytes);
        assert!(
            err.starts_with(&format!("{path}{line}")) && err.contains(what),
            "{err}\n(wanted {line} {what})"
        );
    }
}

#[test]
fn results_without_the_columns_added_later_still_read() {
    let dir = tempfile::tempdir().unwrap();
    let p = dir.path().join("results.csv");
    write_csv(&p, &synthetic()[..2]).unwrap();
    let text = std::fs::read_to_string(&p).unwrap();
    let header: Vec<&str> = text.lines().next().unwrap().split(',').collect();
    // The flow rows' added columns (`by` is a decision row's).
    let added: Vec<usize> = crate::results::ADDED_COLUMNS
        .iter()
        .filter_map(|c| header.iter().position(|h| h == c))
        .collect();
    assert_eq!(added.len(), crate::results::ADDED_COLUMNS.len() - 1);
    let mut old = String::new();
    for l in text.lines() {
        let cells: Vec<&str> = l
            .split(',')
            .enumerate()
            .filter(|(i, _)| !added.contains(i))
            .map(|(_, c)| c)
            .collect();
        old.push_str(&cells.join(","));
        old.push('\n');
    }
    assert!(
        old.starts_with("scenario,")
            && !old.contains("takeovers")
            && !old.contains("srtt")
            && !old.contains("score")
    );
    std::fs::write(&p, old).unwrap();
    let rows: Vec<FlowRow> = read_csv(&p).unwrap();
    assert_eq!(rows.len(), 2);
    assert_eq!((rows[0].fallback_s, rows[0].takeovers), (0.0, 0));
    assert!(rows[0].p95_srtt_ms.abs() < f64::EPSILON);
    // A row without a score is ranked by its reward (the `reward` objective's score).
    assert_eq!(
        (rows[0].objective.as_str(), rows[0].score),
        ("reward", None)
    );
    assert!((rows[0].rank_score() - rows[0].reward).abs() < 1e-12);
}

/// Two single CCAs and two selectors over two classes:
/// wan c1: a 1.0, b 0.5, sel-x 0.8, sel-y 1.0 | wan c2: a 0.0, b 1.0, sel-x 0.9, sel-y 0.2
/// cell c3: a 2.0, b 2.005 (headroom under 0.01), sel-x 2.0, sel-y 1.0
/// c4: only `a` has a result (left out: `b` has a hole there).
/// Means over c1..c3: a 1.0, b 1.168: B = b.
fn headroom_rows() -> Vec<FlowRow> {
    let mut rows = Vec::new();
    let cells: &[(&str, &str, &str, f64)] = &[
        ("c1", "wan", "a", 1.0),
        ("c1", "wan", "b", 0.5),
        ("c1", "wan", "selector-x", 0.8),
        ("c1", "wan", "selector-y", 1.0),
        ("c2", "wan", "a", 0.0),
        ("c2", "wan", "b", 1.0),
        ("c2", "wan", "selector-x", 0.9),
        ("c2", "wan", "selector-y", 0.2),
        ("c3", "cell", "a", 2.0),
        ("c3", "cell", "b", 2.005),
        ("c3", "cell", "selector-x", 2.0),
        ("c3", "cell", "selector-y", 1.0),
        ("c4", "cell", "a", 5.0),
        ("c4", "cell", "selector-x", 5.0),
    ];
    for &(c, env, scheme, r) in cells {
        for seed in [1, 2] {
            let mut row = row(c, env, scheme, seed, -100.0);
            // The score ranks, not the reward: a score column overrides it.
            row.objective = "delay".into();
            row.score = Some(r + if seed == 1 { 0.05 } else { -0.05 });
            rows.push(row);
        }
    }
    rows
}

#[test]
fn headroom_names_best_single_oracle_and_captured_shares() {
    let summary = summarize("h", &headroom_rows());
    let hr = summary
        .headroom
        .as_ref()
        .expect("singles and selectors: a headroom analysis");
    assert_eq!(hr.singles, ["a", "b"]);
    assert_eq!(hr.selectors, ["selector-x", "selector-y"]);
    assert_eq!(hr.best_single, "b");
    assert_eq!(hr.incomplete_conditions, 1);
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // Overall over c1..c3: R_B = (0.5 + 1 + 2.005) / 3, oracle = (1 + 1 + 2.005) / 3.
    let all = &hr.overall;
    assert_eq!(all.conditions, 3);
    assert!(close(all.r_best_single, 3.505 / 3.0));
    assert!(close(all.r_oracle, 4.005 / 3.0));
    assert!(close(all.headroom, 0.5 / 3.0));
    assert_eq!(all.conditions_with_headroom, 1);
    let sx = &all.selectors[0];
    assert_eq!(sx.scheme, "selector-x");
    assert!(close(sx.reward, 3.7 / 3.0));
    assert!(close(sx.captured.unwrap(), (3.7 - 3.505) / 0.5));
    assert!(sx.beats_best_in_set);
    let sy = &all.selectors[1];
    assert!(close(sy.captured.unwrap(), (2.2 - 3.505) / 0.5));
    // Every scheme's seeds differ by the same offset: holding one out chooses as the
    // nominal oracle does.
    assert!(close(all.r_oracle_held_out.unwrap(), all.r_oracle));
    assert!(close(sx.captured_held_out.unwrap(), sx.captured.unwrap()));
    assert!(!sy.beats_best_in_set);
    // Class wan: B = b is also the class's best (0.75 vs 0.5); oracle 1.0.
    let wan = hr.classes.iter().find(|c| c.env == "wan").unwrap();
    assert_eq!(wan.best_in_set, "b");
    assert!(close(wan.headroom, 0.25));
    assert!(close(
        wan.selectors[0].captured.unwrap(),
        (0.85 - 0.75) / 0.25
    ));
    // Class cell (c3 only; c4 is incomplete): headroom 0 -> no captured share.
    let cell = hr.classes.iter().find(|c| c.env == "cell").unwrap();
    assert_eq!(cell.conditions, 1);
    assert_eq!(cell.conditions_with_headroom, 0);
    assert!(cell.selectors[0].captured.is_none());
    // Per condition: c2's oracle is b = B, so no headroom; c1's oracle is a.
    let c1 = hr.conditions.iter().find(|c| c.label == "c1").unwrap();
    assert_eq!(c1.best_in_set, "a");
    assert!(close(c1.headroom, 0.5));
    assert!(close(c1.selectors[0].captured.unwrap(), 0.6));
    assert!(close(c1.selectors[1].captured.unwrap(), 1.0));
    assert!(!c1.selectors[1].beats_best_in_set, "equal is not better");
    let c2 = hr.conditions.iter().find(|c| c.label == "c2").unwrap();
    assert!(c2.selectors[0].captured.is_none());
}

/// The seed-held-out oracle chooses on the other seeds and scores on the held-out one.
/// c1: a 1.0 / 0.0 / 0.0 (best by its first seed's luck), b 0.3 each seed;
/// c2: a 0.5 each seed, b 0.0. B = a (0.4167 against 0.15).
#[test]
fn held_out_oracle_scores_each_seed_by_the_choice_of_the_others() {
    let mut rows = Vec::new();
    let cells: &[(&str, &str, [f64; 3])] = &[
        ("c1", "a", [1.0, 0.0, 0.0]),
        ("c1", "b", [0.3, 0.3, 0.3]),
        ("c1", "selector-x", [0.3, 0.3, 0.6]),
        ("c2", "a", [0.5, 0.5, 0.5]),
        ("c2", "b", [0.0, 0.0, 0.0]),
        ("c2", "selector-x", [0.5, 0.5, 0.5]),
    ];
    for &(c, scheme, per_seed) in cells {
        for (seed, r) in (1..).zip(per_seed) {
            let mut row = row(c, "wan", scheme, seed, -100.0);
            row.objective = "delay".into();
            row.score = Some(r);
            rows.push(row);
        }
    }
    let summary = summarize("h", &rows);
    let h = summary.headroom.as_ref().expect("a headroom analysis");
    assert_eq!(h.best_single, "a");
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    // c1: seed 1 is scored by b (best on seeds 2 and 3), seeds 2 and 3 by a: 0.1.
    let c1 = h.conditions.iter().find(|c| c.label == "c1").unwrap();
    assert!(close(c1.r_oracle, 1.0 / 3.0));
    assert!(close(c1.r_oracle_held_out.unwrap(), 0.1));
    let c2 = h.conditions.iter().find(|c| c.label == "c2").unwrap();
    assert!(close(c2.r_oracle_held_out.unwrap(), 0.5));
    // Overall: no headroom either way (the held-out one is negative), so no shares.
    let all = &h.overall;
    assert!(close(all.r_oracle_held_out.unwrap(), 0.3));
    assert!(close(all.headroom_held_out.unwrap(), 0.3 - 2.5 / 6.0));
    assert!(all.selectors[0].captured_held_out.is_none());
    // One seed: nothing to hold out.
    let one: Vec<FlowRow> = rows.into_iter().filter(|r| r.seed == 1).collect();
    let s1 = summarize("h", &one);
    let h1 = s1.headroom.as_ref().unwrap();
    assert!(h1.overall.r_oracle_held_out.is_none());
    assert!(h1.overall.selectors[0].captured_held_out.is_none());
}

#[test]
fn headroom_needs_singles_and_selectors() {
    let only_singles: Vec<FlowRow> = headroom_rows()
        .into_iter()
        .filter(|r| !r.scheme.starts_with("selector-"))
        .collect();
    assert!(summarize("h", &only_singles).headroom.is_none());
    let only_selectors: Vec<FlowRow> = headroom_rows()
        .into_iter()
        .filter(|r| r.scheme.starts_with("selector-"))
        .collect();
    assert!(summarize("h", &only_selectors).headroom.is_none());
}

#[test]
fn headroom_section_and_cdf_are_written() {
    let dir = tempfile::tempdir().unwrap();
    let rows = headroom_rows();
    write_report(
        dir.path(),
        &ReportInput {
            title: "h",
            rows: &rows,
            series: &[],
        },
    )
    .unwrap();
    let md = std::fs::read_to_string(dir.path().join("report.md")).unwrap();
    assert!(md.contains("## Selection headroom"), "{md}");
    assert!(md.contains("Best single CCA overall (B, the one to deploy): `b`"));
    assert!(md.contains("| `overall` | 3 | 1 |"), "{md}");
    assert!(md.contains("plots/headroom_cdf.svg"));
    let svg = std::fs::read_to_string(dir.path().join("plots/headroom_cdf.svg")).unwrap();
    assert!(
        svg.starts_with("<svg") && svg.contains("selector-x"),
        "{svg}"
    );
    let json = std::fs::read_to_string(dir.path().join("summary.json")).unwrap();
    assert!(json.contains("\"best_single\": \"b\""));
}

/// A swap of scheme `sel`'s flow 1 in the synthetic scenario.
fn swap_row(cond: &str, seed: u64, t_s: f64, from: &str, to: &str) -> crate::results::SwapRow {
    crate::results::SwapRow {
        scenario: "synthetic".into(),
        condition: cond.into(),
        scheme: "sel".into(),
        seed,
        sock_id: 1,
        t_s,
        from: from.into(),
        to: to.into(),
    }
}

#[test]
fn the_moves_per_flow_table_counts_moves_apart_from_re_seats() {
    let swap =
        |cond: &str, seed: u64, sock_id: u32, from: &str, to: &str| crate::results::SwapRow {
            scenario: "synthetic".into(),
            condition: cond.into(),
            scheme: "sel".into(),
            seed,
            sock_id,
            t_s: 1.0,
            from: from.into(),
            to: to.into(),
        };
    let rows = vec![
        row("c1", "wan", "sel", 1, 1.0),
        row("c2", "dcn", "sel", 1, 2.0),
    ];
    assert_eq!(choices::moves_per_flow_table(&[], &rows), None);
    let swaps = [
        // c1 seed 1: flow 1 moves twice and is re-seated once; flow 2 moves once.
        swap("c1", 1, 1, "copa", "bbr"),
        swap("c1", 1, 1, "bbr", "bbr"),
        swap("c1", 1, 1, "bbr", "arc"),
        swap("c1", 1, 2, "copa", "cubic"),
        // c1 seed 2: a re-seat alone is no move.
        swap("c1", 2, 1, "copa", "copa"),
        // c2: three moves in one flow.
        swap("c2", 1, 1, "copa", "bbr"),
        swap("c2", 1, 1, "bbr", "arc"),
        swap("c2", 1, 1, "arc", "copa"),
    ];
    let md = choices::moves_per_flow_table(&swaps, &rows).expect("flows moved");
    let lines: Vec<&str> = md.lines().skip(2).collect();
    assert_eq!(
        lines,
        [
            "| dcn | `sel` | 1 | 0 | 0 | 1 | 3 | 0 |",
            "| wan | `sel` | 2 | 1 | 1 | 0 | 2 | 2 |",
            "| all | `sel` | 3 | 1 | 1 | 1 | 3 | 2 |",
        ],
        "{md}"
    );
}

#[test]
fn the_moves_table_compares_runs_with_a_move_to_their_start_alone() {
    let swap = swap_row;
    let rows = vec![
        row("c1", "wan", "sel", 1, 1.0),
        row("c1", "wan", "copa", 1, 0.4),
        row("c1", "wan", "sel", 2, 0.0),
        row("c1", "wan", "copa", 2, 0.5),
        row("c2", "dcn", "sel", 1, 2.0),
        row("c2", "dcn", "copa", 1, 2.5),
        row("c3", "dcn", "sel", 1, 9.0),
    ];
    // A re-seat alone is not a move; the start is the first move's `from`, whatever order the
    // rows come in; a run whose start was not run alone (c3, from vegas) is left out.
    assert_eq!(
        choices::moves_table(&[swap("c1", 1, 3.0, "copa", "copa")], &rows),
        None
    );
    let swaps = [
        swap("c1", 1, 9.0, "bbr", "arc"),
        swap("c1", 1, 2.0, "copa", "bbr"),
        swap("c1", 2, 5.0, "copa", "copa"),
        swap("c2", 1, 1.5, "copa", "arc"),
        swap("c3", 1, 1.5, "vegas", "copa"),
    ];
    let md = choices::moves_table(&swaps, &rows).expect("two runs moved");
    let lines: Vec<&str> = md.lines().skip(2).collect();
    assert_eq!(
        lines,
        [
            "| dcn | `sel` | 1 | -0.500 | 0 / 1 |",
            "| wan | `sel` | 1 | +0.600 | 1 / 0 |",
            "| all | `sel` | 2 | +0.050 | 1 / 1 |",
        ],
        "{md}"
    );
}

#[test]
fn the_parts_table_counts_each_run_for_the_part_that_asked_for_its_first_move() {
    let swap = swap_row;
    let decision = |cond: &str, seed: u64, t_s: f64, to: &str, by: &str| {
        crate::results::DecisionRow::explaining(
            swap(cond, seed, t_s, "copa", to),
            by,
            String::new(),
            String::new(),
        )
    };
    let rows = vec![
        row("c1", "wan", "sel", 1, 1.0),
        row("c1", "wan", "copa", 1, 0.4),
        row("c1", "wan", "sel", 2, 0.0),
        row("c1", "wan", "copa", 2, 0.5),
        row("c2", "dcn", "sel", 1, 2.0),
        row("c2", "dcn", "copa", 1, 2.5),
        row("c3", "dcn", "sel", 1, 3.0),
        row("c3", "dcn", "copa", 1, 2.0),
    ];
    let swaps = [
        // c1 seed 1: the kind's move, then a watch's: the run counts for the kind.
        swap("c1", 1, 1.6, "copa", "bbr"),
        swap("c1", 1, 9.0, "bbr", "arc"),
        // c1 seed 2: the models'.
        swap("c1", 2, 1.6, "copa", "cubic"),
        // c2: a watch's, asked for before the swap (an earlier stay is not it).
        swap("c2", 1, 5.0, "copa", "arc"),
        // c3: no decision explains it.
        swap("c3", 1, 2.0, "copa", "reno"),
    ];
    let decisions = [
        decision("c1", 1, 1.5, "bbr", "kind"),
        decision("c1", 1, 8.9, "arc", "watch"),
        decision("c1", 2, 1.5, "cubic", "models"),
        decision("c2", 1, 1.5, "copa", "models"),
        decision("c2", 1, 4.9, "arc", "watch"),
        // Asked for after the swap: not its reason.
        decision("c3", 1, 2.5, "reno", "rule"),
    ];
    let md = choices::moves_by_part_table(&swaps, &decisions, &rows).expect("runs moved");
    let lines: Vec<&str> = md.lines().skip(2).collect();
    assert_eq!(
        lines,
        [
            "| dcn | `sel` | - | 1 | +1.000 | 1 / 0 |",
            "| dcn | `sel` | watch | 1 | -0.500 | 0 / 1 |",
            "| wan | `sel` | kind | 1 | +0.600 | 1 / 0 |",
            "| wan | `sel` | models | 1 | -0.500 | 0 / 1 |",
            "| all | `sel` | - | 1 | +1.000 | 1 / 0 |",
            "| all | `sel` | kind | 1 | +0.600 | 1 / 0 |",
            "| all | `sel` | models | 1 | -0.500 | 0 / 1 |",
            "| all | `sel` | watch | 1 | -0.500 | 0 / 1 |",
        ],
        "{md}"
    );
    // Without moves, or without the start run alone, no table.
    assert_eq!(
        choices::moves_by_part_table(&[swap("c1", 1, 3.0, "copa", "copa")], &decisions, &rows),
        None
    );
    assert_eq!(
        choices::moves_by_part_table(&[swap("c1", 1, 3.0, "vegas", "copa")], &decisions, &rows),
        None
    );
}

/// `report` over a selector's run and its start's run in separate directories ends
/// `report.md` with what the moves earned, in all and per part; a directory given twice counts
/// once; without the start's run there is no such section; a damaged `swaps.csv` is refused,
/// naming it.
#[test]
fn report_dirs_adds_what_the_moves_earned_across_directories() {
    let singles = tempfile::tempdir().unwrap();
    let selector = tempfile::tempdir().unwrap();
    write_csv(
        &singles.path().join("results.csv"),
        &[
            row("c1", "wan", "copa", 1, 0.4),
            row("c2", "dcn", "copa", 1, 2.5),
        ],
    )
    .unwrap();
    write_csv(
        &selector.path().join("results.csv"),
        &[
            row("c1", "wan", "sel", 1, 1.0),
            row("c2", "dcn", "sel", 1, 2.0),
        ],
    )
    .unwrap();
    let swap = |cond: &str, t_s: f64, to: &str| swap_row(cond, 1, t_s, "copa", to);
    write_csv(
        &selector.path().join("swaps.csv"),
        &[swap("c1", 1.6, "bbr"), swap("c2", 1.6, "arc")],
    )
    .unwrap();
    write_csv(
        &selector.path().join("decisions.csv"),
        &[crate::results::DecisionRow::explaining(
            swap("c1", 1.5, "bbr"),
            "kind",
            String::new(),
            String::new(),
        )],
    )
    .unwrap();
    let out = tempfile::tempdir().unwrap();
    let both = [
        singles.path().to_path_buf(),
        selector.path().to_path_buf(),
        selector.path().to_path_buf(),
    ];
    report_dirs(&both, out.path()).unwrap();
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    let section = md
        .split("## What the selectors' moves earned")
        .nth(1)
        .expect("the section");
    for line in [
        "| all | `sel` | 2 | +0.050 | 1 / 1 |",
        "| wan | `sel` | kind | 1 | +0.600 | 1 / 0 |",
        "| dcn | `sel` | - | 1 | -0.500 | 0 / 1 |",
    ] {
        assert!(section.contains(line), "{line} in {section}");
    }
    // A decisions.csv from before the `by` column reads, its moves counted for `-`.
    let d = selector.path().join("decisions.csv");
    let text = std::fs::read_to_string(&d).unwrap();
    let old: String = text
        .lines()
        .map(|l| {
            let mut c: Vec<&str> = l.split(',').collect();
            c.remove(8);
            c.join(",") + "\n"
        })
        .collect();
    assert!(old.starts_with("scenario,") && !old.contains("by"), "{old}");
    std::fs::write(&d, old).unwrap();
    report_dirs(&both, out.path()).unwrap();
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(
        md.contains("| wan | `sel` | - | 1 | +0.600 | 1 / 0 |"),
        "{md}"
    );
    // The selector's run alone: no start to compare with, no section.
    report_dirs(&both[1..], out.path()).unwrap();
    let md = std::fs::read_to_string(out.path().join("report.md")).unwrap();
    assert!(!md.contains("moves earned"), "{md}");
    // A damaged swaps.csv is named.
    std::fs::write(
        selector.path().join("swaps.csv"),
        "scenario,condition\nx,y\n",
    )
    .unwrap();
    let err = report_dirs(&both, out.path()).unwrap_err().to_string();
    assert!(err.contains("swaps.csv"), "{err}");
}
