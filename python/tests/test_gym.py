"""ccp_suite.gym: the three environments pass Gymnasium's checker, are reproducible bit for bit
from a seed, vectorize, and step the real selector / datapath."""

import pathlib
import threading

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env

import ccp_suite
import ccp_suite.gym  # noqa: F401 (registers the ids)
from ccp_suite.gym import SelectEnv, best_per_condition

TINY = """\
name = "gym-tiny"
duration_s = 3
seeds = [1]

[[conditions]]
id = "fast"
bw_mbps = 10
rtt_ms = 20
buffer_bdp = 1

[[conditions]]
id = "lossy"
bw_mbps = 5
rtt_ms = 40
loss = 0.02
buffer_bdp = 2
"""

IDS = ["ccp/Select-v0", "ccp/Rate-v0", "ccp/Cwnd-v0"]


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    p = tmp_path_factory.mktemp("gym") / "tiny.toml"
    p.write_text(TINY)
    return p


def rollout(env: gym.Env, seed: int, actions) -> tuple[list[np.ndarray], list[float], list[dict]]:
    obs, info = env.reset(seed=seed)
    seen, rewards, infos = [obs], [], [info]
    for a in actions:
        obs, r, term, trunc, info = env.step(a)
        seen.append(obs)
        rewards.append(r)
        infos.append(info)
        if term or trunc:
            break
    return seen, rewards, infos


@pytest.mark.parametrize("env_id", IDS)
def test_passes_gymnasiums_checker(env_id: str, tiny: pathlib.Path) -> None:
    env = gym.make(env_id, scenario=str(tiny), duration_s=1.0)
    check_env(env.unwrapped, skip_render_check=True)


@pytest.mark.parametrize("env_id", IDS)
def test_same_seed_same_episode_bit_for_bit(env_id: str, tiny: pathlib.Path) -> None:
    a = gym.make(env_id, scenario=str(tiny))
    b = gym.make(env_id, scenario=str(tiny))
    a.action_space.seed(7)
    actions = [a.action_space.sample() for _ in range(400)]
    oa, ra, ia = rollout(a, 11, actions)
    ob, rb, ib = rollout(b, 11, actions)
    assert len(oa) > 50, "too few steps to compare"
    assert all(np.array_equal(x, y) for x, y in zip(oa, ob, strict=True))
    assert ra == rb
    assert ia == ib
    # Another seed is another episode (condition, losses or start).
    oc, rc, _ = rollout(a, 12, actions)
    assert rc != ra or not all(np.array_equal(x, y) for x, y in zip(oa, oc))


def test_select_swaps_through_the_selector_and_rewards_follow_the_path(tiny: pathlib.Path) -> None:
    env = SelectEnv(scenario=str(tiny), candidates=["cubic", "bbr", "vegas"], initial="cubic")
    obs, info = env.reset(seed=3, options={"condition": "fast"})
    assert info["candidate_name"] == "cubic" and info["condition"] == "fast"
    # The window's last report carries the active candidate's one-hot.
    per_report = 4 + 3
    assert obs.shape == (8 * per_report + 3,)
    onehot = slice(8 * per_report - 3, 8 * per_report)
    assert obs[onehot].tolist() == [1.0, 0.0, 0.0]
    steps = 0
    for _ in range(30):
        obs, r, term, trunc, info = env.step(1)
        steps += 1
    assert info["candidate_name"] == "bbr"
    assert obs[onehot].tolist() == [0.0, 1.0, 0.0]
    # TCP-RL's state of the step closes the observation.
    assert abs(obs[-3] - np.log1p(info["throughput_mbps"])) < 1e-5
    assert abs(obs[-2] - np.log1p(info["rtt_ms"])) < 1e-5
    # 10 Mbit/s at 20 ms: BBR fills the pipe; a step is about one RTT.
    assert 6.0 < info["throughput_mbps"] <= 10.5, info
    assert 19.0 < info["rtt_ms"] < 60.0, info
    assert abs(r - np.log(info["throughput_mbps"] / info["rtt_ms"])) < 1e-9
    assert 0.02 < info["time_s"] / (steps + 1) < 0.08
    with pytest.raises(ValueError, match="candidate index"):
        env.step(3)


