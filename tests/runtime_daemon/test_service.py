"""Durable state, recompute per event, heartbeat timeout and profiling window (no HTTP)."""

from __future__ import annotations

import json
import sqlite3
from pathlib import Path

import pytest

from commsched.errors import InputError
from commsched.runtime.daemon import (
    ClusterConfig,
    DaemonService,
    JobRequest,
    ProfileRecord,
    StateConflictError,
    Store,
    UnknownJobError,
)
from tests.runtime_daemon.conftest import FakeClock

CFG = ClusterConfig(topology={"kind": "crux_testbed"}, profiling_window_s=30.0, heartbeat_timeout_s=10.0)


def _svc(path: Path, clock: FakeClock, cfg: ClusterConfig = CFG) -> DaemonService:
    return DaemonService(Store(path), default=cfg, clock=clock)


def _start(svc: DaemonService, jid: str, hosts: tuple[str, ...]) -> int:
    return svc.start_job(JobRequest(id=jid, hosts=hosts, model="bert"))[1]


def test_every_event_makes_a_new_version_and_restart_keeps_them(tmp_path: Path) -> None:
    clock = FakeClock()
    db = tmp_path / "d.db"
    svc = _svc(db, clock)
    assert svc.version == 0
    assert _start(svc, "a", ("h0", "h4")) == 1
    clock.t += 1
    assert _start(svc, "b", ("h1", "h5")) == 2
    assert svc.post_profile("a", ProfileRecord(compute_s=0.05, comm_bytes=2e8, period_s=0.1)) == 3
    before_doc, before_jobs = svc.latest_body(), svc.jobs()
    svc.store.close()

    clock.t += 20  # away for longer than the heartbeat timeout (b is still in its profiling window)
    again = _svc(db, clock, cfg=ClusterConfig(policy="ecmp-fair"))  # a different default is ignored
    assert again.config == CFG
    assert again.version == 3 and again.latest_body() == before_doc and again.jobs() == before_jobs
    assert again.tick() == []  # jobs get a fresh heartbeat deadline after a restart
    assert again.end_job("b") == 4
    doc = json.loads(again.latest_body())
    assert set(doc["jobs"]) == {"a"} and doc["cause"] == {"kind": "job-end", "job": "b", "detail": ""}
    assert [r.version for r in again.store.history(10)] == [4, 3, 2, 1]
    kinds = [e["kind"] for e in again.store.events(0, 100)]
    assert kinds == [
        "daemon-init",
        "daemon-start",
        "job-start",
        "job-start",
        "profile",
        "daemon-start",
        "job-end",
    ]


def test_heartbeat_timeout_removes_the_job_and_recomputes(tmp_path: Path) -> None:
    clock = FakeClock()
    svc = _svc(tmp_path / "d.db", clock)
    _start(svc, "a", ("h0", "h4"))
    _start(svc, "b", ("h1", "h5"))
    clock.t += 8
    svc.heartbeat("a")
    clock.t += 3  # b silent for 11 s, a for 3 s
    assert svc.tick() == [3]
    assert [j.id for j in svc.jobs()] == ["a"]
    doc = json.loads(svc.latest_body())
    assert set(doc["jobs"]) == {"a"} and doc["cause"]["kind"] == "heartbeat-timeout"
    assert all(c["job"] == "a" for c in doc["connections"])
    with pytest.raises(UnknownJobError):
        svc.heartbeat("b")


def test_profiling_window_ends_without_a_profile(tmp_path: Path) -> None:
    clock = FakeClock()
    svc = _svc(
        tmp_path / "d.db", clock, cfg=ClusterConfig(topology={"kind": "crux_testbed"}, profiling_window_s=5.0)
    )
    _start(svc, "a", ("h0", "h4"))
    assert json.loads(svc.latest_body())["jobs"]["a"]["profiling"] is True
    clock.t += 4
    svc.heartbeat("a")
    assert svc.tick() == []
    clock.t += 2
    svc.heartbeat("a")
    assert svc.tick() == [2]
    doc = json.loads(svc.latest_body())
    assert doc["jobs"]["a"]["profiling"] is False and doc["cause"]["kind"] == "profile-window-end"


def test_profile_replaces_the_declared_numbers(tmp_path: Path) -> None:
    svc = _svc(tmp_path / "d.db", FakeClock())
    _start(svc, "a", ("h0", "h4"))
    svc.post_profile("a", ProfileRecord(compute_s=0.25, comm_bytes=123e6, period_s=0.4, overlap=0.5))
    job = svc.job("a")
    assert (job.compute_s, job.comm_bytes, job.overlap, job.profiling) == (0.25, 123e6, 0.5, False)
    doc = json.loads(svc.latest_body())["jobs"]["a"]
    assert (doc["compute_s"], doc["comm_bytes"]) == (0.25, 123e6)


def test_refusals_write_nothing(tmp_path: Path) -> None:
    db = tmp_path / "d.db"
    svc = _svc(db, FakeClock())
    _start(svc, "a", ("h0", "h4"))
    with pytest.raises(StateConflictError, match="already running"):
        _start(svc, "a", ("h1",))
    with pytest.raises(StateConflictError, match="held by job 'a'"):
        svc.start_job(JobRequest(id="b", gpu_ids=("h0/gpu0",), model="bert"))
    with pytest.raises(InputError, match="hosts\\[1\\]: unknown host 'nope'"):
        _start(svc, "c", ("h1", "nope"))
    with pytest.raises(InputError, match="collective"):
        svc.start_job(JobRequest(id="d", gpus=8, model="bert", collective="gossip"))
    with pytest.raises(InputError, match="model"):
        svc.start_job(JobRequest(id="e", gpus=8, model="no-such-model"))
    with pytest.raises(StateConflictError, match="do not fit"):
        svc.start_job(JobRequest(id="f", gpus=96, model="bert"))
    with pytest.raises(StateConflictError, match="jobs are running"):
        svc.set_cluster(ClusterConfig(topology={"kind": "leaf_spine", "leaves": 2, "spines": 2}))
    with pytest.raises(InputError, match="topology"):
        svc.set_cluster(ClusterConfig(topology={"kind": "single_link", "capacity_bps": "fast"}))
    assert svc.version == 1
    rows = sqlite3.connect(db).execute("SELECT COUNT(*) FROM decisions").fetchone()
    assert rows == (1,)


def test_placement_by_count_and_no_topology(tmp_path: Path) -> None:
    svc = _svc(tmp_path / "d.db", FakeClock(), cfg=ClusterConfig())
    with pytest.raises(StateConflictError, match="no cluster topology"):
        svc.start_job(JobRequest(id="a", gpus=8, model="bert"))
    svc.set_cluster(ClusterConfig(topology={"kind": "crux_testbed"}))
    rec, _ = svc.start_job(JobRequest(id="a", gpus=16, model="bert"))
    rec2, _ = svc.start_job(JobRequest(id="b", gpus=16, model="bert"))
    assert len(rec.gpus) == 16 and not set(rec.gpus) & set(rec2.gpus)


def test_wal_mode(tmp_path: Path) -> None:
    svc = _svc(tmp_path / "d.db", FakeClock())
    mode = svc.store._db.execute("PRAGMA journal_mode").fetchone()[0]
    assert mode == "wal"
