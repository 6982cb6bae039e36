"""The daemon's read routes for decisions: latest (long-poll), stream (SSE), history, events, status.

Agents follow decisions by long-polling ``GET /v1/decisions/latest?after=V&wait_s=S`` (answers as soon
as a version newer than ``V`` exists) or by the server-sent events of ``GET /v1/decisions/stream``.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator
from typing import Annotated, Any

from fastapi import APIRouter, Query
from fastapi import Path as FastPath
from fastapi.responses import HTMLResponse, JSONResponse, Response, StreamingResponse

from commsched.runtime.daemon.jobrequest import UnknownJobError
from commsched.runtime.daemon.models import API_VERSION
from commsched.runtime.daemon.page import render_status
from commsched.runtime.daemon.service import DaemonService
from commsched.runtime.daemon.shapes import EventJSON, HealthJSON, HistoryRowJSON
from commsched.runtime.http.strictjson import StrictJSONRoute
from commsched.runtime.protocol.control import Decision
from commsched.runtime.protocol.control_json import DecisionJSON

__all__ = ["Versions", "decisions_router", "status_router"]


class Versions:
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


def _empty_doc(service: DaemonService) -> DecisionJSON:
    """The document before the first decision: version 0, the cluster's policy, no job."""
    return Decision(version=0, policy=service.config.policy).to_json()


def status_router(service: DaemonService, *, read: list[Any]) -> APIRouter:
    """``/health``, the event log ``/v1/events`` and the status page ``/``."""
    router = APIRouter(route_class=StrictJSONRoute, dependencies=read)

    @router.get("/health")
    async def health() -> HealthJSON:
        return {
            "status": "ok",
            "api": API_VERSION,
            "version": service.version,
            "jobs": len(service.jobs()),
            "caches_warm": service.warmed,
        }

    @router.get("/v1/events")
    def events(
        after: int = Query(0, ge=0, le=2**62), limit: int = Query(100, ge=1, le=10_000)
    ) -> list[EventJSON]:
        return service.store.events(after, limit)

    @router.get("/", response_class=HTMLResponse)
    def status_page() -> HTMLResponse:
        return HTMLResponse(render_status(service))

    return router


async def _announcements(service: DaemonService, versions: Versions, after: int) -> AsyncIterator[str]:
    """Server-sent events: one ``decision`` event per new version, a keep-alive comment every 15 s."""
    seen = after
    while True:
        await versions.wait_newer(service, seen, 15.0)
        if service.version > seen:
            seen = service.version
            yield f'event: decision\nid: {seen}\ndata: {{"version": {seen}}}\n\n'
        else:
            yield ": keep-alive\n\n"


def decisions_router(service: DaemonService, versions: Versions, *, read: list[Any]) -> APIRouter:
    """``/v1/decisions/...``: the latest (long-poll, or one host's view), the stream, one version, history."""
    router = APIRouter(route_class=StrictJSONRoute, dependencies=read)

    @router.get("/v1/decisions/latest")
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

    @router.get("/v1/decisions/stream")
    async def stream(after: int = Query(-1, ge=-1, le=2**62)) -> StreamingResponse:
        return StreamingResponse(_announcements(service, versions, after), media_type="text/event-stream")

    @router.get("/v1/decisions/{version}")
    def get_decision(version: Annotated[int, FastPath(ge=0, le=2**62)]) -> Response:
        row = service.store.decision(version)
        if row is None:
            raise UnknownJobError(f"no decision version {version}", where="version")
        return Response(content=row.body, media_type="application/json")

    @router.get("/v1/decisions")
    def history(limit: int = Query(50, ge=1, le=10_000)) -> list[HistoryRowJSON]:
        return [
            {"version": r.version, "created_s": r.created_s, "cause": r.cause}
            for r in service.store.history(limit)
        ]

    return router
