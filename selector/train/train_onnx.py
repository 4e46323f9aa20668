#!/usr/bin/env python3
"""Train the `onnx` selection policy: an sklearn MLPClassifier exported to ONNX with skl2onnx.

Input rows are feature windows in the schema of `selector/src/onnx.rs` (`SCHEMA_VERSION` 1):
for each of the last K reports, oldest first, the per-report features

    throughput_norm, rtt_ratio, loss_frac, timeout, current=<candidate> (one per candidate)

flattened to columns named `r<i>.<feature>` (r0 the oldest report). The label is the index or
name of the best candidate for the state the window describes.

Two sources:
  --data CSV     rows of those columns plus a `best_candidate` column: `ccp-eval gen-data`
                 writes `onnx.csv` (explore flows' windows, labelled with the condition's
                 best candidate run alone); `make onnx-example` trains the shipped model on it;
  --synthetic    report sequences generated here and labelled by simple rules (below), so an
                 example model exists before real data does.

Output, in --out-dir: `policy.onnx` (input `input`: float [N, K*F]; outputs `label`: int64 [N]
and `probabilities`: float [N, candidates], zipmap disabled) and `policy.json`, the sidecar the
Rust loader checks: schema version, window, feature names, candidate names, the output to read,
and reference cases (raw reports, the scores ONNX Runtime gives for them in Python, and the
class sklearn predicts) that the Rust tests replay.

Needs numpy, scikit-learn, skl2onnx and onnxruntime (the Makefile's `.venv`); no PyTorch.
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from pathlib import Path

import numpy as np

SCHEMA_VERSION = 1
REPORT_FEATURES = ["throughput_norm", "rtt_ratio", "loss_frac", "timeout"]
# Mirrors of the constants in selector/src/onnx.rs.
MSS_BYTES = 1448
RTT_RATIO_CAP = 10.0
DEFAULT_CANDIDATES = [
    "reno", "cubic", "bbr", "vegas", "westwood", "illinois", "copa", "c2tcp", "vivace",
]
INPUT_NAME = "input"
OUTPUT_NAME = "probabilities"


def per_report_names(candidates: list[str]) -> list[str]:
    return REPORT_FEATURES + [f"current={c}" for c in candidates]


def column_names(window: int, candidates: list[str]) -> list[str]:
    return [f"r{i}.{n}" for i in range(window) for n in per_report_names(candidates)]


class Featurizer:
    """The per-flow feature state of `OnnxPolicy` (selector/src/onnx.rs), line for line."""

    def __init__(self, n_candidates: int):
        self.n = n_candidates
        self.min_rtt_us = 0
        self.max_tput = 0.0
        self.prev_now_us: int | None = None

    def push(self, m: dict, current: int) -> list[float]:
        for s in (m["min_rtt_us"], m["rtt_us"]):
            if s > 0 and (self.min_rtt_us == 0 or s < self.min_rtt_us):
                self.min_rtt_us = s
        if m["rate_incoming_bytes_per_sec"] > 0:
            tput = float(m["rate_incoming_bytes_per_sec"])
        elif self.prev_now_us is not None and m["now_us"] > self.prev_now_us:
            tput = m["acked_bytes"] * 1e6 / (m["now_us"] - self.prev_now_us)
        else:
            tput = 0.0
        self.prev_now_us = m["now_us"]
        self.max_tput = max(self.max_tput, tput)
        tput_norm = tput / self.max_tput if self.max_tput > 0 else 0.0
        if m["rtt_us"] > 0 and self.min_rtt_us > 0:
            rtt_ratio = min(m["rtt_us"] / self.min_rtt_us, RTT_RATIO_CAP)
        else:
            rtt_ratio = 0.0
        lost_bytes = m["lost_pkts"] * MSS_BYTES
        denom = m["acked_bytes"] + m["sacked_bytes"] + lost_bytes
        loss_frac = lost_bytes / denom if denom > 0 else 0.0
        onehot = [1.0 if i == current else 0.0 for i in range(self.n)]
        return [tput_norm, rtt_ratio, loss_frac, 1.0 if m["timeout"] else 0.0] + onehot


def window_of(reports: list[dict], currents: list[int], window: int, n: int) -> np.ndarray:
    """Features of the last `window` reports of a flow that saw `reports` from its start."""
    f = Featurizer(n)
    rows = [f.push(m, c) for m, c in zip(reports, currents)]
    return np.asarray(rows[-window:], dtype=np.float64).reshape(-1)


def report(now_us, rtt_us, acked_bytes, lost_pkts=0, rate=0, timeout=False) -> dict:
    return {
        "now_us": int(now_us),
        "acked_bytes": int(acked_bytes),
        "sacked_bytes": 0,
        "lost_pkts": int(lost_pkts),
        "timeout": bool(timeout),
        "rtt_us": int(rtt_us),
        "min_rtt_us": int(rtt_us),
        "rate_incoming_bytes_per_sec": int(rate),
    }


def rule_label(reports: list[dict], current: int, cands: list[str], window: int) -> int:
    """The synthetic teacher, Rein-like: on loss, classify it by RTT inflation (random loss at an
    empty queue -> westwood, shallow buffer -> bbr, deep buffer -> cubic); without loss, a
    standing queue over 2x the base RTT -> copa; otherwise stay on the current candidate."""
    base = min(r["rtt_us"] for r in reports)
    last = reports[-window:]
    lossy = [r for r in last if r["lost_pkts"] > 0 or r["timeout"]]
    idx = {c: i for i, c in enumerate(cands)}
    if lossy:
        inflation = max(r["rtt_us"] for r in lossy) / base
        if inflation < 1.05:
            return idx.get("westwood", current)
        if inflation < 1.5:
            return idx.get("bbr", current)
        return idx.get("cubic", current)
    if np.mean([r["rtt_us"] for r in last]) / base > 2.0:
        return idx.get("copa", current)
    return current


def synthetic_flow(rng: np.random.Generator, window: int, n: int):
    """One flow's report sequence (once per RTT) in a random path regime."""
    base_rtt = int(rng.uniform(10_000, 200_000))
    rate = float(rng.uniform(1e5, 1.25e7))  # bytes/s, ~1-100 Mbit/s
    regime = rng.choice(["clean", "random_loss", "shallow", "deep", "bloat"])
    length = window + int(rng.integers(0, window))
    current = int(rng.integers(0, n))
    now, reports = 0, []
    for k in range(length):
        queue = {"clean": 0.02, "random_loss": 0.01, "shallow": 0.25, "deep": 1.2,
                 "bloat": 1.8}[regime] * min(1.0, (k + 1) / 4)
        rtt = int(base_rtt * (1.0 + queue * rng.uniform(0.7, 1.3)))
        now += rtt
        tput = rate * rng.uniform(0.6, 1.0)
        acked = tput * rtt / 1e6
        lost = 0
        if regime == "random_loss" and rng.random() < 0.4:
            lost = int(rng.integers(1, 4))
        elif regime in ("shallow", "deep") and k >= window // 2 and rng.random() < 0.3:
            lost = int(rng.integers(1, 10))
        use_rate = rng.random() < 0.8
        reports.append(report(now, rtt, acked, lost, tput if use_rate else 0))
    return reports, [current] * length, current


