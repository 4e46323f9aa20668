"""TCP-RL's rollout workers as Ray actors (`ccp_suite.tcprl.rollout`): a training run whose
environments step in Ray actors is the run whose environments step in process, bit for bit,
and a worker killed mid-run is restarted and the run finishes."""

import os
import pathlib
import shutil
import tempfile

import numpy as np
import pytest

from ccp_suite.tcprl import a2c, net, rollout

try:
    import ray
except ImportError:  # pragma: no cover - the Makefile installs Ray; CCP_RAY_REQUIRED=1 there
    ray = None

pytestmark = pytest.mark.skipif(
    ray is None and os.environ.get("CCP_RAY_REQUIRED") != "1", reason="ray is not installed"
)

@pytest.fixture(scope="module")
def cluster():
    assert ray is not None, "CCP_RAY_REQUIRED=1 but ray is not importable"
    # Ray keeps a session folder per cluster under its temp root: one of the test's own, removed
    # afterwards (short, for Ray's unix socket paths).
    root = tempfile.mkdtemp(prefix="ccp-ray-test-")
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False, _temp_dir=os.path.join(root, "ray"))
    yield
    ray.shutdown()
    shutil.rmtree(root, ignore_errors=True)


def config(tiny: pathlib.Path, **kw) -> a2c.Config:
    # Episodes of 4 steps (2 s at 0.5 s) inside rollouts of 5: episodes end and reset mid-run.
    # Built-in candidates: other tests register Python algorithms in this process, which the
    # Ray workers (other processes) do not have.
    base = dict(scenario=str(tiny), candidates=["cubic", "reno", "bbr", "copa", "vegas"], step_s=0.5, duration_s=2.0, envs=4, rollout=5, iterations=4, seed=3)
    base.update(kw)
    return a2c.Config(**base)


def test_training_on_ray_actors_is_the_training_in_process(cluster, tiny: pathlib.Path) -> None:
    local = a2c.train(config(tiny))
    on_ray = a2c.train(config(tiny, ray_workers=2))
    assert on_ray.env_steps == local.env_steps == 4 * 5 * 4
    assert on_ray.worker_restarts == 0
    assert on_ray.candidates == local.candidates
    for k in net.NAMES:
        assert np.array_equal(on_ray.params[k], local.params[k]), k
    assert [c["mean_step_reward"] for c in on_ray.curve] == [c["mean_step_reward"] for c in local.curve]


def test_imitation_targets_reach_the_learner_from_ray_actors(cluster, tiny: pathlib.Path) -> None:
    # The learner asks the actors which condition each environment runs (the imitation term).
    oracle = {"clean": "vegas", "lossy": "bbr"}
    local = a2c.train(config(tiny, oracle=oracle))
    on_ray = a2c.train(config(tiny, oracle=oracle, ray_workers=2))
    for k in net.NAMES:
        assert np.array_equal(on_ray.params[k], local.params[k]), k
    assert on_ray.curve[-1]["oracle_agreement"] == local.curve[-1]["oracle_agreement"] is not None


def test_a_killed_worker_is_restarted_and_the_run_finishes(
    cluster, tiny: pathlib.Path, tmp_path: pathlib.Path, monkeypatch
) -> None:
    marker = tmp_path / "killed"
    # The actors get the driver's marker through their runtime environment.
    monkeypatch.setenv(rollout.KILL_MARKER_ENV, str(marker))
    res = a2c.train(config(tiny, ray_workers=2, iterations=3))
    assert marker.exists(), "no worker was killed"
    assert res.worker_restarts == 1
    assert res.env_steps == 4 * 5 * 3
    assert all(np.isfinite(res.params[k]).all() for k in net.NAMES)
