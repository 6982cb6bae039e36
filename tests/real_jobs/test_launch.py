"""``commsched launch --job J -- env`` against a running daemon and host agent (processes, loopback)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

pytest.importorskip("fastapi")
httpx = pytest.importorskip("httpx")

from tests.runtime_daemon.conftest import TOKEN, start_process, wait_until  # noqa: E402


def _cli(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    code = "import sys; from commsched.cli.app import main; sys.argv[0] = 'commsched'; main()"
    return subprocess.run(
        [sys.executable, "-c", code, *args], capture_output=True, text=True, timeout=120, env=env, check=False
    )


def test_launch_prints_the_nccl_environment_of_the_jobs_class(tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text(TOKEN)
    daemon = start_process(
        ["daemon", "--db", str(tmp_path / "d.db"), "--token-file", str(token), "--policy", "crux-full",
         "--topology", "crux_testbed", "--profiling-window", "0"],
        tmp_path,
    )  # fmt: skip
    agent = None
    try:
        agent = start_process(
            ["agent", "--daemon", daemon.url, "--host", "h0", "--token-file", str(token), "--wait", "1",
             "--state", str(tmp_path / "a.json"), "--nic", "h0/nic0=127.0.0.1"],
            tmp_path,
        )  # fmt: skip
        auth = {"Authorization": f"Bearer {TOKEN}"}
        for job, gpus in (("a", ["h0/gpu0", "h4/gpu0"]), ("b", ["h0/gpu1", "h5/gpu0"])):
            body = {"id": job, "gpu_ids": gpus, "compute_s": 0.1 if job == "a" else 1.0, "comm_bytes": 1e9}
            assert httpx.post(f"{daemon.url}/v1/jobs", json=body, headers=auth).status_code == 201

        def decided() -> bool:
            return len(httpx.get(f"{agent.url}/v1/decision").json().get("jobs", {})) == 2

        wait_until(decided, 20, "the agent's decision")
        want = httpx.get(f"{daemon.url}/v1/decisions/latest").json()["jobs"]
        for job in ("a", "b"):
            out = _cli("launch", "--job", job, "--agent", agent.url, "--", "env")
            assert out.returncode == 0, out.stderr
            env = dict(line.split("=", 1) for line in out.stdout.splitlines() if "=" in line)
            assert env["NCCL_IB_TC"] == str(want[job]["dscp"] << 2)
            assert env["NCCL_IB_SL"] == str(want[job]["class"])
            assert env["NCCL_SOCKET_IFNAME"] == "=lo" and env["COMMSCHED_JOB"] == job
        assert want["a"]["class"] != want["b"]["class"]  # two classes: the variables differ
        bad = _cli("launch", "--job", "nope", "--agent", agent.url, "--", "env")
        assert (
            bad.returncode == 2
            and "no decision for job 'nope'" in bad.stderr
            and "Traceback" not in bad.stderr
        )
        env = {**os.environ, "COMMSCHED_AGENT": agent.url}
        assert _cli("launch", "--job", "a", "--", "true", env=env).returncode == 0
    finally:
        for p in (agent, daemon):
            if p is not None:
                p.kill()
                for stream in (p.popen.stdout, p.popen.stderr):
                    if stream is not None:
                        stream.close()
