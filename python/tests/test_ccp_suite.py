"""ccp_suite: Python algorithms in the simulator, as selector candidates and served by the agent.

The registry is installed once per process (by the first `run`), so every class is registered
at import, before any test runs: first the refused registrations, then the example of
docs/writing-a-cca.md, run verbatim (it registers `py-aimd` and runs `quick`), then the rest.
"""

import logging
import os
import pathlib
import re

import pytest

import ccp_suite
from ccp_suite import Control, FlowStart, Handoff, Measurement

ROOT = pathlib.Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "writing-a-cca.md"


class Raises:
    """Raises in every `on_report`: the flow must keep its window and keep running."""

    def __init__(self, start: FlowStart) -> None:
        self.cwnd_bytes = start.init_cwnd_bytes

    def activate(self, handoff: Handoff) -> Control:
        self.cwnd_bytes = handoff.cwnd_bytes
        return Control.cwnd(self.cwnd_bytes)

    def on_report(self, m: Measurement) -> Control:
        raise ZeroDivisionError("on purpose")

    def handoff(self) -> Handoff:
        return Handoff(cwnd_bytes=self.cwnd_bytes)


class WrongType(Raises):
    """Answers a number, not a Control."""

    def on_report(self, m: Measurement) -> Control:
        return 42  # type: ignore[return-value]


def _error(f) -> Exception | None:
    try:
        f()
    except Exception as e:  # noqa: BLE001 (the test looks at which)
        return e
    return None


BAD_NAME = _error(lambda: ccp_suite.register("Not A Name", Raises, "x"))
TAKEN_NAME = _error(lambda: ccp_suite.register("cubic", Raises, "x"))
NOT_AN_ALGORITHM = _error(lambda: ccp_suite.register("py-nothing", int, "x"))
ccp_suite.register("py-raises", Raises, "raises in on_report (test)")
ccp_suite.register("py-wrong-type", WrongType, "answers 42 (test)")

# The documented example, verbatim.
EXAMPLE = re.search(r"## In Python\n.*?```python\n(.*?)```", DOC.read_text(), re.S).group(1)
DOC_NS: dict = {}
exec(compile(EXAMPLE, str(DOC), "exec"), DOC_NS)  # noqa: S102 (the doc's own code)

TINY = """\
name = "tiny"
duration_s = 5
seeds = [3]

[[conditions]]
bw_mbps = 10
rtt_ms = 20
buffer_bdp = 2
"""


@pytest.fixture
def tiny(tmp_path: pathlib.Path) -> pathlib.Path:
    p = tmp_path / "tiny.toml"
    p.write_text(TINY)
    return p


def test_refused_registrations_say_why() -> None:
    assert isinstance(BAD_NAME, ValueError) and "Not A Name" in str(BAD_NAME)
    assert isinstance(TAKEN_NAME, ValueError) and "already" in str(TAKEN_NAME)
    assert isinstance(NOT_AN_ALGORITHM, TypeError) and "activate" in str(NOT_AN_ALGORITHM)


def test_the_documented_aimd_runs_in_the_simulator_and_moves_data() -> None:
    rows = DOC_NS["rows"]
    aimd = [r for r in rows if r["scheme"] == "py-aimd"]
    assert len(aimd) == 5  # quick: five conditions, one seed
    for r in aimd:
        assert r["status"] == "ok", r
        assert r["flow_scheme"] == "py-aimd"
        assert r["throughput_mbps"] > 0.1 and r["utilization"] > 0.1, r
        assert r["fallback_s"] == 0 and r["takeovers"] == 1, r
    assert list(rows[0])[:4] == ["scenario", "env", "condition", "bw_mbps"]
    assert list(rows[0])[-1] == "status"
    s = ccp_suite.stats()["py-aimd"]
    assert s["flows"] >= 5 and s["reports"] > 1000 and s["errors"] == 0, s


def test_a_python_algorithm_is_a_selector_candidate() -> None:
    assert "py-aimd" in ccp_suite.candidates()
    assert ccp_suite.algorithms()[-4:] == ["arc", "py-raises", "py-wrong-type", "py-aimd"]
    rein = [r for r in DOC_NS["rows"] if r["scheme"] == "selector-rein"]
    assert rein and all(r["status"] == "ok" for r in rein), rein


def test_an_exception_in_on_report_is_logged_counted_and_survived(
    tiny: pathlib.Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="ccp_suite")
    rows = ccp_suite.run(tiny, schemes=["py-raises", "py-wrong-type"])
    assert len(rows) == 2
    for r in rows:
        # The window stays at the initial 10 MSS, answered on every report: data moves, and
        # the datapath never took the flow for one whose agent went silent.
        assert r["status"] == "ok", r
        assert r["throughput_mbps"] > 1.0, r
        assert r["fallback_s"] == 0 and r["takeovers"] == 1, r
    s = ccp_suite.stats()
    for name in ["py-raises", "py-wrong-type"]:
        assert s[name]["errors"] == s[name]["reports"] > 50, s
    text = caplog.text
    assert "py-raises" in text and "ZeroDivisionError: on purpose" in text, text
    assert "expected a ccp_suite.Control" in text, text


def test_register_after_the_registry_is_installed_is_refused() -> None:
    with pytest.raises(RuntimeError, match="register every algorithm first"):
        ccp_suite.register("py-late", Raises, "too late")


def test_run_errors_name_the_problem(tiny: pathlib.Path) -> None:
    with pytest.raises(ValueError, match="unknown scheme `tahoe`"):
        ccp_suite.run(tiny, schemes=["tahoe"])
    with pytest.raises(FileNotFoundError, match="quick"):
        ccp_suite.run(tiny.parent / "missing.toml")
    with pytest.raises(ValueError):
        Control(pacing_bytes_per_sec=0)


def test_types_mirror_the_rust_structs() -> None:
    m = Measurement(acked_bytes=1448, lost_pkts=1, rtt_us=20_000)
    assert m.congestion() and m.rtt_us == 20_000 and m.now_us == 0
    h = Handoff(cwnd_bytes=28960)
    assert h.pacing_bytes_per_sec is None and h.ssthresh_bytes == 2**32 - 1
    assert Control().is_none() and not Control.cwnd(1).is_none()
    assert FlowStart().mss_bytes == 1448


def test_serve_runs_a_python_algorithm_for_a_real_flow() -> None:
    name = f"py-test-{os.getpid()}"
    before = ccp_suite.stats()["py-aimd"]
    agent = ccp_suite.serve(name, alg="cubic")
    try:
        assert agent.running
        # The suite's datapath runtime over /tmp/ccp unix sockets, one flow asking for
        # py-aimd: the agent installs its program and py-aimd's window grows per report.
        flow = ccp_suite.datapath_flow(name, alg="py-aimd", acks=300)
    finally:
        agent.stop()
    assert not agent.running
    assert flow["agent_acks"] >= 300, flow
    assert flow["cwnd_bytes"] > flow["init_cwnd_bytes"], flow
    after = ccp_suite.stats()["py-aimd"]
    assert after["flows"] == before["flows"] + 1, (before, after)
    assert after["reports"] > before["reports"], (before, after)
    assert not (pathlib.Path("/tmp/ccp") / name).exists()
