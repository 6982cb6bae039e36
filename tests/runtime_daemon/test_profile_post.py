"""A job process measures its profile (W_j, t_j, FFT period) and posts it; the daemon recomputes with it."""

from __future__ import annotations

import json
import socket
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from commsched.runtime.jobside.jobproc import run
from tests.runtime_daemon.conftest import AUTH, TOKEN, Proc, start_process

pytestmark = pytest.mark.slow

COMPUTE_S = 0.12
RAIL_BYTES = 400_000


def _free_ports(k: int) -> list[int]:
    socks = [socket.socket() for _ in range(k)]
    try:
        for s in socks:
            s.bind(("127.0.0.1", 0))
        return [int(s.getsockname()[1]) for s in socks]
    finally:
        for s in socks:
            s.close()


def _spec(tmp: Path, k: int, ports: list[int], profile: dict[str, Any] | None) -> dict[str, Any]:
    return {
        "job": "cs3-prof",
        "host_index": k,
        "hosts": 2,
        "rails": 1,
        "compute_s": COMPUTE_S,
        "overlap": 0.5,
        "rail_bytes": RAIL_BYTES,
        "listen": [[["127.0.0.1", p] for p in ports]],
        "agent": None,
        "ready": str(tmp / f"ready{k}"),
        "go": str(tmp / "go"),
        "out": str(tmp / f"out{k}.json"),
        "refresh_s": None,
        "calibration": 0,
        "timeout_s": 20.0,
        "go_timeout_s": 30.0,
        "profile": profile,
    }


def test_job_posts_its_measured_profile_and_the_daemon_recomputes(tmp_path: Path, procs: list[Proc]) -> None:
    import httpx

    (tmp_path / "tok").write_text(TOKEN + "\n")
    sock = tmp_path / "d.sock"
    procs.append(
        start_process(
            ["daemon", "--db", str(tmp_path / "d.db"), "--listen", f"unix:{sock}",
             "--token-file", str(tmp_path / "tok"), "--topology", "crux_testbed",
             "--heartbeat-timeout", "0", "--profiling-window", "60"],
            tmp_path,
        )
    )  # fmt: skip
    client = httpx.Client(transport=httpx.HTTPTransport(uds=str(sock)), base_url="http://local", timeout=10.0)
    with client:
        declared = {"id": "cs3-prof", "hosts": ["h0", "h4"], "compute_s": 1.0, "comm_bytes": 1e9}
        assert client.post("/v1/jobs", json=declared, headers=AUTH).status_code == 201
        before = client.get("/v1/decisions/latest").json()
        assert before["jobs"]["cs3-prof"]["profiling"] is True

        ports = _free_ports(2)
        profile = {"window_s": 2.0, "daemon": str(sock), "token_file": str(tmp_path / "tok")}
        results: list[Any] = [None, None]

        def host(k: int) -> None:
            results[k] = run(_spec(tmp_path, k, ports, profile if k == 0 else None))

        threads = [threading.Thread(target=host, args=(k,)) for k in range(2)]
        for t in threads:
            t.start()
        deadline = time.time() + 30
        while not all((tmp_path / f"ready{k}").exists() for k in range(2)):
            assert time.time() < deadline, "job processes not ready"
            time.sleep(0.05)
        now = time.time()
        (tmp_path / "go").write_text(json.dumps({"start": now + 0.2, "end_at": now + 3.5}))
        for t in threads:
            t.join(60)
        assert all(r is not None and not r["errors"] for r in results), results

        rep = results[0]["profile"]
        assert rep is not None and "error" not in rep, rep
        assert rep["status"] == 200
        its = [b - a for a, b in results[0]["iterations"]]
        mean_it = sum(its[1:]) / len(its[1:])
        posted = rep["posted"]
        # the FFT's period is the iteration time the job really ran at
        assert posted["period_s"] == pytest.approx(mean_it, rel=0.15)
        # W_j: compute reported per iteration; t_j: a 2-host ring sends each rail's bytes once
        assert posted["compute_s"] == pytest.approx(COMPUTE_S, rel=0.2)
        assert posted["comm_bytes"] == pytest.approx(RAIL_BYTES, rel=0.2)
        assert results[1]["profile"] is None

        job = client.get("/v1/jobs/cs3-prof").json()
        assert job["profiling"] is False
        assert job["compute_s"] == pytest.approx(posted["compute_s"])
        assert job["comm_bytes"] == pytest.approx(posted["comm_bytes"])
        latest = client.get("/v1/decisions/latest").json()
        assert latest["version"] == rep["answer"]["version"] > before["version"]
        assert latest["cause"]["kind"] == "profile"
        assert latest["jobs"]["cs3-prof"]["profiling"] is False
        assert latest["jobs"]["cs3-prof"]["compute_s"] == pytest.approx(posted["compute_s"])
