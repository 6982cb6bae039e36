"""Fixtures of the profiling tests: real traces produced by PyTorch's own tools on the CPU."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

HERE = Path(__file__).parent


@pytest.fixture(scope="session")
def gloo_job(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """A two-rank gloo DDP job recorded by the execution-trace observer and the profiler (both ranks)."""
    pytest.importorskip("torch")
    out = tmp_path_factory.mktemp("gloo")
    store = out / "store"
    env = {**os.environ, "OMP_NUM_THREADS": "1", "GLOO_SOCKET_IFNAME": "lo"}
    procs = [
        subprocess.Popen(
            [sys.executable, str(HERE / "ddp_job.py"), str(r), "2", str(store), str(out)],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
        )
        for r in range(2)
    ]
    logs = [p.communicate(timeout=240)[0].decode(errors="replace") for p in procs]
    for p, log in zip(procs, logs, strict=True):
        assert p.returncode == 0, log[-2000:]
    return {"dir": out, "job": json.loads((out / "job0.json").read_text())}
