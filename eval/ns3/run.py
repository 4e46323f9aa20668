#!/usr/bin/env python3
"""Runs a scenario's conditions through ns-3's TCP models (eval/ns3/calibrate.cc) and writes
`results.csv` in ccp-eval's schema, so `ccp-eval agree --sim DIR --kernel ...` compares ns-3
with the kernel testbed as it compares the simulator (docs/calibration-ns3.md).

    python3 eval/ns3/run.py --out results/ctcp-ns3                  # calibrate-tcp, seeds 1-2
    python3 eval/ns3/run.py eval/scenarios/calibrate-tcp.toml --jobs 2 --out DIR

Which ns-3 model stands for which scheme (ns-3 has no CCP; our CCP Reno, Cubic and BBR on the
kernel follow the same algorithms as the kernel's own, so each pair shares a model):

    native-reno, reno  -> TcpLinuxReno (ns-3's Reno that counts ACKed segments as Linux does;
                          --reno-model TcpNewReno for ns-3's classic NewReno)
    native-cubic, cubic -> TcpCubic (with HyStart and TCP friendliness, as Linux's)
    bbr                -> TcpBbr (BBR v1, paced)

Only constant-rate conditions without phases, traces or cross traffic are supported (the
calibration scenarios). Prints the wall time of the whole grid.
"""

import argparse
import concurrent.futures
import csv
import io
import os
import subprocess
import sys
import time
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FRAME_BYTES = 1514  # eval/src/runner: runner::FRAME_BYTES
MIN_BUFFER_BYTES = 2 * FRAME_BYTES  # runner::MIN_BUFFER_BYTES

MODELS = {
    "native-reno": "reno",
    "reno": "reno",
    "native-cubic": "TcpCubic",
    "cubic": "TcpCubic",
    "bbr": "TcpBbr",
}


class ScenarioError(Exception):
    pass


def buffer_bytes(cond: dict) -> int:
    """The bottleneck buffer as eval/src/runner/mod.rs `link_for` computes it."""
    bw = float(cond["bw_mbps"])
    rtt = float(cond["rtt_ms"])
    bps = int(bw * 1e6)
    bdp = bps / 8.0 * rtt / 1000.0
    given = [k for k in ("buffer_bdp", "buffer_bytes", "buffer_pkts") if k in cond]
    if len(given) > 1:
        raise ScenarioError(f"condition {cond.get('id')}: give one of {', '.join(given)}")
    if "buffer_bytes" in cond:
        b = int(cond["buffer_bytes"])
    elif "buffer_pkts" in cond:
        b = int(cond["buffer_pkts"]) * FRAME_BYTES
    else:
        b = int(bdp * float(cond.get("buffer_bdp", 1.0)))
    return max(b, MIN_BUFFER_BYTES)


def load(path: Path) -> dict:
    try:
        with open(path, "rb") as f:
            s = tomllib.load(f)
    except (OSError, tomllib.TOMLDecodeError) as e:
        raise ScenarioError(f"{path}: {e}") from e
    for key in ("name", "conditions", "schemes"):
        if key not in s:
            raise ScenarioError(f"{path}: no `{key}`")
    for c in s["conditions"]:
        for key in ("id", "bw_mbps", "rtt_ms"):
            if key not in c:
                raise ScenarioError(f"{path}: condition without `{key}`: {c}")
        for key in ("phases", "trace", "cross", "cellular", "flows"):
            if key in c:
                raise ScenarioError(f"{path}: condition {c['id']}: `{key}` is not supported here")
    for scheme in s["schemes"]:
        if scheme not in MODELS:
            raise ScenarioError(f"{path}: scheme {scheme} has no ns-3 model ({', '.join(MODELS)})")
    return s


def run_one(binary: Path, delack: int, s: dict, c: dict, scheme: str, model: str, seed: int) -> str:
    args = [
        str(binary),
        f"--scenario={s['name']}",
        f"--env={c.get('env', 'default')}",
        f"--condition={c['id']}",
        f"--scheme={scheme}",
        f"--model={model}",
        f"--seed={seed}",
        f"--bwMbps={float(c['bw_mbps'])}",
        f"--rttMs={float(c['rtt_ms'])}",
        f"--bufferBytes={buffer_bytes(c)}",
        f"--loss={float(c.get('loss', 0.0))}",
        f"--duration={float(s.get('duration_s', 20))}",
        f"--delAckCount={delack}",
        "--header",
    ]
    p = subprocess.run(args, capture_output=True, text=True)
    rows = list(csv.reader(io.StringIO(p.stdout)))
    if len(rows) != 2:
        raise RuntimeError(
            f"{c['id']} {scheme} seed {seed}: exit {p.returncode}, no result row; stderr: {p.stderr.strip()}"
        )
    return p.stdout


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("scenario", nargs="?", default=str(ROOT / "eval/scenarios/calibrate-tcp.toml"))
    ap.add_argument("--out", required=True, help="directory for results.csv")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 1)
    ap.add_argument("--seed", type=int, action="append", help="only these seeds (repeatable)")
    ap.add_argument("--schemes", help="comma-separated schemes instead of the scenario's")
    ap.add_argument("--reno-model", default="TcpLinuxReno", choices=["TcpLinuxReno", "TcpNewReno"])
    ap.add_argument(
        "--delack-count",
        type=int,
        default=2,
        help="segments per ACK at the receiver: 2 (delayed ACKs, 40 ms timer) or 1 (an ACK per segment)",
    )
    ap.add_argument("--binary", default=str(ROOT / "target/ns3/calibrate"))
    a = ap.parse_args()

    binary = Path(a.binary)
    src = Path(__file__).resolve().parent / "calibrate.cc"
    if not binary.exists() or binary.stat().st_mtime < src.stat().st_mtime:
        b = subprocess.run([str(src.parent / "build.sh"), str(binary)])
        if b.returncode != 0:
            return b.returncode
    try:
        s = load(Path(a.scenario))
    except ScenarioError as e:
        print(f"run.py: {e}", file=sys.stderr)
        return 2
    if a.delack_count < 1:
        print("run.py: --delack-count must be at least 1", file=sys.stderr)
        return 2
    if a.schemes:
        s["schemes"] = [x.strip() for x in a.schemes.split(",") if x.strip()]
        unknown = [x for x in s["schemes"] if x not in MODELS]
        if unknown:
            print(f"run.py: no ns-3 model for {', '.join(unknown)} ({', '.join(MODELS)})", file=sys.stderr)
            return 2
    seeds = a.seed or s.get("seeds", [1])
    jobs = [
        (c, scheme, a.reno_model if MODELS[scheme] == "reno" else MODELS[scheme], seed)
        for c in s["conditions"]
        for scheme in s["schemes"]
        for seed in seeds
    ]
    t0 = time.monotonic()
    with concurrent.futures.ThreadPoolExecutor(max_workers=max(1, a.jobs)) as ex:
        outs = list(ex.map(lambda j: run_one(binary, a.delack_count, s, *j), jobs))
    wall = time.monotonic() - t0
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = [outs[0].splitlines()[0]] + [o.splitlines()[1] for o in outs]
    (out / "results.csv").write_text("\n".join(lines) + "\n")
    failed = sum(1 for o in outs if not o.splitlines()[1].endswith(",ok"))
    print(
        f"{len(jobs)} runs ({len(s['conditions'])} conditions x {len(s['schemes'])} schemes x "
        f"{len(seeds)} seeds), {failed} not ok, --jobs {a.jobs}: wall {wall:.1f} s; {out / 'results.csv'}"
    )
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
