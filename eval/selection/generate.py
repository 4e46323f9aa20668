"""Draws the conditions of the selection benchmark's classes from their parameter ranges.

`python3 eval/selection/generate.py SET --seed S --per-class N [--seeds a,b] [--segment lo,hi]
[--web-class mixed|recorded] [--recurring K]` prints a scenario (TOML) of N conditions per class,
each drawn independently from the class's ranges below with Python's `random.Random(S)`. The
class `web` is drawn last, so `--web-class recorded` (see `web_recorded`) changes only its
conditions and leaves the other five classes of a set as they are. `--recurring K` makes the flow
under test of each condition K finite flows to one destination, one every 30/K s (see
`recurring`): what a server sees of a client that comes back. The training set (`selection-train`), the
validation set (`selection-bench`) and the held-out test set (`selection-bench-test`) are three
draws with three generator seeds and disjoint shares of every trace (`--segment`), so they come
from one distribution and share no condition; `eval/tests/selection_bench.rs` checks that the
three share no path, run seed or trace second.

Standard library only: it runs with any Python 3.11 and needs nothing installed.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import sys

# Recorded downlinks and uplinks (eval/traces/README.md): file, length in seconds.
DOWNLINKS = [
    ("TMobile-LTE-short.down", 140),
    ("ATT-LTE-driving-2016.down", 120),
    ("TMobile-UMTS-driving.down", 928),
    ("Verizon-EVDO-driving.down", 1062),
]
UPLINKS = [
    ("TMobile-LTE-short.up", 140),
    ("ATT-LTE-driving-2016.up", 120),
    ("TMobile-UMTS-driving.up", 928),
    ("Verizon-EVDO-driving.up", 1062),
]
TRACES = DOWNLINKS + UPLINKS
CLASSES = ["cellular", "wan", "competition", "changing", "app", "web"]
DURATION_S = 30


def log_uniform(rng: random.Random, lo: float, hi: float) -> float:
    return math.exp(rng.uniform(math.log(lo), math.log(hi)))


def r2(x: float) -> float:
    """Two significant digits: readable ids, and draws that are far apart stay apart."""
    if x == 0:
        return 0.0
    d = 1 - int(math.floor(math.log10(abs(x))))
    return round(x, max(d, 0))


def link(rng: random.Random, bw=(5, 150), rtt=(10, 200), buf=(0.2, 8), lossy=0.6, loss=(1e-4, 0.05)) -> dict:
    c = {
        "bw_mbps": r2(log_uniform(rng, *bw)),
        "rtt_ms": r2(log_uniform(rng, *rtt)),
        "loss": r2(log_uniform(rng, *loss)) if rng.random() < lossy else 0.0,
        "buffer_bdp": r2(log_uniform(rng, *buf)),
    }
    return c


# The share of each trace's period a set's segments come from (`--segment`): the sets use
# disjoint shares, so no second of a recording is in two of them.
SEGMENT = (0.0, 1.0)


def trace(rng: random.Random, buf=(0.2, 3), traces=TRACES) -> dict:
    name, length = rng.choice(traces)
    lo, hi = SEGMENT
    first, last = int(lo * length), int(hi * length) - DURATION_S
    return {
        "trace": f"../traces/{name}",
        "trace_offset_s": rng.randint(first, max(first, last)),
        "rtt_ms": r2(log_uniform(rng, 15, 200)),
        "buffer_bdp": r2(log_uniform(rng, *buf)),
    }


def cellular(rng):
    """The recorded uplinks (a phone sending: uploads, calls), 15-200 ms, 0.2-2 BDP of buffer.
    The downlinks were the first choice; on a draw of 40 of them and the uplinks Copa was
    within 1 % of the best single CCA on every downlink (docs/selector.md), so the class took
    the uplinks, where the best CCA differs."""
    return trace(rng, buf=(0.2, 2), traces=UPLINKS)


def wan(rng):
    """Long-haul wired paths: 5-150 Mbit/s, 90-300 ms, random loss up to 5 % on three paths
    in five, 0.2-8 BDP of buffer. Shorter RTTs were drawn first (10-200 ms): below ~90 ms Copa
    was the best CCA on every draw (docs/selector.md)."""
    return link(rng, rtt=(90, 300))


def competition(rng):
    c = link(rng, bw=(10, 120), rtt=(10, 150), buf=(0.3, 6), lossy=0.0)
    kind = rng.choice(["cubic", "cubic", "bbr", "mix"])
    if kind == "cubic":
        cross = [{"scheme": "native-cubic", "count": rng.randint(1, 4), "stagger_s": 0.5}]
    elif kind == "bbr":
        cross = [{"scheme": "bbr", "count": rng.randint(1, 2), "stagger_s": 0.5}]
    else:
        cross = [{"scheme": "native-cubic", "count": rng.randint(1, 2), "stagger_s": 0.5},
                 {"scheme": "bbr", "count": 1, "stagger_s": 0.5}]
    c["flows"] = [{"count": 1, "objective": "friendly"}]
    c["cross"] = cross
    return c


def changing(rng):
    c = link(rng, bw=(5, 100), rtt=(10, 150), buf=(0.5, 5), lossy=0.3, loss=(1e-4, 0.03))
    n = rng.randint(1, 3)
    times = sorted(rng.sample(range(6, DURATION_S - 3), n))
    phases = []
    for t in times:
        p = {"at_s": float(t)}
        what = rng.choice(["bw", "rtt", "loss", "bw+rtt"])
        if "bw" in what:
            p["bw_mbps"] = r2(min(200.0, max(1.0, c["bw_mbps"] * log_uniform(rng, 0.15, 6))))
        if "rtt" in what:
            p["rtt_ms"] = r2(min(250.0, max(5.0, c["rtt_ms"] * log_uniform(rng, 0.25, 5))))
        if what == "loss":
            p["loss"] = 0.0 if rng.random() < 0.3 else r2(log_uniform(rng, 1e-3, 0.05))
        phases.append(p)
    c["phases"] = phases
    return c


def app(rng):
    mode = rng.choice(["delay", "throughput"])
    port = 5001 if mode == "delay" else 5002
    c = trace(rng, buf=(0.3, 6)) if rng.random() < 0.3 else link(rng)
    c["flows"] = [{"count": 1, "objective": mode, "port": port}]
    return c


def web(rng):
    """Web-like flows beside long ones on wired links (`--web-class mixed`, every built-in set
    through `selection-bench-test9`): twenty web-like flows against one or two long native
    Cubic flows, or one long flow among forty web-like native Cubic flows. Held out it showed
    no headroom (docs/selector/web-class.md); kept so those sets stay the generator's draws."""
    c = link(rng, bw=(5, 100), rtt=(10, 150), buf=(0.3, 5), lossy=0.2, loss=(1e-4, 0.01))
    if rng.random() < 0.5:
        c["flows"] = [{"count": 20, "start_s": 1.0, "stagger_s": 1.4, "sizes": "web", "objective": "fct"}]
        c["cross"] = [{"scheme": "native-cubic", "count": rng.randint(1, 2)}]
    else:
        c["flows"] = [{"count": 1}]
        c["cross"] = [{"scheme": "native-cubic", "count": 40, "start_s": 0.5, "stagger_s": 0.7, "sizes": "web"}]
    return c


