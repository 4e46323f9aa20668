"""ccp_suite.tcprl: the hand-written gradients are right, a tiny policy trained for seconds
beats a random one, its ONNX export computes what numpy computes, the DNC learns changes,
and the selector runs the exported model as `selector-tcprl`."""

import dataclasses
import json
import os
import pathlib

import numpy as np
import onnxruntime as ort
import pytest

import ccp_suite
from ccp_suite.tcprl import a2c, dnc, export, net

# The nine the tiny check was made for (the suite has eleven since LP-TCP and RL-TCP joined;
# 400 tiny iterations do not learn over eleven).
NINE = ["reno", "cubic", "bbr", "copa", "vegas", "westwood", "illinois", "c2tcp", "vivace"]


def suite_nine() -> list[str]:
    """The selectors' candidates of the nine, in the selectors' order."""
    return [c for c in ccp_suite.candidates() if c in NINE]


@pytest.fixture(scope="module")
def trained(tiny: pathlib.Path):
    cfg = a2c.Config(
        scenario=str(tiny),
        candidates=suite_nine(),
        step_s=None,
        step_rtts=4.0,
        duration_s=3.0,
        envs=4,
        rollout=8,
        # On the simulator with RACK-TLP and the CCP record delay, with the fixed gradients:
        # 800 iterations reach a margin of 0.21 over random for five of seeds 0-5 (seed 1:
        # -0.85); 400 stay within 0.07 of random.
        iterations=800,
        beta_decay_iterations=400,
        lr=1e-3,
        seed=2,
    )
    return cfg, a2c.train(cfg)


def test_gradients_match_finite_differences() -> None:
    assert net.gradient_check(seed=0) < 1e-5
    assert net.gradient_check(seed=1) < 1e-5


def test_a_tiny_policy_learns_to_beat_a_random_one(trained) -> None:
    cfg, res = trained
    assert sorted(res.candidates) == sorted(NINE), res.candidates
    learned = a2c.evaluate(res.params, cfg, 8, seed=99)
    random = a2c.evaluate(None, cfg, 8, seed=99, policy="random")
    # Seeded, so the same every run: -1.249 against random's -1.455. Random switching beats
    # most fixed candidates here, so the policy must learn when to switch; not every seed
    # finds it (see the config above).
    assert learned > random + 0.1, (learned, random)
    # The entropy weight decayed as configured and the policy sharpened.
    assert res.curve[-1]["beta"] == pytest.approx(0.01)
    assert res.curve[-1]["entropy"] < res.curve[0]["entropy"]


def test_imitation_gradients_match_finite_differences() -> None:
    rng = np.random.default_rng(3)
    logits = rng.normal(size=(3, 4, 5)) * 2.0
    # One-hot targets, soft ones, and steps without a target.
    targets = np.eye(5)[rng.integers(0, 5, size=(3, 4))]
    soft = rng.random(5)
    targets[1, 1] = soft / soft.sum()
    targets[0, 0] = 0.0
    targets[2, 3] = 0.0
    loss, dl, n = net.imitation_loss_grads(logits, targets)
    assert n == 10
    eps = 1e-6
    for idx in [(0, 0, 1), (1, 1, 3), (1, 2, 3), (2, 3, 0), (0, 1, 4)]:
        up, down = logits.copy(), logits.copy()
        up[idx] += eps
        down[idx] -= eps
        num = (net.imitation_loss_grads(up, targets)[0] - net.imitation_loss_grads(down, targets)[0]) / (2 * eps)
        assert abs(num - dl[idx]) < 1e-6, (idx, num, dl[idx])
    # Steps without a target get no gradient; no targets at all is no term.
    assert np.all(dl[0, 0] == 0.0) and np.all(dl[2, 3] == 0.0)
    assert net.imitation_loss_grads(logits, np.zeros((3, 4, 5)))[2] == 0


def test_soft_oracle_targets_share_the_mass_of_near_ties(tmp_path: pathlib.Path) -> None:
    rows = ["condition,scheme,seed,reward,status"]
    for seed, (a, b, c) in enumerate([(-1.00, -1.02, -2.0), (-1.02, -1.00, -2.0)]):
        rows += [f"x,reno,{seed},{a},ok", f"x,cubic,{seed},{b},ok", f"x,bbr,{seed},{c},ok", f"x,copa,{seed},9,failed"]
    path = tmp_path / "results.csv"
    path.write_text("\n".join(rows) + "\n")
    cands = ["reno", "cubic", "bbr", "copa"]
    hard = a2c.oracle_targets(str(path), cands, None)["x"]
    assert hard.tolist() == [1.0, 0.0, 0.0, 0.0]  # a tie in the mean goes to the first
    soft = a2c.oracle_targets(str(path), cands, 0.05)["x"]
    assert soft.sum() == pytest.approx(1.0)
    assert soft[0] == pytest.approx(soft[1]) and soft[0] > 0.49
    assert soft[2] < 1e-8 and soft[3] == 0.0  # far behind; no ok row
    assert a2c.oracle_targets({"x": "bbr"}, cands, None)["x"].tolist() == [0.0, 0.0, 1.0, 0.0]


