"""The Ray driver behind `ccp-eval run SCENARIO --ray [ADDRESS]`.

`ccp-eval` plans the scenario, then runs this script with the project's Python (the `.venv`
the Makefile builds, or `$CCP_PYTHON`) and one JSON argument. Each shard (`--shard i/n`) of
the scenario becomes one Ray task that runs `ccp-eval run ... --shard i/n` on whichever
worker Ray picks, in a fresh temporary directory, and returns the shard's CSV files as bytes
(workers need not share a filesystem with the driver). The driver writes each shard's files
into `<shards_dir>/<i>/`; `ccp-eval` then merges them in plan order, so the report is the one
a local run of the same scenario writes.

A worker that dies mid-shard (killed, out of memory, its node lost) is retried by Ray
(`max_retries`); only the attempt that finishes returns files, and every shard's files are
written once, so nothing is counted twice. Progress (`shard k/n done`) goes to stderr.

The JSON argument:
  ccp_eval       path of the `ccp-eval` binary (the same path must exist on every worker)
  scenario       a built-in scenario name, or null when `scenario_text` is given
  scenario_text  the scenario file's text (sent to the workers), or null
  shards         number of shards (tasks)
  address        Ray cluster address, or null for a local cluster of `local_cpus` CPUs
  local_cpus     CPUs of the local cluster
  run_args       extra `ccp-eval run` arguments (`--seed`, `--schemes`, `--jobs`)
  shards_dir     where the driver writes `<i>/results.csv`, `series.csv`, `swaps.csv`,
                 `decisions.csv`
  kill_marker    tests only: the first attempt of shard 0 creates this file and then dies
                 (SIGKILL, with its `ccp-eval` child) mid-shard, to show the retry; null
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

FILES = ("results.csv", "series.csv", "swaps.csv", "decisions.csv")
# `ccp-eval run` exit codes: 0 all runs ok, 1 some runs failed (their rows say why), 2 bad input.
RUN_OK = (0, 1)


def run_shard(
    ccp_eval: str,
    scenario: str | None,
    scenario_text: str | None,
    index: int,
    shards: int,
    run_args: list[str],
    kill_marker: str | None,
) -> dict[str, bytes]:
    """Runs one shard in a temporary directory; returns its CSV files."""
    with tempfile.TemporaryDirectory(prefix=f"ccp-ray-{index}-") as tmp:
        if scenario_text is not None:
            scenario = os.path.join(tmp, "scenario.toml")
            Path(scenario).write_text(scenario_text)
        out = os.path.join(tmp, "out")
        cmd = [ccp_eval, "run", scenario, "--shard", f"{index}/{shards}", "--out", out, *run_args]
        child = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        if kill_marker is not None and index == 0 and not os.path.exists(kill_marker):
            Path(kill_marker).write_text(f"killed worker {os.getpid()}\n")
            time.sleep(0.2)
            child.kill()
            child.wait()
            # The injected crash skips the `with`'s cleanup; a real one would leave the folder.
            shutil.rmtree(tmp, ignore_errors=True)
            os.kill(os.getpid(), signal.SIGKILL)
        _, err = child.communicate()
        if child.returncode not in RUN_OK:
            raise RuntimeError(
                f"shard {index}/{shards}: `{' '.join(cmd)}` exited with {child.returncode}: "
                + err.decode(errors="replace")[-2000:]
            )
        return {
            name: Path(out, name).read_bytes() for name in FILES if Path(out, name).is_file()
        }


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print("usage: sweep.py JSON", file=sys.stderr)
        return 2
    job = json.loads(argv[1])
    import ray  # imported here so a bad argument is reported without starting Ray

    if job["address"]:
        ray.init(address=job["address"], log_to_driver=False)
    else:
        ray.init(num_cpus=job["local_cpus"], include_dashboard=False, log_to_driver=False)
    try:
        task = ray.remote(max_retries=3, num_cpus=1)(run_shard)
        shards = job["shards"]
        pending = {
            task.remote(
                job["ccp_eval"],
                job["scenario"],
                job["scenario_text"],
                i,
                shards,
                job["run_args"],
                job["kill_marker"],
            ): i
            for i in range(shards)
        }
        done = 0
        started = time.monotonic()
        while pending:
            ready, _ = ray.wait(list(pending), num_returns=1)
            i = pending.pop(ready[0])
            files = ray.get(ready[0])
            out = Path(job["shards_dir"], str(i))
            out.mkdir(parents=True, exist_ok=False)
            for name, data in files.items():
                (out / name).write_bytes(data)
            done += 1
            print(
                f"ray: shard {i} done ({done}/{shards}, {time.monotonic() - started:.1f} s)",
                file=sys.stderr,
                flush=True,
            )
    except Exception as e:  # noqa: BLE001 - any failure of the sweep is reported the same way
        print(f"ray: {e}", file=sys.stderr)
        return 1
    finally:
        ray.shutdown()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
