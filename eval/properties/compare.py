#!/usr/bin/env python3
"""The `properties` scenarios on both datapaths, side by side (docs/algorithms.md, "Defining
properties"): per algorithm and buffer, the median over the scenario's rate x RTT cells of
utilization, mean queue (packets at the link rate), mean RTT over the path's RTT, and loss,
simulator / kernel, from two `results.csv` of the same scenario.

    ccp-eval run eval/scenarios/properties-kernel.toml --out results/props-sim
    ccp-eval run eval/scenarios/properties-kernel.toml --datapath kernel --out results/props-kernel
    python3 eval/properties/compare.py --sim results/props-sim --kernel results/props-kernel
"""

from __future__ import annotations

import argparse
import csv
import pathlib
import statistics
import sys

FRAME_BITS = 1514 * 8


def rows(directory: pathlib.Path) -> list[dict]:
    with open(directory / "results.csv", newline="") as f:
        return [r for r in csv.DictReader(f) if r["role"] == "main" and r["status"] == "ok"]


def cell_values(r: dict) -> dict:
    bw, rtt = float(r["bw_mbps"]), float(r["rtt_ms"])
    pkt_ms = FRAME_BITS / (bw * 1e6) * 1e3
    bdp_bytes = bw * 1e6 / 8 * rtt / 1e3
    return {
        "buffer_bdp": round(float(r["buffer_bytes"]) / bdp_bytes, 1),
        "util": float(r["utilization"]),
        "queue_pkts": float(r["mean_qdelay_ms"]) / pkt_ms,
        "rtt_ratio": float(r["mean_rtt_ms"]) / rtt,
        "loss": float(r["loss_rate"]),
    }


def table(sim: list[dict], kernel: list[dict]) -> str:
    def group(rs):
        out: dict[tuple[str, float], list[dict]] = {}
        for r in rs:
            v = cell_values(r)
            out.setdefault((r["scheme"], v["buffer_bdp"]), []).append(v)
        return out

    s, k = group(sim), group(kernel)
    lines = [
        "| algorithm | buffer (BDP) | cells | utilization sim / kernel | mean queue, packets sim / kernel | mean RTT / path RTT sim / kernel | loss sim / kernel (max) |",
        "|---|---|---|---|---|---|---|",
    ]
    med = statistics.median
    for key in sorted(set(s) & set(k)):
        a, b = s[key], k[key]

        def m(vs, f):
            return med(v[f] for v in vs)

        lines.append(
            f"| {key[0]} | {key[1]:g} | {len(b)} | {m(a, 'util'):.2f} / {m(b, 'util'):.2f} "
            f"| {m(a, 'queue_pkts'):.1f} / {m(b, 'queue_pkts'):.1f} "
            f"| {m(a, 'rtt_ratio'):.2f} / {m(b, 'rtt_ratio'):.2f} "
            f"| {100 * m(a, 'loss'):.2f} % / {100 * m(b, 'loss'):.2f} % "
            f"({100 * max(v['loss'] for v in b):.1f} %) |"
        )
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", required=True, type=pathlib.Path)
    ap.add_argument("--kernel", required=True, type=pathlib.Path)
    a = ap.parse_args(argv)
    try:
        print(table(rows(a.sim), rows(a.kernel)))
    except (OSError, KeyError, ValueError) as e:
        sys.exit(f"compare.py: {e}")


if __name__ == "__main__":
    main()
