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


def render_status(service: DaemonService, *, max_rows: int = 200) -> str:
    """The status page of ``service`` as one HTML document."""
    cfg = service.config
    doc = service.latest_doc()
    jobs = doc.get("jobs", {})
    job_rows = [
        (
            jid,
            j.get("rank"),
            j.get("class"),
            j.get("dscp"),
            "yes" if j.get("profiling") else "no",
            len(j.get("gpus", [])),
            j.get("hosts"),
            j.get("intensity"),
            j.get("k"),
            service.heartbeat_age_s(jid) if jid in {r.id for r in service.jobs()} else None,
        )
        for jid, j in sorted(jobs.items(), key=lambda kv: (kv[1].get("rank") is None, kv[1].get("rank") or 0))
    ]
    conns = doc.get("connections", [])
    conn_rows = [
        (
            c["job"],
            c.get("src_rank"),
            c.get("dst_rank"),
            c["src_nic"],
            c["dst_nic"],
            f"{c['path_index']}/{c['n_paths']}",
            " > ".join(c["path"][1:-1]),
            c.get("src_port"),
        )
        for c in conns[:max_rows]
    ]
    links = sorted(doc.get("link_load", []), key=lambda r: -r["bytes_per_iter"])[:max_rows]
    link_rows = [
        (
            r["link"],
            f"{r['src']} > {r['dst']}",
            r["bytes_per_iter"],
            r["capacity_bps"],
            len(r["jobs"]),
            r["jobs"],
        )
        for r in links
    ]
    hosts = service.hosts()
    host_rows = [
        (
            name,
            [n.get("id") + (f"={n['ip']}" if n.get("ip") else "") for n in h.get("nics", [])],
            h.get("agent"),
            len(h["counters"]) - 1 if h.get("counters") else 0,
        )
        for name, h in sorted(hosts.items())
    ]
    hist = service.store.history(30)
    hist_rows = [
        (
            r.version,
            time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(r.created_s)),
            r.cause.get("kind"),
            r.cause.get("job"),
            r.cause.get("detail"),
        )
        for r in hist
    ]
    topo = cfg.topology.get("kind", "none") if cfg.topology else "none (PUT /v1/cluster)"
    summary = (
        f'decision version <b id="version">{service.version}</b> &middot; policy {html.escape(cfg.policy)} '
        f"&middot; {cfg.priority_levels} priority levels &middot; topology {html.escape(str(topo))} "
        f"&middot; {len(jobs)} jobs &middot; {len(conns)} inter-host connections"
    )
    parts = [
        '<!DOCTYPE html><html><head><meta charset="utf-8"><meta http-equiv="refresh" content="5">',
        f"<title>commsched daemon</title><style>{_STYLE}</style></head><body>",
        f"<h1>commsched scheduling daemon</h1><p>{summary}</p>",
        _table(
            "jobs",
            "Jobs",
            (
                "job",
                "rank",
                "class",
                "DSCP",
                "profiling",
                "GPUs",
                "hosts",
                "intensity",
                "k",
                "heartbeat age s",
            ),
            job_rows,
        ),
        _table(
            "connections",
            "Connections and paths",
            ("job", "src rank", "dst rank", "src NIC", "dst NIC", "path", "switches", "src port"),
            conn_rows,
            note=f"first {min(len(conns), max_rows)} of {len(conns)}",
        ),
        _table(
            "links",
            "Planned link load",
            ("link", "ends", "bytes/iteration", "capacity bps", "jobs", "job ids"),
            link_rows,
            note="busiest first",
        ),
        _table("hosts", "Hosts", ("host", "NICs", "agent", "counters"), host_rows),
        _table("history", "Decision history", ("version", "time (UTC)", "cause", "job", "detail"), hist_rows),
        "</body></html>",
    ]
    return "".join(parts)
