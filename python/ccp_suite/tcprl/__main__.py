"""`python -m ccp_suite.tcprl train --out DIR [options]`: trains TCP-RL's policy (A2C) and its
change detector on `ccp/Select-v0`, exports both to ONNX with the sidecar the selector's
`tcprl` policy reads, and writes `training.json` (config, seed, curve, wall time, the DNC's
held-out scores) beside them. `python -m ccp_suite.tcprl pick --out DIR MODEL:RESULTS ...` keeps
the model with the best validation score (`pick.py`). `make tcprl-model` trains several seeds
with the shipped model's settings and picks one.
"""

from __future__ import annotations

import argparse
import json
import pathlib
import sys
import tempfile
import time
from dataclasses import asdict

import numpy as np

from . import a2c, dnc, export, pick


def train_dnc(cfg: a2c.Config, conditions: int, episodes: int):
    """The DNC on paths that change on purpose: (parameters, threshold, summary). 80 % of the
    steps train it; its threshold is chosen on them for at most 2 % false alarms; the other
    20 % are held out."""
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        duration = cfg.duration_s or 20.0
        path = pathlib.Path(tmp) / "dnc-train.toml"
        times = dnc.changing_scenario(path, conditions, duration, cfg.seed)

        def env():
            return a2c.make_env(cfg, scenario=str(path), conditions=None)

        x, y = dnc.collect(env, times, episodes, cfg.seed)
    rng = np.random.default_rng(cfg.seed)
    order = rng.permutation(len(y))
    cut = int(0.8 * len(y))
    tr, te = order[:cut], order[cut:]
    d = dnc.fit(x[tr], y[tr], cfg.seed)
    threshold = dnc.choose_threshold(d, x[tr], y[tr])
    summary = {
        "conditions": conditions,
        "episodes_per_condition": episodes,
        "wall_s": round(time.perf_counter() - t0, 1),
        "threshold": threshold,
        "train": dnc.scores(d, x[tr], y[tr], threshold),
        "held_out": dnc.scores(d, x[te], y[te], threshold),
        "held_out_at_0.5": dnc.scores(d, x[te], y[te], 0.5),
    }
    return d, threshold, summary


