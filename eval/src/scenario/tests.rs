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
    let text = "name = \"t\"\nduration_s = 5\n[[conditions]]\ntrace = \"nope.txt\"\nrtt_ms = 10\n";
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
    let with = |lines: &str| format!("{BASE}[[conditions]]\nbw_mbps = 10\nrtt_ms = 20\n{lines}\n");
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
    let grid = "name = \"t\"\nduration_s = 86400\n[grid]\nbw_mbps = [10, 10000]\nrtt_ms = [20]\n";
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

#[test]
fn conditions_carry_their_own_traffic_objectives_ports_and_web_sizes() {
    let s = Scenario::parse(
        "t.toml",
        r#"
name = "t"
duration_s = 10
[[conditions]]
id = "own"
bw_mbps = 10
rtt_ms = 20
flows = [{ count = 3, sizes = "web", objective = "fct", stagger_s = 1 }]
cross = [{ scheme = "native-cubic", count = 2 }]
[[conditions]]
id = "shared"
bw_mbps = 10
rtt_ms = 20
[[flows]]
objective = "delay"
port = 5001
"#,
        None,
    )
    .unwrap();
    let own = &s.conditions[0];
    let f = &s.flows_of(own)[0];
    assert_eq!(
        (f.count, f.web_sizes, f.objective),
        (3, true, Objective::Fct)
    );
    assert_eq!(f.port, DEFAULT_PORT);
    assert_eq!(s.cross_of(own)[0].count, 2);
    let shared = &s.conditions[1];
    assert!(shared.flows.is_none() && s.cross_of(shared).is_empty());
    let g = &s.flows_of(shared)[0];
    assert_eq!(
        (g.objective, g.port, g.web_sizes),
        (Objective::Delay, 5001, false)
    );
    assert!(s.named_schemes().contains(&"native-cubic".to_string()));
}

#[test]
fn bad_objectives_sizes_ports_offsets_and_empty_own_flows_are_refused() {
    let base = "name = \"t\"\nduration_s = 10\n[[conditions]]\nbw_mbps = 10\nrtt_ms = 20\n";
    let cases = [
        (
            "flows = [{ objective = \"fast\" }]\n",
            "conditions[0].flows[0].objective",
            "unknown objective",
        ),
        (
            "flows = [{ sizes = \"mice\" }]\n",
            "conditions[0].flows[0].sizes",
            "unknown size mix",
        ),
        (
            "flows = [{ sizes = \"web\", size_bytes = 1000 }]\n",
            "conditions[0].flows[0].sizes",
            "not both",
        ),
        (
            "flows = [{ port = 0 }]\n",
            "conditions[0].flows[0].port",
            "[1, 65535]",
        ),
        (
            "flows = [{ count = 0 }]\n",
            "conditions[0].flows",
            "no flow",
        ),
        (
            "cross = [{ count = 1 }]\n",
            "conditions[0].cross[0].scheme",
            "needs a scheme",
        ),
        (
            "trace_offset_s = 3\n",
            "conditions[0].trace_offset_s",
            "only a trace file",
        ),
    ];
    for (extra, field, msg) in cases {
        let e = Scenario::parse("bad.toml", &format!("{base}{extra}"), None)
            .unwrap_err()
            .to_string();
        assert!(e.contains(field) && e.contains(msg), "{extra}: {e}");
        assert!(e.starts_with("bad.toml:"), "{e}");
    }
}

#[test]
fn a_trace_offset_rotates_the_trace_within_its_period() {
    let t = Trace::parse("t", "1\n2\n4\n10\n").unwrap();
    let r = parse::rotate(&t, 3_000_000);
    assert_eq!(r.period_ns, t.period_ns);
    assert_eq!(r.opportunities_ns.len(), 4);
    // 4 -> 1, 10 -> 7, 1 -> 8, 2 -> 9 (ms).
    let ms: Vec<u64> = r.opportunities_ns.iter().map(|x| x / 1_000_000).collect();
    assert_eq!(ms, [1, 7, 8, 9]);
    assert_eq!(r.mean_bps(), t.mean_bps());
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("x.down"), "1\n2\n4\n10\n").unwrap();
    let text = |off: &str| {
        format!(
            "name = \"t\"\nduration_s = 5\n[[conditions]]\ntrace = \"x.down\"\n\
             trace_offset_s = {off}\nrtt_ms = 20\n"
        )
    };
    let s = Scenario::parse("t.toml", &text("0.003"), Some(dir.path())).unwrap();
    match &s.conditions[0].rate {
        RateSource::TraceFile(_, tr) => assert_eq!(tr, &r),
        other => panic!("{other:?}"),
    }
    let e = Scenario::parse("t.toml", &text("0.01"), Some(dir.path()))
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("trace_offset_s") && e.contains("within the trace's period"),
        "{e}"
    );
}