def web_recorded(rng):
    """Twenty finite flows of web-search sizes over a recorded link (uplink or downlink), one
    every 1.4 s from 1 s, 0.2-3 BDP of buffer, scored by completion time. The replacement of
    `web` (`--web-class recorded`): on the drawn sets `web` showed no headroom over its best
    single CCA against the seed-held-out oracle (docs/selector/web-class.md), while these flows
    finish soonest under different CCAs on different recordings."""
    c = trace(rng, buf=(0.2, 3))
    c["flows"] = [{"count": 20, "start_s": 1.0, "stagger_s": 1.4, "sizes": "web", "objective": "fct"}]
    return c


def trace_mbps(c: dict) -> float:
    """The mean rate of a condition's trace over the run (a mahimahi line is one 1,500-byte
    delivery opportunity at that millisecond)."""
    path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "scenarios", c["trace"])
    with open(path) as f:
        ms = [int(line) for line in f if line.strip()]
    period = max(ms[-1], 1)
    lo = c["trace_offset_s"] * 1000
    hi = lo + DURATION_S * 1000
    # The trace repeats: count each millisecond's opportunities modulo the period.
    n = sum(1 for t in ms for k in range(lo // period, hi // period + 1) if lo <= t + k * period < hi)
    return n * 1500 * 8 / (DURATION_S * 1e6)


def recurring(env: str, c: dict, k: int) -> dict:
    """The condition with its flow under test replaced by `k` finite flows to one destination,
    one every DURATION_S / k seconds, each of the bytes the flow's fair share of the path carries
    in 80 % of that gap (at least 200 kB), scored as the class scores its flow (`friendly`
    against competing flows, else `reward`). A flow slower than its share overlaps the next."""
    gap = DURATION_S / k
    mbps = trace_mbps(c) if "trace" in c else c["bw_mbps"]
    share = 1 + sum(x["count"] for x in c.get("cross", []))
    size = max(200_000, int(mbps * 1e6 / 8 / share * gap * 0.8))
    objective = "friendly" if env == "competition" else "reward"
    out = dict(c)
    out["id"] = f"{c['id']}-x{k}"
    out["flows"] = [{"count": k, "start_s": 0.0, "stagger_s": r2(gap), "size_bytes": size, "objective": objective}]
    return out


DRAW = {"cellular": cellular, "wan": wan, "competition": competition, "changing": changing, "app": app, "web": web}

# What `--web-class` draws for the class `web`: `mixed` (every built-in set) or `recorded`.
WEB_CLASSES = {"mixed": web, "recorded": web_recorded}


def condition_id(env: str, c: dict) -> str:
    if "trace" in c:
        name = c["trace"].rsplit("/", 1)[-1].replace("-driving", "").replace("-2016", "").replace("-short", "")
        base = f"{name.lower()}-at{c['trace_offset_s']}-rtt{c['rtt_ms']:g}-buf{c['buffer_bdp']:g}"
    else:
        base = f"bw{c['bw_mbps']:g}-rtt{c['rtt_ms']:g}-loss{c['loss']:g}-buf{c['buffer_bdp']:g}"
    if env == "competition":
        base = "vs-" + "-".join(f"{x['count']}{x['scheme'].replace('native-', '')}" for x in c["cross"]) + "-" + base
    if env == "changing":
        base += "-" + "-".join(
            f"{int(p['at_s'])}s" + "".join(f"{k.split('_')[0]}{v:g}" for k, v in p.items() if k != "at_s") for p in c["phases"])
    if env == "app":
        base = c["flows"][0]["objective"] + "-" + base
    if env == "web" and not c.get("cross"):
        base = "web-flows-" + base
    elif env == "web":
        base = ("web-flows-vs" + str(c["cross"][0]["count"]) + "cubic-" if c["flows"][0]["count"] > 1 else "long-among-web-") + base
    return base


def fmt(v) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return '"' + v + '"'
    if isinstance(v, float):
        return repr(v)
    if isinstance(v, int):
        return str(v)
    if isinstance(v, dict):
        return "{ " + ", ".join(f"{k} = {fmt(x)}" for k, x in v.items()) + " }"
    if isinstance(v, list):
        return "[" + ", ".join(fmt(x) for x in v) + "]"
    raise TypeError(type(v))


def draw(seed: int, per_class: int, classes=CLASSES, web_class="mixed") -> list[tuple[str, dict]]:
    rng = random.Random(seed)
    out, seen = [], set()
    drawers = {**DRAW, "web": WEB_CLASSES[web_class]}
    for env in classes:
        k = 0
        while k < per_class:
            c = drawers[env](rng)
            cid = condition_id(env, c)
            if cid in seen:
                continue
            seen.add(cid)
            out.append((env, {"id": cid, **c}))
            k += 1
    return out


def scenario(name: str, description: str, conditions, seeds, schemes) -> str:
    lines = [f"name = {fmt(name)}", f"description = {fmt(description)}", f"duration_s = {DURATION_S}",
             f"seeds = {fmt(seeds)}"]
    if schemes:
        lines.append(f"schemes = {fmt(schemes)}")
    for env, c in conditions:
        lines += ["", "[[conditions]]", f"env = {fmt(env)}"]
        lines += [f"{k} = {fmt(v)}" for k, v in c.items()]
    return "\n".join(lines) + "\n"


def segment(text: str) -> tuple[float, float]:
    """`lo,hi` with 0 <= lo < hi <= 1 (argparse reports anything else as a usage error)."""
    try:
        lo, hi = (float(x) for x in text.split(","))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not lo,hi") from None
    if not 0.0 <= lo < hi <= 1.0:
        raise argparse.ArgumentTypeError(f"{text!r}: need 0 <= lo < hi <= 1")
    return lo, hi


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("name")
    ap.add_argument("--seed", type=int, required=True, help="the generator's seed")
    ap.add_argument("--per-class", type=int, required=True)
    ap.add_argument("--seeds", default="1", help="the runs' seeds, comma-separated")
    ap.add_argument("--schemes", default="", help="comma-separated schemes (default: none listed)")
    ap.add_argument("--description", default="")
    ap.add_argument("--classes", default=",".join(CLASSES))
    ap.add_argument("--segment", type=segment, default=(0.0, 1.0), help="lo,hi: the share of each trace's period to take segments from")
    ap.add_argument("--web-class", choices=sorted(WEB_CLASSES), default="mixed",
                    help="what the class `web` draws: `mixed` (web-like flows against Cubic, or a long flow among web-like Cubic flows) or `recorded` (web-like flows over a recorded link)")
    ap.add_argument("--recurring", type=int, default=0, help="K: the flow under test becomes K finite flows to one destination")
    a = ap.parse_args(argv)
    global SEGMENT
    SEGMENT = a.segment
    conds = draw(a.seed, a.per_class, a.classes.split(","), a.web_class)
    if a.recurring > 0:
        conds = [(env, recurring(env, c, a.recurring)) for env, c in conds]
    seeds = [int(s) for s in a.seeds.split(",")]
    schemes = [s for s in a.schemes.split(",") if s]
    desc = a.description or f"{a.per_class} conditions per class drawn with seed {a.seed} (eval/selection/generate.py)."
    sys.stdout.write(scenario(a.name, desc, conds, seeds, schemes))
    return 0


if __name__ == "__main__":
    sys.exit(main())
