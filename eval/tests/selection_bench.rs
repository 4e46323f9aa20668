//! A small seeded version of `selection-bench`: one condition of each class, shortened, four
//! single CCAs and two selectors. Checks that every class runs, that each flow is scored by
//! its class's objective, that web-like sizes follow the seed, and that the report's headroom
//! columns (best single overall, oracle, captured share) are what the rows say.

// Test helpers outside #[test] functions may fail loudly too.
#![allow(clippy::expect_used, clippy::unwrap_used, clippy::float_cmp)]

use std::collections::{BTreeMap, BTreeSet};

use ccp_eval::report;
use ccp_eval::results::FlowRow;
use ccp_eval::runner::{self, RunOptions};
use ccp_eval::scenario::{Objective, Scenario};

const DURATION_S: f64 = 12.0;
const SINGLES: [&str; 4] = ["cubic", "bbr", "copa", "vegas"];
const SELECTORS: [&str; 3] = ["selector-rein", "selector-outcome", "selector-probe"];

/// The built-in held-out sets, grouped by the share of each recording their trace segments come
/// from: test sets (the last quarter), validation sets (the third), training sets (the first
/// half). Sets of one group may share trace seconds; no two sets share a path, seed or id.
const SET_GROUPS: [&[&str]; 3] = [
    &[
        "selection-bench-test",
        "selection-bench-test2",
        "selection-bench-test3",
        "selection-bench-test4",
        "selection-bench-test5",
        "selection-bench-test6",
        "selection-bench-test7",
        "selection-bench-test8",
        "selection-bench-test9",
        "selection-bench-test10",
        "selection-bench-test11",
        "selection-bench-test12",
        "selection-bench-test13",
        "selection-bench-test14",
        "selection-recurring-test",
    ],
    &[
        "selection-bench",
        "selection-val2",
        "selection-val3",
        "selection-val4",
        "selection-recurring",
    ],
    &[
        "selection-train",
        "selection-train2",
        "competition-train2",
        "lone-train",
    ],
];

/// The built-in bench cut down: the named conditions, `DURATION_S`, one seed, and web-like
/// groups with only the flows that start within the shorter run.
fn small(name: &str, keep: &[&str]) -> Scenario {
    let mut s = ccp_eval::builtin::scenario(name).unwrap().unwrap();
    s.duration_s = DURATION_S;
    s.seeds = vec![s.seeds[0]];
    // The run names its own schemes; the bench's list (with the ONNX selector, which needs
    // ONNX Runtime) is not checked then.
    s.conditions.retain(|c| keep.contains(&c.id.as_str()));
    assert_eq!(s.conditions.len(), keep.len(), "every kept id is in {name}");
    for c in &mut s.conditions {
        for g in c.flows.iter_mut().chain(c.cross.iter_mut()).flatten() {
            if g.stagger_s > 0.0 {
                let fit = ((DURATION_S - 1.0 - g.start_s) / g.stagger_s).floor() as usize + 1;
                g.count = g.count.min(fit);
            }
        }
        c.phases.retain(|p| p.at_s < DURATION_S);
    }
    s
}

fn bench() -> Scenario {
    small(
        "selection-bench",
        &[
            "att-lte.up-at60-rtt29-buf0.63",
            "bw48-rtt102-loss0.018-buf0.78",
            "vs-1cubic-bw44-rtt88-loss0-buf1.6",
            "bw36-rtt32-loss0-buf0.67-7sloss0",
            "delay-bw14-rtt27-loss0.019-buf5.4",
            "web-flows-vs1cubic-bw10-rtt12-loss0-buf0.37",
        ],
    )
}

fn run(s: &Scenario) -> Vec<FlowRow> {
    let opts = RunOptions {
        jobs: 2,
        schemes: Some(
            SINGLES
                .iter()
                .chain(&SELECTORS)
                .map(|x| (*x).to_string())
                .collect(),
        ),
        ..RunOptions::default()
    };
    let plan = runner::plan(s, &opts).unwrap();
    let out = runner::run(s, &plan, &opts);
    assert_eq!(
        out.failed,
        0,
        "{:?}",
        out.rows.iter().map(|r| &r.status).collect::<Vec<_>>()
    );
    out.rows
}

