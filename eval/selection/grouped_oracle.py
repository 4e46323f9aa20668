"""What knowing a condition's group is worth: the best single CCA of each group, against the oracle.

`python3 eval/selection/grouped_oracle.py SUMMARY [--choose-on SUMMARY ...] [--class ENV]
[--group KEY] [--selector SCHEME] [--moves DIR [--choose-on-moves DIR ...]]` reads the
`summary.json` of a `ccp-eval run` (or `report`) that holds the twelve single CCAs and a
selector, and scores a policy that knows one thing about each condition of a class (its
group) and nothing else: every condition of a group runs the single CCA with the best summed
reward over the group, from the flow's start, with no swap.

- `--group` names what the policy knows. `competitors` is the competing flows' kind in a
  competition condition's id (`vs-2cubic-...` or `train-vs-2cubic-...`: `cubic`;
  `vs-2bbr-...`: `bbr`; both: `mix`); `competitors+buffer` adds whether the buffer is under
  one BDP (`buf0.43`: `shallow`); `competitors+count+buffer` takes the id's whole `vs-...`
  prefix (kinds and counts) and the buffer; `class` knows only the class (the report's "best
  single of set").
- The group's CCA is chosen on the same summary (in hindsight: an upper bound for that set) or,
  with `--choose-on`, on other summaries (training or other validation sets: what a policy
  fitted elsewhere would pick, among this summary's single CCAs). A group absent from them
  falls back to the class's best single.
- With `--moves`, the policy does not start on the group's CCA: it starts on the probe's
  start candidate and moves to it at the probe's end. `DIR` is a `ccp-eval gen-data --kind
  probe` of the same scenario (`probe.csv`: every flow probed, then switched to each
  candidate); a condition's reward for a move is the mean over seeds of its default-mode rows
  for that target (the classes but `app` run default-mode flows). The group's CCA is chosen on
  the same rows, or on `--choose-on-moves` (another scenario's `gen-data`, such as the
  training set's). `probe.csv` names no class, so moves are grouped by the competitors' kind
  in competition only (whose ids say it); another class is played as one group, in
  hindsight.
- It prints, per group, the chosen CCA and the conditions; for the class, the best single
  overall (B), the grouped policy, the selector and the oracle with the share of the class's
  headroom each captures, (R - R_B) / (R_oracle - R_B), the report's measure; and the overall
  share the selector would capture if it played the class as the grouped policy does and every
  other class as it did.

The conditions' rewards, B and the oracle are read from the summary's per-condition tables
(`conditions`, `headroom`), so the numbers match `report.md`'s "Selection headroom". A
condition some single CCA lacks a reward in is left out, as the report leaves it out.

Standard library only.
"""

from __future__ import annotations

import argparse
import csv
import json
import re
import sys
from collections import defaultdict

GROUPS = ("competitors", "competitors+buffer", "competitors+count+buffer", "class")

# `competition-train`'s ids carry a `train-` prefix.
_VS = re.compile(r"^(?:train-)?vs-((?:\d+(?:cubic|bbr|reno|copa|vegas)-?)+?)-bw")
_KIND = re.compile(r"\d+([a-z]+)")
_BUF = re.compile(r"-buf([0-9.]+)")


class SummaryError(ValueError):
    """A summary that cannot be read as a selection-headroom run."""


def group_of(condition: str, env: str, key: str) -> str:
    """The group a condition falls in under `key` (one of `GROUPS`)."""
    if key == "class":
        return env
    vs = _VS.match(condition)
    if vs is None:
        return "other"
    kinds = sorted(set(_KIND.findall(vs.group(1))))
    kind = kinds[0] if len(kinds) == 1 else "mix"
    if key == "competitors":
        return kind
    buf = _BUF.search(condition)
    depth = "?" if buf is None else ("shallow" if float(buf.group(1)) < 1.0 else "deep")
    if key == "competitors+buffer":
        return f"{kind} {depth}"
    return f"{vs.group(1)} {depth}"


