"""The CCP congestion-control suite from Python (the Rust crate `python/`, built by maturin).

- `run`: a scenario through the harness's runner in this process; `results.csv` rows as dicts.
- `register`: a class with `activate`, `on_report` and `handoff` becomes an algorithm of the
  process registry (a scheme, a selector candidate, an algorithm the agent serves).
- `serve`: the agent on a thread, serving real datapaths over `/tmp/ccp/<agent_name>`.

The registry is installed once per process, by the first `run`, `serve`, `algorithms` or
`candidates`: register every algorithm before that.
"""

import os
from typing import Any, Protocol

UNPACED_RATE: int
"""The datapath `Rate` that means unpaced (2**32 - 1)."""

class FlowStart:
    """What a flow starts with: the argument of an algorithm class's constructor."""

    sock_id: int
    mss_bytes: int
    init_cwnd_bytes: int
    seed: int
    """Seed for the algorithm's randomness (its only source of it)."""
    def __init__(
        self, mss_bytes: int = 1448, init_cwnd_bytes: int = 14480, sock_id: int = 0, seed: int = 0
    ) -> None: ...

class Measurement:
    """One report (once per RTT): sums over the interval, latest values of its last ACK."""

    now_us: int
    acked_bytes: int
    sacked_bytes: int
    lost_pkts: int
    timeout: bool
    rtt_us: int
    """Latest RTT sample, µs (0: none yet)."""
    min_rtt_us: int
    """Smallest RTT sample in the interval, µs (0: none)."""
    rate_incoming_bytes_per_sec: int
    rate_outgoing_bytes_per_sec: int
    inflight_bytes: int
    cwnd_bytes: int
    def __init__(
        self,
        *,
        now_us: int = 0,
        acked_bytes: int = 0,
        sacked_bytes: int = 0,
        lost_pkts: int = 0,
        timeout: bool = False,
        rtt_us: int = 0,
        min_rtt_us: int = 0,
        rate_incoming_bytes_per_sec: int = 0,
        rate_outgoing_bytes_per_sec: int = 0,
        inflight_bytes: int = 0,
        cwnd_bytes: int = 0,
    ) -> None: ...
    def congestion(self) -> bool:
        """Whether the interval saw a loss or a timeout."""

class Handoff:
    """What the next algorithm needs to continue a flow (`activate`'s argument, `handoff`'s result)."""

    now_us: int
    cwnd_bytes: int
    ssthresh_bytes: int
    """Slow-start threshold, bytes (2**32 - 1: none yet)."""
    pacing_bytes_per_sec: int | None
    """Pacing rate, bytes/s (None: unpaced)."""
    srtt_us: int
    min_rtt_us: int
    delivery_rate_bytes_per_sec: int
    last_loss_us: int | None
    in_first_slow_start: bool
    def __init__(
        self,
        *,
        cwnd_bytes: int,
        now_us: int = 0,
        ssthresh_bytes: int = 2**32 - 1,
        pacing_bytes_per_sec: int | None = None,
        srtt_us: int = 0,
        min_rtt_us: int = 0,
        delivery_rate_bytes_per_sec: int = 0,
        last_loss_us: int | None = None,
        in_first_slow_start: bool = True,
    ) -> None: ...

class Control:
    """What an algorithm asks of the datapath. `Control()` (or returning None) keeps the window."""

    cwnd_bytes: int | None
    pacing_bytes_per_sec: int | None
    unpaced: bool
    def __init__(
        self,
        cwnd_bytes: int | None = None,
        pacing_bytes_per_sec: int | None = None,
        unpaced: bool = False,
    ) -> None: ...
    @staticmethod
    def none() -> Control: ...
    @staticmethod
    def cwnd(cwnd_bytes: int) -> Control: ...
    def is_none(self) -> bool: ...

class Algorithm(Protocol):
    """What `register` expects of a class (constructed as `cls(flow_start)` per flow)."""

    def activate(self, handoff: Handoff) -> Control | None: ...
    def on_report(self, m: Measurement) -> Control | None: ...
    def handoff(self) -> Handoff: ...

class Agent:
    """A running agent (`serve`); also a context manager that stops it."""

    name: str
    alg: str
    @property
    def running(self) -> bool: ...
    def stop(self) -> None:
        """Stops the agent (within about a second) and raises if it had failed."""
    def __enter__(self) -> Agent: ...
    def __exit__(self, *exc: object) -> bool: ...

def register(name: str, cls: type, description: str = "a Python algorithm") -> None:
    """Registers `cls` under `name` (a-z, 0-9, `-`, `_`, `.`, starting with a letter). Raises
    RuntimeError once the registry is installed, ValueError for a bad or taken name."""

def run(
    scenario: str | os.PathLike[str],
    schemes: list[str] | None = None,
    seed: int | None = None,
    jobs: int = 0,
) -> list[dict[str, Any]]:
    """Runs a built-in scenario or a TOML file in this process; one dict per flow per run,
    keyed like results.csv. `jobs=0`: one runner thread per core."""

def serve(agent_name: str = "portus", alg: str = "cubic") -> Agent:
    """Serves real flows over /tmp/ccp/<agent_name> on a thread; `alg` for flows naming none."""

def datapath_flow(
    agent_name: str,
    alg: str | None = None,
    acks: int = 200,
    rtt_us: int = 10_000,
    timeout_s: float = 20.0,
) -> dict[str, int]:
    """One flow of the suite's datapath runtime against an agent, in real time: `acks`,
    `agent_acks`, `init_cwnd_bytes`, `cwnd_bytes`."""

def algorithms() -> list[str]:
    """The process registry's algorithms, in order (installs the registry)."""

def candidates() -> list[str]:
    """The selectors' candidates, in order (installs the registry)."""

def stats() -> dict[str, dict[str, int]]:
    """Per registered Python algorithm: `flows`, `reports`, `errors`."""

class EnvCore:
    """One environment of `ccp_suite.gym` without Gymnasium: `reset` starts an episode (one flow
    on a condition of the scenario) and runs it to the end of its first step, `step` to the end of
    the next. Observations are float32 bytes; the GIL is released while the simulation runs."""

    def __init__(
        self,
        kind: str,
        scenario: str | os.PathLike[str],
        candidates: list[str] | None = None,
        window: int = 8,
        step_rtts: float = 1.0,
        step_s: float | None = None,
        history: int = 10,
        delta: float | None = None,
        interval_rtts: float | None = None,
        duration_s: float | None = None,
        path_change: bool = True,
    ) -> None: ...
    def conditions(self) -> list[str]: ...
    def candidates(self) -> list[str]: ...
    def obs_len(self) -> int: ...
    def feature_names(self) -> list[str]: ...
    def duration_s(self) -> float: ...
    def reset(
        self, condition: int, seed: int, initial: int = 0
    ) -> tuple[bytes, tuple[float, float, float, float, float, int, int, int]]:
        """(observation, (reward, throughput Mbit/s, RTT ms, loss, time s, candidate, cwnd
        bytes, pacing bytes/s))."""
    def step(
        self, action: float
    ) -> tuple[bytes, tuple[float, float, float, float, float, int, int, int], bool]:
        """(observation, numbers as in `reset`, episode over)."""
