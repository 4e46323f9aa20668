"""ARC's actor-critic trained off-policy on trajectories of 64 decision intervals.

The environment is `ccp/Rate-v0` (the suite's simulator with ARC's own state and rate rule).
Training follows the paper's loop: the actor is fixed during an episode; exploration is added
on the environment side (`Exploring`: Gaussian noise on the action the environment applies,
the applied action recorded); the episode's intervals are cut into trajectories of 64 and
stored; the learner updates from stored trajectories, whichever actor produced them.

The update is off-policy deterministic actor-critic (Silver et al., DPG, 2014; with DDPG's
target networks, Lillicrap et al., 2016): the critic Q(s, a) learns by temporal differences
on the actions actually applied, `y = r + gamma Q'(s', mu'(s'))`; the actor follows
`dQ/da` at `a = mu(s)`. Because the critic is of (s, a) and the actor deterministic, data of
any earlier actor or any exploration is used without importance weights: that is the
off-policy correction here (ARC does not say which it used).

The paper's numbers: gamma 0.9, learning rates 1e-5 (actor) and 1e-4 (critic), 2 x 128 for
both (the defaults here; `make arc-model` states what it used). Adam; the reward is the
environment's ln(throughput Mbit/s / RTT ms), floored at `reward_floor` (an interval with
nothing acknowledged is worth ln(0.001 / RTT) there, about -11, and would otherwise dominate the
critic's error) and scaled by `reward_scale`. Returns are `n_step`-step within a trajectory
(bootstrapped from the target critic at the trajectory's end).

Optional warm start (`warm_episodes`, `clone_updates`; 0 in the paper's setting): the first
episodes are driven by a rule controller (`rule_policy`: +0.3 while the RTT is within 20 % of
its minimum, -0.5 above) with the same exploration noise; their trajectories are off-policy
data like any other, and with `clone_updates` the actor is first fitted to the rule's actions
on them (regression), so learning starts from a controller that does not collapse the link;
the actor then stays fixed until the critic has had `critic_warmup_updates` more updates (the
critic learns from the warm episodes' data from their first trajectory on).
"""

from __future__ import annotations

import json
import time
from dataclasses import asdict, dataclass, field

import numpy as np

from ..tcprl.net import Adam
from . import export, net

TRAJECTORY = 64


@dataclass
class Config:
    """A training run: the environment, the learner's settings, the seed."""

    scenario: str = "arc-train"
    conditions: list | None = None
    history: int = 10
    delta: float = 0.5
    interval_rtts: float = 0.5
    duration_s: float | None = 10.0
    episodes: int = 200
    exploration_std: float = 0.2
    gamma: float = 0.9
    lr_actor: float = 1e-5
    lr_critic: float = 1e-4
    reward_scale: float = 0.1
    reward_floor: float = -6.0
    n_step: int = 4
    batch_trajectories: int = 4
    updates_per_trajectory: int = 8
    warmup_trajectories: int = 4
    buffer_trajectories: int = 2000
    tau: float = 0.01
    warm_episodes: int = 0
    clone_updates: int = 0
    critic_warmup_updates: int = 0
    clip: float = 1.0
    # TD3+BC's behaviour term (Fujimoto & Gu, 2021): the actor maximizes
    # lambda Q(s, mu(s)) - (mu(s) - a)^2 with lambda = bc_alpha / mean |Q|, a the applied
    # action of the stored transition; 0 turns it off (plain DPG, as `train` uses).
    bc_alpha: float = 0.0
    seed: int = 0
    hidden: int = net.HIDDEN
    extra: dict = field(default_factory=dict)


class Exploring:
    """Exploration on the environment side: the environment applies `a + N(0, std)` (clipped
    to [-1, 1]) and reports what it applied in `info["applied_action"]`."""

    def __init__(self, env, std: float, rng: np.random.Generator):
        self.env, self.std, self.rng = env, std, rng

    def reset(self, **kw):
        return self.env.reset(**kw)

    def step(self, action: float):
        a = float(np.clip(action + self.rng.normal(0.0, self.std), -1.0, 1.0)) if self.std > 0 else float(action)
        obs, r, term, trunc, info = self.env.step(np.array([a], dtype=np.float32))
        info["applied_action"] = a
        return obs, r, term, trunc, info


