"""Reports per second through a trivial Python algorithm in the simulator.

`.venv/bin/python python/bench/reports.py [--jobs N]`: runs python/bench/reports.toml with
`py-trivial` (a fixed window: the cheapest possible Python algorithm) and with `reno` (the
same flows without Python), and prints the reports the Python class handled per wall-clock
second.
"""

import argparse
import pathlib
import time

import ccp_suite


class Trivial:
    """Holds the initial window: one Python call per report and nothing else."""

    def __init__(self, start: ccp_suite.FlowStart) -> None:
        self.cwnd_bytes = 4 * start.mss_bytes

    def activate(self, handoff: ccp_suite.Handoff) -> ccp_suite.Control:
        return ccp_suite.Control.cwnd(self.cwnd_bytes)

    def on_report(self, m: ccp_suite.Measurement) -> ccp_suite.Control | None:
        return None

    def handoff(self) -> ccp_suite.Handoff:
        return ccp_suite.Handoff(cwnd_bytes=self.cwnd_bytes)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--jobs", type=int, default=0, help="runner threads (0: one per core)")
    args = ap.parse_args()
    scenario = pathlib.Path(__file__).with_name("reports.toml")
    ccp_suite.register("py-trivial", Trivial, "a fixed window, in Python (benchmark)")
    started = time.perf_counter()
    rows = ccp_suite.run(scenario, schemes=["reno"], jobs=args.jobs)
    reno_s = time.perf_counter() - started
    started = time.perf_counter()
    rows += ccp_suite.run(scenario, schemes=["py-trivial"], jobs=args.jobs)
    py_s = time.perf_counter() - started
    assert all(r["status"] == "ok" for r in rows), [r["status"] for r in rows]
    s = ccp_suite.stats()["py-trivial"]
    assert s["errors"] == 0, s
    print(f"reno (Rust):        {reno_s:.2f} s wall")
    print(f"py-trivial (Python): {py_s:.2f} s wall, {s['reports']} reports in {s['flows']} flows")
    print(f"{s['reports'] / py_s:,.0f} reports/s through Python (whole runs: simulation included)")


if __name__ == "__main__":
    main()
