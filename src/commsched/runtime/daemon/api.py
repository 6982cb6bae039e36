"""The daemon's HTTP JSON API (FastAPI; OpenAPI description at ``/openapi.json``).

Mutating calls (every POST, PUT and DELETE) need ``Authorization: Bearer TOKEN`` and answer 401
without it; reads are open to loopback clients (and Unix-socket ones) and need the token from
elsewhere. Errors are JSON ``{"error": ONE LINE, "field": WHERE}``: 400 bad value, 404 unknown job or
version, 409 conflict with the state (id taken, GPUs held, no topology), 422 malformed body (the line
names the field). Agents follow decisions by long-polling ``GET /v1/decisions/latest?after=V&wait_s=S``
(answers as soon as a version newer than ``V`` exists) or by the server-sent events of
``GET /v1/decisions/stream``.
"""

from __future__ import annotations

import asyncio
import contextlib
import secrets
from collections.abc import AsyncIterator
from dataclasses import replace
from typing import Annotated, Any

from fastapi import Depends, FastAPI, Query, Request
from fastapi import Path as FastPath
from fastapi.exceptions import RequestValidationError
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer
from starlette.concurrency import run_in_threadpool

from commsched.errors import InputError
from commsched.runtime.daemon.jobs import JobRequest, StateConflictError, UnknownJobError
from commsched.runtime.daemon.models import API_VERSION, ClusterIn, CountersIn, HostIn, JobIn, ProfileIn
from commsched.runtime.daemon.page import render_status
from commsched.runtime.daemon.records import ProfileRecord
from commsched.runtime.daemon.service import DaemonService

__all__ = ["create_app"]

_LOOPBACK = {"127.0.0.1", "::1", "localhost", "testclient"}
_bearer = HTTPBearer(auto_error=False)


class _UnauthorizedError(Exception):
    pass


class _Versions:
    """Wakes long-poll and SSE waiters when a new decision version is committed (event-loop side)."""

    def __init__(self) -> None:
        self.changed = asyncio.Event()

    def bump(self) -> None:
        old, self.changed = self.changed, asyncio.Event()
        old.set()

    async def wait_newer(self, service: DaemonService, after: int, timeout_s: float) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        while service.version <= after:
            ev = self.changed
            remaining = deadline - loop.time()
            if remaining <= 0 or service.version > after:
                return
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(ev.wait(), remaining)


def _empty_doc(service: DaemonService) -> dict[str, Any]:
    return {
        "format": 1,
        "version": 0,
        "policy": service.config.policy,
        "jobs": {},
        "connections": [],
        "link_load": [],
    }


