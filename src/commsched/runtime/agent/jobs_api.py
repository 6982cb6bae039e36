"""The agent's routes for unmodified jobs: environment hand-out, processes, adoption, measurements.

``GET /v1/jobs/{job}/env`` works on every agent: the environment a job's processes on this host get
(NCCL's traffic class, service level and interfaces for the job's class and rails, see
:mod:`commsched.runtime.enforce.marking.nccl`). The others need an agent started with ``--enforce``
(:mod:`commsched.runtime.enforce`); they answer 409 otherwise. The routes that start, adopt or stop
processes need the agent's bearer token when it has one (``--token-file``), since the agent runs them
with its own privileges.
"""

from __future__ import annotations

import hmac
from dataclasses import dataclass
from typing import Annotated, Any

from fastapi import FastAPI, Header, Query, Request
from fastapi import Path as PathParam
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field

from commsched.errors import InputError
from commsched.runtime.agent.answers import (
    AdoptAnswer,
    ConnectionsAnswer,
    ForgetAnswer,
    JobEnvAnswer,
    StopAnswer,
)
from commsched.runtime.agent.follower import Follower
from commsched.runtime.enforce.host import JobProfileJSON
from commsched.runtime.enforce.processes.spawn import ProcessJSON
from commsched.runtime.enforce.reports import ReportJSON, TrafficJSON
from commsched.runtime.protocol.control import JobDecision

__all__ = ["AdoptIn", "ProcessIn", "ProfileIn", "add_job_routes"]

_JOB = r"^[A-Za-z0-9][A-Za-z0-9_.:@+-]{0,63}$"


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", allow_inf_nan=False, frozen=True)


class AdoptIn(_Strict):
    """Processes to move into the job's cgroup (with their descendants)."""

    pids: list[Annotated[int, Field(ge=1, le=2**22)]] = Field(min_length=1, max_length=4096)


class ProcessIn(_Strict):
    """A process to start inside the job's cgroup."""

    argv: list[Annotated[str, Field(min_length=1, max_length=4096)]] = Field(min_length=1, max_length=1024)
    env: dict[
        Annotated[str, Field(min_length=1, max_length=256)], Annotated[str, Field(max_length=65536)]
    ] = Field(default_factory=dict, max_length=1024)
    cwd: str | None = Field(default=None, max_length=4096)
    log: str | None = Field(default=None, max_length=4096, description="file for its standard output")
    profile_window_s: float | None = Field(default=None, ge=0, le=86_400)


class ProfileIn(_Strict):
    """A window of the job's traffic to profile now (wall-clock seconds) and post to the daemon."""

    start: float = Field(ge=0)
    end: float = Field(ge=0)


class _RefusedError(Exception):
    def __init__(self, status: int, message: str, field: str) -> None:
        super().__init__(message)
        self.status, self.message, self.field = status, message, field


@dataclass(frozen=True, slots=True)
class _Guard:
    """What every route checks: the agent enforces, the caller has the token, the job is decided."""

    follower: Follower
    enforcer: Any
    token: str | None

    def enforcing(self) -> Any:
        if self.enforcer is None:
            raise _RefusedError(409, "this agent does not enforce (start it with --enforce)", "enforce")
        return self.enforcer

    def allowed(self, authorization: str | None) -> None:
        if self.token is None:
            return
        scheme, _, cred = (authorization or "").partition(" ")
        if scheme.lower() != "bearer" or not hmac.compare_digest(cred.encode(), self.token.encode()):
            raise _RefusedError(401, "missing or wrong bearer token", "Authorization")

    def decided(self, job: str) -> JobDecision:
        f = self.follower
        info = f.host_view.jobs.get(job)
        if info is None:
            msg = f"no decision for job {job!r} on host {f.host!r} (version {f.version})"
            raise _RefusedError(404, msg, "job")
        return info


def add_job_routes(app: FastAPI, follower: Follower, enforcer: Any, *, token: str | None) -> None:
    """Add the job routes to the agent's ``app`` (``enforcer``: an Enforcer, or ``None``)."""

    @app.exception_handler(_RefusedError)
    async def _refused(_r: Request, e: _RefusedError) -> JSONResponse:
        return JSONResponse({"error": e.message, "field": e.field}, status_code=e.status)

    @app.exception_handler(InputError)
    async def _input(_r: Request, e: InputError) -> JSONResponse:
        code = 404 if e.where == "job" else 400
        return JSONResponse({"error": e.line(), "field": e.where}, status_code=code)

    g = _Guard(follower=follower, enforcer=enforcer, token=token)
    _env_route(app, g)
    _process_routes(app, g)
    _measure_routes(app, g)