class Replay:
    """Stored trajectories of up to `TRAJECTORY` transitions, as n-step targets: the state,
    the applied action, the discounted reward sum of the next `n` intervals (fewer at the
    trajectory's end), the state to bootstrap from and its discount. The oldest go first."""

    def __init__(self, capacity: int, gamma: float, n_step: int):
        self.capacity, self.gamma, self.n = capacity, gamma, max(1, n_step)
        self.items: list[tuple[np.ndarray, ...]] = []

    def add(self, s, a, r, s2) -> None:
        L = len(r)
        r = np.asarray(r, dtype=np.float64)
        G = np.zeros(L)
        boot = np.zeros_like(np.asarray(s2))
        disc = np.zeros(L)
        for t in range(L):
            k = min(self.n, L - t)
            G[t] = sum(self.gamma**i * r[t + i] for i in range(k))
            boot[t] = s2[t + k - 1]
            disc[t] = self.gamma**k
        self.items.append((np.asarray(s), np.asarray(a).reshape(-1, 1), G.reshape(-1, 1), boot, disc.reshape(-1, 1)))
        if len(self.items) > self.capacity:
            self.items.pop(0)

    def __len__(self) -> int:
        return len(self.items)

    def sample(self, k: int, rng: np.random.Generator):
        idx = rng.integers(len(self.items), size=k)
        parts = [self.items[i] for i in idx]
        return tuple(np.concatenate([p[j] for p in parts]) for j in range(5))


class Learner:
    """Actor, critic, their targets and optimizers; `update` is one off-policy step."""

    def __init__(self, obs_dim: int, cfg: Config, rng: np.random.Generator, actor: dict | None = None):
        self.cfg = cfg
        self.actor = actor if actor is not None else net.init(obs_dim, rng, cfg.hidden)
        self.critic = net.init(obs_dim + 1, rng, cfg.hidden)
        self.actor_t = {k: v.copy() for k, v in self.actor.items()}
        self.critic_t = {k: v.copy() for k, v in self.critic.items()}
        self.opt_a = Adam(self.actor, lr=cfg.lr_actor, clip=cfg.clip)
        self.opt_c = Adam(self.critic, lr=cfg.lr_critic, clip=cfg.clip)
        self.opt_clone = Adam(self.actor, lr=1e-3, clip=cfg.clip)

    def set_critic(self, saved: dict) -> None:
        """Continues from a saved critic and target (`export.load_critic`); a critic of
        another input size is an error."""
        if saved["critic"]["w1"].shape != self.critic["w1"].shape:
            raise ValueError(f"the saved critic takes {saved['critic']['w1'].shape[0]} inputs, this learner's "
                             f"{self.critic['w1'].shape[0]}")
        for k in self.critic:
            self.critic[k][...] = saved["critic"][k]
            self.critic_t[k][...] = saved["target"][k]

    def act(self, obs: np.ndarray) -> float:
        return float(net.forward(self.actor, obs.reshape(1, -1).astype(np.float64), "tanh")[0][0, 0])

    def update(self, s, a, g, s2, disc, actor: bool = True) -> tuple[float, float]:
        """One step on a batch of n-step targets (see `Replay`); returns (critic TD loss, mean
        Q of the actor's actions)."""
        c = self.cfg
        a2, _ = net.forward(self.actor_t, s2, "tanh")
        q2, _ = net.forward(self.critic_t, np.hstack([s2, a2]), "linear")
        y = c.reward_scale * g + disc * q2
        q, cache = net.forward(self.critic, np.hstack([s, a]), "linear")
        B = len(s)
        td = q - y
        g, _ = net.backward(self.critic, cache, td / B)
        self.opt_c.update(self.critic, g)
        if not actor:
            for k in self.critic_t:
                self.critic_t[k] += c.tau * (self.critic[k] - self.critic_t[k])
            return float(0.5 * (td * td).mean()), 0.0
        mu, acache = net.forward(self.actor, s, "tanh")
        qmu, ccache = net.forward(self.critic, np.hstack([s, mu]), "linear")
        _, dx = net.backward(self.critic, ccache, np.ones_like(qmu) / B)
        if c.bc_alpha > 0:
            lam = c.bc_alpha / max(float(np.abs(qmu).mean()), 1e-6)
            ga, _ = net.backward(self.actor, acache, -lam * dx[:, -1:] + 2.0 * (mu - a) / B)
        else:
            ga, _ = net.backward(self.actor, acache, -dx[:, -1:])
        self.opt_a.update(self.actor, ga)
        for tgt, src in ((self.actor_t, self.actor), (self.critic_t, self.critic)):
            for k in tgt:
                tgt[k] += c.tau * (src[k] - tgt[k])
        return float(0.5 * (td * td).mean()), float(qmu.mean())


