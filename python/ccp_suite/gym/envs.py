"""The Gymnasium environments over `ccp_suite._native.EnvCore`.

Each episode is one flow on one condition of a scenario (drawn with the environment's
`np_random`, or named in `reset(options={"condition": ...})`), simulated for the scenario's
duration by the suite's simulator with the real datapath runtime, portus and (for `select`)
the real selector. The same seed gives the same episode bit for bit.
"""

from __future__ import annotations

import csv
import math
import os
from collections.abc import Iterable, Mapping
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces

from .._native import EnvCore

INFO_KEYS = (
    "reward_raw",
    "throughput_mbps",
    "rtt_ms",
    "loss",
    "time_s",
    "candidate",
    "cwnd_bytes",
    "rate_bytes_per_sec",
)


def best_per_condition(
    rows: Iterable[Mapping[str, Any]], candidates: Iterable[str]
) -> dict[str, str]:
    """The oracle: per condition, the candidate run alone with the highest flow reward
    (`reward` of `results.csv` rows with status `ok`; the mean over seeds)."""
    return {c: max(r, key=r.__getitem__) for c, r in reward_table(rows, candidates).items()}


def reward_table(
    rows: Iterable[Mapping[str, Any]], candidates: Iterable[str]
) -> dict[str, dict[str, float]]:
    """Per condition, each candidate's mean flow reward over seeds (`results.csv` rows with
    status `ok`)."""
    names = set(candidates)
    sums: dict[tuple[str, str], list[float]] = {}
    for r in rows:
        if r.get("status") != "ok" or r.get("scheme") not in names:
            continue
        sums.setdefault((r["condition"], r["scheme"]), []).append(float(r["reward"]))
    table: dict[str, dict[str, float]] = {}
    for (cond, scheme), v in sums.items():
        table.setdefault(cond, {})[scheme] = sum(v) / len(v)
    return table


def _load_oracle(oracle: Mapping[str, str] | str | os.PathLike[str] | None, candidates):
    if oracle is None:
        return {}
    if isinstance(oracle, Mapping):
        return dict(oracle)
    with open(oracle, newline="") as f:
        return best_per_condition(csv.DictReader(f), candidates)


class _SimEnv(gym.Env):
    """The part the three environments share (see the module docs)."""

    metadata = {"render_modes": []}

    def __init__(
        self,
        kind: str,
        scenario: str | os.PathLike[str],
        conditions: Iterable[int | str] | None = None,
        **core: Any,
    ) -> None:
        self.core = EnvCore(kind, scenario, **core)
        ids = self.core.conditions()
        if conditions is None:
            self.condition_pool = list(range(len(ids)))
        else:
            self.condition_pool = [ids.index(c) if isinstance(c, str) else int(c) for c in conditions]
            if not self.condition_pool or not all(0 <= c < len(ids) for c in self.condition_pool):
                raise ValueError(f"conditions must be indices or ids of {ids}")
        self.condition_ids = ids
        self.condition: int | None = None
        self.last_obs: np.ndarray | None = None

    def _condition(self, options: Mapping[str, Any] | None) -> int:
        c = (options or {}).get("condition")
        if c is None:
            return self.condition_pool[int(self.np_random.integers(len(self.condition_pool)))]
        if isinstance(c, str):
            return self.condition_ids.index(c)
        return int(c)

    def _info(self, numbers) -> dict[str, Any]:
        info = dict(zip(INFO_KEYS, numbers))
        info["condition"] = self.condition_ids[self.condition] if self.condition is not None else ""
        return info

    def _start(self, options, initial: int = 0):
        self.condition = self._condition(options)
        seed = int(self.np_random.integers(2**63 - 1))
        raw, numbers = self.core.reset(self.condition, seed, initial)
        obs = np.frombuffer(raw, dtype=np.float32).copy()
        self.last_obs = obs
        return obs, self._info(numbers)

    def _advance(self, action: float):
        raw, numbers, done = self.core.step(action)
        obs = np.frombuffer(raw, dtype=np.float32).copy()
        self.last_obs = obs
        info = self._info(numbers)
        return obs, float(numbers[0]), False, bool(done), info


