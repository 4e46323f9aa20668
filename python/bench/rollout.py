"""Training steps per second with the environments in process and in Ray actors, side by side
in one run: `python python/bench/rollout.py [--workers 2] [--address ADDR] [--repeats 2]`.

The run is TCP-RL's A2C (`ccp_suite.tcprl.a2c`) on `ccp/Select-v0` over the `antelope-train`
conditions, 8 environments, rollouts of 10 steps of 1 s; each mode runs `--iterations`
rollouts `--repeats` times, alternating, and the medians and their ratio are printed. Ray's
start (`ray.init`) is timed apart and not in the rates.
"""

from __future__ import annotations

import argparse
import statistics
import time

import ray

from ccp_suite.tcprl import a2c


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--address", default=None)
    ap.add_argument("--iterations", type=int, default=10)
    ap.add_argument("--repeats", type=int, default=2)
    a = ap.parse_args()
    t0 = time.perf_counter()
    if a.address:
        ray.init(address=a.address, log_to_driver=False)
    else:
        ray.init(num_cpus=a.workers, include_dashboard=False, log_to_driver=False)
    print(f"ray.init: {time.perf_counter() - t0:.1f} s")
    rates: dict[str, list[float]] = {"in process": [], f"ray, {a.workers} actors": []}
    for r in range(a.repeats):
        for mode, workers in (("in process", 0), (f"ray, {a.workers} actors", a.workers)):
            cfg = a2c.Config(scenario="antelope-train", envs=8, rollout=10, iterations=a.iterations, seed=r, ray_workers=workers, ray_address=a.address)
            t = time.perf_counter()
            res = a2c.train(cfg)
            rate = res.env_steps / (time.perf_counter() - t)
            rates[mode].append(rate)
            print(f"repeat {r + 1}, {mode}: {res.env_steps} steps at {rate:.1f} steps/s")
    med = {m: statistics.median(v) for m, v in rates.items()}
    for m, v in med.items():
        print(f"median, {m}: {v:.1f} env steps/s")
    base, other = med.values()
    print(f"ratio (ray / in process): {other / base:.2f}")


if __name__ == "__main__":
    main()
