"""The agent's ``GET /metrics`` (Prometheus text format): its own registry, and a fixed address for it.

Counted as they happen (since the agent started):

* ``commsched_agent_decisions_received_total`` — host views received from the daemon;
* ``commsched_agent_probes_sent_total``, ``commsched_agent_probes_answered_total`` and the histogram
  ``commsched_agent_probe_search_seconds`` — what the probing path oracle reports through
  :class:`ProbeMetrics` (probes sent, probes a router or the destination answered, time to find the
  ports of one key: how long a first connection was held).

Read from the agent's state at each scrape:

* ``commsched_agent_decision_version``, ``commsched_agent_connected`` (1: following the daemon now);
* with ``--enforce``, per job: ``commsched_agent_connections_marked{job}`` (tracked connections with
  the job's mark, both roles), ``commsched_agent_connections_pinned{job}`` and
  ``commsched_agent_connections_unpinned{job, reason}`` (connections this host opened, by whether
  their source port pins them to the decided paths); ``commsched_agent_pin_keys{pinned, reason}``
  (the ``(job, source, destination, port)`` keys decided); ``commsched_agent_syns_held_total{job}``
  (first SYNs held until their key was decided); ``commsched_agent_job_sent_bytes_total{job}``,
  ``commsched_agent_job_data_sent_bytes_total{job}``,
  ``commsched_agent_job_data_received_bytes_total{job}`` (the job's counters on this host: all bytes
  out, data bytes out and in); ``commsched_agent_job_processes{job}``;
  ``commsched_agent_job_iteration_seconds{job}`` and ``commsched_agent_job_bytes_per_iteration{job}``
  (the iteration estimated from the job's traffic, once its profile is measured here).

The agent's local socket serves ``/metrics`` like its other reads; ``--metrics-listen HOST:PORT`` adds
a fixed TCP address (:func:`serve_metrics`) that answers loopback clients as they are and other hosts
only with ``Authorization: Bearer TOKEN`` (the agent's ``--token-file``), as the daemon's reads do.
"""

from __future__ import annotations

import hmac
import ipaddress
import socket
import threading
from collections import Counter as Tally
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

from prometheus_client import CollectorRegistry, Counter, Histogram, make_wsgi_app
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.exposition import ThreadingWSGIServer, choose_encoder
from prometheus_client.registry import Collector

from commsched.runtime.protocol.control import HostView

__all__ = ["SEARCH_BUCKETS_S", "AgentMetrics", "MetricsServer", "ProbeMetrics", "serve_metrics"]

#: upper bounds of the probe-search histogram, seconds (TCP sends a held SYN again after 1 s, 3 s, 7 s)
SEARCH_BUCKETS_S = (0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.0, 3.0, 5.0, 7.0, 15.0, 30.0)


class ProbeMetrics:
    """What the probing path oracle counts (one per agent; each call is thread-safe)."""

    def __init__(self, registry: CollectorRegistry) -> None:
        self._sent = Counter(
            "commsched_agent_probes_sent", "Path probes sent (TCP probes of a tuple).", registry=registry
        )
        self._answered = Counter(
            "commsched_agent_probes_answered",
            "Path probes answered (an ICMP time-exceeded of a router, or the destination's answer).",
            registry=registry,
        )
        self._search = Histogram(
            "commsched_agent_probe_search_seconds",
            "Time the oracle took to find the source ports of one key.",
            buckets=SEARCH_BUCKETS_S,
            registry=registry,
        )

    def probe_sent(self, n: int = 1) -> None:
        """``n`` probes went out."""
        self._sent.inc(n)

    def probe_answered(self, n: int = 1) -> None:
        """``n`` probes were answered."""
        self._answered.inc(n)

    def search_took(self, seconds: float) -> None:
        """One key's ports were searched for ``seconds`` (found or not)."""
        self._search.observe(seconds)


class _State(Collector):
    """The agent's state at a scrape: its follower and, when it enforces, its enforcer's jobs."""

    def __init__(self, follower: Any, enforcer: Any) -> None:
        self.follower = follower
        self.enforcer = enforcer

    def collect(self) -> Iterable[Metric]:
        f = self.follower
        yield GaugeMetricFamily(
            "commsched_agent_decision_version", "Version of the decision the agent follows.", value=f.version
        )
        yield GaugeMetricFamily(
            "commsched_agent_connected", "1 while the agent follows the daemon.", value=int(bool(f.connected))
        )
        if self.enforcer is not None:
            yield from _jobs(self.enforcer)
            yield _pin_keys(self.enforcer)


_Family = CounterMetricFamily | GaugeMetricFamily


def _family(kind: str, name: str, doc: str, labels: list[str]) -> _Family:
    if kind == "counter":
        return CounterMetricFamily(name, doc, labels=labels)
    return GaugeMetricFamily(name, doc, labels=labels)


def _jobs(e: Any) -> Iterator[Metric]:
    """The per-job families of an enforcer."""
    fams = {
        key: _family(kind, f"commsched_agent_{key}", doc, ["job"])
        for key, kind, doc in (
            ("connections_marked", "gauge", "Tracked connections with the job's mark (both roles)."),
            ("connections_pinned", "gauge", "Connections opened here pinned to their decided paths."),
            ("syns_held", "counter", "First SYNs held until their key was decided."),
            ("job_sent_bytes", "counter", "Bytes the job sent from this host."),
            ("job_data_sent_bytes", "counter", "Data bytes (packets over 100 bytes) the job sent."),
            ("job_data_received_bytes", "counter", "Data bytes the job received on this host."),
            ("job_processes", "gauge", "Processes in the job's cgroup."),
            ("job_iteration_seconds", "gauge", "Iteration time estimated from the job's traffic."),
            ("job_bytes_per_iteration", "gauge", "Bytes per iteration out of this host (estimated)."),
        )
    }
    unpinned = GaugeMetricFamily(
        "commsched_agent_connections_unpinned",
        "Connections opened here that are not pinned, by reason.",
        labels=["job", "reason"],
    )
    with e.lock:
        jobs = list(e.jobs.values())
    for state in jobs:
        _one_job(e, state, fams, unpinned)
    yield from fams.values()
    yield unpinned