def test_the_headroom_pool_draws_conditions_by_what_choosing_gains(tmp_path: pathlib.Path) -> None:
    # B = cubic (best mean); "x": reno beats it by 0.25 -> 1 + 2 draws; "y": cubic best -> 1;
    # "z": reno by 0.9, capped at 1 + 4; "w": no bbr result -> left out.
    table = {"x": (-1.0, -1.25, -3.0), "y": (-3.0, -1.0, -3.0), "z": (-1.0, -1.9, -3.0)}
    rows = ["condition,scheme,seed,reward,status"]
    for cond, rewards in table.items():
        rows += [f"{cond},{s},1,{r},ok" for s, r in zip(["reno", "cubic", "bbr"], rewards, strict=True)]
    rows += ["w,reno,1,0,ok", "w,cubic,1,0,ok", "w,bbr,1,0,failed"]
    path = tmp_path / "results.csv"
    path.write_text("\n".join(rows) + "\n")
    pool, best = a2c.headroom_pool(str(path), ["reno", "cubic", "bbr"], unit=0.1)
    assert best == "cubic"
    assert sorted(pool) == ["x"] * 3 + ["y"] + ["z"] * 5
    with pytest.raises(ValueError, match="unit"):
        a2c.headroom_pool(str(path), ["reno", "cubic", "bbr"], unit=0.0)
    with pytest.raises(ValueError, match="no condition"):
        a2c.headroom_pool(str(path), ["reno", "vegas"], unit=0.1)


def test_the_imitation_term_teaches_the_oracle_per_condition(tiny: pathlib.Path) -> None:
    # Labels that differ by condition (and are not what the reward alone would pick), so the
    # policy must read the path from its observation to agree with them.
    oracle = {"clean": "vegas", "lossy": "westwood"}
    cfg = a2c.Config(
        scenario=str(tiny),
        candidates=suite_nine(),
        step_s=None,
        step_rtts=4.0,
        duration_s=3.0,
        envs=4,
        rollout=8,
        # Seeded: agreement 0.48 in the first ten iterations, 0.98-1.0 after 300 of 400. Since
        # the simulator's SACK compression changed the lossy path's observations, 400 left the
        # greedy policy on the lossy condition's label 11 times in 14 (79 %); 500 passes, as do
        # seeds 3 and 4 at 400 or 500 (seed 2 fails the first-iterations check: 0.75 by chance).
        iterations=500,
        beta_start=0.05,
        beta_end=0.01,
        oracle=oracle,
        imitation=2.0,
        imitation_end=2.0,
        seed=1,
    )
    res = a2c.train(cfg)
    assert res.curve[-1]["imitation_weight"] == pytest.approx(2.0)
    assert res.curve[-1]["oracle_agreement"] > 0.9, res.curve[-1]
    assert res.curve[0]["oracle_agreement"] < 0.7, res.curve[0]
    # The greedy policy, from the second step on, runs each condition's label.
    env = a2c.make_env(cfg)
    for cond, want in oracle.items():
        obs, _ = env.reset(seed=7, options={"condition": cond, "initial": "cubic"})
        h, c = np.zeros((1, cfg.hidden)), np.zeros((1, cfg.hidden))
        picks = []
        done = False
        while not done:
            a, h, c = a2c.act_greedy(res.params, obs, h, c)
            picks.append(res.candidates[a])
            obs, _, term, trunc, info = env.step(a)
            assert info["oracle"] == res.candidates.index(want)
            done = term or trunc
        assert picks[1:].count(want) >= 0.8 * len(picks[1:]), (cond, picks)


def test_a_rollout_that_refills_its_observations_does_not_change_the_recorded_inputs() -> None:
    # The training loop refilled one observation array in place every step while the trace
    # held references to it, so every step's first-layer gradient used the last observation.
    rng = np.random.default_rng(0)
    p = net.init_params(6, 3, rng, 8)
    x = rng.normal(size=(2, 6))
    seen = x.copy()
    tr = net.Trace()
    net.step(p, x, np.zeros((2, 8)), np.zeros((2, 8)), tr)
    x[:] = 0.0
    assert np.array_equal(tr.x[0], seen)


