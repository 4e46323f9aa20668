"""TCP-RL's policy trained with synchronous advantage actor-critic (A2C) on `ccp/Select-v0`.

TCP-RL used A3C: 16 asynchronous workers pushing gradients to a central learner. Here the
workers are `envs` environments stepped together and one learner updates once per rollout of
`rollout` steps of all of them (A2C). Synchronous because (1) on two cores asynchrony buys
nothing: the simulation of all environments already keeps the cores busy and the update is
one batched matrix pass; (2) an update then depends on the seed only, so a training run is
reproducible bit for bit; (3) A2C matches A3C's performance in the literature it was
compared in (Wu et al., ACKTR, 2017). Each environment starts every episode on a random
candidate (TCP-RL's random initial scheme); the entropy weight decays linearly from 0.5 to
0.01; gamma is 0.99.

The environments run in the learner's process or as Ray actors (`rollout.py`,
`Config.ray_workers`); the learner draws every action, so both give the same run.

Deviations, stated: Adam with learning rate 1e-3 instead of 1e-4 (short budgets), rewards
scaled by `reward_scale` (0.1) so returns over a 30-step episode stay in single digits, and
truncated backpropagation through time over each rollout.

Optional, not in TCP-RL: an imitation term (`Config.oracle`). Given a `results.csv` of the
candidates run alone on the training scenario, every step of an episode is also labelled with
that condition's best single candidate (`gym.envs.best_per_condition`), and the loss gains
`imitation` x the cross-entropy of the policy against the label, the weight decaying linearly
from `imitation` to `imitation_end` over `imitation_decay_iterations`. With
`oracle_temperature` T the label is soft: softmax((R_a - R_best) / T) over the candidates'
mean rewards R_a (ln units), so near-ties share the mass instead of one of them taking it. The policy-gradient
term alone finds the best *default* of the training grid and stays there (the entropy has
decayed before the rarer per-path choices pay off in its noisy returns); the label says
which choice pays per path from the first iteration, and the policy gradient still decides
how to act on what the observation reveals (the label is the whole flow's best candidate; on
the first step the observation cannot know it). Only training conditions are labelled.
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field, replace

import numpy as np

from . import net


@dataclass
class Config:
    """A training run: the environment, the A2C settings, the seed."""

    scenario: str = "tcprl-train"
    conditions: list | None = None
    candidates: list | None = None
    window: int = 8
    step_rtts: float = 1.0
    step_s: float | None = 1.0
    duration_s: float | None = 20.0
    envs: int = 8
    rollout: int = 10
    iterations: int = 1000
    lr: float = 1e-3
    gamma: float = 0.99
    beta_start: float = 0.5
    beta_end: float = 0.01
    beta_decay_iterations: int | None = None
    value_coef: float = 0.5
    reward_scale: float = 0.1
    normalize_advantages: bool = True
    clip: float = 1.0
    seed: int = 0
    hidden: int = net.HIDDEN
    # Rollout workers as Ray actors (`rollout.RayEnvs`): 0 steps the environments in this
    # process; N > 0 splits them over N actors, on the cluster at `ray_address` or a local one.
    ray_workers: int = 0
    ray_address: str | None = None
    # The imitation term (module docs): a `results.csv` of the candidates alone on `scenario`,
    # or a mapping condition id -> candidate (None: no term); its weight at the start and the
    # end, and the decay's length (None: `iterations`).
    oracle: str | dict | None = None
    imitation: float = 1.0
    imitation_end: float = 0.0
    imitation_decay_iterations: int | None = None
    oracle_temperature: float | None = None
    # A price per swap in the training reward (`SelectEnv.swap_cost`; ln units, before
    # `reward_scale`), against needless switching. Not in TCP-RL.
    swap_cost: float = 0.0
    # A model written by `export.write` (its `tcprl.json`) whose policy is the starting point
    # instead of fresh weights (same candidates and observation); None: fresh weights.
    init: str | None = None
    # The environments' path-change detection (`SelectEnv.path_change`): the selector re-seats
    # the active candidate on a longer path, as it does when the model runs.
    path_change: bool = True
    extra: dict = field(default_factory=dict)

    def beta(self, it: int) -> float:
        span = self.beta_decay_iterations or self.iterations
        frac = min(1.0, it / max(1, span))
        return self.beta_start + (self.beta_end - self.beta_start) * frac

    def imitation_weight(self, it: int) -> float:
        if self.oracle is None:
            return 0.0
        span = self.imitation_decay_iterations or self.iterations
        frac = min(1.0, it / max(1, span))
        return self.imitation + (self.imitation_end - self.imitation) * frac


def make_env(cfg: Config, **overrides):
    from ..gym import SelectEnv

    kw = dict(
        scenario=cfg.scenario,
        candidates=cfg.candidates,
        window=cfg.window,
        step_rtts=cfg.step_rtts,
        step_s=cfg.step_s,
        duration_s=cfg.duration_s,
        conditions=cfg.conditions,
        initial="random",
        oracle=cfg.oracle,
        swap_cost=cfg.swap_cost,
        path_change=cfg.path_change,
    )
    kw.update(overrides)
    return SelectEnv(**kw)


def oracle_targets(oracle, candidates: list[str], temperature: float | None) -> dict[str, np.ndarray]:
    """Per condition id, the imitation target over `candidates`: a mapping condition id ->
    candidate gives one-hot targets; a `results.csv` path gives the best candidate's one-hot
    (`temperature` None) or softmax((R_a - R_best) / temperature) over the candidates' mean
    rewards (candidates without a row get none of the mass)."""
    A = len(candidates)
    if isinstance(oracle, dict):
        return {c: np.eye(A)[candidates.index(s)] for c, s in oracle.items() if s in candidates}
    import csv

    from ..gym.envs import reward_table

    with open(oracle, newline="") as f:
        table = reward_table(csv.DictReader(f), candidates)
    out = {}
    for cond, rewards in table.items():
        r = np.array([rewards.get(c, -np.inf) for c in candidates])
        if temperature is None:
            out[cond] = np.eye(A)[int(np.argmax(r))]
        else:
            z = np.exp((r - r.max()) / temperature)
            out[cond] = z / z.sum()
    return out


def headroom_pool(results_csv, candidates: list[str], unit: float, cap: int = 4) -> tuple[list[str], str]:
    """A training pool that draws conditions in proportion to what choosing can gain there
    (not in TCP-RL, which draws uniformly): from a `results.csv` of the candidates run alone,
    B is the candidate with the best mean reward over the conditions, and each condition
    appears 1 + min(cap, floor((R_best - R_B) / unit)) times (R in ln units), so a condition
    where B is best is drawn once and one where another candidate beats B by 0.4 (at unit
    0.1) five times. Returns the pool (condition ids) and B."""
    import csv

    from ..gym.envs import reward_table

    if not unit > 0 or cap < 0:
        raise ValueError(f"unit must be > 0 and cap >= 0, not {unit!r}, {cap!r}")
    with open(results_csv, newline="") as f:
        table = reward_table(csv.DictReader(f), candidates)
    complete = {c: r for c, r in table.items() if all(k in r for k in candidates)}
    if not complete:
        raise ValueError(f"{results_csv}: no condition has a result for each of {candidates}")
    b = max(candidates, key=lambda k: sum(r[k] for r in complete.values()))
    pool = []
    for cond in sorted(complete):
        r = complete[cond]
        extra = int(min(cap, np.floor((max(r.values()) - r[b]) / unit)))
        pool += [cond] * (1 + extra)
    return pool, b


class EnvMaker:
    """Builds environment `i` of a run (picklable, for Ray workers)."""

    def __init__(self, cfg: Config):
        self.cfg = cfg

    def __call__(self, i: int):
        return make_env(self.cfg)


def make_envs(cfg: Config):
    """The run's `cfg.envs` environments: in process, or over `cfg.ray_workers` Ray actors."""
    from . import rollout

    if cfg.ray_workers > 0:
        if cfg.candidates is None:
            # The workers are other processes: they must step the candidates this process would
            # (an algorithm registered from Python here is unknown there and fails loudly).
            from .. import candidates

            cfg = replace(cfg, candidates=list(candidates()))
        return rollout.RayEnvs(EnvMaker(cfg), cfg.envs, cfg.ray_workers, cfg.ray_address, cfg.seed)
    return rollout.LocalEnvs(EnvMaker(cfg), list(range(cfg.envs)))