def _one_job(e: Any, state: Any, fams: dict[str, _Family], unpinned: GaugeMetricFamily) -> None:
    job = [state.id]
    from commsched.runtime.enforce.reports import connections

    conns = connections(e, state)  # by its state: a job forgotten meanwhile is still reported once
    opened = [c for c in conns if c["role"] == "connecting"]
    fams["connections_marked"].add_metric(job, len(conns))
    fams["connections_pinned"].add_metric(job, sum(1 for c in opened if c.get("pinned")))
    for reason, n in sorted(
        Tally(c.get("reason") or "unknown" for c in opened if not c.get("pinned")).items()
    ):
        unpinned.add_metric([state.id, reason], n)
    with e.lock:
        last = state.samples[-1] if state.samples else None
        profile = state.profile
    if last is not None:
        for key, col in (("job_data_sent_bytes", 1), ("job_sent_bytes", 2), ("syns_held", 3)):
            fams[key].add_metric(job, last[col])
        fams["job_data_received_bytes"].add_metric(job, last[4])
    fams["job_processes"].add_metric(job, len(state.cgroup.pids()))
    measured = (profile or {}).get("measured") or {}
    for key, field in (
        ("job_iteration_seconds", "period_s"),
        ("job_bytes_per_iteration", "bytes_per_iteration"),
    ):
        if isinstance(measured.get(field), int | float):
            fams[key].add_metric(job, float(measured[field]))


def _pin_keys(e: Any) -> Metric:
    fam = GaugeMetricFamily(
        "commsched_agent_pin_keys",
        "Keys (job, source, destination, port) decided, by whether they are pinned and why.",
        labels=["pinned", "reason"],
    )
    tally = Tally((str(bool(p["pinned"])).lower(), str(p["reason"])) for p in e.pinning.to_json())
    for labels, n in sorted(tally.items()):
        fam.add_metric(list(labels), n)
    return fam


class AgentMetrics:
    """The metrics of one agent (its own registry): ``follower``'s decisions, ``enforcer``'s jobs.

    ``probes`` is what a probing path oracle counts into (:class:`ProbeMetrics`).
    """

    def __init__(self, follower: Any, enforcer: Any = None) -> None:
        self.registry = CollectorRegistry()
        self.probes = ProbeMetrics(self.registry)
        self._received = Counter(
            "commsched_agent_decisions_received",
            "Host views received from the daemon.",
            registry=self.registry,
        )
        self._state = _State(follower, enforcer)
        self.registry.register(self._state)
        listeners = getattr(follower, "listeners", None)
        if listeners is not None:
            listeners.append(self.view_received)

    def watch(self, enforcer: Any) -> None:
        """Report ``enforcer``'s jobs from now on (an agent makes its enforcer after its metrics)."""
        self._state.enforcer = enforcer

    def view_received(self, view: HostView) -> None:
        """Count one host view received (the follower calls this)."""
        self._received.inc()

    def render(self, accept: str = "") -> tuple[bytes, str]:
        """The exposition for a client that accepts ``accept``: body and media type."""
        encode, media = choose_encoder(accept)
        return encode(self.registry), media


def _loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def guard(app: Callable[..., Any], token: str | None) -> Callable[..., Any]:
    """``app`` (WSGI) answering ``/metrics`` only, to loopback clients or with the bearer ``token``."""

    def guarded(environ: dict[str, Any], start_response: Callable[..., Any]) -> Any:
        if environ.get("PATH_INFO") != "/metrics":
            start_response("404 Not Found", [("Content-Type", "text/plain")])
            return [b"only /metrics here\n"]
        if not _loopback(str(environ.get("REMOTE_ADDR", ""))):
            scheme, _, cred = str(environ.get("HTTP_AUTHORIZATION", "")).partition(" ")
            ok = (
                token is not None
                and scheme.lower() == "bearer"
                and hmac.compare_digest(cred.encode(), token.encode())
            )
            if not ok:
                start_response(
                    "401 Unauthorized", [("Content-Type", "text/plain"), ("WWW-Authenticate", "Bearer")]
                )
                return [b"missing or wrong bearer token\n"]
        return app(environ, start_response)

    return guarded


class _Quiet(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        """No access log on standard error."""


@dataclass(slots=True)
class MetricsServer:
    """The metrics listener of an agent (its own thread)."""

    server: Any
    thread: threading.Thread

    @property
    def port(self) -> int:
        return int(self.server.server_address[1])

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(timeout=5.0)


def serve_metrics(metrics: AgentMetrics, *, host: str, port: int, token: str | None) -> MetricsServer:
    """Serve ``metrics`` on ``host:port`` (TCP; port 0: any free one) until :meth:`MetricsServer.close`."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    server_class = type("MetricsWSGIServer", (ThreadingWSGIServer,), {"address_family": family})
    server: Any = make_server(host, port, guard(make_wsgi_app(metrics.registry), token), server_class, _Quiet)
    thread = threading.Thread(target=server.serve_forever, name="agent-metrics", daemon=True)
    thread.start()
    return MetricsServer(server=server, thread=thread)
