"""ccp_suite.arc: the hand-written gradients are right, the ONNX export computes what numpy
computes, a tiny training run (seconds) writes an actor whose action responds to the state,
and the `arc` algorithm of the Rust registry loads that actor and runs flows with it."""

import json
import os
import pathlib
import subprocess
import sys

import numpy as np
import onnxruntime as ort
import pytest

from ccp_suite.arc import export, net, train

TINY = """\
name = "arc-tiny"
duration_s = 4
seeds = [1]

[[conditions]]
id = "clean"
bw_mbps = 10
rtt_ms = 40
buffer_bdp = 1
"""

# One threaded BLAS per process: the training subprocess is small, threads only contend.
ENV = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1"}


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    d = tmp_path_factory.mktemp("arc")
    (d / "tiny.toml").write_text(TINY)
    return d


@pytest.fixture(scope="module")
def trained(tiny: pathlib.Path) -> pathlib.Path:
    """A tiny run: 2 rule-driven episodes, the actor fitted to them, 2 episodes of its own."""
    out = tiny / "model"
    cmd = [sys.executable, "-m", "ccp_suite.arc", "train", "--out", str(out), "--scenario", str(tiny / "tiny.toml"),
           "--episodes", "4", "--duration-s", "3", "--warm-episodes", "2", "--clone-updates", "600",
           "--critic-warmup-updates", "20", "--updates-per-trajectory", "2", "--seed", "3"]
    r = subprocess.run(cmd, env=ENV, capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    return out / "actor.onnx"


def test_gradients_match_finite_differences():
    assert net.gradient_check() < 1e-5


def test_export_computes_what_numpy_computes(tmp_path):
    rng = np.random.default_rng(0)
    p = net.init(70, rng, out_scale=1.0)
    path = export.write(tmp_path, p, history=10, delta=0.5, interval_rtts=0.5, version=7)
    side = json.loads(path.with_suffix(".json").read_text())
    assert side["version"] == 7 and side["features"] == export.FEATURES and side["history"] == 10
    x = rng.uniform(0, 2, size=(5, 70))
    ref = net.forward({k: v.astype(np.float32).astype(np.float64) for k, v in p.items()}, x.astype(np.float32).astype(np.float64), "tanh")[0]
    s = ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])
    got = s.run(["action"], {"obs": x.astype(np.float32)})[0]
    assert np.allclose(got, ref, atol=1e-5)
    with pytest.raises(ValueError):
        export.write(tmp_path, p, history=3, delta=0.5, interval_rtts=0.5)


def test_feature_schema_is_the_environments():
    import gymnasium as gym

    import ccp_suite.gym  # noqa: F401

    env = gym.make("ccp/Rate-v0", scenario="arc-train", duration_s=2.0).unwrapped
    assert env.core.feature_names() == export.FEATURES


def test_n_step_targets_discount_within_a_trajectory():
    r = train.Replay(10, gamma=0.5, n_step=2)
    s = np.arange(4, dtype=float).reshape(4, 1)
    r.add(s, np.zeros(4), np.array([1.0, 2.0, 3.0, 4.0]), s + 1)
    _, _, g, boot, disc = r.items[0]
    assert np.allclose(g[:, 0], [2.0, 3.5, 5.0, 4.0])
    assert np.allclose(boot[:, 0], [2, 3, 4, 4]) and np.allclose(disc[:, 0], [0.25, 0.25, 0.25, 0.5])


def test_a_tiny_trained_actor_responds_to_the_state(trained: pathlib.Path, tiny: pathlib.Path):
    """On states of a real episode, the actor probes up where the warm start's rule does and
    backs off where it does: its action follows the state."""
    side = json.loads(trained.with_suffix(".json").read_text())
    assert side["training"]["episodes"] == 4
    cfg = train.Config(scenario=str(tiny / "tiny.toml"), duration_s=3.0)
    env = train.make_env(cfg)
    (S, _, _, _), _ = train.run_episode(env, train.rule_policy, np.random.default_rng(0), 0.2, seed=11)
    s = ort.InferenceSession(str(trained), providers=["CPUExecutionProvider"])
    acts = s.run(["action"], {"obs": S.astype(np.float32)})[0][:, 0]
    rule = np.array([train.rule_policy(x) for x in S])
    up, down = acts[rule > 0], acts[rule < 0]
    assert len(up) > 5 and len(down) > 5, (len(up), len(down))
    assert up.mean() > down.mean() + 0.2, (up.mean(), down.mean())
    assert acts.std() > 0.05


