"""The CCP congestion-control suite from Python (the Rust crate `python/`, built by maturin).

- `run`: a scenario through the harness's runner in this process; `results.csv` rows as dicts.
- `register`: a class with `activate`, `on_report` and `handoff` becomes an algorithm of the
  process registry (a scheme, a selector candidate, an algorithm the agent serves).
- `serve`: the agent on a thread, serving real datapaths over `/tmp/ccp/<agent_name>`.
- `ccp_suite.gym`: the simulator as Gymnasium environments (`ccp/Select-v0`, `ccp/Rate-v0`,
  `ccp/Cwnd-v0`; registered when `ccp_suite.gym` is imported).
- `ccp_suite.tcprl`: TCP-RL's selection policy (A2C with an LSTM) and its change detector,
  trained on `ccp/Select-v0` and exported to ONNX for the selector's `tcprl` policy.

The native part is `ccp_suite._native` (typed in `_native.pyi`); everything in it is here.
"""

from ._native import *  # noqa: F403 (the package is the native module plus subpackages)
from ._native import __all__ as _native_all  # type: ignore[attr-defined]

__all__ = list(_native_all)