def train_all(
    cfg: a2c.Config, out: pathlib.Path, dnc_conditions: int, dnc_episodes: int, log=print, start: str = "random"
) -> dict:
    started = time.perf_counter()
    res = a2c.train(cfg, log=log)
    summary: dict = {
        "config": asdict(cfg),
        "candidates": res.candidates,
        "policy_wall_s": round(res.wall_s, 1),
        "policy_env_steps": res.env_steps,
        "worker_restarts": res.worker_restarts,
        "curve": res.curve,
    }
    dnc_params, threshold = None, 0.5
    if dnc_conditions > 0:
        dnc_params, threshold, summary["dnc"] = train_dnc(cfg, dnc_conditions, dnc_episodes)
        log({"dnc": summary["dnc"]})
    export.write(
        out, res.params, res.candidates, cfg.window, cfg.step_rtts, cfg.step_s, dnc_params, threshold, start
    )
    summary["start"] = start
    summary["total_wall_s"] = round(time.perf_counter() - started, 1)
    (out / "training.json").write_text(json.dumps(summary, indent=1) + "\n")
    return summary


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m ccp_suite.tcprl", description=__doc__)
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train, export, write training.json")
    d = a2c.Config()
    t.add_argument("--out", required=True, type=pathlib.Path)
    t.add_argument("--scenario", default=d.scenario)
    t.add_argument("--candidates", default=None, help="comma-separated (default: the selectors' nine)")
    t.add_argument("--iterations", type=int, default=d.iterations)
    t.add_argument("--envs", type=int, default=d.envs)
    t.add_argument("--rollout", type=int, default=d.rollout)
    t.add_argument("--step-s", type=float, default=d.step_s, help="step length, s (0: use --step-rtts)")
    t.add_argument("--step-rtts", type=float, default=d.step_rtts)
    t.add_argument("--window", type=int, default=d.window)
    t.add_argument("--duration-s", type=float, default=d.duration_s)
    t.add_argument("--lr", type=float, default=d.lr)
    t.add_argument("--reward-scale", type=float, default=d.reward_scale)
    t.add_argument("--beta-start", type=float, default=d.beta_start, help="entropy weight at the start (TCP-RL: 0.5)")
    t.add_argument("--init", default=None, help="a tcprl.json whose policy is the starting point (same candidates)")
    t.add_argument("--beta-decay-iterations", type=int, default=None, help="default: --iterations")
    t.add_argument("--seed", type=int, default=d.seed)
    t.add_argument("--ray-workers", type=int, default=0, help="step the environments in N Ray actors (0: in process)")
    t.add_argument("--ray-address", default=None, help="Ray cluster address (default: a local cluster of N CPUs)")
    t.add_argument("--oracle", default=None, help="results.csv of the candidates alone on --scenario: adds the imitation term")
    t.add_argument("--imitation", type=float, default=d.imitation, help="imitation weight at the start")
    t.add_argument("--imitation-end", type=float, default=d.imitation_end)
    t.add_argument("--imitation-decay-iterations", type=int, default=None, help="default: --iterations")
    t.add_argument("--oracle-temperature", type=float, default=None, help="soft labels: softmax((R - R_best) / T)")
    t.add_argument(
        "--start",
        default="random",
        help="the candidate every flow starts on in the selector, or 'random' (TCP-RL's random initial scheme per flow)",
    )
    t.add_argument("--swap-cost", type=float, default=d.swap_cost, help="subtracted from a step's reward when it swaps (ln units)")
    t.add_argument(
        "--oversample",
        default=None,
        help="results.csv of the candidates alone on --scenario: draw conditions by headroom over the best single (a2c.headroom_pool)",
    )
    t.add_argument("--oversample-unit", type=float, default=0.1, help="headroom (ln units) worth one more draw")
    t.add_argument("--oversample-cap", type=int, default=4, help="at most this many more draws per condition")
    t.add_argument(
        "--path-change",
        choices=["on", "off"],
        default="on" if d.path_change else "off",
        help="the environments' path-change detection (the selector re-seats on a longer path)",
    )
    t.add_argument("--dnc-conditions", type=int, default=40, help="0: no DNC")
    t.add_argument("--dnc-episodes", type=int, default=2)
    r = sub.add_parser("dnc", help="retrain only the DNC of a trained model in --out (same seed, same data)")
    r.add_argument("--out", required=True, type=pathlib.Path)
    p = sub.add_parser("pick", help="copy the model with the best validation score into --out (pick.py)")
    p.add_argument("--out", required=True, type=pathlib.Path)
    p.add_argument("runs", nargs="+", help="MODEL_DIR:VALIDATION_RESULTS_CSV, one per trained model")
    a = ap.parse_args(argv)
    if a.cmd == "pick":
        try:
            runs = [tuple(pathlib.Path(x) for x in r.rsplit(":", 1)) for r in a.runs]
            if any(len(r) != 2 for r in runs):
                raise ValueError("each run is MODEL_DIR:VALIDATION_RESULTS_CSV")
            sel = pick.pick(runs, a.out)
        except (OSError, ValueError) as e:
            sys.exit(f"pick: {e}")
        for r in sel["runs"]:
            print(f"{r['mean_score']:+.4f} over {r['flows']} flows: {r['model']}")
        print(f"kept {sel['chosen']} in {a.out}", file=sys.stderr)
        return
    if a.cmd == "dnc":
        summary = json.loads((a.out / "training.json").read_text())
        cfg = a2c.Config(**summary["config"])
        d_, threshold, summary["dnc"] = train_dnc(
            cfg, summary["dnc"]["conditions"], summary["dnc"]["episodes_per_condition"]
        )
        side = json.loads((a.out / "tcprl.json").read_text())
        import onnx

        onnx.save(export.dnc_graph(d_), str(a.out / "dnc.onnx"))
        side["dnc"], side["dnc_threshold"] = "dnc.onnx", threshold
        (a.out / "tcprl.json").write_text(json.dumps(side, indent=1) + "\n")
        ref = json.loads((a.out / "reference.json").read_text())
        d32 = {k: np.asarray(v, dtype=np.float32).astype(np.float64) for k, v in d_.items()}
        ref["dnc_p"] = float(dnc.predict(d32, np.asarray([ref["dnc_x"]]))[0])
        (a.out / "reference.json").write_text(json.dumps(ref) + "\n")
        (a.out / "training.json").write_text(json.dumps(summary, indent=1) + "\n")
        print(json.dumps(summary["dnc"]))
        return
    candidates = a.candidates.split(",") if a.candidates else None
    from .. import candidates as suite_candidates

    names = candidates or list(suite_candidates())
    # Checked before training, which export.write would only refuse after it.
    if a.start != "random" and a.start not in names:
        sys.exit(f"--start {a.start!r}: not 'random' nor one of {names}")
    if a.init is not None:
        try:
            _, init_candidates = export.read_policy(a.init)
        except ValueError as e:
            sys.exit(f"--init: {e}")
        if init_candidates != names:
            sys.exit(f"--init {a.init}: trained over {init_candidates}, not this run's {names}")
    conditions, extra = None, {}
    if a.oversample:
        from ..gym import SelectEnv

        try:
            conditions, best = a2c.headroom_pool(a.oversample, names, a.oversample_unit, a.oversample_cap)
        except (OSError, ValueError) as e:
            sys.exit(f"--oversample {a.oversample}: {e}")
        ids = SelectEnv(scenario=a.scenario, candidates=candidates).condition_ids
        missing = sorted(set(ids) - set(conditions))
        if missing:
            sys.exit(f"--oversample {a.oversample}: no result of every candidate for {len(missing)} of the scenario's conditions, e.g. {missing[:3]}")
        foreign = sorted(set(conditions) - set(ids))
        if foreign:
            sys.exit(f"--oversample {a.oversample}: {len(foreign)} conditions are not {a.scenario}'s, e.g. {foreign[:3]}")
        extra = {
            "oversample": {"results": a.oversample, "unit": a.oversample_unit, "cap": a.oversample_cap, "best_single": best}
        }
    cfg = a2c.Config(
        scenario=a.scenario,
        conditions=conditions,
        extra=extra,
        candidates=candidates,
        iterations=a.iterations,
        envs=a.envs,
        rollout=a.rollout,
        step_s=a.step_s or None,
        step_rtts=a.step_rtts,
        window=a.window,
        duration_s=a.duration_s,
        lr=a.lr,
        reward_scale=a.reward_scale,
        beta_decay_iterations=a.beta_decay_iterations,
        seed=a.seed,
        ray_workers=a.ray_workers,
        ray_address=a.ray_address,
        oracle=a.oracle,
        imitation=a.imitation,
        imitation_end=a.imitation_end,
        imitation_decay_iterations=a.imitation_decay_iterations,
        oracle_temperature=a.oracle_temperature,
        swap_cost=a.swap_cost,
        beta_start=a.beta_start,
        init=a.init,
        path_change=a.path_change == "on",
    )

    def log(point):
        print(json.dumps(point), flush=True)

    s = train_all(cfg, a.out, a.dnc_conditions, a.dnc_episodes, log, a.start)
    print(f"wrote {a.out} in {s['total_wall_s']} s", file=sys.stderr)


if __name__ == "__main__":
    main()
