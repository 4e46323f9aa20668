"""Environment steps per second and CPU per step (docs/benchmarks.md, section 12).

`.venv/bin/python python/bench/gym_step.py [--steps N] [--threads 1,2]`: one flow on a
10 Mbit/s, 50 ms path with a one-BDP buffer (python/bench/gym_path.toml), steps of one RTT.

- `EnvCore.step` (the native environment alone) and `gym.make("ccp/Select-v0").step` (with
  Gymnasium's wrappers and numpy), staying on one candidate or switching at random every step;
  `ccp/Rate-v0` (a decision every RTT/2) and `ccp/Cwnd-v0`. CPU per step is the process's CPU
  time over the steps (`time.process_time`), so other load on the machine does not count.
- Scaling: T threads, each stepping its own environments (the GIL is released while the
  simulation runs): total steps per wall-clock second and simulated seconds per wall second.
"""

import argparse
import pathlib
import random
import threading
import time

import gymnasium as gym
import numpy as np

import ccp_suite
import ccp_suite.gym  # noqa: F401

PATH = pathlib.Path(__file__).with_name("gym_path.toml")


def run_core(kind: str, steps: int, switch: bool, seed: int = 1) -> tuple[int, float, float, float]:
    """(steps, CPU s, wall s, simulated s) of `steps` native steps."""
    core = ccp_suite.EnvCore(kind, str(PATH))
    rng = random.Random(seed)
    n_cand = len(core.candidates())
    done_steps, sim_s = 0, 0.0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    while done_steps < steps:
        raw, info = core.reset(0, seed + done_steps, 0)
        t_start = info[4]
        done = False
        while not done and done_steps < steps:
            if kind == "select":
                action = float(rng.randrange(n_cand)) if switch else 0.0
            else:
                # Keeps the link busy: up while the RTT is within 20 % of the minimum, else down.
                rtt_ratio = np.frombuffer(raw, dtype=np.float32)[-4]
                action = 0.3 if rtt_ratio < 1.2 else -0.3
            raw, info, done = core.step(action)
            done_steps += 1
        sim_s += info[4] - t_start
    return done_steps, time.process_time() - cpu0, time.perf_counter() - wall0, sim_s


def run_gym(env_id: str, steps: int, switch: bool) -> tuple[int, float, float]:
    env = gym.make(env_id, scenario=str(PATH))
    env.action_space.seed(1)
    n = 0
    cpu0, wall0 = time.process_time(), time.perf_counter()
    obs, _ = env.reset(seed=1, options={"initial": 0} if env_id == "ccp/Select-v0" else None)
    while n < steps:
        if env_id == "ccp/Select-v0":
            a = env.action_space.sample() if switch else 0
        else:
            a = np.array([0.3 if obs[-4] < 1.2 else -0.3], dtype=np.float32)
        obs, _, term, trunc, _ = env.step(a)
        n += 1
        if term or trunc:
            env.reset()
    return n, time.process_time() - cpu0, time.perf_counter() - wall0


def threads(t: int, steps_each: int) -> tuple[float, float, float]:
    """(steps per wall s, simulated s per wall s, process CPU s per wall s) of `t` threads, one
    environment each."""
    out: list[tuple[int, float, float, float]] = [None] * t  # type: ignore[list-item]

    def work(i: int) -> None:
        out[i] = run_core("select", steps_each, False, seed=100 + i)

    ts = [threading.Thread(target=work, args=(i,)) for i in range(t)]
    cpu0, wall0 = time.process_time(), time.perf_counter()
    for th in ts:
        th.start()
    for th in ts:
        th.join()
    wall = time.perf_counter() - wall0
    cpu = time.process_time() - cpu0
    return sum(o[0] for o in out) / wall, sum(o[3] for o in out) / wall, cpu / wall


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=20_000)
    ap.add_argument("--threads", default="1,2")
    args = ap.parse_args()
    run_core("select", 500, False)  # warm-up: the registry, page faults of the first stack
    print(f"path: {PATH.name}, {args.steps} steps per row")
    print("| what | steps | CPU per step (us) | steps/s (wall) | simulated s / wall s |")
    print("|---|---|---|---|---|")
    for kind, switch, label in (
        ("select", False, "EnvCore select, stay"),
        ("select", True, "EnvCore select, random switch every step"),
        ("rate", False, "EnvCore rate (RTT/2)"),
        ("cwnd", False, "EnvCore cwnd"),
    ):
        n, cpu, wall, sim = run_core(kind, args.steps, switch)
        print(f"| {label} | {n} | {cpu / n * 1e6:.1f} | {n / wall:,.0f} | {sim / wall:.0f} |")
    for env_id, switch, label in (
        ("ccp/Select-v0", False, "gym.make select, stay"),
        ("ccp/Select-v0", True, "gym.make select, random switch"),
        ("ccp/Rate-v0", False, "gym.make rate"),
    ):
        n, cpu, wall = run_gym(env_id, args.steps, switch)
        print(f"| {label} | {n} | {cpu / n * 1e6:.1f} | {n / wall:,.0f} | |")
    print()
    print("| threads | steps/s (wall, all threads) | simulated s / wall s | cores busy (CPU s / wall s) |")
    print("|---|---|---|---|")
    for t in (int(x) for x in args.threads.split(",")):
        sps, ratio, busy = threads(t, args.steps)
        print(f"| {t} | {sps:,.0f} | {ratio:.0f} | {busy:.2f} |")


if __name__ == "__main__":
    main()
