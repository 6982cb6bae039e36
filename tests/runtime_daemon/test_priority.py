"""A priority class written on a job reaches the daemon: the static policy gives it, restarts keep it.

``commsched policies`` says of ``static``: "classes = the priorities written on the jobs". A job started
through ``POST /v1/jobs`` had no field to write one, so under the daemon (and so in ``testbed run``, which
registers its jobs there) every job got class 0. The classes expected here are the written ones.
"""

from __future__ import annotations

from pathlib import Path

import httpx
import pytest

from commsched.runtime.daemon import ClusterConfig, DaemonService, JobRequest, Store
from commsched.runtime.daemon.api import create_app
from commsched.runtime.launch.session import _bodies
from tests.runtime_daemon.conftest import AUTH, TOKEN, FakeClock, serve_in_thread

#: no profiling window: a job in its window takes the top class for a while (docs/runtime-daemon.md)
CFG = ClusterConfig(
    topology={"kind": "crux_testbed"}, policy="static", priority_levels=4, profiling_window_s=0.0
)


def _classes(svc: DaemonService) -> dict[str, int]:
    return {j: int(v["class"]) for j, v in svc.latest_doc()["jobs"].items()}


def test_the_static_policy_gives_the_written_classes_and_a_restart_keeps_them(tmp_path: Path) -> None:
    clock = FakeClock()
    db = tmp_path / "d.db"
    svc = DaemonService(Store(db), default=CFG, clock=clock)
    svc.start_job(JobRequest(id="a", hosts=("h0", "h4"), model="bert", priority=2))
    svc.start_job(JobRequest(id="b", hosts=("h1", "h5"), model="bert"))
    svc.start_job(JobRequest(id="c", hosts=("h2", "h6"), model="bert", priority=9))
    # none written: 0; beyond the cluster's 4 levels: the lowest
    assert _classes(svc) == {"a": 2, "b": 0, "c": 3}
    svc.store.close()
    again = DaemonService(Store(db), default=CFG, clock=clock)
    assert {j.id: j.priority for j in again.jobs()} == {"a": 2, "b": None, "c": 9}
    clock.t += 1
    again.start_job(JobRequest(id="d", hosts=("h3", "h7"), model="bert", priority=1))
    assert _classes(again) == {"a": 2, "b": 0, "c": 3, "d": 1}
    again.store.close()


@pytest.mark.parametrize("value", [-1, 64, 1.5, "high"])
def test_a_wrong_priority_is_refused_naming_the_field(tmp_path: Path, value: object) -> None:
    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG)
    srv = serve_in_thread(create_app(svc, token=TOKEN))
    try:
        with httpx.Client(base_url=srv.url, timeout=10) as c:
            body = {"id": "a", "hosts": ["h0", "h4"], "model": "bert"}
            r = c.post("/v1/jobs", json={**body, "priority": value}, headers=AUTH)
            assert r.status_code == 422, r.text
            assert r.json()["field"] == "body.priority"
            assert svc.version == 0
            ok = c.post("/v1/jobs", json={**body, "priority": 3}, headers=AUTH)
            assert ok.status_code == 201, ok.text
            assert c.get("/v1/decisions/latest", headers=AUTH).json()["jobs"]["a"]["class"] == 3
    finally:
        srv.stop()
        svc.store.close()


def test_the_testbed_registers_the_scenario_s_priorities() -> None:
    from commsched.runtime.launch.jobs import CommandJob, JobLayout
    from commsched.topology import NodeId

    lay = JobLayout(id="lib", hosts=("h0",), rails=1, gpus=(NodeId("h0/gpu0"),), compute_s=0.1, overlap=1.0,
                    sync_bytes=1e6, model=None, listeners=(), priority=1)  # fmt: skip
    cmd = CommandJob(id="cmd", argv=("x",), ranks=(), local_world=1, master_port=1, iteration_log=None,
                     compute_s=0.1, sync_bytes=1e6, overlap=1.0, collective="ring",
                     declared=True)  # fmt: skip
    bodies = {b["id"]: b for b in _bodies([lay], [cmd])}
    assert bodies["lib"]["priority"] == 1
    assert "priority" not in bodies["cmd"]  # none written: the field is left out (the daemon's default)
