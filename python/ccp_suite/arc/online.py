"""ARC trained online, as the paper trains it: episode after episode of a real flow whose
decisions go to the trajectory store, while the learner updates the actor from the store and
writes new versions that the next episodes use.

`python -m ccp_suite.arc online --scenario S --episodes N --out DIR [--datapath kernel]`:

- `DIR/model/actor.onnx` (with `actor.json`, and `critic.npz` when the start model has one) is
  a copy of the start model (`--start`, default the shipped actor) that the learner rewrites;
- every episode is one `ccp-eval run S --schemes arc --seed K --datapath D
  --arc-trajectories DIR/trajectories.sqlite --arc-explore SIGMA` with `CCP_ARC_MODEL` naming
  that copy: on `--datapath kernel` a real kernel TCP flow through the BPF datapath and the
  testbed (root, a `ccp-eval` built with `--features kernel`), on `sim` the simulator. A flow
  loads the newest model when it starts;
- the learner (`learner.learn`) runs in a thread of this process beside the episodes;
- `DIR/curve.json` gets one entry per episode: the model version the flow ran, its mean
  interval reward from the store (the learner's reward), and the run's throughput, RTT and loss
  from `results.csv`; `summary` says after how many episodes the curve settled
  (`train.episodes_to_convergence`).

A failed episode (the run's status or exit code) is recorded and counted, and the loop goes on;
three in a row stop it.
"""

from __future__ import annotations

import csv
import json
import math
import os
import pathlib
import shutil
import sqlite3
import subprocess
import threading
import time

import numpy as np

from . import learner as online_learner
from .train import Config, episodes_to_convergence

MODEL_FILES = ("actor.onnx", "actor.json", "critic.npz")


def checkout() -> pathlib.Path:
    """The checkout this runs in: the working directory or the nearest folder above it with
    `algorithms/models/arc` (the package is installed into `.venv`, away from the sources)."""
    here = pathlib.Path.cwd().resolve()
    for d in (here, *here.parents):
        if (d / "algorithms" / "models" / "arc").is_dir():
            return d
    raise FileNotFoundError(f"{here}: not inside the suite's checkout (no algorithms/models/arc above it); "
                            "name the model with --start and the binary with --ccp-eval")


def default_ccp_eval() -> pathlib.Path:
    return checkout() / "target" / "release" / "ccp-eval"


def copy_model(start: pathlib.Path, dest: pathlib.Path) -> pathlib.Path:
    """Copies `actor.onnx` (and its sidecar and critic, when there) from `start` (a folder or
    an `actor.onnx`) into `dest`; returns the copy's `actor.onnx`."""
    src = start if start.is_dir() else start.parent
    dest.mkdir(parents=True, exist_ok=True)
    for name in MODEL_FILES:
        if (src / name).exists():
            shutil.copyfile(src / name, dest / name)
    if not (dest / "actor.onnx").exists() or not (dest / "actor.json").exists():
        raise FileNotFoundError(f"{src}: no actor.onnx with its actor.json")
    return dest / "actor.onnx"


def read_rows(results: pathlib.Path) -> list[dict]:
    with open(results, newline="") as f:
        return list(csv.DictReader(f))


def episode_reward(db: pathlib.Path, after_id: int, floor: float) -> tuple[float | None, int, int]:
    """The mean interval reward of the decisions stored after row `after_id` (one episode's),
    the number of them, and the last row id."""
    if not db.exists():
        return None, 0, after_id
    con = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=5.0)
    try:
        rows = con.execute("SELECT id, throughput_mbps, rtt_ms FROM decisions WHERE id > ?", (after_id,)).fetchall()
    finally:
        con.close()
    if not rows:
        return None, 0, after_id
    r = [online_learner.reward(t, rtt, floor) for _, t, rtt in rows]
    return float(np.mean(r)), len(rows), max(i for i, _, _ in rows)


def model_version(model: pathlib.Path) -> int:
    try:
        return int(json.loads(model.with_suffix(".json").read_text()).get("version", 0))
    except (OSError, ValueError):
        return -1


def run_episode(ccp_eval, scenario: str, seed: int, out: pathlib.Path, model: pathlib.Path, db: pathlib.Path | None,
                explore: float, datapath: str, timeout_s: float) -> tuple[list[dict], str]:
    """One `ccp-eval run` of `scenario` with ARC alone; returns its rows and its stderr."""
    cmd = [str(ccp_eval), "run", scenario, "--schemes", "arc", "--seed", str(seed), "--out", str(out),
           "--datapath", datapath, "--jobs", "1"]
    if db is not None:
        cmd += ["--arc-trajectories", str(db), "--arc-explore", str(explore)]
    env = {**os.environ, "CCP_ARC_MODEL": str(model)}
    p = subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=timeout_s)
    if p.returncode != 0:
        raise RuntimeError(f"ccp-eval exited with {p.returncode}: {p.stderr.strip()[-2000:]}")
    return read_rows(out / "results.csv"), p.stderr


