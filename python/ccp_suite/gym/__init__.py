"""The suite's simulator as Gymnasium environments (registered on import):

- `ccp/Select-v0` (`SelectEnv`): TCP-RL's congestion-control selection through the real
  selector; action = a candidate, reward = ln(throughput/RTT) per step (default one RTT).
- `ccp/Rate-v0` (`RateEnv`): ARC/Aurora's pacing-rate control, a decision every RTT/2.
- `ccp/Cwnd-v0` (`CwndEnv`): window control, a decision every RTT.

    import gymnasium as gym, ccp_suite.gym
    env = gym.make("ccp/Select-v0", scenario="quick")
    obs, info = env.reset(seed=1)
"""

import gymnasium

from .envs import CwndEnv, RateEnv, SelectEnv, best_per_condition

__all__ = ["CwndEnv", "RateEnv", "SelectEnv", "best_per_condition"]

for _id, _entry in (
    ("ccp/Select-v0", "SelectEnv"),
    ("ccp/Rate-v0", "RateEnv"),
    ("ccp/Cwnd-v0", "CwndEnv"),
):
    if _id not in gymnasium.registry:
        gymnasium.register(id=_id, entry_point=f"ccp_suite.gym.envs:{_entry}")