def test_training_is_reproducible(tiny: pathlib.Path) -> None:
    cfg = a2c.Config(scenario=str(tiny), step_s=None, step_rtts=4.0, duration_s=3.0, envs=2, rollout=4, iterations=20, seed=5)
    a, b = a2c.train(cfg), a2c.train(cfg)
    assert all(np.array_equal(a.params[k], b.params[k]) for k in net.NAMES)


def test_export_runs_in_onnx_runtime_as_in_numpy(trained, tmp_path: pathlib.Path) -> None:
    cfg, res = trained
    rng = np.random.default_rng(0)
    d = dnc.init(2 * res.obs_dim + len(res.candidates), rng)
    export.write(tmp_path, res.params, res.candidates, cfg.window, cfg.step_rtts, cfg.step_s, d)
    ref = json.loads((tmp_path / "reference.json").read_text())
    s = ort.InferenceSession(str(tmp_path / "policy.onnx"))
    h = np.zeros((1, 128), np.float32)
    c = np.zeros((1, 128), np.float32)
    for obs, want in zip(ref["obs"], ref["probs"]):
        probs, _, h, c = s.run(None, {"obs": np.asarray([obs], np.float32), "h_in": h, "c_in": c})
        np.testing.assert_allclose(probs[0], want, atol=1e-5)
    np.testing.assert_allclose(h[0], ref["h_last"], atol=1e-5)
    sd = ort.InferenceSession(str(tmp_path / "dnc.onnx"))
    (p,) = sd.run(None, {"x": np.asarray([ref["dnc_x"]], np.float32)})
    assert abs(float(p[0, 0]) - ref["dnc_p"]) < 1e-5
    side = json.loads((tmp_path / "tcprl.json").read_text())
    assert side["candidates"] == res.candidates and side["step"] == {"rtts": 4.0}
    assert side["start"] == "random"
    start = res.candidates[-1]
    export.write(tmp_path, res.params, res.candidates, cfg.window, cfg.step_rtts, cfg.step_s, d, start=start)
    assert json.loads((tmp_path / "tcprl.json").read_text())["start"] == start
    with pytest.raises(ValueError, match="start"):
        export.write(tmp_path, res.params, res.candidates, cfg.window, cfg.step_rtts, cfg.step_s, d, start="nope")


def test_an_exported_policy_reads_back_and_starts_a_run(trained, tiny: pathlib.Path, tmp_path: pathlib.Path) -> None:
    cfg, res = trained
    side = export.write(tmp_path, res.params, res.candidates, cfg.window, cfg.step_rtts, cfg.step_s)
    p, candidates = export.read_policy(side)
    assert candidates == res.candidates
    for k in net.NAMES:  # float32 in the file
        np.testing.assert_allclose(p[k], res.params[k], atol=1e-6, err_msg=k)
    # A run warm-started from it begins where the trained policy is: after one iteration at a
    # tiny learning rate it is still far better than random (a fresh start is random).
    warm = dataclasses.replace(cfg, iterations=1, lr=1e-9, beta_start=0.01, init=str(side))
    learned = a2c.evaluate(a2c.train(warm).params, cfg, 8, seed=99)
    random = a2c.evaluate(None, cfg, 8, seed=99, policy="random")
    assert learned > random + 0.1, (learned, random)
    with pytest.raises(ValueError, match="candidates"):
        a2c.initial_params(side, list(reversed(res.candidates)), res.obs_dim, cfg.hidden)
    nan = dict(res.params, w2=np.full_like(res.params["w2"], np.nan))
    export.write(tmp_path / "nan", nan, res.candidates, cfg.window, cfg.step_rtts, cfg.step_s)
    with pytest.raises(ValueError, match="non-finite"):
        export.read_policy(tmp_path / "nan" / "tcprl.json")
    (tmp_path / "policy.onnx").write_bytes(b"not a model")
    with pytest.raises(ValueError, match="not a tcprl model"):
        export.read_policy(side)


def test_the_dnc_learns_path_changes(tiny: pathlib.Path, tmp_path: pathlib.Path) -> None:
    path = tmp_path / "changes.toml"
    times = dnc.changing_scenario(path, 12, 6.0, seed=3)
    assert all(1 <= len(t) <= 3 for t in times)
    cfg = a2c.Config(scenario=str(path), step_s=0.5, duration_s=6.0)
    x, y = dnc.collect(lambda: a2c.make_env(cfg), times, 2, seed=3)
    assert 0 < y.sum() < len(y)
    d = dnc.fit(x, y, seed=3, epochs=200)
    s = dnc.scores(d, x, y)
    # Fits what it was trained on far better than chance (positives are ~1/4 of the steps).
    assert s["recall"] > 0.8 and s["precision"] > 0.5, s