def test_select_step_length_in_seconds(tiny: pathlib.Path) -> None:
    env = SelectEnv(scenario=str(tiny), step_s=0.5, initial=0, candidates=["cubic", "bbr"])
    _, info = env.reset(seed=1, options={"condition": "fast"})
    times = [info["time_s"]]
    done = False
    while not done:
        _, _, term, trunc, info = env.step(0)
        done = term or trunc
        times.append(info["time_s"])
    gaps = np.diff(times[:-1])
    assert len(gaps) >= 3 and np.all(gaps >= 0.5) and np.all(gaps < 0.6), times


LONGER = """\
name = "gym-longer"
duration_s = 7
seeds = [1]

[[conditions]]
env = "dynamic"
id = "longer"
bw_mbps = 20
rtt_ms = 20
buffer_bdp = 1
phases = [{ at_s = 3, bw_mbps = 50, rtt_ms = 40 }]
"""


def throughput_after_change(env) -> float:
    """Mean throughput of `env`'s flow on `LONGER` after 4.5 s, always on action 0."""
    env.reset(seed=1)
    tput = []
    done = False
    while not done:
        _, _, term, trunc, info = env.step(0)
        done = term or trunc
        if info["time_s"] > 4.5 and not done:
            tput.append(info["throughput_mbps"])
    return float(np.mean(tput))


def test_select_reseats_copa_after_a_longer_path_unless_told_not_to(tmp_path: pathlib.Path) -> None:
    p = tmp_path / "longer.toml"
    p.write_text(LONGER)

    def after_change(path_change: bool) -> float:
        return throughput_after_change(
            SelectEnv(scenario=str(p), step_s=0.5, initial="copa", candidates=["copa", "bbr"], path_change=path_change)
        )

    # The path goes from 20 Mbit/s, 20 ms to 50 Mbit/s, 40 ms at 3 s. Re-seated, Copa takes the
    # new rate within about a second; blind, it keeps reading 20 ms of queue for 10 s.
    seen, blind = after_change(True), after_change(False)
    assert seen > 40.0, seen
    assert blind < 25.0, blind


def test_swap_cost_is_charged_on_the_steps_that_swap_and_only_there(tiny: pathlib.Path) -> None:
    actions = [0, 0, 1, 1, 0, 0]
    kw = dict(scenario=str(tiny), candidates=["cubic", "bbr"], initial=0, step_s=0.25)
    _, free, _ = rollout(SelectEnv(**kw), 5, actions)
    _, paid, infos = rollout(SelectEnv(**kw, swap_cost=0.3), 5, actions)
    swapped = [i["swapped"] for i in infos[1:]]
    assert swapped == [False, False, True, False, True, False]
    for r0, r1, i, s in zip(free, paid, infos[1:], swapped, strict=True):
        # The path is the same (the cost is on the reward only), and raw stays the unpriced one.
        assert r1 == pytest.approx(r0 - (0.3 if s else 0.0), abs=1e-12)
        assert i["reward_raw"] == pytest.approx(r0, abs=1e-12)
    # The first action swaps when it is not the candidate the flow started on.
    _, _, infos = rollout(SelectEnv(**kw, swap_cost=0.3), 5, [1])
    assert infos[1]["swapped"] is True
    with pytest.raises(ValueError, match="swap_cost"):
        SelectEnv(**kw, swap_cost=-0.1)


def test_oracle_from_the_candidates_run_alone(tiny: pathlib.Path) -> None:
    rows = ccp_suite.run(tiny, schemes=["cubic", "bbr"], jobs=1)
    best = best_per_condition(rows, ["cubic", "bbr"])
    assert set(best) == {"fast", "lossy"}
    env = SelectEnv(scenario=str(tiny), candidates=["cubic", "bbr"], oracle=best)
    _, info = env.reset(seed=0)
    assert info["oracle"] == ["cubic", "bbr"].index(best[info["condition"]])
    assert SelectEnv(scenario=str(tiny), candidates=["cubic", "bbr"]).reset(seed=0)[1]["oracle"] == -1