#[test]
fn small_bench_scores_each_class_by_its_objective_and_reports_headroom() {
    let s = bench();
    let rows = run(&s);
    let envs: BTreeSet<&str> = rows.iter().map(|r| r.env.as_str()).collect();
    assert_eq!(
        envs,
        BTreeSet::from(["app", "cellular", "changing", "competition", "wan", "web"])
    );

    // Every counted flow is scored by its class's objective, and the score is that
    // objective's formula over the row's own columns.
    for r in rows.iter().filter(|r| r.role == "main") {
        assert_eq!(r.status, "ok", "{r:?}");
        let expect = match (r.env.as_str(), r.condition.as_str()) {
            ("competition", _) => Objective::Friendly,
            ("web", _) => Objective::Fct,
            ("app", c) if c.starts_with("delay") => Objective::Delay,
            _ => Objective::Reward,
        };
        assert_eq!(r.objective, expect.name(), "{r:?}");
        let score = r.score.expect("a run writes every score");
        assert!(score.is_finite(), "{r:?}");
        match expect {
            Objective::Reward => assert!((score - r.reward).abs() < 1e-12),
            Objective::Delay => {
                let want = r.throughput_mbps.ln() - 2.0 * r.p95_rtt_ms.ln();
                assert!((score - want).abs() < 1e-9, "{r:?}");
            }
            // min(x, f^2/x) <= x: never above the flow's own reward.
            Objective::Friendly => assert!(score <= r.reward + 1e-9, "{r:?}"),
            Objective::Fct => {
                let fct = r.fct_s.unwrap_or(DURATION_S - r.start_s);
                assert!((score + fct.ln()).abs() < 1e-9, "{r:?}");
            }
            Objective::Throughput => unreachable!(),
        }
    }

    // Web-like sizes come from the seed: the same in every scheme's run, and finite.
    let sizes = |scheme: &str| -> Vec<Option<u64>> {
        rows.iter()
            .filter(|r| r.scheme == scheme && r.condition.starts_with("web-flows"))
            .filter(|r| r.role == "main")
            .map(|r| r.size_bytes)
            .collect()
    };
    let web = sizes("cubic");
    assert!(web.len() >= 5 && web.iter().all(Option::is_some), "{web:?}");
    assert!(web.iter().collect::<BTreeSet<_>>().len() > 1, "sizes vary");
    assert_eq!(web, sizes("selector-rein"));

    // The headroom columns, recomputed from the rows.
    let summary = report::summarize("small", &rows);
    let h = summary.headroom.as_ref().expect("singles and selectors");
    let mut mean: BTreeMap<(&str, &str), (f64, usize)> = BTreeMap::new();
    for r in rows.iter().filter(|r| r.role == "main" && r.status == "ok") {
        let e = mean.entry((&r.condition, &r.scheme)).or_default();
        e.0 += r.score.unwrap();
        e.1 += 1;
    }
    let reward = |c: &str, s: &str| {
        let (sum, n) = mean[&(c, s)];
        sum / n as f64
    };
    let conds: Vec<&str> = s.conditions.iter().map(|c| c.id.as_str()).collect();
    let avg =
        |f: &dyn Fn(&str) -> f64| conds.iter().map(|c| f(c)).sum::<f64>() / conds.len() as f64;
    let best = SINGLES
        .iter()
        .max_by(|a, b| avg(&|c| reward(c, a)).total_cmp(&avg(&|c| reward(c, b))))
        .unwrap();
    assert_eq!(&h.best_single, best);
    let oracle = |c: &str| {
        SINGLES
            .iter()
            .map(|x| reward(c, x))
            .fold(f64::NEG_INFINITY, f64::max)
    };
    let close = |a: f64, b: f64| (a - b).abs() < 1e-9;
    assert!(close(h.overall.r_oracle, avg(&oracle)));
    assert!(close(h.overall.r_best_single, avg(&|c| reward(c, best))));
    assert!(h.overall.r_oracle >= h.overall.r_best_single);
    for sel in SELECTORS {
        let e = h
            .overall
            .selectors
            .iter()
            .find(|e| e.scheme == sel)
            .unwrap();
        let r_sel = avg(&|c| reward(c, sel));
        assert!(close(e.reward, r_sel));
        let hr = h.overall.r_oracle - h.overall.r_best_single;
        if hr >= report::headroom::MIN_HEADROOM {
            let want = (r_sel - h.overall.r_best_single) / hr;
            assert!(close(e.captured.unwrap(), want), "{sel}: {e:?}");
        }
    }
    for c in &h.conditions {
        assert!(close(c.r_oracle, oracle(&c.label)), "{c:?}");
        assert_eq!(c.conditions, 1);
    }
    assert_eq!(h.classes.len(), 6);
}