def load(path: str) -> dict:
    """A summary's singles, best single and per-condition rewards, checked."""
    try:
        with open(path, encoding="utf-8") as f:
            summary = json.load(f)
    except (OSError, json.JSONDecodeError) as e:
        raise SummaryError(f"{path}: {e}") from e
    headroom = summary.get("headroom") if isinstance(summary, dict) else None
    if not isinstance(headroom, dict) or not headroom.get("singles"):
        raise SummaryError(f"{path}: no selection headroom (a run with the single CCAs has one)")
    try:
        singles = [str(x) for x in headroom["singles"]]
        rows = {}
        for c in summary.get("conditions", []):
            rewards = {s["scheme"]: float(s["reward"]) for s in c.get("schemes", []) if s.get("reward") is not None}
            if all(s in rewards for s in singles):
                rows[c["condition"]] = {"env": c["env"], "rewards": rewards}
        oracle = {h["label"]: h for h in headroom.get("conditions", [])}
        for name, row in rows.items():
            h = oracle.get(name)
            if h is None:
                raise SummaryError(f"{path}: condition {name} has no headroom row")
            row["b"] = float(h["r_best_single"])
            row["oracle"] = float(h["r_oracle"])
        best = str(headroom["best_single"])
    except (KeyError, TypeError, ValueError, AttributeError) as e:
        if isinstance(e, SummaryError):
            raise
        raise SummaryError(f"{path}: not a report's summary ({type(e).__name__}: {e})") from e
    return {"singles": singles, "best": best, "rows": rows, "path": path}


def load_moves(directory: str) -> dict[str, dict[str, float]]:
    """Per condition, per target: the mean score of the default-mode rows of a `gen-data --kind
    probe` directory's `probe.csv` (a move to the target at the probe's end)."""
    path = f"{directory}/probe.csv"
    sums: dict[str, dict[str, list[float]]] = defaultdict(lambda: defaultdict(list))
    try:
        with open(path, encoding="utf-8", newline="") as f:
            reader = csv.DictReader(f)
            missing = {"condition", "mode", "target", "score"} - set(reader.fieldnames or [])
            if missing:
                raise SummaryError(f"{path}: no column {', '.join(sorted(missing))}")
            for line, row in enumerate(reader, start=2):
                if any(row[k] is None for k in ("condition", "mode", "target", "score")):
                    raise SummaryError(f"{path}:{line}: the row has fewer fields than the header")
                if row["mode"] != "default":
                    continue
                try:
                    score = float(row["score"])
                except ValueError as e:
                    raise SummaryError(f"{path}:{line}: score {row['score']!r}: {e}") from e
                sums[row["condition"]][row["target"]].append(score)
    except OSError as e:
        raise SummaryError(f"{path}: {e}") from e
    return {c: {t: sum(v) / len(v) for t, v in by.items()} for c, by in sums.items()}


def best_per_group(tables, env: str, key: str, candidates: list[str]) -> dict[str, str]:
    """Per group of class `env`, the candidate with the best summed value over `tables`
    (`(condition, {candidate: value})` pairs of that class), among the candidates every
    condition of the group has; ties go to the first in `candidates`' order."""
    sums: dict[str, dict[str, float]] = defaultdict(lambda: defaultdict(float))
    have: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    counts: dict[str, int] = defaultdict(int)
    for condition, values in tables:
        g = group_of(condition, env, key)
        counts[g] += 1
        for c, v in values.items():
            sums[g][c] += v
            have[g][c] += 1
    picks = {}
    for g, by in sums.items():
        full = [c for c in candidates if have[g][c] == counts[g]]
        if full:
            picks[g] = max(full, key=lambda c: by[c])
    return picks


def share(r: float, b: float, oracle: float) -> float | None:
    """(r - b) / (oracle - b), or None where there is no headroom."""
    return None if oracle - b < 1e-12 else (r - b) / (oracle - b)