def create_app(service: DaemonService, *, token: str, tick_s: float | None = None) -> FastAPI:
    """The FastAPI application serving ``service``; mutating calls need ``token``.

    ``tick_s`` is how often heartbeat timeouts and profiling windows are checked (default: a quarter
    of the heartbeat timeout, between 0.05 and 1 s).
    """
    versions = _Versions()

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI) -> AsyncIterator[None]:
        loop = asyncio.get_running_loop()
        versions.changed = asyncio.Event()

        def wake(_version: int) -> None:
            loop.call_soon_threadsafe(versions.bump)

        service.add_listener(wake)
        timeout = service.config.heartbeat_timeout_s
        period = tick_s if tick_s is not None else min(1.0, max(0.05, timeout / 4 if timeout else 1.0))

        async def ticker() -> None:
            while True:
                await asyncio.sleep(period)
                await run_in_threadpool(service.tick)

        task = asyncio.create_task(ticker())
        warm = loop.run_in_executor(None, service.warm)  # caches only; decides nothing
        try:
            yield
        finally:
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await task
            with contextlib.suppress(Exception):
                await warm

    app = FastAPI(
        title="commsched scheduling daemon",
        version=str(API_VERSION),
        description=(__doc__ or "").strip(),
        lifespan=lifespan,
    )

    async def need_token(cred: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)]) -> None:
        if cred is None or not secrets.compare_digest(cred.credentials.encode(), token.encode()):
            raise _UnauthorizedError

    async def may_read(request: Request) -> None:
        # reads are open on loopback; the header is parsed only for other clients (a read is the hot
        # path, and a sub-dependency costs a measurable share of its time)
        if request.client is None or request.client.host in _LOOPBACK:
            return
        scheme, _, credentials = request.headers.get("authorization", "").partition(" ")
        ok = scheme.lower() == "bearer" and credentials
        await need_token(HTTPAuthorizationCredentials(scheme=scheme, credentials=credentials) if ok else None)

    @app.exception_handler(_UnauthorizedError)
    async def _unauth(_r: Request, _e: _UnauthorizedError) -> JSONResponse:
        body = {"error": "missing or wrong bearer token", "field": "Authorization"}
        return JSONResponse(body, status_code=401, headers={"WWW-Authenticate": "Bearer"})

    @app.exception_handler(InputError)
    async def _input(_r: Request, e: InputError) -> JSONResponse:
        code = 404 if isinstance(e, UnknownJobError) else 409 if isinstance(e, StateConflictError) else 400
        return JSONResponse({"error": e.line(), "field": e.where}, status_code=code)

    @app.exception_handler(RequestValidationError)
    async def _invalid(_r: Request, e: RequestValidationError) -> JSONResponse:
        errs = list(e.errors())
        lines = [
            ".".join(str(p) for p in err.get("loc", ())) + ": " + str(err.get("msg", "")) for err in errs
        ]
        field = ".".join(str(p) for p in errs[0].get("loc", ())) if errs else ""
        detail = [{"loc": list(err.get("loc", ())), "msg": str(err.get("msg", ""))} for err in errs]
        return JSONResponse({"error": "; ".join(lines), "field": field, "detail": detail}, status_code=422)

    read = [Depends(may_read)]
    write = [Depends(need_token)]

    @app.get("/health", dependencies=read)
    async def health() -> dict[str, Any]:
        return {
            "status": "ok",
            "api": API_VERSION,
            "version": service.version,
            "jobs": len(service.jobs()),
            "caches_warm": service.warmed,
        }

    @app.get("/v1/cluster", dependencies=read)
    async def get_cluster() -> dict[str, Any]:
        return service.config.to_json()

    @app.put("/v1/cluster", dependencies=write)
    def put_cluster(body: ClusterIn) -> dict[str, Any]:
        cur = service.config
        given = body.model_dump(exclude_none=True)
        if "hash" in given:
            given["hash_name"] = given.pop("hash")
        v = service.set_cluster(replace(cur, **given))
        return {"version": v, "cluster": service.config.to_json()}

    @app.get("/v1/jobs", dependencies=read)
    async def list_jobs() -> list[dict[str, Any]]:
        return [{**j.to_json(), "heartbeat_age_s": service.heartbeat_age_s(j.id)} for j in service.jobs()]

    @app.post("/v1/jobs", dependencies=write, status_code=201)
    def start_job(body: JobIn) -> dict[str, Any]:
        data = body.model_dump()
        for k in ("gpu_ids", "hosts"):
            data[k] = tuple(data[k]) if data[k] is not None else None
        rec, v = service.start_job(JobRequest(**data))
        return {"job": rec.to_json(), "version": v}

    @app.get("/v1/jobs/{job_id}", dependencies=read)
    async def get_job(job_id: str) -> dict[str, Any]:
        return service.job(job_id).to_json()

    @app.delete("/v1/jobs/{job_id}", dependencies=write)
    def end_job(job_id: str) -> dict[str, Any]:
        return {"version": service.end_job(job_id)}

    @app.post("/v1/jobs/{job_id}/heartbeat", dependencies=write)
    def heartbeat(job_id: str) -> dict[str, Any]:
        return {"timeout_s": service.heartbeat(job_id), "version": service.version}

    @app.put("/v1/jobs/{job_id}/profile", dependencies=write)
    def put_profile(job_id: str, body: ProfileIn) -> dict[str, Any]:
        return {"version": service.post_profile(job_id, ProfileRecord(**body.model_dump()))}

    @app.get("/v1/hosts", dependencies=read)
    async def list_hosts() -> dict[str, Any]:
        return service.hosts()

    @app.post("/v1/hosts", dependencies=write, status_code=201)
    def register_host(body: HostIn) -> dict[str, Any]:
        service.register_host(body.name, body.model_dump(exclude={"name"}))
        return {"host": body.name, "version": service.version}

    @app.post("/v1/hosts/{host}/counters", dependencies=write)
    def put_counters(host: str, body: CountersIn) -> dict[str, Any]:
        service.put_counters(host, dict(body.counters))
        return {"host": host}

    @app.get("/v1/decisions/latest", dependencies=read)
    async def latest(
        after: int = Query(-1, ge=-1, le=2**62, description="answer once a version newer than this exists"),
        wait_s: float = Query(
            0.0, ge=0, le=300, allow_inf_nan=False, description="long-poll at most this long"
        ),
        host: str | None = Query(None, max_length=128, description="only this host's jobs and connections"),
    ) -> Response:
        if wait_s > 0 and service.version <= after:
            await versions.wait_newer(service, after, wait_s)
        if host is not None:
            return Response(content=service.host_view_body(host), media_type="application/json")
        body = service.latest_body()
        if not body:
            return JSONResponse(_empty_doc(service))
        return Response(content=body, media_type="application/json")

    @app.get("/v1/decisions/stream", dependencies=read)
    async def stream(after: int = Query(-1, ge=-1, le=2**62)) -> StreamingResponse:
        async def events() -> AsyncIterator[str]:
            seen = after
            while True:
                await versions.wait_newer(service, seen, 15.0)
                if service.version > seen:
                    seen = service.version
                    yield f'event: decision\nid: {seen}\ndata: {{"version": {seen}}}\n\n'
                else:
                    yield ": keep-alive\n\n"

        return StreamingResponse(events(), media_type="text/event-stream")

    @app.get("/v1/decisions/{version}", dependencies=read)
    def get_decision(version: Annotated[int, FastPath(ge=0, le=2**62)]) -> Response:
        row = service.store.decision(version)
        if row is None:
            raise UnknownJobError(f"no decision version {version}", where="version")
        return Response(content=row.body, media_type="application/json")

    @app.get("/v1/decisions", dependencies=read)
    def history(limit: int = Query(50, ge=1, le=10_000)) -> list[dict[str, Any]]:
        return [
            {"version": r.version, "created_s": r.created_s, "cause": r.cause}
            for r in service.store.history(limit)
        ]

    @app.get("/v1/events", dependencies=read)
    def events(
        after: int = Query(0, ge=0, le=2**62), limit: int = Query(100, ge=1, le=10_000)
    ) -> list[dict[str, Any]]:
        return service.store.events(after, limit)

    @app.get("/", dependencies=read, response_class=HTMLResponse)
    def status_page() -> HTMLResponse:
        return HTMLResponse(render_status(service))

    return app