class SelectEnv(_SimEnv):
    """`ccp/Select-v0`: TCP-RL's congestion-control selection through the real selector.

    Observation: the selector's feature window (`window` reports x (throughput_norm, rtt_ratio,
    loss_frac, timeout, one-hot of the active candidate)), then TCP-RL's state of the step
    (ln(1 + throughput Mbit/s), ln(1 + RTT ms), loss fraction), float32 in [0, 10]. Action: a candidate index
    (`Discrete(len(candidates))`); switching hands the flow over with its state, as the
    selector does in a deployment (no hysteresis: every action takes effect). Reward: TCP-RL's
    ln(throughput Mbit/s / RTT ms) over the step. A step lasts `step_rtts` smoothed RTTs
    (default 1) or `step_s` seconds. The episode is truncated at the scenario's duration.

    `initial`: the candidate a flow starts on, an index, a name or `"random"` (TCP-RL's random
    initial scheme; drawn with `np_random`); `reset(options={"initial": ...})` overrides it.
    `oracle`: a mapping condition id -> best candidate, or a `results.csv` of the candidates run
    alone; `info["oracle"]` is then that candidate's index (-1 when unknown).
    `swap_cost` (not in TCP-RL; default 0): subtracted from the reward of a step whose action
    moves the flow to another candidate, a price on switching for training against needless
    swaps; `info["swapped"]` says whether the step swapped, `info["reward_raw"]` is the reward
    without the cost.
    `path_change` (default on, as in `ccp-eval`'s selectors): the selector re-seats the active
    candidate when it detects a longer path (`ccp_selector::path_change`).
    """

    def __init__(
        self,
        scenario: str | os.PathLike[str] = "tcprl-288",
        candidates: list[str] | None = None,
        window: int = 8,
        step_rtts: float = 1.0,
        step_s: float | None = None,
        duration_s: float | None = None,
        conditions: Iterable[int | str] | None = None,
        initial: int | str = "random",
        oracle: Mapping[str, str] | str | os.PathLike[str] | None = None,
        swap_cost: float = 0.0,
        path_change: bool = True,
    ) -> None:
        if not (math.isfinite(swap_cost) and swap_cost >= 0.0):
            raise ValueError(f"swap_cost must be a finite number >= 0, not {swap_cost!r}")
        super().__init__(
            "select",
            scenario,
            conditions,
            candidates=candidates,
            window=window,
            step_rtts=step_rtts,
            step_s=step_s,
            duration_s=duration_s,
            path_change=bool(path_change),
        )
        self.candidates = self.core.candidates()
        self.initial = initial
        self.oracle = _load_oracle(oracle, self.candidates)
        self.swap_cost = float(swap_cost)
        self.active: int | None = None
        n = self.core.obs_len()
        self.observation_space = spaces.Box(0.0, 10.0, shape=(n,), dtype=np.float32)
        self.action_space = spaces.Discrete(len(self.candidates))

    def _initial(self, options) -> int:
        initial = (options or {}).get("initial", self.initial)
        if initial == "random":
            return int(self.np_random.integers(len(self.candidates)))
        if isinstance(initial, str):
            return self.candidates.index(initial)
        return int(initial)

    def condition_id(self) -> str:
        """The running episode's condition id ("" before the first reset)."""
        return self.condition_ids[self.condition] if self.condition is not None else ""

    def oracle_index(self) -> int:
        """The oracle's candidate index for the running episode's condition (-1: unknown, or
        no episode yet)."""
        best = self.oracle.get(self.condition_id())
        return self.candidates.index(best) if best in self.candidates else -1

    def _info(self, numbers) -> dict[str, Any]:
        info = super()._info(numbers)
        info["candidate_name"] = self.candidates[info["candidate"]]
        info["oracle"] = self.oracle_index()
        return info

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        condition = self._condition(options)
        initial = self._initial(options)
        self.active = initial
        return self._start({**(options or {}), "condition": condition}, initial)

    def step(self, action):
        a = int(action)
        if not 0 <= a < len(self.candidates):
            raise ValueError(f"action {action!r} is not a candidate index (0..{len(self.candidates) - 1})")
        swapped = self.active is not None and a != self.active
        self.active = a
        obs, reward, term, trunc, info = self._advance(float(a))
        info["swapped"] = swapped
        if swapped:
            reward -= self.swap_cost
        return obs, reward, term, trunc, info


class _ContinuousEnv(_SimEnv):
    def __init__(self, kind: str, scenario, history, delta, interval_rtts, duration_s, conditions):
        super().__init__(
            kind,
            scenario,
            conditions,
            history=history,
            delta=delta,
            interval_rtts=interval_rtts,
            duration_s=duration_s,
        )
        n = self.core.obs_len()
        self.observation_space = spaces.Box(-10.0, 10.0, shape=(n,), dtype=np.float32)
        self.action_space = spaces.Box(-1.0, 1.0, shape=(1,), dtype=np.float32)

    def reset(self, *, seed: int | None = None, options: dict[str, Any] | None = None):
        super().reset(seed=seed)
        return self._start(options)

    def step(self, action):
        a = float(np.asarray(action, dtype=np.float64).reshape(-1)[0])
        if not math.isfinite(a):
            raise ValueError(f"action {action!r} is not finite")
        return self._advance(min(1.0, max(-1.0, a)))


class RateEnv(_ContinuousEnv):
    """`ccp/Rate-v0` (ARC/Aurora style): the action in [-1, 1] scales the pacing rate by
    `1 + delta * a` (or divides it by `1 - delta * a` when negative), every `interval_rtts`
    RTTs (default 0.5). Observation: the last `history` intervals of (send rate, delivery rate,
    loss, RTT ratio, RTT gradient, sent/acked, last action). Reward: ln(throughput/RTT) over
    the interval."""

    def __init__(
        self,
        scenario: str | os.PathLike[str] = "tcprl-288",
        history: int = 10,
        delta: float = 0.5,
        interval_rtts: float = 0.5,
        duration_s: float | None = None,
        conditions: Iterable[int | str] | None = None,
    ) -> None:
        super().__init__("rate", scenario, history, delta, interval_rtts, duration_s, conditions)


class CwndEnv(_ContinuousEnv):
    """`ccp/Cwnd-v0` (RL-TCP/Orca style): the action in [-1, 1] scales the window by
    `2^(delta * a)` once per RTT. Observation and reward as `ccp/Rate-v0`."""

    def __init__(
        self,
        scenario: str | os.PathLike[str] = "tcprl-288",
        history: int = 10,
        delta: float = 1.0,
        interval_rtts: float = 1.0,
        duration_s: float | None = None,
        conditions: Iterable[int | str] | None = None,
    ) -> None:
        super().__init__("cwnd", scenario, history, delta, interval_rtts, duration_s, conditions)