def evaluate(
    target: dict,
    choose_on: list[dict],
    env: str,
    key: str,
    selector: str,
    moves: dict | None = None,
    choose_on_moves: list[dict] | None = None,
) -> dict:
    """The grouped policy's and the selector's rewards and shares on class `env` of `target`
    (with `moves`, the policy moves at the probe's end instead of starting on the CCA)."""
    rows = {n: r for n, r in target["rows"].items() if r["env"] == env}
    if not rows:
        raise SummaryError(f"{target['path']}: no condition of class {env}")
    if any(selector not in r["rewards"] for r in target["rows"].values()):
        raise SummaryError(f"{target['path']}: {selector} lacks a reward in some condition")
    if moves is None:
        # A start on the group's single CCA, chosen on `choose_on`'s rewards (or these).
        table = {n: r["rewards"] for n, r in rows.items()}
        pool = [(n, r["rewards"]) for s in choose_on or [target] for n, r in s["rows"].items() if r["env"] == env]
        candidates = target["singles"]
        default = target["best"]
    else:
        # `probe.csv` names no class: a competition condition is known by its id (`vs-...`),
        # and another class can be played only in hindsight, as one group.
        if env != "competition" and key != "class":
            raise SummaryError("moves are grouped by the competitors' kind in competition only (or by class)")
        if env != "competition" and choose_on_moves:
            raise SummaryError("moves are chosen on another scenario in competition only (its ids name the class)")
        lacking = sorted(n for n in rows if n not in moves)
        if lacking:
            raise SummaryError(f"the moves have no default-mode row of {lacking[0]} ({len(lacking)} conditions)")
        table = {n: moves[n] for n in rows}
        pool = [(c, by) for m in choose_on_moves or [table] for c, by in m.items()
                if env != "competition" or _VS.match(c)]
        candidates = sorted({t for _, by in pool for t in by})
        default = None
    picks = best_per_group(pool, env, key, candidates)
    fallback = best_per_group(pool, env, "class", candidates).get(env, default)
    groups: dict[str, list[str]] = defaultdict(list)
    r_grouped = 0.0
    for name in rows:
        g = group_of(name, env, key)
        cca = picks.get(g, fallback)
        if cca is None or cca not in table[name]:
            raise SummaryError(f"no choice for {name} (group {g})")
        groups[f"{g}: {cca}"].append(name)
        r_grouped += table[name][cca]
    n = len(rows)
    mean = lambda f: sum(f(r) for r in rows.values()) / n  # noqa: E731
    b, oracle, sel = mean(lambda r: r["b"]), mean(lambda r: r["oracle"]), mean(lambda r: r["rewards"][selector])
    r_grouped /= n
    # Overall: every class as the selector played it, this class as the grouped policy.
    every = target["rows"].values()
    total = len(target["rows"])
    b_all = sum(r["b"] for r in every) / total
    o_all = sum(r["oracle"] for r in every) / total
    s_all = sum(r["rewards"][selector] for r in every) / total
    s_mixed = s_all + (r_grouped - sel) * n / total
    return {
        "groups": {g: sorted(names) for g, names in sorted(groups.items())},
        "conditions": n,
        "r_best_single": b,
        "r_oracle": oracle,
        "r_grouped": r_grouped,
        "r_selector": sel,
        "captured_grouped": share(r_grouped, b, oracle),
        "captured_selector": share(sel, b, oracle),
        "overall_selector": share(s_all, b_all, o_all),
        "overall_selector_with_grouped_class": share(s_mixed, b_all, o_all),
    }


def _pct(x: float | None) -> str:
    return "-" if x is None else f"{100 * x:.1f} %"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("summary", help="summary.json of a run with the single CCAs and the selector")
    p.add_argument("--choose-on", nargs="+", default=[], help="summaries to choose each group's CCA on")
    p.add_argument("--class", dest="env", default="competition", help="the class (environment) to play")
    p.add_argument("--group", default="competitors", choices=GROUPS)
    p.add_argument("--selector", default="selector-probe")
    p.add_argument("--moves", help="a gen-data --kind probe directory of the same scenario: move at the probe's end")
    p.add_argument("--choose-on-moves", nargs="+", default=[], help="gen-data directories to choose each group's move on")
    a = p.parse_args(argv)
    if a.choose_on_moves and not a.moves:
        p.error("--choose-on-moves needs --moves")
    try:
        target = load(a.summary)
        others = [load(s) for s in a.choose_on]
        for o in others:
            lacking = [c for c in target["singles"] if c not in o["singles"]]
            if lacking:
                raise SummaryError(f"{o['path']}: no single-CCA run of {', '.join(lacking)} to choose from")
        moves = load_moves(a.moves) if a.moves else None
        pool = [load_moves(d) for d in a.choose_on_moves]
        r = evaluate(target, others, a.env, a.group, a.selector, moves, pool)
    except SummaryError as e:
        print(f"grouped_oracle: {e}", file=sys.stderr)
        return 2
    sources = a.choose_on_moves if a.moves else [o["path"] for o in others]
    chosen = "in hindsight" if not sources else "on " + ", ".join(sources)
    how = f"moved to at the probe's end ({a.moves})" if a.moves else "from the start"
    print(f"{a.summary}: class {a.env}, {r['conditions']} conditions; group by {a.group}, {how}, chosen {chosen}")
    for g, names in r["groups"].items():
        print(f"  {g} ({len(names)})")
    print(f"  R_B {r['r_best_single']:.4f}  oracle {r['r_oracle']:.4f}")
    print(f"  grouped  {r['r_grouped']:.4f}  captured {_pct(r['captured_grouped'])}")
    print(f"  {a.selector} {r['r_selector']:.4f}  captured {_pct(r['captured_selector'])}")
    print(
        f"  overall: {a.selector} {_pct(r['overall_selector'])}; with this class played by the grouped"
        f" policy {_pct(r['overall_selector_with_grouped_class'])}"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
