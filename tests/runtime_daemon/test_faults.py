"""Real processes: the daemon killed with SIGKILL and restarted mid-run, agent restart, heartbeat removal."""

from __future__ import annotations

import contextlib
import json
import signal
import socket
import threading
from pathlib import Path

import httpx
import pytest

from tests.runtime_daemon.conftest import AUTH, TOKEN, Proc, start_process, wait_until

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _daemon(tmp: Path, port: int) -> Proc:
    return start_process(
        [
            "daemon",
            "--db",
            str(tmp / "d.db"),
            "--listen",
            f"127.0.0.1:{port}",
            "--token-file",
            str(tmp / "tok"),
            "--topology",
            "crux_testbed",
            "--heartbeat-timeout",
            "2",
            "--profiling-window",
            "30",
        ],
        tmp,
    )


def test_daemon_sigkill_restart_agent_restart_and_heartbeat_timeout(  # noqa: PLR0915 -- one fault scenario, step by step
    tmp_path: Path, procs: list[Proc]
) -> None:
    (tmp_path / "tok").write_text(TOKEN + "\n")
    port = _free_port()
    procs.append(_daemon(tmp_path, port))
    base = procs[-1].url
    agent_args = [
        "agent",
        "--daemon",
        base,
        "--host",
        "h0",
        "--token-file",
        str(tmp_path / "tok"),
        "--state",
        str(tmp_path / "h0.json"),
        "--wait",
        "1",
        "--listen",
        "127.0.0.1:0",
    ]
    procs.append(start_process(agent_args, tmp_path))
    agent_url = procs[-1].url
    stop = threading.Event()
    beating = {"a", "b"}

    with httpx.Client(base_url=base, headers=AUTH, timeout=10) as c, httpx.Client(timeout=10) as ac:

        def beat() -> None:  # the jobs' heartbeats, through the daemon's restart
            while not stop.wait(0.3):
                for j in list(beating):
                    with contextlib.suppress(httpx.HTTPError):
                        c.post(f"/v1/jobs/{j}/heartbeat")

        beater = threading.Thread(target=beat, daemon=True)
        try:
            assert (
                c.post("/v1/jobs", json={"id": "a", "hosts": ["h0", "h4"], "model": "bert"}).status_code
                == 201
            )
            assert (
                c.post("/v1/jobs", json={"id": "b", "hosts": ["h1", "h5"], "model": "gpt"}).status_code == 201
            )
            beater.start()
            wait_until(
                lambda: ac.get(agent_url + "/health").json()["version"] == 2, what="agent at version 2"
            )
            jobs_before = c.get("/v1/jobs").json()
            doc_before = c.get("/v1/decisions/latest").text
            conn = json.loads(doc_before)["connections"][0]
            assert conn["src_nic"].startswith("h0/")
            q = {"job": "a", "src_rank": conn["src_rank"], "dst_rank": conn["dst_rank"]}
            port_before = ac.get(agent_url + "/v1/port", params=q).json()

            procs[0].popen.send_signal(signal.SIGKILL)  # daemon dies mid-run
            procs[0].popen.wait(timeout=10)
            wait_until(
                lambda: ac.get(agent_url + "/health").json()["connected"] is False, what="agent sees it"
            )
            stale = ac.get(agent_url + "/v1/port", params=q).json()
            assert stale["stale"] is True and stale["src_port"] == port_before["src_port"]

            procs.append(_daemon(tmp_path, port))  # same database, same address
            assert [j["id"] for j in c.get("/v1/jobs").json()] == [j["id"] for j in jobs_before]
            assert c.get("/v1/decisions/latest").text == doc_before  # no decision changed
            wait_until(
                lambda: ac.get(agent_url + "/health").json()["connected"] is True, what="agent reconnects"
            )
            assert ac.get(agent_url + "/v1/port", params=q).json() == port_before

            beating.discard("b")  # b's processes die: removed after the heartbeat timeout
            wait_until(lambda: c.get("/health").json()["version"] == 3, timeout_s=8, what="heartbeat removal")
            latest = c.get("/v1/decisions/latest").json()
            assert set(latest["jobs"]) == {"a"} and latest["cause"]["kind"] == "heartbeat-timeout"
            wait_until(
                lambda: ac.get(agent_url + "/health").json()["version"] == 3, what="agent at version 3"
            )

            at_v3 = ac.get(agent_url + "/v1/port", params=q).json()
            assert at_v3["version"] == 3 and at_v3["src_port"] is not None
            procs[1].popen.send_signal(signal.SIGKILL)  # agent restart: serves its last decision at once
            procs[1].popen.wait(timeout=10)
            procs.append(start_process(agent_args, tmp_path))
            again = ac.get(procs[-1].url + "/v1/port", params=q).json()
            assert {k: v for k, v in again.items() if k != "stale"} == {
                k: v for k, v in at_v3.items() if k != "stale"
            }
            assert (
                c.post("/v1/jobs", json={"id": "c", "hosts": ["h2", "h6"], "model": "bert"}).status_code
                == 201
            )
            wait_until(lambda: ac.get(procs[-1].url + "/health").json()["version"] == 4, what="next event")
        finally:
            stop.set()
            if beater.is_alive():
                beater.join(timeout=5)
    assert procs[2].terminate() == 0  # SIGTERM: clean stop


def test_contract_openapi_and_token(tmp_path: Path, procs: list[Proc]) -> None:
    (tmp_path / "tok").write_text("contract-token-123\n")
    procs.append(
        start_process(
            [
                "daemon",
                "--db",
                str(tmp_path / "d.db"),
                "--listen",
                "127.0.0.1:0",
                "--token-file",
                str(tmp_path / "tok"),
            ],
            tmp_path,
        )
    )
    with httpx.Client(base_url=procs[-1].url, timeout=10) as c:
        spec = c.get("/openapi.json").json()
        posts = [p for p, ops in spec["paths"].items() if "post" in ops]
        assert posts
        for p in posts:
            r = c.post(p.replace("{job_id}", "x").replace("{host}", "x"), json={})
            assert r.status_code == 401
        r = c.post(
            "/v1/jobs",
            json={"id": "a", "gpus": 1, "model": "bert"},
            headers={"Authorization": "Bearer contract-token-123"},
        )
        assert r.status_code == 409 and r.json()["field"] == "topology"