def rule_policy(obs: np.ndarray) -> float:
    """The warm start's rule: probe up while the last interval's RTT is within 20 % of the
    minimum, back off above."""
    rtt_ratio = float(obs[-4])
    return 0.3 if rtt_ratio < 1.2 else -0.5


def clone(learner: "Learner", replay: "Replay", updates: int, rng: np.random.Generator, batch: int) -> float:
    """Fits the actor to the rule's actions on the stored states (squared error, Adam)."""
    loss = 0.0
    for _ in range(updates):
        s, *_ = replay.sample(batch, rng)
        target = np.array([[rule_policy(x)] for x in s])
        mu, cache = net.forward(learner.actor, s, "tanh")
        d = (mu - target) / len(s)
        g, _ = net.backward(learner.actor, cache, d)
        learner.opt_clone.update(learner.actor, g)
        loss = float(0.5 * ((mu - target) ** 2).mean())
    learner.actor_t = {k: v.copy() for k, v in learner.actor.items()}
    return loss


def make_env(cfg: Config):
    import gymnasium as gym

    from .. import gym as _register  # noqa: F401  (registers ccp/Rate-v0)

    return gym.make(
        "ccp/Rate-v0",
        scenario=cfg.scenario,
        history=cfg.history,
        delta=cfg.delta,
        interval_rtts=cfg.interval_rtts,
        duration_s=cfg.duration_s,
        conditions=cfg.conditions,
    ).unwrapped


def run_episode(env, policy, rng: np.random.Generator, std: float, seed: int, options=None):
    """One episode with a fixed `policy` (obs -> action) and exploration `std` on the
    environment side; returns the transitions (s, a, r, s') and the episode's numbers."""
    ex = Exploring(env, std, rng)
    obs, info = ex.reset(seed=seed, options=options)
    S, A, R, S2 = [], [], [], []
    tput, rtt = [], []
    while True:
        a = policy(obs)
        obs2, r, _, done, info = ex.step(a)
        if done:
            break
        S.append(obs)
        A.append(info["applied_action"])
        R.append(r)
        S2.append(obs2)
        tput.append(info["throughput_mbps"])
        rtt.append(info["rtt_ms"])
        obs = obs2
    stats = {
        "condition": info.get("condition", ""),
        "intervals": len(R),
        "reward": float(np.mean(R)) if R else 0.0,
        "throughput_mbps": float(np.mean(tput)) if tput else 0.0,
        "rtt_ms": float(np.mean(rtt)) if rtt else 0.0,
    }
    return (np.array(S, dtype=np.float64), np.array(A), np.array(R), np.array(S2, dtype=np.float64)), stats


def trajectories(S, A, R, S2):
    """An episode cut into trajectories of `TRAJECTORY` intervals (a shorter tail is kept)."""
    for i in range(0, len(R), TRAJECTORY):
        if len(R[i : i + TRAJECTORY]) >= 8:
            yield S[i : i + TRAJECTORY], A[i : i + TRAJECTORY], R[i : i + TRAJECTORY], S2[i : i + TRAJECTORY]


