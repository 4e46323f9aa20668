"""TCP-RL's network-change detector (DNC): two FC layers on (last state, last action, current
state) -> P(the path changed during the step) (Nie et al., JSAC 2019, §VI-C).

Training data come from episodes whose conditions change on purpose: a scenario written
here with one to three changes of rate, RTT and loss at random times per condition (values
from the training grid), run in `ccp/Select-v0` with a candidate switched at random (as the
policy explores); a step is labelled 1 when a change falls inside it or the step after (the
observation reacts within a report or two). Binary cross-entropy with positives weighted by
the class ratio, Adam, gradients written out.
"""

from __future__ import annotations

import pathlib

import numpy as np

from . import net

RATES = [2, 8, 15, 30, 60, 120, 180]
RTTS = [15, 30, 50, 90, 120, 160]
LOSSES = [0.0, 0.005, 0.05]


def changing_scenario(path, conditions: int, duration_s: float, seed: int) -> list[list[float]]:
    """Writes a scenario of `conditions` conditions whose path changes 1-3 times; returns the
    change times (s) per condition."""
    rng = np.random.default_rng(seed)
    lines = [
        'name = "dnc-train"',
        'description = "Paths that change on purpose (DNC training data)."',
        f"duration_s = {duration_s}",
        "seeds = [1]",
        "",
    ]
    times: list[list[float]] = []
    for k in range(conditions):
        def draw():
            return (float(rng.choice(RATES)), float(rng.choice(RTTS)), float(rng.choice(LOSSES)))

        bw, rtt, loss = draw()
        c0 = (bw, rtt, loss)
        n = int(rng.integers(1, 4))
        at = sorted(float(round(x, 3)) for x in rng.uniform(0.15 * duration_s, 0.9 * duration_s, n))
        phases = []
        for t in at:
            nbw, nrtt, nloss = draw()
            while (nbw, nrtt, nloss) == (bw, rtt, loss):
                nbw, nrtt, nloss = draw()
            phases.append(f"{{ at_s = {t}, bw_mbps = {nbw}, rtt_ms = {nrtt}, loss = {nloss} }}")
            bw, rtt, loss = nbw, nrtt, nloss
        lines += [
            "[[conditions]]",
            f'id = "change-{k}"',
            f"bw_mbps = {c0[0]}",
            f"rtt_ms = {c0[1]}",
            f"loss = {c0[2]}",
            "buffer_bdp = 1.0",
            "phases = [" + ", ".join(phases) + "]",
            "",
        ]
        times.append(at)
    pathlib.Path(path).write_text("\n".join(lines))
    return times


def collect(env_factory, times: list[list[float]], episodes_per_condition: int, seed: int, switch_prob: float = 0.3):
    """(x, y): one row per step of (last obs, one-hot last action, obs) and its label."""
    env = env_factory()
    A = env.action_space.n
    rng = np.random.default_rng(seed)
    xs, ys = [], []
    for cond, at in enumerate(times):
        for e in range(episodes_per_condition):
            obs, info = env.reset(seed=seed * 100_003 + cond * 101 + e, options={"condition": cond})
            prev_t = info["time_s"]
            a = info["candidate"]
            done = False
            changed_before = False
            while not done:
                if rng.random() < switch_prob:
                    a = int(rng.integers(A))
                nobs, _, term, trunc, info = env.step(a)
                done = term or trunc
                if done:
                    break
                t = info["time_s"]
                inside = any(prev_t < c <= t for c in at)
                xs.append(np.concatenate([obs, np.eye(A)[a], nobs]))
                ys.append(1.0 if inside or changed_before else 0.0)
                changed_before = inside
                obs, prev_t = nobs, t
    return np.asarray(xs), np.asarray(ys)


def init(n_in: int, rng: np.random.Generator, hidden: int = net.HIDDEN) -> dict:
    lim1 = np.sqrt(6.0 / (n_in + hidden))
    lim2 = np.sqrt(6.0 / (hidden + 1))
    return {
        "w1": rng.uniform(-lim1, lim1, (n_in, hidden)),
        "b1": np.zeros(hidden),
        "w2": rng.uniform(-lim2, lim2, (hidden, 1)),
        "b2": np.zeros(1),
    }


def predict(d: dict, x: np.ndarray) -> np.ndarray:
    a1 = np.maximum(x @ d["w1"] + d["b1"], 0.0)
    return net.sigmoid(a1 @ d["w2"] + d["b2"])[:, 0]


def fit(x: np.ndarray, y: np.ndarray, seed: int, epochs: int = 30, batch: int = 256, lr: float = 1e-3) -> dict:
    rng = np.random.default_rng(seed)
    d = init(x.shape[1], rng)
    opt = net.Adam(d, lr=lr, clip=5.0)
    pos = max(1.0, y.sum())
    w_pos = (len(y) - pos) / pos
    for _ in range(epochs):
        order = rng.permutation(len(y))
        for s in range(0, len(y), batch):
            idx = order[s : s + batch]
            xb, yb = x[idx], y[idx]
            a1 = np.maximum(xb @ d["w1"] + d["b1"], 0.0)
            z = (a1 @ d["w2"] + d["b2"])[:, 0]
            p = net.sigmoid(z)
            w = np.where(yb > 0, w_pos, 1.0)
            dz = (w * (p - yb) / len(idx))[:, None]
            g = {"w2": a1.T @ dz, "b2": dz.sum(0)}
            da1 = dz @ d["w2"].T * (a1 > 0)
            g["w1"] = xb.T @ da1
            g["b1"] = da1.sum(0)
            opt.update(d, g)
    return d


def scores(d: dict, x: np.ndarray, y: np.ndarray, threshold: float = 0.5) -> dict:
    p = predict(d, x) > threshold
    tp = float((p & (y > 0)).sum())
    return {
        "steps": int(len(y)),
        "positives": int(y.sum()),
        "recall": tp / max(1.0, float(y.sum())),
        "precision": tp / max(1.0, float(p.sum())),
        "false_alarm_rate": float((p & (y == 0)).sum()) / max(1.0, float((y == 0).sum())),
    }


def choose_threshold(d: dict, x: np.ndarray, y: np.ndarray, max_false_alarm: float = 0.02) -> float:
    """The lowest threshold (of 0.50, 0.51, ... 0.99) whose false-alarm rate on (x, y) is at
    most `max_false_alarm`: a detector that fires on a steady path sends the flow to a random
    candidate, so false alarms cost more than a late detection."""
    p = predict(d, x)
    neg = max(1.0, float((y == 0).sum()))
    for t in np.arange(0.50, 0.995, 0.01):
        if float(((p > t) & (y == 0)).sum()) / neg <= max_false_alarm:
            return round(float(t), 2)
    return 0.99