def test_rate_action_moves_the_pacing_rate(tiny: pathlib.Path) -> None:
    env = gym.make("ccp/Rate-v0", scenario=str(tiny), conditions=["fast"])
    env.reset(seed=2)
    _, _, _, _, up = env.step(np.array([1.0], dtype=np.float32))
    rates = [up["rate_bytes_per_sec"]]
    for _ in range(3):
        _, _, _, _, info = env.step(np.array([1.0], dtype=np.float32))
        rates.append(info["rate_bytes_per_sec"])
    # delta 0.5: each +1 multiplies the rate by 1.5.
    assert all(abs(b / a - 1.5) < 1e-3 for a, b in zip(rates, rates[1:])), rates
    for _ in range(3):
        _, _, _, _, info = env.step(np.array([-1.0], dtype=np.float32))
    assert abs(info["rate_bytes_per_sec"] / rates[-1] - 1 / 1.5**3) < 1e-3
    # Decisions every half RTT: ~10 ms apart on a 20 ms path.
    t0 = info["time_s"]
    _, _, _, _, info = env.step(np.array([0.0], dtype=np.float32))
    assert 0.008 < info["time_s"] - t0 < 0.02


def test_cwnd_action_scales_the_window(tiny: pathlib.Path) -> None:
    env = gym.make("ccp/Cwnd-v0", scenario=str(tiny), conditions=["fast"])
    _, info = env.reset(seed=2)
    _, _, _, _, a = env.step(np.array([0.0], dtype=np.float32))
    _, _, _, _, b = env.step(np.array([-1.0], dtype=np.float32))
    assert abs(b["cwnd_bytes"] / a["cwnd_bytes"] - 0.5) < 1e-3


def test_vector_envs_match_single_envs(tiny: pathlib.Path) -> None:
    vec = gym.make_vec(
        "ccp/Select-v0", num_envs=3, vectorization_mode="sync", scenario=str(tiny), duration_s=1.0
    )
    obs, _ = vec.reset(seed=[5, 6, 7])
    assert obs.shape == (3, vec.single_observation_space.shape[0])
    singles = [gym.make("ccp/Select-v0", scenario=str(tiny), duration_s=1.0) for _ in range(3)]
    expect = [e.reset(seed=s)[0] for e, s in zip(singles, [5, 6, 7])]
    assert all(np.array_equal(o, e) for o, e in zip(obs, expect))
    for _ in range(20):
        acts = np.array([1, 0, 2])
        obs, rew, _, _, _ = vec.step(acts)
        want = [e.step(int(a)) for e, a in zip(singles, acts)]
        assert all(np.array_equal(o, w[0]) for o, w in zip(obs, want))
        assert rew.tolist() == [w[1] for w in want]
        if any(w[3] for w in want):
            break


def test_envs_in_threads_give_the_same_episodes(tiny: pathlib.Path) -> None:
    """The GIL is released while stepping: episodes in threads are those of one thread."""

    def episode(seed: int, out: dict) -> None:
        env = SelectEnv(scenario=str(tiny), duration_s=1.0, initial=1)
        env.reset(seed=seed)
        rewards, done = [], False
        while not done:
            _, r, term, trunc, _ = env.step(seed % 3)
            rewards.append(r)
            done = term or trunc
        out[seed] = rewards

    alone: dict = {}
    for s in range(4):
        episode(s, alone)
    threaded: dict = {}
    ts = [threading.Thread(target=episode, args=(s, threaded)) for s in range(4)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    assert threaded == alone


def test_bad_arguments_are_clear_errors(tiny: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="unknown environment kind"):
        ccp_suite.EnvCore("nope", str(tiny))
    with pytest.raises(ValueError, match="unknown"):
        SelectEnv(scenario=str(tiny), candidates=["cubic", "no-such-cca"])
    with pytest.raises(FileNotFoundError):
        SelectEnv(scenario="no-such-scenario")
    with pytest.raises(ValueError, match="step_rtts"):
        SelectEnv(scenario=str(tiny), step_rtts=0)
    core = ccp_suite.EnvCore("cwnd", str(tiny))
    with pytest.raises(RuntimeError, match="before reset"):
        core.step(0.0)
    with pytest.raises(ValueError, match="out of range"):
        core.reset(5, 1)

