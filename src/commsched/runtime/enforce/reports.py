"""What an enforcer tells about a job: its connections (with their pins), traffic samples, report."""

from __future__ import annotations

from typing import NotRequired, Protocol

from typing_extensions import TypedDict  # pydantic reads these on Python 3.11 (the agent's answers)

from commsched.runtime.enforce.host import EnforcerView, JobProfileJSON, JobState
from commsched.runtime.enforce.marking.conns import read_conntrack
from commsched.runtime.enforce.marking.nccl import interface_addresses
from commsched.runtime.enforce.pins import PinJSON, Pinning
from commsched.runtime.enforce.processes.spawn import ProcessJSON

__all__ = ["ConnectionRowJSON", "ReportHost", "ReportJSON", "TrafficJSON", "connections", "report", "traffic"]


class ConnectionRowJSON(TypedDict):
    """One tracked connection of a job (:func:`connections`); a connecting one with its pin."""

    role: str  # connecting (this host opened it) or accepting
    local: list[str | int]  # address, port
    remote: list[str | int]
    wire_sport: int  # the source port the wire sees (a translated one)
    state: str
    bytes_out: int | None  # None: the kernel does not count bytes per connection
    bytes_in: int | None
    # a connecting one: its pin (:meth:`.pins.Pinning.pin_of`)
    pinned: NotRequired[bool]
    reason: NotRequired[str]
    forward: NotRequired[list[int] | None]
    reverse: NotRequired[list[int] | None]
    decision: NotRequired[int | None]
    current: NotRequired[bool]
    #: an accepting one on a probing host: the source port its replies leave with (None: its own)
    reply_sport: NotRequired[int | None]


class TrafficJSON(TypedDict):
    """A job's counter samples (:func:`traffic`), one list per counter (cumulative bytes, SYNs)."""

    job: str
    sample_s: float
    t: list[float]
    data_bytes: list[int]
    bytes: list[int]
    held: list[int]
    rx_data_bytes: list[int]


class ReportJSON(TypedDict):
    """A job on this host (:func:`report`): cgroup, processes, last counters, profile, pins, table."""

    job: str
    mark: int
    cgroup: str
    pids: list[int]
    processes: list[ProcessJSON]
    data_bytes: int
    bytes: int
    held_syns: int
    rx_data_bytes: int
    profile: JobProfileJSON | None
    pins: list[PinJSON]
    table: str


class ReportHost(EnforcerView, Protocol):
    """What a report reads of its enforcer besides its view: the pins."""

    @property
    def pinning(self) -> Pinning: ...


def connections(e: ReportHost, state: JobState) -> list[ConnectionRowJSON]:
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
        row: ConnectionRowJSON = {
            "role": "connecting" if t.orig[0] in local else "accepting",
            "local": [t.orig[0], t.orig[1]] if t.orig[0] in local else [t.orig[2], t.orig[3]],
            "remote": [t.orig[2], t.orig[3]] if t.orig[0] in local else [t.orig[0], t.orig[1]],
            "wire_sport": t.wire_sport,
            "state": t.state,
            "bytes_out": t.orig_bytes if t.orig[0] in local else t.reply_bytes,
            "bytes_in": t.reply_bytes if t.orig[0] in local else t.orig_bytes,
        }
        if row["role"] == "connecting":
            pin = e.pinning.pin_of(state.mark, t.orig[0], t.orig[2], t.orig[3], t.wire_sport)
            row["pinned"], row["reason"] = pin["pinned"], pin["reason"]
            row["forward"], row["reverse"], row["decision"] = pin["forward"], pin["reverse"], pin["decision"]
            if "current" in pin:
                row["current"] = pin["current"]
        elif (replies := e.replies) is not None:  # the replies' own source port
            row["reply_sport"] = replies.port_of(t.orig[0], t.orig[3], t.orig[1])
        out.append(row)
    return out


def traffic(e: ReportHost, state: JobState, since: float = 0.0) -> TrafficJSON:
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


def report(e: ReportHost, state: JobState) -> ReportJSON:
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
