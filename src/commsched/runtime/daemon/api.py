"""The daemon's HTTP JSON API (FastAPI; OpenAPI description at ``/openapi.json``).

Mutating calls (every POST, PUT and DELETE) need ``Authorization: Bearer TOKEN`` and answer 401
without it; reads are open to loopback clients (and Unix-socket ones) and need the token from
elsewhere. Errors are JSON ``{"error": ONE LINE, "field": WHERE}``: 400 bad value, 404 unknown job,
host, version or route, 405 wrong method, 409 conflict with the state (id taken, GPUs held, no
topology), 422 malformed body (not JSON, a key given twice, a wrong type: the line names the field).
Agents follow decisions by long-polling ``GET /v1/decisions/latest?after=V&wait_s=S`` (answers as
soon as a version newer than ``V`` exists) or by the server-sent events of
``GET /v1/decisions/stream``. ``GET /metrics`` is the Prometheus text format (read rules).

The routes live in one router per area: :mod:`.routes` (cluster, jobs, hosts) and
:mod:`.decisions_api` (decisions; health, events, status page); :mod:`.apicommon` holds the token
checks, the strict body reading and the error shape.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable

from fastapi import FastAPI
from starlette.concurrency import run_in_threadpool

from commsched.runtime.daemon.apicommon import add_error_handlers, token_guards
from commsched.runtime.daemon.decisions_api import Versions, decisions_router, status_router
from commsched.runtime.daemon.metrics import DaemonMetrics, metrics_router
from commsched.runtime.daemon.models import API_VERSION
from commsched.runtime.daemon.routes import cluster_router, hosts_router, jobs_router
from commsched.runtime.daemon.service import DaemonService

__all__ = ["create_app"]


def _lifespan(
    service: DaemonService, versions: Versions, tick_s: float | None
) -> Callable[[FastAPI], contextlib.AbstractAsyncContextManager[None]]:
    """Wake waiters on every new version; tick heartbeats and profiling windows; warm the caches."""

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

    return lifespan


def create_app(service: DaemonService, *, token: str, tick_s: float | None = None) -> FastAPI:
    """The FastAPI application serving ``service``; mutating calls need ``token``.

    ``tick_s`` is how often heartbeat timeouts and profiling windows are checked (default: a quarter
    of the heartbeat timeout, between 0.05 and 1 s).
    """
    versions = Versions()
    app = FastAPI(
        title="commsched scheduling daemon",
        version=str(API_VERSION),
        description=(__doc__ or "").strip(),
        lifespan=_lifespan(service, versions, tick_s),
    )
    add_error_handlers(app)
    read, write = token_guards(token)
    app.include_router(cluster_router(service, read=read, write=write))
    app.include_router(jobs_router(service, read=read, write=write))
    app.include_router(hosts_router(service, read=read, write=write))
    app.include_router(decisions_router(service, versions, read=read))
    app.include_router(status_router(service, read=read))
    app.state.metrics = DaemonMetrics(service)
    app.include_router(metrics_router(app.state.metrics, read=read))
    return app