/// The training, validation and test sets: disjoint seeds, the same classes, no path of one in
/// another, and no second of a recorded trace in two of them. The second test set
/// (`selection-bench-test2`, drawn later to hold out choices the first one had informed) shares
/// nothing with the training and validation sets either, and no seed or path with the first
/// test set; its trace segments come from the same held-out quarter as the first's. The second
/// validation set (`selection-val2`, three times the conditions) shares nothing with the others
/// but trace seconds with the first validation set (the same third quarter of each recording),
/// and the third (`selection-val3`, as large, drawn once the second had informed many choices)
/// and the fourth (`selection-val4`, as large, drawn to decide between two policies chosen on
/// the older ones) likewise.
/// The second training set (`selection-train2`) shares nothing with the others but trace
/// seconds with the first (the same first half of each recording). The third test set
/// (`selection-bench-test3`, thirty conditions per class) is like the second: nothing shared
/// with training or validation, no seed or path with the other test sets, trace seconds from
/// the same held-out quarter; and so is the fourth (`selection-bench-test4`, as large, drawn
/// once the third had been consulted for three choices), and the fifth (`selection-bench-test5`,
/// drawn once the fourth had been consulted for the kind model), and the sixth
/// (`selection-bench-test6`, drawn once the fifth had been consulted for the kind model's move
/// over a deep queue), and the seventh (`selection-bench-test7`, drawn to test the kind model's
/// softmax classifier), and the eighth (`selection-bench-test8`, drawn to test the probe's rule
/// to ARC for variable, lossy probes), and the ninth (`selection-bench-test9`, drawn to test
/// the kind model's skip box), and the tenth (`selection-bench-test10`, the first with the
/// recorded web class), and the eleventh and twelfth (`selection-bench-test11` and `-test12`,
/// drawn to test the rule to ARC for a lossy probe of a fast, short path; the eleventh shares
/// one path with the third, under other traffic, which the check below allows), and the
/// thirteenth and fourteenth (`selection-bench-test13` and `-test14`, drawn to test the path
/// memory's verdicts of short flows, in a first form and as finally chosen). The kind model's
/// training sets (`competition-train2`, `lone-train`) are two more draws like the training
/// sets: nothing shared with the others, trace seconds from the same first half. The
/// recurring-flow sets of the path memory (`selection-recurring` and its test twin) are two
/// more draws of the four long-flow classes, six finite flows to
/// one destination per path: the validation one takes its trace seconds from the validation
/// quarter, the test one from the held-out quarter.
#[test]
fn the_sets_share_no_path_seed_or_trace_second() {
    let load = |n: &str| ccp_eval::builtin::scenario(n).unwrap().unwrap();
    let sets: Vec<Scenario> = SET_GROUPS
        .iter()
        .flat_map(|g| g.iter())
        .map(|n| load(n))
        .collect();
    for (i, a) in sets.iter().enumerate() {
        for b in &sets[i + 1..] {
            assert!(
                a.seeds.iter().all(|s| !b.seeds.contains(s)),
                "disjoint seeds"
            );
            for c in &b.conditions {
                assert!(
                    a.conditions.iter().all(|x| x.id != c.id),
                    "{} is in two sets",
                    c.id
                );
                // The same path with the same traffic on it. The recorded web class's flows may
                // meet a cellular condition's path: the held-out quarter of the ATT LTE uplink is
                // one 30-s segment, so a draw over it differs only by RTT and buffer (the eleventh
                // set's `web-flows-att-lte.up-at90-rtt41-buf1` is on the third's
                // `att-lte.up-at90-rtt41-buf1`, twenty web-like flows where that has one long one).
                let twin = a.conditions.iter().find(|x| {
                    x.rate == c.rate
                        && x.rtt_ms == c.rtt_ms
                        && x.loss == c.loss
                        && x.buffer == c.buffer
                        && x.phases == c.phases
                        && x.flows == c.flows
                        && x.cross == c.cross
                });
                assert!(twin.is_none(), "{} repeats {}", c.id, twin.unwrap().id);
            }
        }
    }
    no_trace_second_in_two(&sets.iter().collect::<Vec<_>>());
}

