"""The host agent's local API for job processes (loopback TCP or a Unix socket, FastAPI).

``GET /v1/port?job=J&src_rank=S&dst_rank=D[&dport=P]`` answers which source port to bind and which DSCP to
mark for that connection, from the last decision the agent holds (it keeps answering when the daemon
is away: ``stale`` says so). ``GET /v1/decision`` is the whole host view, ``GET /v1/counters`` the
link counters (``?report=true`` also sends them to the daemon), ``GET /health`` the agent's state,
``GET /metrics`` its metrics in the Prometheus text format (:mod:`.metrics`).
Every answer carries the decision ``version`` and the protocol version ``api``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from fastapi import FastAPI, Query, Request
from fastapi.responses import JSONResponse, Response

from commsched.runtime.agent.answers import AgentDecisionJSON, AgentHealthJSON, CountersJSON
from commsched.runtime.agent.counters import CounterSource
from commsched.runtime.agent.follower import Follower
from commsched.runtime.agent.jobs_api import add_job_routes
from commsched.runtime.agent.ports import ProbeTable, answer
from commsched.runtime.http.strictjson import StrictJSONRoute, add_shape_handlers
from commsched.runtime.protocol.control import PORT_API
from commsched.runtime.protocol.control_json import PortAnswerJSON

__all__ = ["AGENT_API_VERSION", "create_agent_app"]

#: version of the agent's local protocol (:data:`commsched.runtime.protocol.control.PORT_API`)
AGENT_API_VERSION = PORT_API


def create_agent_app(
    follower: Follower,
    *,
    table: ProbeTable | None,
    counters: CounterSource,
    enforcer: Any = None,
    token: str | None = None,
    metrics: Any = None,
) -> FastAPI:
    """The agent's local application over ``follower``'s decisions.

    ``enforcer``: a :class:`commsched.runtime.enforce.Enforcer` (``--enforce``), else ``None``;
    ``token``: the bearer token the routes that start or adopt processes ask for; ``metrics``: the
    agent's :class:`~commsched.runtime.agent.metrics.AgentMetrics` (made here when not given).
    """
    app = FastAPI(
        title="commsched host agent", version=str(AGENT_API_VERSION), description=(__doc__ or "").strip()
    )
    app.router.route_class = StrictJSONRoute  # a body with a key given twice is refused
    add_shape_handlers(app)  # errors as {"error", "field"}, as the daemon's

    @app.get("/health")
    def health() -> AgentHealthJSON:
        return {
            "status": "ok",
            "api": AGENT_API_VERSION,
            "host": follower.host,
            "version": follower.version,
            "connected": follower.connected,
            "registered": follower.registered,
            "last_error": follower.last_error,
            "probe_entries": len(table) if table else 0,
            "enforce": None
            if enforcer is None
            else {
                "table": enforcer.table,
                "jobs": sorted(enforcer.jobs),
                "errors": list(enforcer.errors()),
            },
        }

    @app.get("/v1/port", response_model=None)
    def port(
        job: str = Query(..., max_length=128),
        src_rank: int = Query(..., ge=0, le=1_000_000),
        dst_rank: int = Query(..., ge=0, le=1_000_000),
        dport: int | None = Query(None, ge=1, le=65535),
    ) -> PortAnswerJSON | JSONResponse:
        out = answer(follower.host_view, table, job, src_rank, dst_rank, dport=dport)
        if out is None:
            msg = f"no decision for job {job!r} on host {follower.host!r} (version {follower.version})"
            return JSONResponse({"error": msg, "field": "job"}, status_code=404)
        return replace(out, stale=not follower.connected).to_json()

    @app.get("/v1/decision")
    def decision() -> AgentDecisionJSON:
        return {**follower.host_view.to_json(), "api": AGENT_API_VERSION, "stale": not follower.connected}

    @app.get("/v1/counters")
    def get_counters(report: bool = Query(False)) -> CountersJSON:
        values = counters.read()
        sent = follower.report_counters(values) if report else False
        return {"host": follower.host, "counters": values, "reported": sent}

    _metrics_route(app, metrics, follower, enforcer)
    add_job_routes(app, follower, enforcer, token=token)
    return app


def _metrics_route(app: FastAPI, metrics: Any, follower: Follower, enforcer: Any) -> None:
    """``GET /metrics`` of ``metrics`` (an :class:`~commsched.runtime.agent.metrics.AgentMetrics`, made
    here over ``follower`` and ``enforcer`` when ``None``)."""
    if metrics is None:
        from commsched.runtime.agent.metrics import AgentMetrics

        metrics = AgentMetrics(follower, enforcer)
    app.state.metrics = metrics

    @app.get("/metrics", response_class=Response)
    def get_metrics(request: Request) -> Response:
        body, media = metrics.render(request.headers.get("accept", ""))
        return Response(content=body, media_type=media)
