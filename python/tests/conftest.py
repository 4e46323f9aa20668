"""Fixtures the tests share: `tiny`, a two-condition scenario file (a clean and a lossy path)
for short training runs."""

import pathlib

import pytest

TINY = """\
name = "tcprl-tiny"
duration_s = 3
seeds = [1]

[[conditions]]
id = "clean"
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


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> pathlib.Path:
    p = tmp_path_factory.mktemp("tcprl") / "tiny.toml"
    p.write_text(TINY)
    return p