def test_the_selector_runs_the_exported_policy(tiny: pathlib.Path, tmp_path: pathlib.Path) -> None:
    # `selector-tcprl` runs over every candidate of the process (the suite's and the Python
    # algorithms the other test modules registered): a short run over those, exported.
    cfg = a2c.Config(scenario=str(tiny), step_s=None, step_rtts=4.0, duration_s=3.0, envs=2, rollout=4, iterations=10, seed=3)
    res = a2c.train(cfg)
    assert res.candidates == ccp_suite.candidates()
    rng = np.random.default_rng(1)
    d = dnc.init(2 * res.obs_dim + len(res.candidates), rng)
    side = export.write(tmp_path, res.params, res.candidates, cfg.window, cfg.step_rtts, cfg.step_s, d)
    os.environ["CCP_TCPRL_MODEL"] = str(side)
    try:
        rows = ccp_suite.run(tiny, schemes=["selector-tcprl"], jobs=1)
    finally:
        del os.environ["CCP_TCPRL_MODEL"]
    assert [r["status"] for r in rows] == ["ok", "ok"], rows
    assert all(r["throughput_mbps"] > 0.5 for r in rows), rows


def _results(path: pathlib.Path, scores: list[float], status: str = "ok") -> pathlib.Path:
    fields = ["scheme", "role", "condition", "seed", "score", "status"]
    lines = [",".join(fields)]
    for i, s in enumerate(scores):
        lines.append(f"selector-tcprl,main,c{i},3,{s},{status}")
        # A cross flow and another scheme never count.
        lines.append(f"selector-tcprl,cross,c{i},3,9.0,ok")
        lines.append(f"copa,main,c{i},3,9.0,ok")
    path.write_text("\n".join(lines) + "\n")
    return path


def test_pick_keeps_the_model_with_the_best_validation_score(tmp_path: pathlib.Path) -> None:
    from ccp_suite.tcprl import pick

    runs = []
    for name, scores in [("a", [-1.0, -0.5]), ("b", [-0.6, -0.4]), ("c", [-2.0, 0.0])]:
        model = tmp_path / name
        model.mkdir()
        (model / "tcprl.json").write_text(json.dumps({"name": name}))
        (model / "policy.onnx").write_bytes(name.encode())
        runs.append((model, _results(tmp_path / f"{name}.csv", scores)))
    out = tmp_path / "out"
    out.mkdir()
    (out / "stale.onnx").write_bytes(b"old")
    sel = pick.pick(runs, out)
    assert sel["chosen"] == str(tmp_path / "b")
    assert [r["mean_score"] for r in sel["runs"]] == [-0.75, -0.5, -1.0]
    assert json.loads((out / "tcprl.json").read_text()) == {"name": "b"}
    assert (out / "policy.onnx").read_bytes() == b"b"
    assert not (out / "stale.onnx").exists()
    assert json.loads((out / "selection.json").read_text())["chosen"] == str(tmp_path / "b")

    # A failed flow, a missing model, validation sets of different sizes are refused.
    bad = [
        ([(runs[0][0], _results(tmp_path / "f.csv", [0.0], status="error: x"))], "did not run"),
        ([(tmp_path / "none", runs[0][1])], "no tcprl.json"),
        ([runs[0], (runs[1][0], _results(tmp_path / "s.csv", [0.0]))], "different numbers"),
        ([(runs[0][0], _results(tmp_path / "n.csv", []))], "no selector-tcprl flow"),
    ]
    for args, says in bad:
        with pytest.raises(ValueError, match=says):
            pick.pick(args, tmp_path / "out2")


def test_training_environments_take_the_path_change_setting(tmp_path: pathlib.Path) -> None:
    from test_gym import LONGER, throughput_after_change

    p = tmp_path / "longer.toml"
    p.write_text(LONGER)

    def after_change(path_change: bool) -> float:
        cfg = a2c.Config(scenario=str(p), step_s=0.5, duration_s=7.0, candidates=["copa", "bbr"], path_change=path_change)
        return throughput_after_change(a2c.make_env(cfg, initial="copa"))

    # As in test_gym: re-seated after the longer path, Copa takes the new rate; blind, it does not.
    assert a2c.Config().path_change
    assert after_change(True) > 40.0
    assert after_change(False) < 25.0
