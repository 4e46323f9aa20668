"""`eval/selection/grouped_oracle.py` on a real `ccp-eval` summary: its groups, its B, oracle
and selector shares are the report's, a policy that knows each condition's group earns the
oracle where every group holds one condition, and a bad summary is an error, not a traceback."""

from __future__ import annotations

import importlib.util
import json
import pathlib
import subprocess

import pytest

from test_arc import ccp_eval_binary

ROOT = pathlib.Path(__file__).resolve().parents[2]

SCENARIO = """\
name = "grouped-tiny"
duration_s = 8
seeds = [7]
schemes = ["cubic", "bbr", "copa", "selector-probe"]

[[conditions]]
env = "competition"
id = "vs-2cubic-bw12-rtt30-loss0-buf0.5"
bw_mbps = 12.0
rtt_ms = 30.0
buffer_bdp = 0.5
flows = [{ count = 1, objective = "friendly" }]
cross = [{ scheme = "native-cubic", count = 2, stagger_s = 0.5 }]

[[conditions]]
env = "competition"
id = "vs-1bbr-bw12-rtt30-loss0-buf3"
bw_mbps = 12.0
rtt_ms = 30.0
buffer_bdp = 3.0
flows = [{ count = 1, objective = "friendly" }]
cross = [{ scheme = "bbr", count = 1, stagger_s = 0.5 }]

[[conditions]]
env = "wan"
id = "bw12-rtt30-loss0.01-buf1"
bw_mbps = 12.0
rtt_ms = 30.0
loss = 0.01
buffer_bdp = 1.0
"""