@dataclass
class Result:
    """A trained policy and how it got there."""

    params: dict
    candidates: list
    obs_dim: int
    curve: list  # per logged iteration: dict
    wall_s: float
    env_steps: int
    worker_restarts: int = 0


def initial_params(sidecar, candidates: list[str], obs_dim: int, hidden: int) -> dict:
    """The policy of the model at `sidecar` as starting weights, checked against the run's
    candidates (same order), observation length and hidden size; `ValueError` otherwise."""
    from .export import read_policy  # onnx, only when asked for

    p, model_candidates = read_policy(sidecar)
    if model_candidates != list(candidates):
        raise ValueError(f"{sidecar}: candidates {model_candidates}, but this run's are {list(candidates)}")
    if p["w1"].shape != (obs_dim, hidden):
        raise ValueError(f"{sidecar}: input layer {p['w1'].shape}, but this run needs {(obs_dim, hidden)}")
    return p


def train(cfg: Config, log=None) -> Result:
    """Runs A2C for `cfg.iterations` rollouts; returns the parameters and the curve (mean
    step reward of the rollouts, unscaled, per 10 iterations)."""
    rng = np.random.default_rng(cfg.seed)
    envs = make_envs(cfg)
    try:
        return _train(cfg, envs, rng, log)
    finally:
        if hasattr(envs, "close"):
            envs.close()