/// The validation and test sets have the six classes of `selection-bench`, the larger ones
/// thirty conditions per class, the held-out ones at least three seeds; the training sets the
/// same classes.
#[test]
fn the_sets_have_the_benchs_classes() {
    let load = |n: &str| ccp_eval::builtin::scenario(n).unwrap().unwrap();
    let (train, train2, val, test, test2, test3, val2) = (
        load("selection-train"),
        load("selection-train2"),
        load("selection-bench"),
        load("selection-bench-test"),
        load("selection-bench-test2"),
        load("selection-bench-test3"),
        load("selection-val2"),
    );
    let (val3, val4) = (load("selection-val3"), load("selection-val4"));
    let (test4, test5) = (load("selection-bench-test4"), load("selection-bench-test5"));
    let (test6, test7) = (load("selection-bench-test6"), load("selection-bench-test7"));
    let (test8, test9) = (load("selection-bench-test8"), load("selection-bench-test9"));
    let (test10, test11) = (
        load("selection-bench-test10"),
        load("selection-bench-test11"),
    );
    let (test12, test13) = (
        load("selection-bench-test12"),
        load("selection-bench-test13"),
    );
    let test14 = load("selection-bench-test14");
    assert_eq!(
        classes(&val),
        classes(&test),
        "the same classes, as many conditions"
    );
    assert_eq!(classes(&val), classes(&test2));
    assert_eq!(
        classes(&val2).keys().collect::<Vec<_>>(),
        classes(&val).keys().collect::<Vec<_>>()
    );
    assert!(classes(&val2).values().all(|&n| n >= 30));
    assert_eq!(
        classes(&val3),
        classes(&val2),
        "as many conditions per class"
    );
    assert_eq!(classes(&val4), classes(&val3));
    assert_eq!(
        classes(&test3).keys().collect::<Vec<_>>(),
        classes(&val).keys().collect::<Vec<_>>()
    );
    assert!(classes(&test3).values().all(|&n| n >= 30));
    assert_eq!(
        classes(&test4),
        classes(&test3),
        "as many conditions per class"
    );
    assert_eq!(classes(&test5), classes(&test4));
    assert_eq!(classes(&test6), classes(&test4));
    assert_eq!(classes(&test7), classes(&test4));
    assert_eq!(classes(&test8), classes(&test4));
    assert_eq!(classes(&test9), classes(&test4));
    assert_eq!(classes(&test10), classes(&test4));
    assert_eq!(classes(&test11), classes(&test4));
    assert_eq!(classes(&test12), classes(&test4));
    assert_eq!(classes(&test13), classes(&test4));
    assert_eq!(classes(&test14), classes(&test4));
    assert_eq!(classes(&val).len(), 6);
    assert!(classes(&val).values().all(|&n| n >= 10));
    assert_eq!(
        classes(&train).keys().collect::<Vec<_>>(),
        classes(&val).keys().collect::<Vec<_>>()
    );
    assert_eq!(
        classes(&train2),
        classes(&train),
        "as many conditions per class"
    );
    assert!(
        [
            &val, &test, &test2, &test3, &test4, &test5, &test6, &test7, &test8
        ]
        .iter()
        .all(|s| s.seeds.len() >= 3)
    );
}

