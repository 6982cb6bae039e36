"""The daemon's status page: plain HTML tables, no scripts (jobs, ranks, classes, paths, link load,
decision history, hosts). Every value is escaped; the page refreshes itself every 5 s.
"""

from __future__ import annotations

import html
import time
from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from commsched.runtime.daemon.service import DaemonService
    from commsched.runtime.daemon.shapes import HostListedJSON
    from commsched.runtime.protocol.control import Decision

__all__ = ["render_status"]

_STYLE = (
    "body{font-family:sans-serif;margin:1.5em}table{border-collapse:collapse;margin-bottom:1.5em}"
    "td,th{border:1px solid #bbb;padding:2px 8px;text-align:left}th{background:#eee}"
    ".profiling{color:#a40}"
)


def _fmt(v: Any) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list | tuple):
        return " ".join(map(str, v))
    return str(v)


def _table(tid: str, title: str, head: Sequence[str], rows: Iterable[Sequence[Any]], note: str = "") -> str:
    body = "".join("<tr>" + "".join(f"<td>{html.escape(_fmt(c))}</td>" for c in r) + "</tr>" for r in rows)
    cols = "".join(f"<th>{html.escape(h)}</th>" for h in head)
    extra = f"<p>{html.escape(note)}</p>" if note else ""
    head_html = f"<thead><tr>{cols}</tr></thead>"
    return f'<h2>{html.escape(title)}</h2>{extra}<table id="{tid}">{head_html}<tbody>{body}</tbody></table>'


def _jobs(service: DaemonService, decision: Decision) -> str:
    running = {r.id for r in service.jobs()}
    order = sorted(decision.jobs.items(), key=lambda kv: (kv[1].rank is None, kv[1].rank or 0))
    rows = [
        (jid, j.rank, j.priority_class, j.mark.dscp, "yes" if j.profiling else "no", len(j.gpus), j.hosts,
         j.intensity, j.k, service.heartbeat_age_s(jid) if jid in running else None)
        for jid, j in order
    ]  # fmt: skip
    head = ("job", "rank", "class", "DSCP", "profiling", "GPUs", "hosts", "intensity", "k", "heartbeat age s")
    return _table("jobs", "Jobs", head, rows)


def _connections(decision: Decision, max_rows: int) -> str:
    conns = decision.connections
    rows = [
        (c.job, c.src_rank, c.dst_rank, c.src_nic, c.dst_nic, f"{c.path_index}/{c.n_paths}",
         " > ".join(c.path[1:-1]), c.src_port)
        for c in conns[:max_rows]
    ]  # fmt: skip
    head = ("job", "src rank", "dst rank", "src NIC", "dst NIC", "path", "switches", "src port")
    note = f"first {min(len(conns), max_rows)} of {len(conns)}"
    return _table("connections", "Connections and paths", head, rows, note=note)


def _links(decision: Decision, max_rows: int) -> str:
    links = sorted(decision.link_load, key=lambda r: -r.bytes_per_iter)[:max_rows]
    rows = [
        (r.link, f"{r.src} > {r.dst}", r.bytes_per_iter, r.capacity_bps, len(r.jobs), r.jobs) for r in links
    ]
    head = ("link", "ends", "bytes/iteration", "capacity bps", "jobs", "job ids")
    return _table("links", "Planned link load", head, rows, note="busiest first")


def _hosts(service: DaemonService) -> str:
    def nics(h: HostListedJSON) -> list[str]:
        return [n["id"] + (f"={n['ip']}" if n["ip"] else "") for n in h["nics"]]

    rows = [
        (name, nics(h), h["agent"], len(h["counters"]) - 1 if h["counters"] else 0)
        for name, h in sorted(service.hosts().items())
    ]
    return _table("hosts", "Hosts", ("host", "NICs", "agent", "counters"), rows)


def _history(service: DaemonService) -> str:
    rows = [
        (r.version, time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.created_s)), r.cause.get("kind"),
         r.cause.get("job"), r.cause.get("detail"))
        for r in service.store.history(30)
    ]  # fmt: skip
    return _table("history", "Decision history", ("version", "time (UTC)", "cause", "job", "detail"), rows)


def render_status(service: DaemonService, *, max_rows: int = 200) -> str:
    """The status page of ``service`` as one HTML document."""
    cfg = service.config
    decision = service.decision
    topo = cfg.topology.get("kind", "none") if cfg.topology else "none (PUT /v1/cluster)"
    summary = (
        f'decision version <b id="version">{service.version}</b> &middot; policy {html.escape(cfg.policy)} '
        f"&middot; {cfg.priority_levels} priority levels &middot; topology {html.escape(str(topo))} "
        f"&middot; {len(decision.jobs)} jobs &middot; {len(decision.connections)} inter-host connections"
    )
    parts = [
        '<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">',
        f"<title>commsched daemon</title><style>{_STYLE}</style></head><body>",
        f"<h1>commsched scheduling daemon</h1><p>{summary}</p>",
        _jobs(service, decision),
        _connections(decision, max_rows),
        _links(decision, max_rows),
        _hosts(service),
        _history(service),
        "</body></html>",
    ]
    return "".join(parts)
