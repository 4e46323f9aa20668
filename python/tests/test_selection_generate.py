"""The selection sets built into `ccp-eval` are what `eval/selection/generate.py` draws: the
recurring-flow sets, the third and fourth validation sets and the fourth to fourteenth test sets are
regenerated with the arguments `docs/selector/path-memory.md` and `docs/selector.md` give and
must match the files byte for byte (the tenth to fourteenth with the recorded web class,
`docs/selector/web-class.md`), and each recurring flow is sized to its path."""

from __future__ import annotations

import importlib.util
import pathlib
import tomllib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2]
TWELVE = "cubic,reno,bbr,copa,vegas,westwood,illinois,c2tcp,vivace,lptcp,rltcp,arc"


def generator():
    spec = importlib.util.spec_from_file_location("generate", ROOT / "eval/selection/generate.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def scenario_text(name: str) -> str:
    return (ROOT / "eval/scenarios" / f"{name}.toml").read_text()


@pytest.mark.parametrize(
    "name,seed,seeds,segment",
    [
        ("selection-recurring", 601, "601,602,603", "0.5,0.75"),
        ("selection-recurring-test", 701, "701,702,703", "0.75,1.0"),
    ],
)
def test_the_recurring_sets_are_the_generators_draws(name, seed, seeds, segment, capsys):
    stored = scenario_text(name)
    description = tomllib.loads(stored)["description"]
    gen = generator()
    assert gen.main([
        name, "--seed", str(seed), "--per-class", "20", "--seeds", seeds, "--segment", segment,
        "--classes", "cellular,wan,competition,changing", "--recurring", "6",
        "--schemes", TWELVE, "--description", description,
    ]) == 0
    assert capsys.readouterr().out == stored


@pytest.mark.parametrize("name, seed, seeds, segment, web_class", [
    ("selection-val3", "801", "801,802,803", "0.5,0.75", "mixed"),
    ("selection-val4", "1101", "1101,1102,1103", "0.5,0.75", "mixed"),
    ("selection-bench-test4", "901", "901,902,903", "0.75,1.0", "mixed"),
    ("selection-bench-test5", "1601", "1601,1602,1603", "0.75,1.0", "mixed"),
    ("selection-bench-test6", "1701", "1701,1702,1703", "0.75,1.0", "mixed"),
    ("selection-bench-test7", "2001", "2001,2002,2003", "0.75,1.0", "mixed"),
    ("selection-bench-test8", "2101", "2101,2102,2103", "0.75,1.0", "mixed"),
    ("selection-bench-test9", "2201", "2201,2202,2203", "0.75,1.0", "mixed"),
    ("selection-bench-test10", "2301", "2301,2302,2303", "0.75,1.0", "recorded"),
    ("selection-bench-test11", "2401", "2401,2402,2403", "0.75,1.0", "recorded"),
    ("selection-bench-test12", "2501", "2501,2502,2503", "0.75,1.0", "recorded"),
    ("selection-bench-test13", "2601", "2601,2602,2603", "0.75,1.0", "recorded"),
    ("selection-bench-test14", "2701", "2701,2702,2703", "0.75,1.0", "recorded"),
])
def test_the_newer_sets_are_the_generators_draws(name, seed, seeds, segment, web_class, capsys):
    stored = scenario_text(name)
    description = tomllib.loads(stored)["description"]
    assert generator().main([
        name, "--seed", seed, "--per-class", "30", "--seeds", seeds, "--segment", segment,
        "--web-class", web_class, "--schemes", TWELVE, "--description", description,
    ]) == 0
    assert capsys.readouterr().out == stored


def test_a_recurring_flow_carries_four_seconds_of_its_fair_share():
    gen = generator()
    c = {"id": "x", "bw_mbps": 40.0, "rtt_ms": 50.0, "loss": 0.0, "buffer_bdp": 1.0,
         "cross": [{"scheme": "native-cubic", "count": 3}]}
    out = gen.recurring("competition", c, 6)
    (flows,) = out["flows"]
    # 40 Mbit/s shared by four flows for 80 % of a 5-s gap: 10 Mbit/s x 4 s = 5 MB.
    assert flows == {"count": 6, "start_s": 0.0, "stagger_s": 5.0, "size_bytes": 5_000_000,
                     "objective": "friendly"}
    assert out["id"] == "x-x6" and c["id"] == "x", "the drawn condition is left as it was"
    slow = gen.recurring("wan", {**c, "bw_mbps": 0.1, "cross": []}, 6)
    assert slow["flows"][0]["size_bytes"] == 200_000 and slow["flows"][0]["objective"] == "reward"
    # A trace's rate is its delivery opportunities over the run's 30 s.
    trace = {"trace": "../traces/TMobile-LTE-short.up", "trace_offset_s": 0}
    lines = [int(x) for x in (ROOT / "eval/traces/TMobile-LTE-short.up").read_text().split()]
    expected = sum(1 for t in lines if t < 30_000) * 1500 * 8 / 30e6
    assert gen.trace_mbps(trace) == pytest.approx(expected)


def test_the_recorded_web_class_redraws_only_the_web_conditions(capsys):
    """`--web-class recorded` (docs/selector/web-class.md) keeps a set's other five classes as
    they are, and its web conditions are web-like flows over recordings, inside the set's share."""
    gen = generator()
    args = ["t", "--seed", "2101", "--per-class", "30", "--seeds", "1", "--segment", "0.75,1.0"]
    assert gen.main(args) == 0
    mixed = tomllib.loads(capsys.readouterr().out)["conditions"]
    assert gen.main(args + ["--web-class", "recorded"]) == 0
    recorded = tomllib.loads(capsys.readouterr().out)["conditions"]
    assert len(mixed) == len(recorded) == 180
    assert [c for c in mixed if c["env"] != "web"] == [c for c in recorded if c["env"] != "web"]
    web = [c for c in recorded if c["env"] == "web"]
    assert len(web) == 30 and len({c["id"] for c in web}) == 30
    lengths = dict(gen.TRACES)
    directions = set()
    for c in web:
        name = c["trace"].rsplit("/", 1)[-1]
        directions.add(name.rsplit(".", 1)[-1])
        # The set's share: the run's 30 s lie in the last quarter of the recording (or start
        # at its beginning when the quarter is shorter than a run).
        first = int(0.75 * lengths[name])
        assert first <= c["trace_offset_s"] <= max(first, lengths[name] - 30)
        assert 0.2 <= c["buffer_bdp"] <= 3 and 15 <= c["rtt_ms"] <= 200
        assert c["flows"] == [{"count": 20, "start_s": 1.0, "stagger_s": 1.4, "sizes": "web",
                               "objective": "fct"}]
        assert "cross" not in c and c["id"].startswith("web-flows-")
    assert directions == {"up", "down"}
    with pytest.raises(SystemExit):
        gen.main(args + ["--web-class", "other"])