def module():
    spec = importlib.util.spec_from_file_location("grouped_oracle", ROOT / "eval/selection/grouped_oracle.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


@pytest.fixture(scope="module")
def summary(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("grouped")
    (d / "tiny.toml").write_text(SCENARIO)
    subprocess.run([str(ccp_eval_binary()), "run", str(d / "tiny.toml"), "--out", str(d / "out")],
                   cwd=ROOT, check=True, timeout=900, capture_output=True)
    return d / "out" / "summary.json"


def test_groups_are_read_from_the_condition_ids():
    g = module().group_of
    assert g("vs-2cubic-bw20-rtt57-loss0-buf3.3", "competition", "competitors") == "cubic"
    assert g("vs-2cubic-1bbr-bw24-rtt87-loss0-buf4.3", "competition", "competitors") == "mix"
    assert g("vs-2bbr-bw63-rtt57-loss0-buf0.31", "competition", "competitors+buffer") == "bbr shallow"
    assert g("vs-2cubic-1bbr-bw13-rtt31-loss0-buf0.63", "competition", "competitors+count+buffer") \
        == "2cubic-1bbr shallow"
    assert g("train-vs-2bbr-bw12-rtt35-buf0.4", "competition", "competitors+buffer") == "bbr shallow"
    assert g("bw12-rtt30-loss0.01-buf1", "wan", "competitors") == "other"
    assert g("web-flows-vs1cubic-bw95-rtt12-loss0-buf4.2", "web", "competitors") == "other"
    assert g("anything", "web", "class") == "web"


def test_its_numbers_are_the_reports_and_knowing_each_group_reaches_the_oracle(summary: pathlib.Path):
    m = module()
    s = json.loads(summary.read_text())
    target = m.load(str(summary))
    assert target["singles"] == ["bbr", "copa", "cubic"]
    r = m.evaluate(target, [], "competition", "competitors", "selector-probe")
    assert sorted(k.split(":")[0] for k in r["groups"]) == ["bbr", "cubic"]
    cls = next(c for c in s["headroom"]["classes"] if c["env"] == "competition")
    assert r["r_best_single"] == pytest.approx(cls["r_best_single"])
    assert r["r_oracle"] == pytest.approx(cls["r_oracle"])
    sel = next(x for x in cls["selectors"] if x["scheme"] == "selector-probe")
    assert r["r_selector"] == pytest.approx(sel["reward"])
    overall = next(x for x in s["headroom"]["overall"]["selectors"] if x["scheme"] == "selector-probe")
    if overall["captured"] is not None:
        assert r["overall_selector"] == pytest.approx(overall["captured"])
    # One condition per group: the group's best single is the condition's, so the oracle.
    assert r["r_grouped"] == pytest.approx(r["r_oracle"])
    # Knowing only the class is the class's best single in hindsight ("best single of set").
    c = m.evaluate(target, [], "competition", "class", "selector-probe")
    assert c["r_grouped"] == pytest.approx(cls["r_best_in_set"])
    assert c["r_grouped"] <= r["r_grouped"] + 1e-12


def test_a_choice_made_on_another_summary_is_scored_on_this_one(summary: pathlib.Path, tmp_path):
    m = module()
    s = json.loads(summary.read_text())
    # The other summary's rewards are this one's with the ranking of the singles reversed in
    # every condition: its picks are this summary's worst singles.
    for c in s["conditions"]:
        rewards = sorted(x["reward"] for x in c["schemes"] if x["scheme"] in s["headroom"]["singles"])
        singles = sorted((x for x in c["schemes"] if x["scheme"] in s["headroom"]["singles"]),
                         key=lambda x: x["reward"])
        for x, r in zip(singles, reversed(rewards)):
            x["reward"] = r
    other = tmp_path / "other.json"
    other.write_text(json.dumps(s))
    target = m.load(str(summary))
    worst = m.evaluate(target, [m.load(str(other))], "competition", "competitors", "selector-probe")
    best = m.evaluate(target, [], "competition", "competitors", "selector-probe")
    if best["r_oracle"] - best["r_best_single"] > 1e-9:
        assert worst["r_grouped"] < best["r_grouped"]
    assert worst["overall_selector"] == pytest.approx(best["overall_selector"])


def test_bad_summaries_say_what_is_wrong(summary: pathlib.Path, tmp_path, capsys):
    m = module()
    assert m.main([str(tmp_path / "missing.json")]) == 2
    assert "missing.json" in capsys.readouterr().err
    bad = tmp_path / "bad.json"
    bad.write_text('{"conditions": [')
    assert m.main([str(bad)]) == 2
    assert "bad.json" in capsys.readouterr().err
    none = tmp_path / "none.json"
    none.write_text('{"conditions": []}')
    assert m.main([str(none)]) == 2
    assert "no selection headroom" in capsys.readouterr().err
    shapeless = tmp_path / "shapeless.json"
    shapeless.write_text('{"headroom": {"singles": ["copa"]}, "conditions": [{"schemes": [{"scheme": "copa"}]}]}')
    assert m.main([str(shapeless)]) == 2
    assert "not a report's summary" in capsys.readouterr().err
    assert m.main([str(summary), "--selector", "selector-nothing"]) == 2
    assert "selector-nothing lacks a reward" in capsys.readouterr().err
    assert m.main([str(summary), "--class", "web"]) == 2
    assert "no condition of class web" in capsys.readouterr().err
    assert m.main([str(summary)]) == 0
    assert "grouped" in capsys.readouterr().out


@pytest.fixture(scope="module")
def moves(summary: pathlib.Path) -> pathlib.Path:
    """`gen-data --kind probe` of the same scenario: every flow probed, then moved to each
    candidate."""
    out = summary.parent.parent / "moves"
    subprocess.run([str(ccp_eval_binary()), "gen-data", str(summary.parent.parent / "tiny.toml"), "--kind", "probe",
                    "--out", str(out)], cwd=ROOT, check=True, timeout=900, capture_output=True)
    return out


def test_moves_at_the_probes_end_score_the_groups_move_from_the_counterfactual_runs(summary, moves, tmp_path):
    m = module()
    target = m.load(str(summary))
    rows = m.load_moves(str(moves))
    comp = [n for n, r in target["rows"].items() if r["env"] == "competition"]
    assert set(comp) <= set(rows)
    # Every candidate was a move target, the start (the flow stays) among them.
    assert all(len(rows[n]) == 12 and "copa" in rows[n] for n in comp)
    r = m.evaluate(target, [], "competition", "competitors", "selector-probe", rows, [])
    # In hindsight, one condition per group: each takes its best move.
    assert r["r_grouped"] == pytest.approx(sum(max(rows[n].values()) for n in comp) / len(comp))
    # Chosen on rows whose every score is negated: each group takes its worst move.
    flipped = {n: {t: -v for t, v in by.items()} for n, by in rows.items()}
    w = m.evaluate(target, [], "competition", "competitors", "selector-probe", rows, [flipped])
    assert w["r_grouped"] == pytest.approx(sum(min(rows[n].values()) for n in comp) / len(comp))
    assert m.main([str(summary), "--moves", str(moves), "--choose-on-moves", str(moves)]) == 0
    # Bad input: a directory without `probe.csv`, a cut-off score, a move grouping outside
    # competition, choose-on-moves alone.
    assert m.main([str(summary), "--moves", str(tmp_path)]) == 2
    bad = tmp_path / "bad"
    bad.mkdir()
    text = (moves / "probe.csv").read_text().splitlines()
    header = text[0].split(",")
    first = text[1].split(",")
    first[header.index("score")] = "x"
    (bad / "probe.csv").write_text("\n".join([text[0], ",".join(first)] + text[2:]) + "\n")
    with pytest.raises(m.SummaryError, match="probe.csv:2: score 'x'"):
        m.load_moves(str(bad))
    (bad / "probe.csv").write_text("\n".join([text[0], "cut,1"] + text[2:]) + "\n")
    with pytest.raises(m.SummaryError, match="probe.csv:2: the row has fewer fields"):
        m.load_moves(str(bad))
    with pytest.raises(m.SummaryError, match="competition only"):
        m.evaluate(target, [], "wan", "competitors", "selector-probe", rows, [])
    with pytest.raises(m.SummaryError, match="another scenario in competition only"):
        m.evaluate(target, [], "wan", "class", "selector-probe", rows, [rows])
    # Another class, in hindsight as one group: its best move on average.
    wan = [n for n, r in target["rows"].items() if r["env"] == "wan"]
    c = m.evaluate(target, [], "wan", "class", "selector-probe", rows, [])
    assert c["r_grouped"] == pytest.approx(max(sum(rows[n][t] for n in wan) for t in rows[wan[0]]) / len(wan))
    with pytest.raises(SystemExit):
        m.main([str(summary), "--choose-on-moves", str(moves)])