def online(scenario: str, out, episodes: int = 200, datapath: str = "kernel", start=None, explore: float = 0.1,
           per_round: int = 3, cfg: Config | None = None, ccp_eval=None, seed0: int = 1, keep_runs: bool = False,
           episode_timeout_s: float = 600.0, log=print) -> dict:
    """Runs `episodes` episodes with the learner beside them; returns the summary (also in
    `out/curve.json`)."""
    out = pathlib.Path(out)
    out.mkdir(parents=True, exist_ok=True)
    cfg = cfg or Config(lr_actor=1e-5, lr_critic=1e-3, n_step=4, updates_per_trajectory=16, critic_warmup_updates=1500)
    model = copy_model(pathlib.Path(start) if start else checkout() / "algorithms" / "models" / "arc", out / "model")
    db = out / "trajectories.sqlite"
    ccp_eval = pathlib.Path(ccp_eval) if ccp_eval else default_ccp_eval()
    if not ccp_eval.exists():
        raise FileNotFoundError(f"{ccp_eval}: no ccp-eval binary (make build)")
    stop = threading.Event()
    learned: dict = {}

    def learn():
        learned.update(online_learner.learn(db, model, per_round=per_round, cfg=cfg, log=None, stop=stop, seed=seed0))

    # The learner polls a database that exists: the first episode creates it, so start after.
    thread = None
    curve: list[dict] = []
    last_id, failures, started = 0, 0, time.monotonic()
    for ep in range(episodes):
        version = model_version(model)
        run_dir = out / "runs" / f"ep{ep:04d}"
        t0 = time.monotonic()
        entry = {"episode": ep, "seed": seed0 + ep, "model_version": version}
        try:
            rows, _ = run_episode(ccp_eval, scenario, seed0 + ep, run_dir, model, db, explore, datapath, episode_timeout_s)
            arc = [r for r in rows if r["scheme"] == "arc" and r["role"] != "cross"]
            bad = [r["status"] for r in arc if r["status"] != "ok"]
            if bad or not arc:
                raise RuntimeError(f"run status {bad or 'no arc rows'}")
            entry.update(
                throughput_mbps=float(np.mean([float(r["throughput_mbps"]) for r in arc])),
                mean_rtt_ms=float(np.mean([float(r["mean_rtt_ms"]) for r in arc])),
                p95_rtt_ms=float(np.mean([float(r["p95_rtt_ms"]) for r in arc])),
                loss_rate=float(np.mean([float(r["loss_rate"]) for r in arc])),
                flow_reward=float(np.mean([float(r["reward"]) for r in arc])),
                status="ok",
            )
            failures = 0
        except (RuntimeError, OSError, subprocess.TimeoutExpired, KeyError, ValueError) as e:
            failures += 1
            entry.update(status="failed", error=str(e)[-500:])
        reward, n, last_id = episode_reward(db, last_id, cfg.reward_floor)
        entry.update(interval_reward=reward, decisions=n, seconds=time.monotonic() - t0)
        curve.append(entry)
        if not keep_runs:
            shutil.rmtree(run_dir, ignore_errors=True)
        if thread is None and db.exists():
            thread = threading.Thread(target=learn, name="arc-learner", daemon=True)
            thread.start()
        if log:
            if entry["status"] == "ok":
                log(f"episode {ep}: version {version}, reward {reward if reward is None else round(reward, 3)}, "
                    f"{entry['throughput_mbps']:.2f} Mbit/s, mean RTT {entry['mean_rtt_ms']:.1f} ms, loss {entry['loss_rate']:.4f}")
            else:
                log(f"episode {ep}: failed: {entry['error']}")
        write_curve(out, curve, scenario, datapath, explore, cfg, started)
        if failures >= 3:
            log and log("three failed episodes in a row: stopping")
            break
    stop.set()
    if thread is not None:
        thread.join(timeout=120)
    return write_curve(out, curve, scenario, datapath, explore, cfg, started, learned)


def write_curve(out: pathlib.Path, curve: list[dict], scenario: str, datapath: str, explore: float, cfg: Config,
                started: float, learned: dict | None = None) -> dict:
    rewards = [c["interval_reward"] for c in curve if c["status"] == "ok" and c["interval_reward"] is not None]
    summary = {
        "scenario": scenario,
        "datapath": datapath,
        "explore": explore,
        "episodes": len(curve),
        "failed": sum(1 for c in curve if c["status"] != "ok"),
        "seconds": time.monotonic() - started,
        "episodes_to_convergence": episodes_to_convergence(rewards),
        "first_20_reward": float(np.mean(rewards[:20])) if rewards else None,
        "last_20_reward": float(np.mean(rewards[-20:])) if rewards else None,
        "learner": {k: v for k, v in (learned or {}).items() if k != "rewards"},
        "config": {k: v for k, v in vars(cfg).items() if not isinstance(v, float) or math.isfinite(v)},
    }
    tmp = out / ".curve.json.tmp"
    tmp.write_text(json.dumps({"summary": summary, "curve": curve}, indent=1) + "\n")
    os.replace(tmp, out / "curve.json")
    return summary
