"""Iterations from traffic under contention, on the testbed (root; slow; about 5 minutes).

Three unmodified gloo DDP command jobs (the shipped example: a sleep for the compute and a small
model, so that the ranks do not fight for the machine's cores) of three shapes on ``crux_testbed``:
four ranks one per GPU on two hosts, a ring of three hosts, two ranks; every job's first host behind
ToR ``tor0`` and its peers behind ``tor2``/``tor4``, so that they share uplinks. Under ``ecmp-fair``
and ``crux-full`` the iteration measured from each job's traffic (its hosts' byte counters alone) is
within 5 % of the program's own log, and it is found by whole iterations' bytes (the split the job's
hosts agree on, or, where none agrees with the profiling window's bytes per iteration, the byte rate
at those bytes refined by the periodogram's harmonics), not by bursts. Each failure message carries
the run's CPU report (whether the emulation was short of CPU in that window). The run's files
(traffic samples, logs) are kept beside the test's temporary files, so that a failure can be replayed.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from commsched.testbed import netns

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "ddp_gloo_train.py"


def _root() -> None:
    why = netns.missing_capability()
    if why is not None:
        pytest.skip(why)
    pytest.importorskip("torch")
    import shutil

    for tool in ("nft", "nsenter"):
        if shutil.which(tool) is None:
            pytest.skip(f"needs {tool!r} (make sysdeps)")


def _job(job: str, hosts: list[str], dim: int, *, per_gpu: bool = False) -> str:
    cmd = [sys.executable, str(EXAMPLE), "--dim", str(dim), "--iterations", "400", "--compute-s", "0.2"]
    gpus = "gpus_per_host: 2, processes: per_gpu" if per_gpu else "gpus_per_host: 1"
    return (
        f"  - {{id: {job}, hosts: {json.dumps(hosts)}, {gpus}, command: {json.dumps(cmd)},\n"
        f"     iteration_log: 'iteration \\d+ ([0-9.]+)'}}\n"
    )


@pytest.mark.slow
def test_iterations_from_traffic_hold_under_contention(tmp_path: Path) -> None:
    _root()
    text = (
        "name: traffic-shapes\ntopology: {kind: crux_testbed}\npriority_levels: 8\nhorizon_s: 600\njobs:\n"
        + _job("quad", ["h0", "h4"], 512, per_gpu=True)
        + _job("trio", ["h1", "h5", "h9"], 512)
        + _job("duo", ["h2", "h6"], 768)
    )
    path = tmp_path / "s.yaml"
    path.write_text(text)
    name = f"tp{os.getpid() % 100000}"
    env = {**os.environ, "COMMSCHED_TESTBED_DIR": str(tmp_path / "state")}
    try:
        proc = subprocess.run(
            [sys.executable, "-c", "from commsched.cli.app import main; main()", "testbed", "run", str(path),
             "--json", "--quiet", "--name", name, "--policies", "ecmp-fair,crux-full", "--window", "30",
             "--profiling-window", "12", "--keep", str(tmp_path / "keep")],
            capture_output=True, text=True, check=False, timeout=900, env=env,
        )  # fmt: skip
    finally:
        if any(ns.startswith(f"{name}-") for ns in netns.list_namespaces()):
            subprocess.run(
                [sys.executable, "-c", "from commsched.cli.app import main; main()", "testbed", "down", name],
                capture_output=True, check=False, timeout=120, env=env,
            )  # fmt: skip
    assert not [ns for ns in netns.list_namespaces() if ns.startswith(f"{name}-")]
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    for policy, body in report["policies"].items():
        for job, row in body["jobs"].items():
            where = (policy, job, row["measured_iteration_s"], row["logged_iteration_s"], body.get("cpu"))
            assert row["iterations_measured"] >= 10, where
            assert row["traffic_method"] in ("bytes", "harmonics", "byte-rate"), where
            assert abs(row["log_gap"]) <= 0.05, where
            assert row["simulated_iteration_s"] > 0, where
