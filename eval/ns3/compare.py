#!/usr/bin/env python3
"""ns-3's agreement with the kernel beside the simulator's (docs/calibration-ns3.md): the
counts of `ccp-eval agree` (utilization within 5 %, p95 srtt within 10 %,
both) for both, per scheme, and the cells where ns-3 is closer to the kernel than the simulator.

    python3 eval/ns3/compare.py --sim results/ctcp-sim --ns3 results/ctcp-ns3 \\
        --kernel results/ctcp-kernel-s1 results/ctcp-kernel-s2

Cells are formed as eval/src/agree.rs forms them: the `ok` main flows of each (condition,
scheme), averaged over seeds on each side; a kernel row without `p95_srtt_ms` reads it from
`p95_rtt_ms` (the same srtt series there).
"""

import argparse
import csv
import sys
from pathlib import Path

UTIL_BOUND = 0.05  # agree::UTIL_BOUND
RTT_BOUND = 0.10  # agree::RTT_BOUND


def read(dirs, kernel):
    acc = {}
    for d in dirs:
        path = Path(d) / "results.csv"
        try:
            with open(path, newline="") as f:
                rows = list(csv.DictReader(f))
        except OSError as e:
            sys.exit(f"compare.py: {e}")
        for line, r in enumerate(rows, start=2):
            try:
                if r["status"] != "ok" or r["role"] != "main":
                    continue
                srtt = float(r.get("p95_srtt_ms") or 0.0)
                if kernel and srtt == 0.0:
                    srtt = float(r["p95_rtt_ms"])
                key = (r["condition"], r["scheme"])
                e = acc.setdefault(key, [float(r["loss"]), 0.0, 0.0, 0.0, 0])
                e[1] += float(r["utilization"])
                e[2] += srtt
                e[3] += float(r["loss_rate"])
                e[4] += 1
            except (KeyError, ValueError) as err:
                sys.exit(f"compare.py: {path}:{line}: {err!r}")
    return {k: (v[0], v[1] / v[4], v[2] / v[4], v[3] / v[4]) for k, v in acc.items()}


def rel(a, b):
    if b > 0:
        return (a - b) / b
    return 0.0 if a == 0 else float("inf")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--sim", nargs="+", required=True)
    ap.add_argument("--ns3", nargs="+", required=True)
    ap.add_argument("--kernel", nargs="+", required=True)
    a = ap.parse_args()
    sim, ns3, ker = read(a.sim, False), read(a.ns3, False), read(a.kernel, True)
    cells = []
    for key in sorted(set(sim) & set(ns3) & set(ker)):
        loss, ku, kr, kl = ker[key]
        s, n = sim[key], ns3[key]
        cells.append(
            {
                "condition": key[0],
                "scheme": key[1],
                "lossy": loss > 0,
                "k": (ku, kr, kl),
                "s": (s[1], s[2], s[3]),
                "n": (n[1], n[2], n[3]),
                "su": rel(s[1], ku),
                "sr": rel(s[2], kr),
                "nu": rel(n[1], ku),
                "nr": rel(n[2], kr),
            }
        )
    if not cells:
        sys.exit("compare.py: no (condition, scheme) is in all three runs")

    def ok(c, side):
        return abs(c[side + "u"]) <= UTIL_BOUND, abs(c[side + "r"]) <= RTT_BOUND

    groups = [("loss-free", lambda c: not c["lossy"]), ("lossy", lambda c: c["lossy"]), ("all", lambda c: True)]
    for scheme in sorted({c["scheme"] for c in cells}):
        groups.append((f"`{scheme}`", lambda c, s=scheme: c["scheme"] == s))
    print("| cells | utilization within 5 %: sim / ns-3 | p95 srtt within 10 %: sim / ns-3 | both: sim / ns-3 |")
    print("|---|---|---|---|")
    for name, sel in groups:
        cs = [c for c in cells if sel(c)]
        n = len(cs)
        cnt = {
            (side, m): sum(
                1
                for c in cs
                if (ok(c, side)[0] if m == "u" else ok(c, side)[1] if m == "r" else all(ok(c, side)))
            )
            for side in ("s", "n")
            for m in ("u", "r", "b")
        }
        print(
            f"| {name} | {cnt['s', 'u']}/{n} / {cnt['n', 'u']}/{n} | {cnt['s', 'r']}/{n} / {cnt['n', 'r']}/{n} "
            f"| {cnt['s', 'b']}/{n} / {cnt['n', 'b']}/{n} |"
        )
    closer_u = sum(1 for c in cells if abs(c["nu"]) < abs(c["su"]))
    closer_r = sum(1 for c in cells if abs(c["nr"]) < abs(c["sr"]))
    print()
    print(
        f"ns-3's gap is smaller than the simulator's in {closer_u} of {len(cells)} cells on utilization "
        f"and in {closer_r} on p95 srtt."
    )
    print()
    print("Cells where ns-3 is within a bound the simulator misses:")
    print()
    print("| condition | scheme | utilization kernel / sim / ns-3 | p95 srtt kernel / sim / ns-3, ms | ns-3 closer on |")
    print("|---|---|---|---|---|")
    pct = lambda x: f"{100 * x:+.1f} %" if x != float("inf") else "n/a"
    for c in cells:
        (su, sr), (nu, nr) = ok(c, "s"), ok(c, "n")
        which = [m for m, win in (("utilization", nu and not su), ("p95 srtt", nr and not sr)) if win]
        if not which:
            continue
        print(
            f"| {c['condition']} | {c['scheme']} | {c['k'][0]:.3f} / {c['s'][0]:.3f} ({pct(c['su'])}) / "
            f"{c['n'][0]:.3f} ({pct(c['nu'])}) | {c['k'][1]:.1f} / {c['s'][1]:.1f} ({pct(c['sr'])}) / "
            f"{c['n'][1]:.1f} ({pct(c['nr'])}) | {', '.join(which)} |"
        )


if __name__ == "__main__":
    main()
