"""ARC's online learner: reads the decisions `ccp-agent --arc-trajectories` writes (SQLite,
`agent/src/arc_store.rs`), turns each flow's decisions into transitions, cuts them into
trajectories of 64 intervals, updates the actor-critic off-policy (`train.Learner`), and writes
a new `actor.onnx` (version + 1) that the agent hot-reloads.

Alignment: the agent applies at decision t the action computed from the state of decision
t - 1 (one decision late: `algorithms/src/arc/mod.rs`), so a transition is
(state_{t-1}, action applied at t, reward of the interval ending at t + 1, state_t). The reward
is the environment's, ln(throughput Mbit/s / RTT ms), from the stored interval, floored as in
training. Decisions with no applied action (a flow's first, after a timeout) break a flow's
chain.

The store is read with SQLite's own locking (WAL: reading never blocks the agent's writer);
rows are taken in `id` order from the last one seen, so a learner restarted with `--from-id`
resumes.
"""

from __future__ import annotations

import json
import math
import pathlib
import sqlite3
import time

import numpy as np

from . import export
from .train import TRAJECTORY, Config, Learner, Replay

MIN_TPUT_MBPS = 1e-3


def reward(tput_mbps: float, rtt_ms: float, floor: float) -> float:
    return max(floor, math.log(max(tput_mbps, MIN_TPUT_MBPS) / max(rtt_ms, 1e-3)))


class Store:
    """Reads new decisions from the agent's database."""

    def __init__(self, path, from_id: int = 0):
        self.path = str(path)
        self.last_id = from_id
        self.pending: dict[str, list] = {}

    def poll(self):
        """New rows since the last poll, grouped by flow: {flow: [(step, state, action, tput, rtt)]}."""
        con = sqlite3.connect(f"file:{self.path}?mode=ro", uri=True, timeout=5.0)
        try:
            rows = con.execute(
                "SELECT id, flow, step, state, action, throughput_mbps, rtt_ms FROM decisions WHERE id > ? ORDER BY id",
                (self.last_id,),
            ).fetchall()
        finally:
            con.close()
        out: dict[str, list] = {}
        for rid, flow, step, state, action, tput, rtt in rows:
            self.last_id = max(self.last_id, rid)
            s = np.frombuffer(state, dtype="<f4").astype(np.float64)
            out.setdefault(flow, []).append((step, s, action, tput, rtt))
        return out

    def trajectories(self, floor: float):
        """Complete trajectories of `TRAJECTORY` transitions from the rows seen so far (a flow's
        tail waits for more rows)."""
        for flow, rows in self.poll().items():
            self.pending.setdefault(flow, []).extend(rows)
        for flow, rows in self.pending.items():
            rows.sort(key=lambda r: r[0])
            S, A, R, S2 = [], [], [], []
            used = 0
            for i in range(1, len(rows) - 1):
                (s0, st0, _, _, _), (s1, st1, a1, _, _), (s2, _, _, tp2, rtt2) = rows[i - 1], rows[i], rows[i + 1]
                if s1 != s0 + 1 or s2 != s1 + 1 or a1 is None or len(st0) != len(st1):
                    continue
                S.append(st0)
                A.append(a1)
                R.append(reward(tp2, rtt2, floor))
                S2.append(st1)
                used = i
                if len(R) == TRAJECTORY:
                    yield np.array(S), np.array(A), np.array(R), np.array(S2)
                    S, A, R, S2 = [], [], [], []
                    self.pending[flow] = rows[used:]
            if len(rows) > 4 * TRAJECTORY:
                self.pending[flow] = rows[-2 * TRAJECTORY :]


def learn(db, model, rounds: int = 0, per_round: int = 1, interval_s: float = 1.0, cfg: Config | None = None,
          seed: int = 0, log=print, deadline_s: float | None = None, stop=None) -> dict:
    """Runs the loop: every `interval_s`, reads new trajectories; after each `per_round` new
    trajectories, `updates_per_trajectory` updates each and a new model (version + 1) at
    `model`, with the critic beside it (`critic.npz`). Stops after `rounds` rounds (0: never),
    `deadline_s` seconds, or when `stop` (a `threading.Event`) is set.

    The critic starts from `critic.npz` beside the model when there is one (`train` writes it);
    otherwise from random weights, and then the actor stays as it is until the critic has had
    `cfg.critic_warmup_updates` updates (a random critic's gradient would only damage it)."""
    cfg = cfg or Config(lr_actor=1e-5, lr_critic=1e-3)
    model = pathlib.Path(model)
    side = json.loads(model.with_suffix(".json").read_text())
    actor = export.load_params(model)
    rng = np.random.default_rng(seed)
    learner = Learner(actor["w1"].shape[0], cfg, rng, actor=actor)
    critic = export.load_critic(model.parent)
    warmup = 0 if critic is not None else cfg.critic_warmup_updates
    if critic is not None:
        learner.set_critic(critic)
    replay = Replay(cfg.buffer_trajectories, cfg.gamma, cfg.n_step)
    store = Store(db)
    version = int(side.get("version", 0))
    done, fresh, updates, started = 0, 0, 0, time.monotonic()
    history = []
    while rounds == 0 or done < rounds:
        if deadline_s is not None and time.monotonic() - started > deadline_s:
            break
        # Once stopped, one last pass: what the store holds by then is learned from.
        stopping = stop is not None and stop.is_set()
        for s, a, r, s2 in store.trajectories(cfg.reward_floor):
            replay.add(s, a, r, s2)
            fresh += 1
            history.append(float(np.mean(r)))
        if fresh >= per_round or (stopping and fresh > 0):
            for _ in range(cfg.updates_per_trajectory * fresh):
                learner.update(*replay.sample(cfg.batch_trajectories, rng), actor=updates >= warmup)
                updates += 1
            version += 1
            export.write(model.parent, learner.actor, side["history"], side["delta"], side["interval_rtts"], version=version,
                         training={**side.get("training", {}), "online_trajectories": len(history), "online_version": version})
            export.write_critic(model.parent, learner)
            done += 1
            log and log(f"round {done}: {fresh} new trajectories ({len(history)} in all), "
                        f"mean reward {np.mean(history[-fresh:]):.3f}; wrote version {version}")
            fresh = 0
        if stopping:
            break
        if fresh < per_round:
            if stop is not None:
                stop.wait(interval_s)
            else:
                time.sleep(interval_s)
    return {"rounds": done, "version": version, "trajectories": len(history), "updates": updates, "rewards": history}
