"""Reading a hostile execution trace holds bounded memory: checked in a child under an address-space limit."""

from __future__ import annotations

import gzip
import os
import subprocess
import sys
from pathlib import Path

import pytest

_CHILD = """
import resource, sys
limit = int(sys.argv[2])
resource.setrlimit(resource.RLIMIT_AS, (limit, limit))
from commsched.cli.app import app
app(["profile", "--et", sys.argv[1], "--json", *sys.argv[3:]])
"""


def _run_limited(path: Path, limit_bytes: int, *extra: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    return subprocess.run(
        [sys.executable, "-c", _CHILD, str(path), str(limit_bytes), *extra],
        capture_output=True,
        text=True,
        timeout=300,
        env=env,
        check=False,
    )


def _baseline_vm() -> int:
    """Address space the child needs before reading anything (what imports reserve), measured here."""
    out = subprocess.run(
        [sys.executable, "-c", "import commsched.cli.app;print(open('/proc/self/status').read())"],
        capture_output=True, text=True, check=True,
        env={**os.environ, "OMP_NUM_THREADS": "1", "OPENBLAS_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"},
    ).stdout  # fmt: skip
    line = next(ln for ln in out.splitlines() if ln.startswith("VmPeak:"))
    return int(line.split()[1]) * 1024  # kB -> B


@pytest.mark.parametrize("gzipped", [False, True])
def test_a_file_of_zeros_is_refused_in_bounded_memory(tmp_path: Path, gzipped: bool) -> None:
    """30 MB of zeros (an empty protobuf message, over and over) under a limit of 256 MB above what the
    imports need: one line, exit 2, no MemoryError."""
    size = 30 * 10**6
    path = tmp_path / ("zeros.et.gz" if gzipped else "zeros.et")
    if gzipped:
        path.write_bytes(gzip.compress(bytes(size), compresslevel=1))
    else:
        with path.open("wb") as fh:
            fh.truncate(size)
    res = _run_limited(path, _baseline_vm() + 256 * 2**20)
    lines = res.stderr.strip().splitlines()
    assert res.returncode == 2, res.stderr[-2000:]
    assert len(lines) == 1 and lines[0].startswith("error: ") and "Traceback" not in res.stderr
    assert res.stdout == ""


def test_many_small_nodes_stream_in_bounded_memory(tmp_path: Path) -> None:
    """A valid stream of 2,000,000 tiny compute nodes (6 MB): counted in bounded memory, not kept."""
    meta = b"\x0a\x051.0.1"
    node = b"\x08\x01\x18\x04"  # id 1, type COMP_NODE
    body = bytes([len(meta)]) + meta + (bytes([len(node)]) + node) * 2_000_000
    path = tmp_path / "many.et"
    path.write_bytes(body)
    res = _run_limited(path, _baseline_vm() + 160 * 2**20)
    assert res.returncode == 0, res.stderr[-2000:]
    assert '"compute_nodes": 2000000' in res.stdout
