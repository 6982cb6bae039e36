"""The HTTP API on a live server: token on every mutating route, 4xx naming the field, long-poll."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from commsched.runtime.daemon import ClusterConfig, DaemonService, Store
from commsched.runtime.daemon.api import create_app
from tests.runtime_daemon.conftest import AUTH, TOKEN, LiveServer

CFG = ClusterConfig(topology={"kind": "crux_testbed"}, heartbeat_timeout_s=60.0)
JOB = {"id": "a", "hosts": ["h0", "h4"], "model": "bert"}


@pytest.fixture
def daemon(tmp_path: Path, live: Callable[[Any], LiveServer]) -> Iterator[tuple[DaemonService, httpx.Client]]:
    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG)
    srv = live(create_app(svc, token=TOKEN))
    with httpx.Client(base_url=srv.url, timeout=10) as client:
        yield svc, client
    srv.stop()
    svc.store.close()


def test_every_mutating_route_needs_the_token(daemon: tuple[DaemonService, httpx.Client]) -> None:
    svc, c = daemon
    spec = c.get("/openapi.json").json()
    routes = [(m, p) for p, ops in spec["paths"].items() for m in ops if m in ("post", "put", "delete")]
    assert {("post", "/v1/jobs"), ("put", "/v1/cluster"), ("delete", "/v1/jobs/{job_id}")} <= set(routes)
    for method, path in routes:
        url = path.replace("{job_id}", "a").replace("{host}", "h0")
        for headers in ({}, {"Authorization": "Bearer wrong-token"}, {"Authorization": "Basic abc"}):
            r = c.request(method, url, json=JOB, headers=headers)
            assert r.status_code == 401, (method, path, headers, r.text)
            assert r.headers["www-authenticate"] == "Bearer"
    assert svc.version == 0 and svc.jobs() == [] and svc.hosts() == {}
    r = c.post("/v1/jobs", json=JOB, headers=AUTH)
    assert r.status_code == 201 and r.json()["version"] == 1
    assert c.get("/v1/jobs").status_code == 200  # reads are open on loopback


@pytest.mark.parametrize(
    ("body", "code", "field"),
    [
        ({**JOB, "gpus": "many"}, 422, "body.gpus"),
        ({**JOB, "overlap": 2}, 422, "body.overlap"),
        ({**JOB, "colour": "red"}, 422, "body.colour"),
        ({"hosts": ["h0"], "model": "bert"}, 422, "body.id"),
        ({**JOB, "hosts": ["h0", "h99"]}, 400, "hosts[1]"),
        ({**JOB, "model": "nosuch"}, 400, "model"),
        ({**JOB, "collective": "gossip"}, 400, "collective"),
        ({"id": "b", "model": "bert"}, 400, "gpus"),
        ({"id": "b", "gpus": 200, "model": "bert"}, 400, "gpus"),
    ],
)
def test_bad_job_requests_name_the_field(
    daemon: tuple[DaemonService, httpx.Client], body: dict[str, Any], code: int, field: str
) -> None:
    svc, c = daemon
    r = c.post("/v1/jobs", json=body, headers=AUTH)
    assert r.status_code == code, r.text
    out = r.json()
    assert out["field"] == field and field in out["error"]
    assert svc.version == 0


def test_not_found_and_conflicts(daemon: tuple[DaemonService, httpx.Client]) -> None:
    _, c = daemon
    assert c.post("/v1/jobs", json=JOB, headers=AUTH).status_code == 201
    assert c.post("/v1/jobs", json=JOB, headers=AUTH).status_code == 409
    r = c.post("/v1/jobs", json={**JOB, "id": "b"}, headers=AUTH)
    assert r.status_code == 409 and "held by job 'a'" in r.json()["error"]
    assert c.delete("/v1/jobs/zz", headers=AUTH).status_code == 404
    assert c.post("/v1/jobs/zz/heartbeat", headers=AUTH).status_code == 404
    assert c.get("/v1/decisions/99").status_code == 404
    bad = {"compute_s": -1, "comm_bytes": 1, "period_s": 1}
    r = c.put("/v1/jobs/a/profile", json=bad, headers=AUTH)
    assert r.status_code == 422 and r.json()["field"] == "body.compute_s"
    r = c.put("/v1/cluster", json={"policy": "nosuch"}, headers=AUTH)
    assert r.status_code == 400 and r.json()["field"] == "policy"
    r = c.put("/v1/cluster", json={"topology": {"kind": "leaf_spine"}}, headers=AUTH)
    assert r.status_code == 409


def test_long_poll_answers_at_once_on_a_new_version(daemon: tuple[DaemonService, httpx.Client]) -> None:
    _, c = daemon
    t0 = time.monotonic()
    r = c.get("/v1/decisions/latest", params={"after": 0, "wait_s": 0.3})
    assert r.json()["version"] == 0 and time.monotonic() - t0 >= 0.3  # nothing new: waits it out
    got: dict[str, Any] = {}

    def wait() -> None:
        r = c.get("/v1/decisions/latest", params={"after": 0, "wait_s": 120})
        got["doc"], got["t"] = r.json(), time.monotonic()

    th = threading.Thread(target=wait)
    th.start()
    time.sleep(0.3)
    assert c.post("/v1/jobs", json=JOB, headers=AUTH).status_code == 201
    t_posted = time.monotonic()  # the decision is committed when the POST answers
    th.join(timeout=120)
    assert got["doc"]["version"] == 1 and set(got["doc"]["jobs"]) == {"a"}
    # answered with the new version, not at the end of its 120 s wait (a loaded machine may take
    # seconds to schedule the waiting thread: the bound tells the two apart, not the speed)
    assert got["t"] - t_posted < 20.0
    view = c.get("/v1/decisions/latest", params={"host": "h4"}).json()
    assert view["host"] == "h4" and set(view["jobs"]) == {"a"}
    assert view["connections"] and all(x["src_nic"].startswith("h4/") for x in view["connections"])
    assert set(view["nic_ips"]) >= {x["dst_nic"] for x in view["connections"]}
    assert c.get("/v1/decisions/latest", params={"host": "h3"}).json()["jobs"] == {}


def test_server_sent_events_announce_versions(daemon: tuple[DaemonService, httpx.Client]) -> None:
    _, c = daemon
    lines: list[str] = []

    def listen() -> None:
        with c.stream("GET", "/v1/decisions/stream", params={"after": 0}) as r:
            for line in r.iter_lines():
                lines.append(line)
                if line.startswith("data:"):
                    return

    th = threading.Thread(target=listen)
    th.start()
    time.sleep(0.2)
    c.post("/v1/jobs", json=JOB, headers=AUTH)
    th.join(timeout=10)
    assert "event: decision" in lines and 'data: {"version": 1}' in lines


def test_hosts_counters_and_history(daemon: tuple[DaemonService, httpx.Client]) -> None:
    _, c = daemon
    host = {"name": "h0", "nics": [{"id": "h0/nic0", "ip": "192.168.7.1"}], "agent": "http://127.0.0.1:1"}
    assert c.post("/v1/hosts", json=host, headers=AUTH).status_code == 201
    assert c.post("/v1/hosts/h9/counters", json={"counters": {"x": 1}}, headers=AUTH).status_code == 404
    assert (
        c.post("/v1/hosts/h0/counters", json={"counters": {"eth0.tx_bytes": 5}}, headers=AUTH).status_code
        == 200
    )
    hosts = c.get("/v1/hosts").json()
    assert hosts["h0"]["counters"]["eth0.tx_bytes"] == 5
    c.post("/v1/jobs", json=JOB, headers=AUTH)
    c.delete("/v1/jobs/a", headers=AUTH)
    hist = c.get("/v1/decisions").json()
    assert [(h["version"], h["cause"]["kind"]) for h in hist] == [(2, "job-end"), (1, "job-start")]
    assert c.get("/v1/decisions/1").json()["jobs"]["a"]["hosts"] == ["h0", "h4"]
    kinds = [e["kind"] for e in c.get("/v1/events").json()]
    assert kinds[-3:] == ["host-register", "job-start", "job-end"]


def test_reads_from_another_host_need_the_token(tmp_path: Path) -> None:
    import asyncio

    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG)
    transport = httpx.ASGITransport(app=create_app(svc, token=TOKEN), client=("10.1.2.3", 40000))

    async def codes() -> list[int]:
        async with httpx.AsyncClient(transport=transport, base_url="http://daemon") as c:
            out = []
            for headers in (
                {},
                {"Authorization": "Bearer wrong-token"},
                {"Authorization": "Basic abc"},
                AUTH,
            ):
                for path in ("/v1/decisions/latest", "/v1/jobs"):
                    out.append((await c.get(path, headers=headers)).status_code)
            return out

    try:
        assert asyncio.run(codes()) == [401] * 6 + [200] * 2
    finally:
        svc.store.close()