def test_the_rust_algorithm_runs_the_tiny_actor(trained: pathlib.Path, tiny: pathlib.Path):
    """`arc` in the simulator (a fresh process, so the registry's model path is this one)."""
    code = (
        "import json, sys, ccp_suite\n"
        "rows = ccp_suite.run(sys.argv[1], schemes=['arc'])\n"
        "print(json.dumps([{k: r[k] for k in ('scheme', 'status', 'throughput_mbps', 'mean_rtt_ms')} for r in rows]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tiny / "tiny.toml")], env={**ENV, "CCP_ARC_MODEL": str(trained)},
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = json.loads(r.stdout.strip().splitlines()[-1])
    assert [x["scheme"] for x in rows] == ["arc"] and rows[0]["status"] == "ok", rows
    # The initial window alone (10 segments per 40 ms) is ~2.9 Mbit/s: the actor raised the rate.
    assert float(rows[0]["throughput_mbps"]) > 4.0, rows


def test_a_missing_model_makes_arc_unavailable(tiny: pathlib.Path):
    code = (
        "import json, sys, ccp_suite\n"
        "rows = ccp_suite.run(sys.argv[1], schemes=['arc'])\n"
        "print(json.dumps([r['status'] for r in rows]))\n"
    )
    r = subprocess.run([sys.executable, "-c", code, str(tiny / "tiny.toml")],
                       env={**ENV, "CCP_ARC_MODEL": str(tiny / "nope" / "actor.onnx")}, capture_output=True, text=True, timeout=600)
    assert r.returncode != 0 or "ok" not in r.stdout, r.stdout


def test_the_online_learner_reads_the_store_and_writes_a_new_version(tmp_path):
    """The agent's schema (agent/src/arc_store.rs) filled with two flows' decisions; one round
    of the learner writes version + 1, which ONNX Runtime loads."""
    import sqlite3

    from ccp_suite.arc import learner

    rng = np.random.default_rng(1)
    model = export.write(tmp_path / "m", net.init(70, rng), history=10, delta=0.5, interval_rtts=0.5, version=4)
    db = tmp_path / "t.sqlite"
    con = sqlite3.connect(db)
    con.executescript(
        "CREATE TABLE decisions (id INTEGER PRIMARY KEY, flow TEXT NOT NULL, step INTEGER NOT NULL, now_us INTEGER NOT NULL,"
        " state BLOB NOT NULL, action REAL, actor_action REAL, model_version INTEGER NOT NULL, throughput_mbps REAL NOT NULL,"
        " rtt_ms REAL NOT NULL, loss REAL NOT NULL, interval_us INTEGER NOT NULL);"
    )
    for flow in ("1-1-1", "1-2-2"):
        for step in range(140):
            st = rng.uniform(0, 2, size=70).astype("<f4").tobytes()
            a = None if step == 0 else float(rng.uniform(-1, 1))
            con.execute("INSERT INTO decisions (flow, step, now_us, state, action, actor_action, model_version, throughput_mbps,"
                        " rtt_ms, loss, interval_us) VALUES (?, ?, ?, ?, ?, ?, 4, ?, ?, 0, 50000)",
                        (flow, step, step * 50_000, st, a, a, float(rng.uniform(1, 10)), float(rng.uniform(100, 150))))
    con.commit()
    con.close()
    out = learner.learn(db, model, rounds=1, per_round=2, interval_s=0.0, cfg=train.Config(updates_per_trajectory=2), log=None)
    assert out["rounds"] == 1 and out["version"] == 5 and out["trajectories"] == 4
    side = json.loads(model.with_suffix(".json").read_text())
    assert side["version"] == 5 and side["training"]["online_trajectories"] == 4
    s = ort.InferenceSession(str(model), providers=["CPUExecutionProvider"])
    assert s.run(["action"], {"obs": np.zeros((1, 70), dtype=np.float32)})[0].shape == (1, 1)


def ccp_eval_binary() -> pathlib.Path:
    """The `ccp-eval` that `make test` built before pytest (`$CCP_EVAL`), else a debug build
    with the features `make test` uses."""
    if os.environ.get("CCP_EVAL"):
        return pathlib.Path(os.environ["CCP_EVAL"])
    root = pathlib.Path(__file__).resolve().parents[2]
    subprocess.run(["cargo", "build", "-q", "-p", "ccp-eval", "--features",
                    "ccp-datapath/kernel,ccp-agent/kernel,ccp-eval/kernel"], cwd=root, check=True, timeout=1800)
    return root / "target" / "debug" / "ccp-eval"


def test_online_training_runs_episodes_records_them_and_learns_from_them(trained: pathlib.Path, tiny: pathlib.Path,
                                                                         tmp_path):
    """`online` on the simulator: every episode is a `ccp-eval run` whose ARC flow records its
    decisions into the store; the learner beside them writes new versions from them, and the
    curve has one entry per episode with the version it ran."""
    import sqlite3

    from ccp_suite.arc import online

    out = tmp_path / "online"
    cfg = train.Config(updates_per_trajectory=2, critic_warmup_updates=4)
    s = online.online(str(tiny / "tiny.toml"), out, episodes=3, datapath="sim", start=trained.parent, explore=0.1,
                      per_round=1, cfg=cfg, ccp_eval=ccp_eval_binary(), log=None)
    curve = json.loads((out / "curve.json").read_text())["curve"]
    assert s["episodes"] == 3 and s["failed"] == 0, curve
    assert [c["status"] for c in curve] == ["ok"] * 3
    assert all(c["decisions"] > 50 and c["interval_reward"] is not None for c in curve), curve
    assert all(c["throughput_mbps"] > 1.0 for c in curve), curve
    con = sqlite3.connect(out / "trajectories.sqlite")
    flows = con.execute("SELECT COUNT(DISTINCT flow) FROM decisions").fetchone()[0]
    con.close()
    assert flows == 3
    side = json.loads((out / "model" / "actor.json").read_text())
    start = json.loads(trained.with_suffix(".json").read_text())["version"]
    assert s["learner"]["rounds"] >= 1 and side["version"] == start + s["learner"]["rounds"]
    assert (out / "model" / "critic.npz").exists()
    assert curve[0]["model_version"] == start
    assert export.load_critic(out / "model") is not None


def test_a_critic_file_of_another_shape_is_refused(tmp_path):
    np.savez(tmp_path / "critic.npz", **{"critic.w1": np.zeros((3, 3))})
    with pytest.raises(ValueError, match="critic.npz"):
        export.load_critic(tmp_path)


def test_the_behaviour_term_pulls_the_actor_to_the_stored_actions():
    """TD3+BC's term alone (a critic of zero weights has no action gradient): the actor's
    outputs move to the stored transitions' actions."""
    rng = np.random.default_rng(2)
    cfg = train.Config(bc_alpha=2.5, lr_actor=1e-3, tau=0.0)
    learner = train.Learner(14, cfg, rng)
    for k in learner.critic:
        learner.critic[k][...] = 0.0
        learner.critic_t[k][...] = 0.0
    s = rng.uniform(0, 2, size=(64, 14))
    a = np.full((64, 1), 0.5)
    zeros = np.zeros((64, 1))
    before = np.abs(net.forward(learner.actor, s, "tanh")[0] - 0.5).mean()
    for _ in range(300):
        learner.update(s, a, zeros, s, zeros)
    after = np.abs(net.forward(learner.actor, s, "tanh")[0] - 0.5).mean()
    assert before > 0.4 and after < 0.05, (before, after)