def _train(cfg: Config, envs, rng, log) -> Result:
    candidates, obs_dim = envs.spaces()
    A = len(candidates)
    # Drawn even when replaced, so a warm start leaves the rest of the run's random stream as is.
    p = net.init_params(obs_dim, A, rng, cfg.hidden)
    if cfg.init is not None:
        p = initial_params(cfg.init, candidates, obs_dim, cfg.hidden)
    opt = net.Adam(p, lr=cfg.lr, clip=cfg.clip)
    obs = envs.reset([cfg.seed * 10_007 + i for i in range(cfg.envs)])
    B, H = cfg.envs, cfg.hidden
    h = np.zeros((B, H))
    c = np.zeros((B, H))
    fresh = np.ones(B)  # the next step starts an episode
    imitate = cfg.oracle is not None
    targets_of = oracle_targets(cfg.oracle, candidates, cfg.oracle_temperature) if imitate else {}
    no_target = np.zeros(A)
    curve, window_rewards, window_agree = [], [], []
    env_steps = 0
    started = time.perf_counter()
    for it in range(cfg.iterations):
        T = cfg.rollout
        tr = net.Trace()
        xs = np.zeros((T, B, obs_dim))
        resets = np.zeros((T, B))
        logits = np.zeros((T, B, A))
        values = np.zeros((T, B))
        actions = np.zeros((T, B), dtype=np.int64)
        rewards = np.zeros((T, B))
        dones = np.zeros((T, B))
        targets = np.zeros((T, B, A))
        for t in range(T):
            if imitate:
                targets[t] = [targets_of.get(c, no_target) for c in envs.condition_ids()]
            resets[t] = fresh
            keep = (1.0 - fresh)[:, None]
            h, c = h * keep, c * keep
            xs[t] = obs
            lg, v, h, c = net.step(p, obs, h, c, tr)
            logits[t], values[t] = lg, v
            pi = net.softmax(lg)
            u = rng.random(B)[:, None]
            actions[t] = np.minimum((pi.cumsum(1) < u).sum(1), A - 1)
            obs, rewards[t], dones[t] = envs.step(actions[t])
            fresh = dones[t].copy()
            env_steps += B
        # Bootstrap from the state after the rollout (zero where an episode just ended).
        keep = (1.0 - fresh)[:, None]
        _, v_last, _, _ = net.step(p, obs, h * keep, c * keep)
        ret = v_last * (1.0 - fresh)
        returns = np.zeros((T, B))
        for t in reversed(range(T)):
            ret = rewards[t] * cfg.reward_scale + cfg.gamma * ret * (1.0 - dones[t])
            returns[t] = ret
        beta = cfg.beta(it)
        loss, dl, dv, ent = net.a2c_loss_grads(
            logits, values, actions, returns, beta, cfg.value_coef, cfg.normalize_advantages
        )
        w = cfg.imitation_weight(it)
        if imitate:
            il, dli, n_targeted = net.imitation_loss_grads(logits, targets)
            dl = dl + w * dli
            loss += w * il
            if n_targeted:
                mask = targets.sum(-1) > 0
                agree = logits.argmax(-1) == targets.argmax(-1)
                window_agree.append(float(agree[mask].mean()))
        grads = net.backward(p, tr, dl, dv, resets)
        norm = opt.update(p, grads)
        window_rewards.append(rewards.mean())
        if (it + 1) % 10 == 0 or it + 1 == cfg.iterations:
            point = {
                "iteration": it + 1,
                "env_steps": env_steps,
                "wall_s": round(time.perf_counter() - started, 2),
                "mean_step_reward": float(np.mean(window_rewards)),
                "entropy": float(ent),
                "beta": beta,
                "loss": float(loss),
                "grad_norm": norm,
            }
            if imitate:
                point["imitation_weight"] = w
                point["oracle_agreement"] = float(np.mean(window_agree)) if window_agree else None
            window_rewards, window_agree = [], []
            curve.append(point)
            if log:
                log(point)
    restarts = getattr(envs, "restarts", 0)
    return Result(p, candidates, obs_dim, curve, time.perf_counter() - started, env_steps, restarts)


