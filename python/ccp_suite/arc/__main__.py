"""`python -m ccp_suite.arc train --out DIR [...]`: trains ARC's actor on `ccp/Rate-v0` and
writes `actor.onnx`, `actor.json` and `curve.json`. `python -m ccp_suite.arc learn ...`: the
online learner over the agent's trajectory store (`learner.py`)."""

from __future__ import annotations

import argparse
import sys

from . import train as tr


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(prog="python -m ccp_suite.arc")
    sub = ap.add_subparsers(dest="cmd", required=True)
    t = sub.add_parser("train", help="train the actor in the simulator")
    t.add_argument("--out", required=True)
    defaults = tr.Config()
    for name in ("scenario", "episodes", "duration_s", "exploration_std", "gamma", "lr_actor", "lr_critic",
                 "reward_scale", "reward_floor", "n_step", "batch_trajectories", "updates_per_trajectory", "seed", "history", "warm_episodes", "clone_updates", "critic_warmup_updates"):
        v = getattr(defaults, name)
        t.add_argument("--" + name.replace("_", "-"), type=type(v) if v is not None else float, default=v)
    t.add_argument("--conditions", default=None, help="comma-separated condition ids or indices")
    ln = sub.add_parser("learn", help="learn online from ccp-agent's trajectory store")
    ln.add_argument("--db", required=True, help="the agent's --arc-trajectories database")
    ln.add_argument("--model", required=True, help="actor.onnx to start from and to overwrite")
    ln.add_argument("--rounds", type=int, default=0, help="model versions to write (0: until stopped)")
    ln.add_argument("--per-round", type=int, default=1, help="new trajectories per model version")
    ln.add_argument("--seconds", type=float, default=None, help="stop after this long")
    args = ap.parse_args(argv)
    if args.cmd == "learn":
        from . import learner

        s = learner.learn(args.db, args.model, rounds=args.rounds, per_round=args.per_round, deadline_s=args.seconds)
        print(f"{s['rounds']} rounds, {s['trajectories']} trajectories, model version {s['version']}")
        return 0
    if args.cmd == "train":
        kw = {k: getattr(args, k) for k in ("scenario", "episodes", "duration_s", "exploration_std", "gamma", "lr_actor",
                                            "lr_critic", "reward_scale", "reward_floor", "n_step", "batch_trajectories", "updates_per_trajectory",
                                            "seed", "history", "warm_episodes", "clone_updates", "critic_warmup_updates")}
        if args.conditions:
            kw["conditions"] = [int(c) if c.isdigit() else c for c in args.conditions.split(",")]
        s = tr.train(tr.Config(**kw), out_dir=args.out)
        print(f"{s['episodes']} episodes, {s['updates']} updates, {s['seconds']:.0f} s; "
              f"reward first 10 {s['first_10_reward']:.3f} last 10 {s['last_10_reward']:.3f}; "
              f"converged at episode {s['episodes_to_convergence']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
