"""The selection sets built into `ccp-eval` are what `eval/selection/generate.py` draws: the
recurring-flow sets, the third validation set and the fourth test set are regenerated with the arguments
`docs/selector/path-memory.md` and `docs/selector.md` give and must match the files byte for
byte, and each recurring flow is sized to its path."""

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


@pytest.mark.parametrize("name, seed, seeds, segment", [
    ("selection-val3", "801", "801,802,803", "0.5,0.75"),
    ("selection-val4", "1101", "1101,1102,1103", "0.5,0.75"),
    ("selection-bench-test4", "901", "901,902,903", "0.75,1.0"),
    ("selection-bench-test5", "1601", "1601,1602,1603", "0.75,1.0"),
    ("selection-bench-test6", "1701", "1701,1702,1703", "0.75,1.0"),
    ("selection-bench-test7", "2001", "2001,2002,2003", "0.75,1.0"),
    ("selection-bench-test8", "2101", "2101,2102,2103", "0.75,1.0"),
    ("selection-bench-test9", "2201", "2201,2202,2203", "0.75,1.0"),
])
def test_the_newer_sets_are_the_generators_draws(name, seed, seeds, segment, capsys):
    stored = scenario_text(name)
    description = tomllib.loads(stored)["description"]
    assert generator().main([
        name, "--seed", seed, "--per-class", "30", "--seeds", seeds, "--segment", segment,
        "--schemes", TWELVE, "--description", description,
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