def _env_route(app: FastAPI, g: _Guard) -> None:
    follower, enforcer, decided = g.follower, g.enforcer, g.decided

    @app.get("/v1/jobs/{job}/env")
    def job_env(job: Annotated[str, PathParam(pattern=_JOB)]) -> JobEnvAnswer:
        from commsched.runtime.enforce.marking.nccl import interface_addresses, job_environment, rdma_devices

        info = decided(job)
        view = follower.host_view
        ips = view.nic_ips
        prefix = f"{follower.host}/"
        # the job's NICs on this host: the ends of its connections here
        nics = [c.src_nic for c in view.connections if c.job == job]
        nics += [c.dst_nic for c in view.inbound if c.job == job]
        mine = [ips[n] for n in dict.fromkeys(nics) if n.startswith(prefix) and n in ips]
        levels = view.priority_levels or 8
        out = job_environment(
            info.to_json(), mine, interfaces=interface_addresses(), hcas=rdma_devices(), levels=levels
        )
        out["env"]["COMMSCHED_JOB"] = job
        return {**out, "job": job, "version": follower.version, "enforcing": enforcer is not None}


def _process_routes(app: FastAPI, g: _Guard) -> None:
    allowed, decided, enforcing = g.allowed, g.decided, g.enforcing

    @app.post("/v1/jobs/{job}/adopt")
    def adopt(job: str, body: AdoptIn, authorization: Annotated[str | None, Header()] = None) -> AdoptAnswer:
        allowed(authorization)
        decided(job)
        moved = enforcing().adopt(job, list(body.pids))
        return {"job": job, "adopted": moved}

    @app.post("/v1/jobs/{job}/processes", status_code=201)
    def start(
        job: str, body: ProcessIn, authorization: Annotated[str | None, Header()] = None
    ) -> ProcessJSON:
        from commsched.runtime.enforce.processes.spawn import ProcessSpec

        allowed(authorization)
        decided(job)
        e = enforcing()
        if body.profile_window_s is not None:
            e.ensure_job(job).profile_window_s = body.profile_window_s
        spec = ProcessSpec(argv=tuple(body.argv), env=dict(body.env), cwd=body.cwd, log=body.log)
        try:
            proc = e.spawn(job, spec)
        except OSError as exc:
            raise _RefusedError(400, f"cannot start {body.argv[0]!r}: {exc.strerror}", "argv") from None
        started: ProcessJSON = proc.to_json()
        return started

    @app.delete("/v1/jobs/{job}/processes")
    def stop(
        job: str,
        grace_s: float = Query(3.0, ge=0, le=600),
        authorization: Annotated[str | None, Header()] = None,
    ) -> StopAnswer:
        allowed(authorization)
        codes = enforcing().stop(job, grace_s)
        return {"job": job, "stopped": {str(k): v for k, v in codes.items()}}


def _measure_routes(app: FastAPI, g: _Guard) -> None:
    allowed, enforcing = g.allowed, g.enforcing

    @app.get("/v1/jobs/{job}")
    def report(job: str) -> ReportJSON:
        out: ReportJSON = enforcing().report(job)
        return out

    @app.get("/v1/jobs/{job}/connections")
    def connections(job: str) -> ConnectionsAnswer:
        return {"job": job, "connections": enforcing().connections(job)}

    @app.get("/v1/jobs/{job}/traffic")
    def traffic(job: str, since: float = Query(0.0, ge=0)) -> TrafficJSON:
        out: TrafficJSON = enforcing().traffic(job, since)
        return out

    @app.post("/v1/jobs/{job}/profile")
    def profile(
        job: str, body: ProfileIn, authorization: Annotated[str | None, Header()] = None
    ) -> JobProfileJSON:
        from commsched.runtime.enforce.loops import profile_now

        allowed(authorization)
        e = enforcing()
        if body.end <= body.start:
            raise _RefusedError(400, "the window ends before it starts", "end")
        return profile_now(e, e.job(job), body.start, body.end)

    @app.delete("/v1/jobs/{job}")
    def forget(job: str, authorization: Annotated[str | None, Header()] = None) -> ForgetAnswer:
        allowed(authorization)
        e = enforcing()
        e.job(job)
        e.remove(job)
        return {"job": job, "removed": True}
