"""Keeps the best of several trained TCP-RL models by their validation reward.

One training run is one draw: the same seed on another machine takes another floating-point
path and can end far from the shipped model (`docs/learning.md`). `make tcprl-model` therefore
trains several seeds, runs each as `selector-tcprl` on the validation grid, and keeps the one
with the highest mean score of its flows there; `selection.json`, written beside the kept
model, records every run's mean so the choice can be checked.
"""

from __future__ import annotations

import csv
import json
import pathlib
import shutil

SCHEME = "selector-tcprl"


def mean_score(results: pathlib.Path, scheme: str = SCHEME) -> tuple[float, int]:
    """Mean `score` of `scheme`'s flows under test in a `results.csv`, and how many. A failed
    run, a missing or non-finite score, or no flow at all is an error: a model is not chosen
    on part of the validation set."""
    scores = []
    with open(results, newline="") as f:
        for row in csv.DictReader(f):
            if row.get("scheme") != scheme or row.get("role") != "main":
                continue
            if row.get("status") != "ok":
                raise ValueError(f"{results}: {row.get('condition')} seed {row.get('seed')} did not run: {row.get('status')}")
            try:
                s = float(row["score"])
            except (KeyError, ValueError) as e:
                raise ValueError(f"{results}: {row.get('condition')}: no score ({e})") from None
            if s != s or s in (float("inf"), float("-inf")):
                raise ValueError(f"{results}: {row.get('condition')}: score {s}")
            scores.append(s)
    if not scores:
        raise ValueError(f"{results}: no {scheme} flow")
    return sum(scores) / len(scores), len(scores)


def pick(runs: list[tuple[pathlib.Path, pathlib.Path]], out: pathlib.Path) -> dict:
    """`runs`: (model folder with `tcprl.json`, its validation `results.csv`). Copies the best
    model's files into `out` (replacing what was there) and writes `out/selection.json`."""
    if not runs:
        raise ValueError("no run to pick from")
    rows = []
    counts = set()
    for model, results in runs:
        if not (model / "tcprl.json").is_file():
            raise ValueError(f"{model}: no tcprl.json (not a trained model)")
        mean, n = mean_score(results)
        counts.add(n)
        rows.append({"model": str(model), "results": str(results), "mean_score": mean, "flows": n})
    if len(counts) > 1:
        raise ValueError(f"the runs were validated on different numbers of flows: {sorted(counts)}")
    best = max(rows, key=lambda r: r["mean_score"])
    src = pathlib.Path(best["model"])
    out.mkdir(parents=True, exist_ok=True)
    if out.resolve() != src.resolve():
        for f in out.iterdir():
            if f.is_file():
                f.unlink()
        for f in src.iterdir():
            if f.is_file():
                shutil.copy2(f, out / f.name)
    selection = {"scheme": SCHEME, "runs": rows, "chosen": best["model"]}
    (out / "selection.json").write_text(json.dumps(selection, indent=1) + "\n")
    return selection