def episodes_to_convergence(rewards: list[float], window: int = 20, within: float = 0.05) -> int | None:
    """Episodes until the training reward settles: the end of the first block of `window`
    episodes whose mean, and every later block's, is within `within` (relative) of the last
    block's mean. Episodes cycle through conditions, so a block's mean, not one episode, is
    what can settle. None if there are fewer than two blocks."""
    n = len(rewards) // window
    if n < 2:
        return None
    means = [float(np.mean(rewards[i * window : (i + 1) * window])) for i in range(n)]
    final = means[-1]
    tol = within * max(abs(final), 1e-9)
    for i in range(n):
        if all(abs(m - final) <= tol for m in means[i:]):
            return (i + 1) * window
    return None


def train(cfg: Config, out_dir=None, log=print) -> dict:
    """Trains; writes the actor (and `curve.json`) into `out_dir` if given; returns the
    summary (the per-episode curve included)."""
    rng = np.random.default_rng(cfg.seed)
    env = make_env(cfg)
    obs_dim = env.observation_space.shape[0]
    learner = Learner(obs_dim, cfg, rng)
    replay = Replay(cfg.buffer_trajectories, cfg.gamma, cfg.n_step)
    curve = []
    updates = 0
    losses = []
    started = time.perf_counter()
    for ep in range(cfg.episodes):
        frozen = {k: v.copy() for k, v in learner.actor.items()}  # fixed during the episode

        def policy(o, p=frozen):
            return float(net.forward(p, o.reshape(1, -1).astype(np.float64), "tanh")[0][0, 0])

        if ep < cfg.warm_episodes:
            policy = rule_policy
        elif ep == cfg.warm_episodes and cfg.clone_updates > 0:
            clone_loss = clone(learner, replay, cfg.clone_updates, rng, cfg.batch_trajectories)
            for _ in range(cfg.critic_warmup_updates):
                losses.append(learner.update(*replay.sample(cfg.batch_trajectories, rng), actor=False)[0])
            log and log(f"actor fitted to the rule: loss {clone_loss:.4f}; critic td {np.mean(losses[-50:]):.4f}")
            frozen = {k: v.copy() for k, v in learner.actor.items()}

            def policy(o, p=frozen):
                return float(net.forward(p, o.reshape(1, -1).astype(np.float64), "tanh")[0][0, 0])

        (S, A, R, S2), stats = run_episode(env, policy, rng, cfg.exploration_std, seed=cfg.seed * 100_003 + ep)
        for t in trajectories(S, A, np.maximum(R, cfg.reward_floor), S2):
            replay.add(*t)
            if len(replay) >= cfg.warmup_trajectories:
                for _ in range(cfg.updates_per_trajectory):
                    loss, q = learner.update(*replay.sample(cfg.batch_trajectories, rng), actor=ep >= cfg.warm_episodes)
                    losses.append(loss)
                    updates += 1
        stats["episode"] = ep
        stats["behaviour"] = "rule" if ep < cfg.warm_episodes else "actor"
        stats["updates"] = updates
        stats["td_loss"] = float(np.mean(losses[-50:])) if losses else None
        curve.append(stats)
        if log and (ep % 10 == 0 or ep == cfg.episodes - 1):
            log(f"episode {ep}: {stats['condition']} reward {stats['reward']:.3f} "
                f"{stats['throughput_mbps']:.2f} Mbit/s {stats['rtt_ms']:.1f} ms td {stats['td_loss']}")
    rewards = [c["reward"] for c in curve]
    summary = {
        "config": asdict(cfg),
        "episodes": cfg.episodes,
        "updates": updates,
        "seconds": time.perf_counter() - started,
        "episodes_to_convergence": episodes_to_convergence(rewards),
        "first_10_reward": float(np.mean(rewards[:10])) if rewards else None,
        "last_10_reward": float(np.mean(rewards[-10:])) if rewards else None,
    }
    if out_dir is not None:
        export.write(out_dir, learner.actor, cfg.history, cfg.delta, cfg.interval_rtts, version=1,
                     training={k: v for k, v in summary.items() if k != "config"})
        export.write_critic(out_dir, learner)
        import pathlib

        (pathlib.Path(out_dir) / "curve.json").write_text(json.dumps({"summary": summary, "curve": curve}, indent=1) + "\n")
    summary["curve"] = curve
    summary["learner"] = learner
    return summary
