"""The daemon registers a job with parallel groups: checked, placed, decided over its groups' connections."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from commsched.errors import InputError
from commsched.runtime.daemon import ClusterConfig, DaemonService, JobRequest, Store
from commsched.workload.grouped_jobs import resolve_model
from tests.runtime_daemon.conftest import FakeClock, serve_in_thread

CFG = ClusterConfig(topology={"kind": "crux_testbed"}, profiling_window_s=0.0, heartbeat_timeout_s=10.0)


def test_daemon_registers_a_grouped_job_and_survives_a_restart(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    svc = DaemonService(Store(db), default=CFG, clock=FakeClock())
    par = {"tp": 8, "pp": 2, "dp": 2, "micro_batches": 4}
    rec, _ = svc.start_job(
        JobRequest(id="g", hosts=("h0", "h1", "h4", "h5"), model="gpt3-crux", parallel=par)
    )
    # per-GPU compute: the model's split over tp x pp = 16 GPUs, stretched by the bubble (4 + 1) / 4
    assert rec.compute_s == pytest.approx(resolve_model("gpt3-crux").compute_s / 16 * 5 / 4)
    assert rec.parallel == par
    doc = json.loads(svc.latest_body())
    # inter-host connections of its groups (rank t + 8 (d + 2 s) on hosts h0, h1 | h4, h5): every PP
    # chain (tp x dp = 16) both ways, every DP pair (tp x pp = 16) both ways; TP stays inside the hosts
    assert len(doc["connections"]) == 2 * 16 + 2 * 16
    again = DaemonService(Store(db), default=CFG, clock=FakeClock())
    assert again.job("g").parallel == par


@pytest.mark.parametrize(
    ("par", "match"),
    [
        ({"tp": 8, "pp": 2, "dp": 3}, "parallel.dp"),
        ({"tp": 2, "dp": 16, "ep": 2}, "parallel.ep: ep = 2 for a model without MoE layers"),
    ],
)
def test_daemon_refuses_bad_parallelism(tmp_path: Path, par: dict[str, int], match: str) -> None:
    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG, clock=FakeClock())
    before = svc.version
    with pytest.raises(InputError, match=match):
        svc.start_job(JobRequest(id="g", hosts=("h0", "h1", "h4", "h5"), model="gpt3-crux", parallel=par))
    assert svc.version == before


def test_daemon_registers_a_named_moe_model_with_expert_parallelism(tmp_path: Path) -> None:
    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG, clock=FakeClock())
    par = {"tp": 2, "dp": 8, "ep": 4, "micro_batches": 2}
    rec, _ = svc.start_job(JobRequest(id="m", hosts=("h2", "h6"), model="mixtral-8x7b@h200", parallel=par))
    assert rec.compute_s == pytest.approx(resolve_model("mixtral-8x7b@h200").compute_s / 2)
    assert json.loads(svc.latest_body())["jobs"]["m"]["gpus"] == list(rec.gpus)


def test_http_job_start_takes_a_parallel_object(tmp_path: Path) -> None:
    import httpx

    from commsched.runtime.daemon.api import create_app

    svc = DaemonService(Store(tmp_path / "d.db"), default=CFG, clock=FakeClock())
    srv = serve_in_thread(create_app(svc, token="t0k"))
    auth = {"Authorization": "Bearer t0k"}
    try:
        with httpx.Client(base_url=srv.url, timeout=10) as client:
            body = {"id": "g", "hosts": ["h0", "h4"], "model": "gpt3-crux", "parallel": {"tp": 8, "dp": 2}}
            r = client.post("/v1/jobs", json=body, headers=auth)
            assert r.status_code == 201, r.text
            assert r.json()["job"]["parallel"]["tp"] == 8
            bad = {**body, "id": "h", "hosts": ["h1", "h5"], "parallel": {"tp": 8, "dp": 3}}
            r = client.post("/v1/jobs", json=bad, headers=auth)
            assert r.status_code in (400, 422) and "parallel" in r.text
            r = client.post("/v1/jobs", json={**bad, "parallel": {"tp": 8, "dp": 2, "sp": 2}}, headers=auth)
            assert r.status_code == 422 and "sp" in r.text
    finally:
        srv.stop()
        svc.store.close()
