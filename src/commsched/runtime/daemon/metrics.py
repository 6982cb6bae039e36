"""The daemon's ``GET /metrics``: Prometheus text format, one registry per application.

Counted as they happen (since the process started):

* ``commsched_daemon_decisions_total{cause}`` — decisions committed, by the event that caused them
  (``job-start``, ``job-end``, ``profile``, ``heartbeat-timeout``, ``profile-window-end``, ``cluster``);
* ``commsched_daemon_decision_seconds`` — histogram of the time the policy took per decision;
* ``commsched_daemon_heartbeats_missed_total`` — jobs removed because their heartbeat timed out.

Read from the state at each scrape:

* ``commsched_daemon_decision_version`` — the current decision's version;
* ``commsched_daemon_jobs{priority_class, state}`` — running jobs by class and state (``profiling``:
  in its top-class window; ``profiled``: a measured profile arrived; ``declared``: its window ended
  without one); ``priority_class`` is ``none`` for a job the decision has not ranked yet;
* ``commsched_daemon_job_heartbeat_age_seconds{job}`` — time since each job's last heartbeat;
* ``commsched_daemon_job_priority_class{job}``, ``commsched_daemon_job_dscp{job}`` — each ranked job's
  class and its DSCP in the current decision;
* ``commsched_daemon_link_planned_bytes_per_iteration{link, src, dst}``,
  ``commsched_daemon_link_planned_jobs{...}`` and ``commsched_daemon_link_capacity_bits_per_second{...}``
  — the link loads the current decision plans with (the links it loads, nothing else);
* ``commsched_daemon_hosts_registered`` — hosts whose agent registered.

A registry belongs to one :class:`DaemonMetrics` (never the library's process-wide default), so two
daemons in one process keep their counts apart.
"""

from __future__ import annotations

from collections import Counter as Tally
from collections.abc import Iterable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import Response
from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import choose_encoder
from prometheus_client.registry import Collector

from commsched.runtime.daemon.service import DaemonService
from commsched.runtime.protocol.control import Cause

__all__ = ["DECISION_BUCKETS_S", "DaemonMetrics", "metrics_router"]

#: upper bounds of the decision-time histogram, seconds (a decision takes milliseconds to seconds)
DECISION_BUCKETS_S = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0)

#: the media type of the text format's answer when the client names none it prefers
TEXT_FORMAT = "text/plain; version=0.0.4; charset=utf-8"


def job_state(profiling: bool, profiled: bool) -> str:
    """``profiling``, ``profiled`` or ``declared`` (the ``state`` label of ``commsched_daemon_jobs``).

    Examples
    --------
    >>> job_state(True, False), job_state(False, True), job_state(False, False)
    ('profiling', 'profiled', 'declared')
    """
    return "profiling" if profiling else "profiled" if profiled else "declared"


class _State(Collector):
    """What the service holds now, read at each scrape."""

    def __init__(self, service: DaemonService) -> None:
        self.service = service

    def collect(self) -> Iterable[Metric]:
        svc = self.service
        decision = svc.decision
        yield GaugeMetricFamily(
            "commsched_daemon_decision_version", "Version of the current decision.", value=decision.version
        )
        jobs = GaugeMetricFamily(
            "commsched_daemon_jobs",
            "Running jobs by priority class and state.",
            labels=["priority_class", "state"],
        )
        ages = GaugeMetricFamily(
            "commsched_daemon_job_heartbeat_age_seconds",
            "Time since the job's last heartbeat.",
            labels=["job"],
        )
        classes = GaugeMetricFamily(
            "commsched_daemon_job_priority_class",
            "The priority class the current decision gives the job (0: the top).",
            labels=["job"],
        )
        marks = GaugeMetricFamily(
            "commsched_daemon_job_dscp", "The DSCP of the job's class now.", labels=["job"]
        )
        tally: Tally[tuple[str, str]] = Tally()
        for rec in svc.jobs():
            entry = decision.jobs.get(rec.id)
            cls = "none" if entry is None else str(entry.priority_class)
            tally[(cls, job_state(rec.profiling, rec.profile is not None))] += 1
            ages.add_metric([rec.id], svc.heartbeat_age_s(rec.id))
            if entry is not None:
                classes.add_metric([rec.id], entry.priority_class)
                marks.add_metric([rec.id], entry.mark.dscp)
        for labels, n in sorted(tally.items()):
            jobs.add_metric(list(labels), n)
        yield jobs
        yield ages
        yield classes
        yield marks
        yield from _links(decision.link_load)
        yield CounterMetricFamily(
            "commsched_daemon_heartbeats_missed",
            "Jobs removed because their heartbeat timed out.",
            value=svc.missed_heartbeats,
        )
        yield GaugeMetricFamily(
            "commsched_daemon_hosts_registered", "Hosts whose agent registered.", value=len(svc.hosts())
        )


def _links(loads: Iterable[Any]) -> Iterable[Metric]:
    names = ["link", "src", "dst"]
    nbytes = GaugeMetricFamily(
        "commsched_daemon_link_planned_bytes_per_iteration",
        "Bytes per iteration the current decision plans on the link (all its jobs).",
        labels=names,
    )
    njobs = GaugeMetricFamily(
        "commsched_daemon_link_planned_jobs", "Jobs the current decision routes over the link.", labels=names
    )
    cap = GaugeMetricFamily(
        "commsched_daemon_link_capacity_bits_per_second", "Capacity of the loaded link.", labels=names
    )
    for x in loads:
        labels = [str(x.link), x.src, x.dst]
        nbytes.add_metric(labels, x.bytes_per_iter)
        njobs.add_metric(labels, len(x.jobs))
        cap.add_metric(labels, x.capacity_bps)
    return (nbytes, njobs, cap)


class DaemonMetrics:
    """The metrics of one daemon (its own registry); counts the decisions ``service`` commits."""

    def __init__(self, service: DaemonService) -> None:
        self.registry = CollectorRegistry()
        self.decisions = Counter(
            "commsched_daemon_decisions",
            "Decisions committed, by the event that caused them.",
            ["cause"],
            registry=self.registry,
        )
        self.latency = Histogram(
            "commsched_daemon_decision_seconds",
            "Time the policy took to make a decision.",
            buckets=DECISION_BUCKETS_S,
            registry=self.registry,
        )
        self.registry.register(_State(service))
        service.add_decision_observer(self.decided)

    def decided(self, cause: Cause, seconds: float) -> None:
        """Count one committed decision (the service calls this)."""
        self.decisions.labels(cause=cause.kind).inc()
        self.latency.observe(seconds)

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition for a client that accepts ``accept``: body and media type."""
        encode, media = choose_encoder(accept)
        return encode(self.registry), media


def metrics_router(metrics: DaemonMetrics, *, read: list[Any]) -> APIRouter:
    """``GET /metrics`` (read rules: open on loopback, the token from elsewhere)."""
    router = APIRouter(tags=["metrics"])

    @router.get(
        "/metrics",
        dependencies=read,
        response_class=Response,
        responses={200: {"content": {TEXT_FORMAT: {}}, "description": "Prometheus text format."}},
    )
    def get_metrics(request: Request) -> Response:
        body, media = metrics.render(request.headers.get("accept", ""))
        return Response(content=body, media_type=media)

    return router
