"""The daemon's ``GET /metrics``: parsed by prometheus_client's own text parser, counters moving as jobs
arrive, profile, and miss their heartbeats; reads from another host need the token."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import pytest

pytest.importorskip("prometheus_client")

from prometheus_client.parser import text_string_to_metric_families

from commsched.runtime.daemon import ClusterConfig, DaemonService, Store
from commsched.runtime.daemon.api import create_app
from tests.runtime_daemon.conftest import AUTH, TOKEN, FakeClock, LiveServer

CFG = ClusterConfig(topology={"kind": "crux_testbed"}, heartbeat_timeout_s=10.0, profiling_window_s=30.0)

Samples = dict[tuple[str, tuple[tuple[str, str], ...]], float]


def scrape(client: httpx.Client) -> tuple[Samples, set[str]]:
    """Every sample of ``/metrics`` by (name, sorted labels), and the family names (the library's parser)."""
    r = client.get("/metrics")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"].startswith("text/plain")
    out: Samples = {}
    names: set[str] = set()
    for fam in text_string_to_metric_families(r.text):
        names.add(fam.name)
        for s in fam.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out, names


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, tuple(sorted(labels.items()))), 0.0)


def total(samples: Samples, name: str) -> float:
    return sum(v for (n, _), v in samples.items() if n == name)


@pytest.fixture
def stack(tmp_path: Path, live: Callable[[Any], LiveServer]) -> Any:
    clock = FakeClock()
    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG, clock=clock)
    srv = live(create_app(svc, token=TOKEN, tick_s=3600.0))  # the test ticks by hand
    with httpx.Client(base_url=srv.url, timeout=10) as client:
        yield svc, client, clock
    srv.stop()
    svc.store.close()


def test_counters_follow_the_jobs(stack: Any) -> None:
    svc, c, clock = stack
    s, names = scrape(c)
    assert {
        "commsched_daemon_decisions",
        "commsched_daemon_decision_seconds",
        "commsched_daemon_jobs",
    } <= names
    assert total(s, "commsched_daemon_decisions_total") == 0
    assert value(s, "commsched_daemon_heartbeats_missed_total") == 0

    for job, hosts in (("a", ["h0", "h4"]), ("b", ["h1", "h5"])):
        body = {"id": job, "hosts": hosts, "gpus_per_host": 1, "compute_s": 0.2, "comm_bytes": 4e6}
        assert c.post("/v1/jobs", json=body, headers=AUTH).status_code == 201
    s, _ = scrape(c)
    assert value(s, "commsched_daemon_decisions_total", cause="job-start") == 2
    assert value(s, "commsched_daemon_decision_seconds_count") == 2
    assert value(s, "commsched_daemon_decision_seconds_sum") > 0
    assert value(s, "commsched_daemon_decision_version") == 2
    assert total(s, "commsched_daemon_jobs") == 2
    assert all(dict(k[1])["state"] == "profiling" for k in s if k[0] == "commsched_daemon_jobs")

    prof = {"compute_s": 0.5, "comm_bytes": 8e6, "period_s": 0.6}
    assert c.put("/v1/jobs/a/profile", json=prof, headers=AUTH).status_code == 200
    doc = c.get("/v1/decisions/latest").json()
    s, _ = scrape(c)
    assert value(s, "commsched_daemon_decisions_total", cause="profile") == 1
    cls_a, cls_b = str(doc["jobs"]["a"]["class"]), str(doc["jobs"]["b"]["class"])
    expect: dict[tuple[str, str], int] = {}
    for cls, state in ((cls_a, "profiled"), (cls_b, "profiling")):
        expect[(cls, state)] = expect.get((cls, state), 0) + 1
    for (cls, state), n in expect.items():
        assert value(s, "commsched_daemon_jobs", priority_class=cls, state=state) == n
    # the planned link loads are the decision's, link by link
    loads = {str(x["link"]): x for x in doc["link_load"]}
    assert loads
    got = {
        dict(k[1])["link"]: v
        for k, v in s.items()
        if k[0] == "commsched_daemon_link_planned_bytes_per_iteration"
    }
    assert got == {k: x["bytes_per_iter"] for k, x in loads.items()}
    jobs_on = {dict(k[1])["link"]: v for k, v in s.items() if k[0] == "commsched_daemon_link_planned_jobs"}
    assert jobs_on == {k: len(x["jobs"]) for k, x in loads.items()}

    # job b beats, job a stays silent past the timeout: a is removed, b kept
    clock.t += 6.0
    assert c.post("/v1/jobs/b/heartbeat", headers=AUTH).status_code == 200
    s, _ = scrape(c)
    assert value(s, "commsched_daemon_job_heartbeat_age_seconds", job="a") == pytest.approx(6.0)
    assert value(s, "commsched_daemon_job_heartbeat_age_seconds", job="b") == pytest.approx(0.0)
    clock.t += 5.0
    svc.tick()
    s, _ = scrape(c)
    assert value(s, "commsched_daemon_heartbeats_missed_total") == 1
    assert value(s, "commsched_daemon_decisions_total", cause="heartbeat-timeout") == 1
    assert total(s, "commsched_daemon_jobs") == 1
    assert c.delete("/v1/jobs/b", headers=AUTH).status_code == 200
    s, _ = scrape(c)
    assert value(s, "commsched_daemon_decisions_total", cause="job-end") == 1
    assert value(s, "commsched_daemon_decision_seconds_count") == 5
    assert total(s, "commsched_daemon_jobs") == 0
    assert total(s, "commsched_daemon_link_planned_bytes_per_iteration") == 0


def test_two_daemons_in_one_process_count_apart(tmp_path: Path, live: Callable[[Any], LiveServer]) -> None:
    svcs = [DaemonService(Store(tmp_path / f"d{i}.db"), default=CFG) for i in range(2)]
    try:
        urls = [live(create_app(s, token=TOKEN)).url for s in svcs]
        with (
            httpx.Client(base_url=urls[0], timeout=10) as c0,
            httpx.Client(base_url=urls[1], timeout=10) as c1,
        ):
            body = {"id": "a", "hosts": ["h0", "h4"], "gpus_per_host": 1, "compute_s": 0.2, "comm_bytes": 1e6}
            assert c0.post("/v1/jobs", json=body, headers=AUTH).status_code == 201
            s0, _ = scrape(c0)
            s1, _ = scrape(c1)
        assert value(s0, "commsched_daemon_decisions_total", cause="job-start") == 1
        assert value(s1, "commsched_daemon_decisions_total", cause="job-start") == 0
    finally:
        for s in svcs:
            s.store.close()


def test_reads_from_another_host_need_the_token(tmp_path: Path) -> None:
    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG)

    async def get(headers: dict[str, str]) -> httpx.Response:
        transport = httpx.ASGITransport(app=create_app(svc, token=TOKEN), client=("192.0.2.7", 40000))
        async with httpx.AsyncClient(transport=transport, base_url="http://daemon") as c:
            return await c.get("/metrics", headers=headers)

    try:
        assert asyncio.run(get({})).status_code == 401
        assert asyncio.run(get({"Authorization": "Bearer wrong-token"})).status_code == 401
        r = asyncio.run(get(AUTH))
        assert r.status_code == 200
        assert any(f.name == "commsched_daemon_decisions" for f in text_string_to_metric_families(r.text))
    finally:
        svc.store.close()
