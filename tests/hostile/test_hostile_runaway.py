"""Runaway work in a separate process under hard limits: 1 GiB of address space and 10 s of CPU.

The cases would hang or exhaust memory if they were not refused up front (an alias bomb, a nanosecond
iteration simulated exactly, a ten-year horizon, a fabric of 10^5 ToRs, a trace of 10^8 jobs, reading
``/dev/zero``). Each must end in exit 2 with one line, well within the limits.
"""

from __future__ import annotations

import os
import resource
import subprocess
import sys
from pathlib import Path

import pytest

from tests.hostile._cli import MEMORY_LIMIT_BYTES, TIME_LIMIT_S

pytestmark = pytest.mark.slow

SINGLE = """\
topology: {kind: single_link, capacity_bps: 8.0e9}
horizon_s: HORIZON
jobs:
  - {id: a, gpus: 10, compute_s: COMPUTE, comm_bytes: 2.0e9, priority: 0}
"""

BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]" for i in range(9)]
    + ["topology: {kind: single_link}", "horizon_s: 1", "jobs: [*j]"]
)


def _limits() -> None:
    resource.setrlimit(resource.RLIMIT_AS, (MEMORY_LIMIT_BYTES, MEMORY_LIMIT_BYTES))
    cpu = int(TIME_LIMIT_S)
    resource.setrlimit(resource.RLIMIT_CPU, (cpu, cpu))


def _run_limited(args: list[str], cwd: Path) -> tuple[int, str, float]:
    """Run the CLI in a child process under the limits; return exit code, stderr and CPU seconds."""
    env = {**os.environ, "OPENBLAS_NUM_THREADS": "1", "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}
    env.pop("COMMSCHED_DEBUG", None)
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    proc = subprocess.run(
        [sys.executable, "-c", "from commsched.cli.app import main; main()", *args],
        capture_output=True,
        text=True,
        cwd=cwd,
        env=env,
        preexec_fn=_limits,
        timeout=120,  # wall clock: only a guard against a hang on a heavily shared machine
        check=False,
    )
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)
    return proc.returncode, proc.stderr, cpu


CASES = [
    ("alias-bomb", BOMB, "the document expands to more than"),
    ("nanosecond-iteration", SINGLE.replace("HORIZON", "60").replace("COMPUTE", "1.0e-9"), "use --mode fast"),
    ("ten-year-horizon", SINGLE.replace("HORIZON", "3.0e8").replace("COMPUTE", "1.0"), "iterations"),
    ("horizon-1e300", SINGLE.replace("HORIZON", "1.0e300").replace("COMPUTE", "1.0"), "horizon_s"),
    (
        "fabric-of-1e5-tors",
        SINGLE.replace("{kind: single_link, capacity_bps: 8.0e9}", "{kind: two_layer_clos, tors: 100000}")
        .replace("HORIZON", "60")
        .replace("COMPUTE", "1.0"),
        "topology.tors",
    ),
    (
        "trace-of-1e8-jobs",
        "topology: {kind: two_layer_clos}\nhorizon_s: 60\ntrace: {kind: synthetic, jobs: 100000000}\n",
        "trace.jobs",
    ),
]


@pytest.mark.parametrize(("case", "text", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_runaway_work_is_refused_within_limits(tmp_path: Path, case: str, text: str, fragment: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    code, err, cpu = _run_limited(["simulate", str(path)], tmp_path)
    lines = err.strip().splitlines()
    assert code == 2, (code, err[-2000:])
    assert len(lines) == 1 and lines[0].startswith("error: "), err
    assert fragment in lines[0], lines[0]
    assert cpu < TIME_LIMIT_S, cpu


def test_reading_dev_zero_is_refused_within_limits(tmp_path: Path) -> None:
    code, err, cpu = _run_limited(["validate", "/dev/zero"], tmp_path)
    assert code == 2 and err.strip().startswith("error: /dev/zero: not a regular file"), err
    assert cpu < TIME_LIMIT_S, cpu
