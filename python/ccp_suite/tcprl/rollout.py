"""The environments a training run steps, in this process or as Ray actors.

A2C (`a2c.train`) steps `envs` environments together every step of a rollout. Stepping them
is where the time goes (each step simulates the network for a while); the policy's forward
and backward passes over the batch are cheap. `LocalEnvs` steps them one after the other in
the learner's process; `RayEnvs` splits them into groups, one `EnvGroup` Ray actor per
group, and steps the groups in parallel: TCP-RL's rollout workers (A3C's asynchronous
workers) as Ray actors, on a local cluster or an existing one (`ray start`, see
`docs/scale.md`).

Both give the learner the same observations, rewards and episode ends for the same seeds:
each environment is built and reset with the same arguments wherever it runs, and the
learner draws every action, so a run on Ray is bit for bit the run in process
(`python/tests/test_rollout.py`).

A worker that dies is restarted by Ray (`max_restarts`) and the step it was running is sent
again (`max_task_retries`). Its environments' episodes are lost with it: the restarted
group resets them (seeded with the restart's number, so a rerun is reproducible) and reports
their episodes as ended on that step, with reward 0; `restarts` counts such events. That
step's transitions are the only ones that differ from an uninterrupted run.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import numpy as np

# Tests only: a file path; the group that creates the file (the first to step while it does
# not exist) dies (SIGKILL of its own process), to show the restart.
KILL_MARKER_ENV = "CCP_RAY_TEST_KILL_MARKER"


class LocalEnvs:
    """`n` environments made by `make(i)`, stepped in this process. Finished episodes are
    reset at once (without a seed: each environment's generator continues)."""

    def __init__(self, make: Callable[[int], object], indices: list[int]):
        self.envs = [make(i) for i in indices]
        self.indices = list(indices)

    def spaces(self) -> tuple[list[str], int]:
        """The candidates and the observation length."""
        e = self.envs[0]
        return list(e.candidates), int(e.observation_space.shape[0])

    def reset(self, seeds: list[int]) -> np.ndarray:
        return np.stack([e.reset(seed=s)[0] for e, s in zip(self.envs, seeds, strict=True)]).astype(np.float64)

    def condition_ids(self) -> list[str]:
        """Each environment's running condition (`SelectEnv.condition_id`)."""
        return [e.condition_id() for e in self.envs]

    def step(self, actions: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Observations after the step (after a reset where an episode ended), rewards, and 1.0
        where an episode ended."""
        n = len(self.envs)
        obs, rewards, dones = [], np.zeros(n), np.zeros(n)
        for b, e in enumerate(self.envs):
            o, r, term, trunc, _ = e.step(int(actions[b]))
            rewards[b] = r
            if term or trunc:
                dones[b] = 1.0
                o, _ = e.reset()
            obs.append(o)
        return np.stack(obs).astype(np.float64), rewards, dones


class EnvGroup:
    """A group of environments in a Ray actor (the class is wrapped by `ray.remote` in
    `RayEnvs`). `make` must be picklable."""

    def __init__(self, make: Callable[[int], object], indices: list[int], restart_seed: int):
        import ray

        self.local = LocalEnvs(make, indices)
        self.restart_seed = restart_seed
        # After Ray restarted this actor its environments have no episode running.
        self.lost = ray.get_runtime_context().was_current_actor_reconstructed

    def spaces(self):
        return self.local.spaces()

    def reset(self, seeds: list[int]) -> np.ndarray:
        self.lost = False
        return self.local.reset(seeds)

    def condition_ids(self) -> list[str]:
        return self.local.condition_ids()

    def step(self, actions: np.ndarray):
        """As `LocalEnvs.step`, plus whether this step found the group restarted."""
        marker = os.environ.get(KILL_MARKER_ENV)
        if marker:
            try:
                # Exclusive creation: of groups stepping at once, exactly one dies.
                os.close(os.open(marker, os.O_CREAT | os.O_EXCL | os.O_WRONLY))
            except FileExistsError:
                pass
            else:
                os.kill(os.getpid(), 9)
        if self.lost:
            self.lost = False
            n = len(self.local.envs)
            seeds = [self.restart_seed + 7_919 * i for i in self.local.indices]
            obs = self.local.reset(seeds)
            return obs, np.zeros(n), np.ones(n), True
        obs, rewards, dones = self.local.step(actions)
        return obs, rewards, dones, False


class RayEnvs:
    """The environments of `LocalEnvs(make, range(n))` split over `workers` Ray actors (one
    CPU each). Connects to the cluster at `address`, or starts a local one with `workers`
    CPUs when `address` is None and Ray is not initialized yet."""

    def __init__(self, make: Callable[[int], object], n: int, workers: int, address: str | None, seed: int):
        import ray

        if not ray.is_initialized():
            if address:
                ray.init(address=address, log_to_driver=False)
            else:
                ray.init(num_cpus=max(1, workers), include_dashboard=False, log_to_driver=False)
        workers = max(1, min(workers, n))
        self.groups = [list(range(n))[w::workers] for w in range(workers)]
        options = dict(num_cpus=1, max_restarts=3, max_task_retries=3)
        if KILL_MARKER_ENV in os.environ:
            options["runtime_env"] = {"env_vars": {KILL_MARKER_ENV: os.environ[KILL_MARKER_ENV]}}
        group = ray.remote(**options)(EnvGroup)
        self.actors = [group.remote(make, g, seed * 104_729 + 1_000 * (w + 1)) for w, g in enumerate(self.groups)]
        self.n = n
        self.restarts = 0
        self._ray = ray

    def spaces(self):
        return self._ray.get(self.actors[0].spaces.remote())

    def reset(self, seeds: list[int]) -> np.ndarray:
        parts = self._ray.get([a.reset.remote([seeds[i] for i in g]) for a, g in zip(self.actors, self.groups, strict=True)])
        return self._gather(parts)

    def step(self, actions: np.ndarray):
        parts = self._ray.get(
            [a.step.remote(np.asarray([actions[i] for i in g])) for a, g in zip(self.actors, self.groups, strict=True)]
        )
        self.restarts += sum(1 for p in parts if p[3])
        return self._gather([p[0] for p in parts]), self._gather([p[1] for p in parts]), self._gather([p[2] for p in parts])

    def condition_ids(self) -> list[str]:
        parts = self._ray.get([a.condition_ids.remote() for a in self.actors])
        out = [""] * self.n
        for g, p in zip(self.groups, parts, strict=True):
            for i, c in zip(g, p, strict=True):
                out[i] = c
        return out

    def _gather(self, parts: list[np.ndarray]) -> np.ndarray:
        """Puts the groups' rows back in environment order."""
        first = parts[0]
        out = np.zeros((self.n, *first.shape[1:]), dtype=first.dtype)
        for g, p in zip(self.groups, parts, strict=True):
            out[g] = p
        return out

    def close(self) -> None:
        for a in self.actors:
            self._ray.kill(a)