/// The recurring-flow sets: the four long-flow classes, twenty conditions each, and on each
/// path six finite flows of the scheme under test, one every 5 s.
#[test]
fn the_recurring_sets_send_six_flows_to_one_destination_per_path() {
    for name in ["selection-recurring", "selection-recurring-test"] {
        let s = ccp_eval::builtin::scenario(name).unwrap().unwrap();
        assert_eq!(
            classes(&s).into_iter().collect::<Vec<_>>(),
            [
                ("cellular".to_string(), 20),
                ("changing".to_string(), 20),
                ("competition".to_string(), 20),
                ("wan".to_string(), 20)
            ]
        );
        assert!(s.seeds.len() >= 3);
        for c in &s.conditions {
            let flows = c.flows.as_ref().expect("each condition's own flows");
            assert!(
                matches!(flows.as_slice(), [g] if g.count == 6 && g.size_bytes.is_some()
                        && g.scheme.is_none() && (g.stagger_s - 5.0).abs() < 1e-9),
                "{}: {flows:?}",
                c.id
            );
        }
    }
}

/// No second of a recorded trace is replayed by two of `sets`, but by two of one of
/// [`SET_GROUPS`] (each group drawn from the same share of every recording).
fn no_trace_second_in_two(sets: &[&Scenario]) {
    // Trace segments: [offset, offset + duration) of each recording, per set (from the files:
    // a loaded scenario holds the trace already rotated).
    let segments = |s: &Scenario| -> Vec<(String, f64, f64)> {
        let text = ccp_eval::builtin::SCENARIOS
            .iter()
            .find(|(n, _)| *n == s.name)
            .unwrap()
            .1;
        let file: toml::Table = text.parse().unwrap();
        file["conditions"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|c| {
                let trace = c.get("trace")?.as_str()?.to_string();
                let off = c.get("trace_offset_s").map_or(0.0, |v| {
                    v.as_float()
                        .or_else(|| v.as_integer().map(|i| i as f64))
                        .unwrap()
                });
                Some((trace, off, off + s.duration_s))
            })
            .collect()
    };
    let all: Vec<Vec<(String, f64, f64)>> = sets.iter().map(|s| segments(s)).collect();
    assert!(
        sets.iter()
            .zip(&all)
            .all(|(s, v)| !v.is_empty() || !classes(s).contains_key("cellular")),
        "every set with a cellular class replays traces"
    );
    for (i, a) in all.iter().enumerate() {
        for (j, b) in all.iter().enumerate().skip(i + 1) {
            let pair = [sets[i].name.as_str(), sets[j].name.as_str()];
            if SET_GROUPS
                .iter()
                .any(|g| g.contains(&pair[0]) && g.contains(&pair[1]))
            {
                // The test sets, the validation sets and the training sets: each group drawn
                // from the same share.
                continue;
            }
            for (f, lo, hi) in b {
                for (g, lo2, hi2) in a {
                    assert!(
                        f != g || hi <= lo2 || hi2 <= lo,
                        "{f}: {lo}-{hi} s overlaps {lo2}-{hi2} s"
                    );
                }
            }
        }
    }
}

/// Conditions per class of `s`.
fn classes(s: &Scenario) -> BTreeMap<String, usize> {
    let mut m: BTreeMap<String, usize> = BTreeMap::new();
    for c in &s.conditions {
        *m.entry(c.env.clone()).or_default() += 1;
    }
    m
}
