"""What an enforcer tells about a job: its connections (with their pins), traffic samples, report."""

from __future__ import annotations

from typing import Any, Protocol

from commsched.runtime.enforce.conns import read_conntrack
from commsched.runtime.enforce.host import EnforcerView, JobState
from commsched.runtime.enforce.nccl import interface_addresses
from commsched.runtime.enforce.pins import Pinning

__all__ = ["ReportHost", "connections", "report", "traffic"]


class ReportHost(EnforcerView, Protocol):
    """What a report reads of its enforcer besides its view: the pins."""

    @property
    def pinning(self) -> Pinning: ...


def connections(e: ReportHost, state: JobState) -> list[dict[str, Any]]:
    """The job's tracked connections on this host, each with its pin (connecting side only)."""
    local = set(interface_addresses())
    out = []
    for t in read_conntrack():
        if (
            t.mark != state.mark
            or t.orig[2].startswith("127.")
            or (t.orig[2] in local and t.orig[0] in local)
        ):
            continue
        row: dict[str, Any] = {
            "role": "connecting" if t.orig[0] in local else "accepting",
            "local": [t.orig[0], t.orig[1]] if t.orig[0] in local else [t.orig[2], t.orig[3]],
            "remote": [t.orig[2], t.orig[3]] if t.orig[0] in local else [t.orig[0], t.orig[1]],
            "wire_sport": t.wire_sport,
            "state": t.state,
            "bytes_out": t.orig_bytes if t.orig[0] in local else t.reply_bytes,
            "bytes_in": t.reply_bytes if t.orig[0] in local else t.orig_bytes,
        }
        if row["role"] == "connecting":
            row.update(e.pinning.pin_of(state.mark, t.orig[0], t.orig[2], t.orig[3], t.wire_sport))
        elif (replies := e.replies) is not None:  # the replies' own source port
            row["reply_sport"] = replies.port_of(t.orig[0], t.orig[3], t.orig[1])
        out.append(row)
    return out


def traffic(e: ReportHost, state: JobState, since: float = 0.0) -> dict[str, Any]:
    """The job's counter samples after ``since``: time, data bytes out, all bytes out, held SYNs,
    data bytes in (cumulative)."""
    with e.lock:
        rows = [s for s in state.samples if s[0] > since]
    return {
        "job": state.id,
        "sample_s": e.cfg.sample_s,
        "t": [r[0] for r in rows],
        "data_bytes": [r[1] for r in rows],
        "bytes": [r[2] for r in rows],
        "held": [r[3] for r in rows],
        "rx_data_bytes": [r[4] for r in rows],
    }


def report(e: ReportHost, state: JobState) -> dict[str, Any]:
    """The job's cgroup, processes, counters and posted profile on this host."""
    with e.lock:
        last = state.samples[-1] if state.samples else (0.0, 0, 0, 0, 0)
        procs = [p.to_json() for p in state.procs.values()]
    return {
        "job": state.id,
        "mark": state.mark,
        "cgroup": str(state.cgroup.path),
        "pids": state.cgroup.pids(),
        "processes": procs,
        "data_bytes": last[1],
        "bytes": last[2],
        "held_syns": last[3],
        "rx_data_bytes": last[4],
        "profile": state.profile,
        "pins": [p for p in e.pinning.to_json() if p["mark"] == state.mark],
        "table": e.table,
    }
