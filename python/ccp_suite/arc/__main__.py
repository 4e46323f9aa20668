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
                 "reward_scale", "reward_floor", "n_step", "batch_trajectories", "updates_per_trajectory", "seed", "history", "warm_episodes", "clone_updates", "critic_warmup_updates", "bc_alpha"):
        v = getattr(defaults, name)
        t.add_argument("--" + name.replace("_", "-"), type=type(v) if v is not None else float, default=v)
    t.add_argument("--conditions", default=None, help="comma-separated condition ids or indices")
    ln = sub.add_parser("learn", help="learn online from ccp-agent's trajectory store")
    ln.add_argument("--db", required=True, help="the agent's --arc-trajectories database")
    ln.add_argument("--model", required=True, help="actor.onnx to start from and to overwrite")
    ln.add_argument("--rounds", type=int, default=0, help="model versions to write (0: until stopped)")
    ln.add_argument("--per-round", type=int, default=1, help="new trajectories per model version")
    ln.add_argument("--seconds", type=float, default=None, help="stop after this long")
    on = sub.add_parser("online", help="train online: episodes of real flows with the learner beside them")
    on.add_argument("--scenario", required=True, help="the episodes' scenario (built-in name or TOML file)")
    on.add_argument("--out", required=True, help="folder for the model copy, the store and curve.json")
    on.add_argument("--episodes", type=int, default=200)
    on.add_argument("--datapath", choices=["kernel", "sim"], default="kernel")
    on.add_argument("--start", default=None, help="the model to start from (default: the shipped actor)")
    on.add_argument("--explore", type=float, default=0.1, help="exploration noise added by the flows")
    on.add_argument("--per-round", type=int, default=3, help="new trajectories per model version")
    on.add_argument("--updates-per-trajectory", type=int, default=16)
    on.add_argument("--critic-warmup-updates", type=int, default=1500)
    on.add_argument("--bc-alpha", type=float, default=2.5,
                    help="TD3+BC's behaviour term (0: plain DPG); keeps the actor near the actions it was trained on")
    on.add_argument("--ccp-eval", default=None, help="the ccp-eval binary (default target/release/ccp-eval)")
    on.add_argument("--seed", type=int, default=1, help="the first episode's seed (then +1 per episode)")
    on.add_argument("--keep-runs", action="store_true", help="keep every episode's run folder")
    args = ap.parse_args(argv)
    if args.cmd == "online":
        from . import online

        cfg = tr.Config(lr_actor=1e-5, lr_critic=1e-3, n_step=4, updates_per_trajectory=args.updates_per_trajectory,
                        critic_warmup_updates=args.critic_warmup_updates, bc_alpha=args.bc_alpha, seed=args.seed)
        s = online.online(args.scenario, args.out, episodes=args.episodes, datapath=args.datapath, start=args.start,
                          explore=args.explore, per_round=args.per_round, cfg=cfg, ccp_eval=args.ccp_eval,
                          seed0=args.seed, keep_runs=args.keep_runs)
        print(f"{s['episodes']} episodes ({s['failed']} failed) in {s['seconds']:.0f} s; reward first 20 "
              f"{s['first_20_reward']}, last 20 {s['last_20_reward']}; settled after {s['episodes_to_convergence']}")
        return 0 if s["failed"] < s["episodes"] else 1
    if args.cmd == "learn":
        from . import learner

        s = learner.learn(args.db, args.model, rounds=args.rounds, per_round=args.per_round, deadline_s=args.seconds)
        print(f"{s['rounds']} rounds, {s['trajectories']} trajectories, model version {s['version']}")
        return 0
    if args.cmd == "train":
        kw = {k: getattr(args, k) for k in ("scenario", "episodes", "duration_s", "exploration_std", "gamma", "lr_actor",
                                            "lr_critic", "reward_scale", "reward_floor", "n_step", "batch_trajectories", "updates_per_trajectory",
                                            "seed", "history", "warm_episodes", "clone_updates", "critic_warmup_updates", "bc_alpha")}
        if args.conditions:
            kw["conditions"] = [int(c) if c.isdigit() else c for c in args.conditions.split(",")]
        s = tr.train(tr.Config(**kw), out_dir=args.out)
        print(f"{s['episodes']} episodes, {s['updates']} updates, {s['seconds']:.0f} s; "
              f"reward first 10 {s['first_10_reward']:.3f} last 10 {s['last_10_reward']:.3f}; "
              f"converged at episode {s['episodes_to_convergence']}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