def act_greedy(p: dict, obs: np.ndarray, h: np.ndarray, c: np.ndarray):
    """The deployed policy's decision: the most probable candidate."""
    lg, _, h, c = net.step(p, obs[None, :].astype(np.float64), h, c)
    return int(np.argmax(lg[0])), h, c


def evaluate(p: dict | None, cfg: Config, episodes: int, seed: int, policy: str = "greedy", **env_overrides) -> float:
    """Mean step reward of `episodes` episodes with the trained policy (`greedy`), a random
    candidate every step (`random`), or a fixed candidate index (an int as `policy`)."""
    env = make_env(cfg, **env_overrides)
    rng = np.random.default_rng(seed)
    total, n = 0.0, 0
    for k in range(episodes):
        obs, _ = env.reset(seed=seed * 1_000 + k)
        h = np.zeros((1, cfg.hidden))
        c = np.zeros((1, cfg.hidden))
        done = False
        while not done:
            if policy == "greedy":
                a, h, c = act_greedy(p, obs, h, c)
            elif policy == "random":
                a = int(rng.integers(env.action_space.n))
            else:
                a = int(policy)
            obs, r, term, trunc, _ = env.step(a)
            total += r
            n += 1
            done = term or trunc
    return total / max(1, n)


def save(result: Result, cfg: Config, path) -> None:
    """Parameters (`.npz`) and the config and curve (`.json`) beside them."""
    np.savez(str(path) + ".npz", **result.params)
    with open(str(path) + ".json", "w") as f:
        json.dump(
            {
                "config": asdict(cfg),
                "candidates": result.candidates,
                "obs_dim": result.obs_dim,
                "wall_s": result.wall_s,
                "env_steps": result.env_steps,
                "curve": result.curve,
            },
            f,
            indent=1,
        )