def synthetic(samples: int, window: int, cands: list[str], seed: int):
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    n = len(cands)
    while len(xs) < samples:
        reports, currents, current = synthetic_flow(rng, window, n)
        xs.append(window_of(reports, currents, window, n))
        ys.append(rule_label(reports, current, cands, window))
    return np.asarray(xs, dtype=np.float32), np.asarray(ys, dtype=np.int64)


def load_csv(path: Path, window: int, cands: list[str]):
    cols = column_names(window, cands)
    xs, ys = [], []
    with path.open(newline="") as fh:
        rd = csv.DictReader(fh)
        missing = [c for c in cols + ["best_candidate"] if c not in (rd.fieldnames or [])]
        if missing:
            sys.exit(f"{path}: missing columns (schema v{SCHEMA_VERSION}): {missing[:5]}...")
        for row in rd:
            xs.append([float(row[c]) for c in cols])
            lab = row["best_candidate"]
            ys.append(cands.index(lab) if lab in cands else int(lab))
    return np.asarray(xs, dtype=np.float32), np.asarray(ys, dtype=np.int64)


def reference_cases(window: int, cands: list[str]):
    """Hand-written report sequences the Rust tests replay through `OnnxPolicy`."""
    idx = {c: i for i, c in enumerate(cands)}
    cur = idx.get("cubic", 0)
    cases = []
    # Random loss at an empty queue, while on cubic.
    reps = [report(50_000 * (k + 1), 50_000 + 200 * (k % 2), 60_000, 2 if k % 3 == 2 else 0,
                   1_200_000) for k in range(window)]
    cases.append(("random_loss_on_cubic", reps, cur))
    # A deep standing queue and no loss, while on cubic.
    reps = [report(100_000 * (k + 1), 40_000 + 30_000 * min(k, 3), 90_000, 0, 1_000_000)
            for k in range(window)]
    cases.append(("bufferbloat_on_cubic", reps, cur))
    # A clean path, while on bbr.
    b = idx.get("bbr", 0)
    reps = [report(30_000 * (k + 1), 30_000 + 300 * (k % 3), 40_000, 0, 0)
            for k in range(window)]
    cases.append(("clean_on_bbr", reps, b))
    return cases


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    src = ap.add_mutually_exclusive_group(required=True)
    src.add_argument("--data", type=Path, help="CSV of feature columns + best_candidate")
    src.add_argument("--synthetic", action="store_true", help="generate rule-labelled data")
    ap.add_argument("--out-dir", type=Path, default=Path("selector/models/example-onnx"))
    ap.add_argument("--window", type=int, default=8, help="reports per window (K)")
    ap.add_argument("--candidates", default=",".join(DEFAULT_CANDIDATES))
    ap.add_argument("--hidden", type=int, default=32, help="hidden units (one layer)")
    ap.add_argument("--samples", type=int, default=40_000, help="synthetic rows")
    ap.add_argument("--seed", type=int, default=7)
    args = ap.parse_args()

    from sklearn.model_selection import train_test_split
    from sklearn.neural_network import MLPClassifier
    from skl2onnx import convert_sklearn
    from skl2onnx.common.data_types import FloatTensorType
    import onnxruntime as ort

    cands = [c for c in args.candidates.split(",") if c]
    n, window = len(cands), args.window
    if args.synthetic:
        x, y = synthetic(args.samples, window, cands, args.seed)
    else:
        x, y = load_csv(args.data, window, cands)

    xtr, xte, ytr, yte = train_test_split(x, y, test_size=0.2, random_state=args.seed)
    absent = sorted(set(range(n)) - set(ytr.tolist()))
    if absent:
        # MLPClassifier has one output per class it saw; the policy needs one per candidate.
        # A candidate never the best in the training rows gets one placeholder row (the mean
        # window), so the network has its output; among tens of thousands of rows it is as
        # good as never predicted.
        print(f"never the best in the training rows: {[cands[i] for i in absent]} "
              "(one placeholder row each)")
        pad = np.repeat(xtr.mean(axis=0, keepdims=True), len(absent), axis=0)
        xtr = np.concatenate([xtr, pad.astype(np.float32)])
        ytr = np.concatenate([ytr, np.asarray(absent, dtype=np.int64)])
    clf = MLPClassifier(hidden_layer_sizes=(args.hidden,), max_iter=400,
                        random_state=args.seed, early_stopping=True)
    clf.fit(xtr, ytr)
    acc = float(clf.score(xte, yte))
    print(f"held-out accuracy {acc:.3f} on {len(yte)} rows ({n} candidates, window {window})")

    onx = convert_sklearn(
        clf,
        initial_types=[(INPUT_NAME, FloatTensorType([None, x.shape[1]]))],
        options={id(clf): {"zipmap": False}},
        target_opset={"": 17, "ai.onnx.ml": 3},
    )
    args.out_dir.mkdir(parents=True, exist_ok=True)
    model_path = args.out_dir / "policy.onnx"
    model_path.write_bytes(onx.SerializeToString())

    sess = ort.InferenceSession(str(model_path), providers=["CPUExecutionProvider"])
    refs = []
    for name, reps, current in reference_cases(window, cands):
        xin = window_of(reps, [current] * len(reps), window, n).astype(np.float32)[None, :]
        scores = sess.run([OUTPUT_NAME], {INPUT_NAME: xin})[0][0]
        refs.append({
            "name": name,
            "current": current,
            "reports": reps,
            "input": [float(v) for v in xin[0]],
            "scores": [float(v) for v in scores],
            "sklearn_argmax": int(clf.predict(xin)[0]),
        })

    sidecar = {
        "schema_version": SCHEMA_VERSION,
        "window": window,
        "features": per_report_names(cands),
        "candidates": cands,
        "input_name": INPUT_NAME,
        "output_name": OUTPUT_NAME,
        "trained_on": str(args.data) if args.data else f"synthetic(seed={args.seed}, "
                      f"samples={args.samples})",
        "hidden_units": args.hidden,
        "held_out_accuracy": round(acc, 4),
        "onnxruntime_version": ort.__version__,
        "references": refs,
    }
    (args.out_dir / "policy.json").write_text(json.dumps(sidecar, indent=1) + "\n")
    print(f"wrote {model_path} ({model_path.stat().st_size} bytes) and policy.json")


if __name__ == "__main__":
    main()
