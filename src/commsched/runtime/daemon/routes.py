"""The daemon's routes for the cluster, the jobs and the hosts (one :class:`APIRouter` per area).

``GET /v1/cluster`` names the ECMP hash ``hash``, as ``PUT /v1/cluster`` takes it; ``hash_name`` (the
field's name in :class:`~commsched.runtime.daemon.records.ClusterConfig`) is kept beside it as an alias
for clients written against the first answers.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import APIRouter

from commsched.runtime.daemon.jobrequest import JobRequest
from commsched.runtime.daemon.models import ClusterIn, CountersIn, HostIn, JobIn, ProfileIn
from commsched.runtime.daemon.records import ClusterConfig, ProfileRecord
from commsched.runtime.daemon.service import DaemonService
from commsched.runtime.daemon.shapes import (
    ClusterAnswer,
    ClusterJSON,
    CountersAnswer,
    HeartbeatAnswer,
    HostAnswer,
    HostListedJSON,
    JobJSON,
    JobListedJSON,
    JobStartedAnswer,
    VersionAnswer,
)
from commsched.runtime.http.strictjson import StrictJSONRoute
from commsched.runtime.protocol.control_json import NicJSON

__all__ = ["cluster_json", "cluster_router", "hosts_router", "jobs_router"]


def cluster_json(cfg: ClusterConfig) -> ClusterJSON:
    """The cluster as the API shows it: ``hash`` as the PUT takes it, ``hash_name`` as its alias.

    Examples
    --------
    >>> out = cluster_json(ClusterConfig(hash_name="crc32"))
    >>> out["hash"], out["hash_name"]
    ('crc32', 'crc32')
    """
    return {**cfg.to_json(), "hash": cfg.hash_name}


def cluster_router(service: DaemonService, *, read: list[Any], write: list[Any]) -> APIRouter:
    """``GET``/``PUT /v1/cluster``."""
    router = APIRouter(route_class=StrictJSONRoute)

    @router.get("/v1/cluster", dependencies=read)
    async def get_cluster() -> ClusterJSON:
        return cluster_json(service.config)

    @router.put("/v1/cluster", dependencies=write)
    def put_cluster(body: ClusterIn) -> ClusterAnswer:
        given = body.model_dump(exclude_none=True)
        if "hash" in given:
            given["hash_name"] = given.pop("hash")
        v = service.set_cluster(replace(service.config, **given))
        return {"version": v, "cluster": cluster_json(service.config)}

    return router


def jobs_router(service: DaemonService, *, read: list[Any], write: list[Any]) -> APIRouter:
    """Job start, end, heartbeat and profile; the running jobs."""
    router = APIRouter(route_class=StrictJSONRoute)

    @router.get("/v1/jobs", dependencies=read)
    async def list_jobs() -> list[JobListedJSON]:
        return [{**j.to_json(), "heartbeat_age_s": service.heartbeat_age_s(j.id)} for j in service.jobs()]

    @router.post("/v1/jobs", dependencies=write, status_code=201)
    def start_job(body: JobIn) -> JobStartedAnswer:
        data = body.model_dump()
        for k in ("gpu_ids", "hosts"):
            data[k] = tuple(data[k]) if data[k] is not None else None
        rec, v = service.start_job(JobRequest(**data))
        return {"job": rec.to_json(), "version": v}

    @router.get("/v1/jobs/{job_id}", dependencies=read)
    async def get_job(job_id: str) -> JobJSON:
        return service.job(job_id).to_json()

    @router.delete("/v1/jobs/{job_id}", dependencies=write)
    def end_job(job_id: str) -> VersionAnswer:
        return {"version": service.end_job(job_id)}

    @router.post("/v1/jobs/{job_id}/heartbeat", dependencies=write)
    def heartbeat(job_id: str) -> HeartbeatAnswer:
        return {"timeout_s": service.heartbeat(job_id), "version": service.version}

    @router.put("/v1/jobs/{job_id}/profile", dependencies=write)
    def put_profile(job_id: str, body: ProfileIn) -> VersionAnswer:
        return {"version": service.post_profile(job_id, ProfileRecord(**body.model_dump()))}

    return router


def hosts_router(service: DaemonService, *, read: list[Any], write: list[Any]) -> APIRouter:
    """Agents registering their hosts and reporting counters."""
    router = APIRouter(route_class=StrictJSONRoute)

    @router.get("/v1/hosts", dependencies=read)
    async def list_hosts() -> dict[str, HostListedJSON]:
        return service.hosts()

    @router.post("/v1/hosts", dependencies=write, status_code=201)
    def register_host(body: HostIn) -> HostAnswer:
        nics: list[NicJSON] = [{"id": n.id, "ip": n.ip} for n in body.nics]
        service.register_host(body.name, {"nics": nics, "agent": body.agent})
        return {"host": body.name, "version": service.version}

    @router.post("/v1/hosts/{host}/counters", dependencies=write)
    def put_counters(host: str, body: CountersIn) -> CountersAnswer:
        service.put_counters(host, dict(body.counters))
        return {"host": host}

    return router
