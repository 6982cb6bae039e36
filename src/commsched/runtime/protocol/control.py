"""The control path's records, from the daemon's decision to the socket a job marks (their JSON shapes:
:mod:`commsched.runtime.protocol.control_json`). Each is frozen, with ``to_json()`` and a validating
``from_json()`` (a wrong layout version, a missing or mistyped field is an
:class:`~commsched.errors.InputError` naming the field; unknown keys are ignored, so a newer writer may
add fields but never rename or retype one):

* :class:`Decision` (``format`` 1, ``GET /v1/decisions/latest``): per running job a
  :class:`JobDecision` (rank, class, DSCP and TOS, GPUs, hosts, ...), every inter-host
  :class:`Connection` with its path and source port, and the planned :class:`LinkLoad`
  (:func:`commsched.runtime.daemon.decide.decision`).
* :class:`HostView` (``format`` 1, ``?host=H``): the decision cut to one host, for its agent: its jobs,
  the connections leaving and arriving at it, the IP address of every NIC they use.
* :class:`PortAnswer` (``api`` 1, the agent's ``GET /v1/port``): the source port to bind and the mark to
  set for one connection (read by :class:`commsched.runtime.jobside.agentpolicy.AgentPolicy`).

The JSON keys are the HTTP API's contract (``class`` for :attr:`JobDecision.priority_class`). A class
becomes its DSCP and TOS byte only through :func:`commsched.runtime.protocol.marks.mark_for_class`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import TypedDict

from commsched.errors import InputError
from commsched.runtime.protocol import control_json as cj
from commsched.runtime.protocol.fields import Fields
from commsched.runtime.protocol.marks import Mark

__all__ = [
    "DECISION_FORMAT",
    "PORT_API",
    "Cause",
    "Connection",
    "Decision",
    "HostView",
    "JobDecision",
    "LinkLoad",
    "PortAnswer",
]

#: layout version of a decision and of a host view (their ``format`` key)
DECISION_FORMAT = 1
PORT_API = 1  # version of the agent's local protocol (the ``api`` key of its answers)
PORT_SOURCES = ("probe", "hash-model", "unrouted")  # where a port answer's source port came from


@dataclass(frozen=True, slots=True, kw_only=True)
class Cause:
    """Why a decision was made: the event kind (``job-start``, ``job-end``, ``profile``, ...) and its job."""

    kind: str
    job: str | None = None
    detail: str = ""

    def to_json(self) -> cj.CauseJSON:
        return {"kind": self.kind, "job": self.job, "detail": self.detail}

    @staticmethod
    def from_json(data: object, where: str = "cause") -> Cause:
        f = Fields(data, where=where)
        return Cause(kind=f.text("kind"), job=f.opt_text("job"), detail=f.opt_text("detail") or "")


@dataclass(frozen=True, slots=True, kw_only=True)
class JobDecision:
    """One job's entry of a decision (JSON key ``class`` for :attr:`priority_class`)."""

    rank: int | None
    priority_class: int
    mark: Mark
    profiling: bool
    gpus: tuple[str, ...]
    hosts: tuple[str, ...]
    intensity: float | None = None
    k: float | None = None
    compute_s: float
    comm_bytes: float

    def to_json(self) -> cj.JobDecisionJSON:
        return {
            "rank": self.rank,
            "class": self.priority_class,
            "dscp": self.mark.dscp,
            "tos": self.mark.tos,
            "profiling": self.profiling,
            "gpus": list(self.gpus),
            "hosts": list(self.hosts),
            "intensity": self.intensity,
            "k": self.k,
            "compute_s": self.compute_s,
            "comm_bytes": self.comm_bytes,
        }

    @staticmethod
    def from_json(data: object, where: str = "job") -> JobDecision:
        f = Fields(data, where=where)
        return JobDecision(
            rank=f.opt_integer("rank"),
            priority_class=f.integer("class"),
            mark=f.mark(),
            profiling=f.flag("profiling"),
            gpus=f.texts("gpus"),
            hosts=f.texts("hosts"),
            intensity=f.opt_number("intensity"),
            k=f.opt_number("k"),
            compute_s=f.number("compute_s"),
            comm_bytes=f.number("comm_bytes"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class Connection:
    """One directed inter-host connection of a job: its path, and the source port that pins it there."""

    job: str
    src_rank: int | None
    dst_rank: int | None
    src: str
    dst: str
    src_nic: str
    dst_nic: str
    path_index: int
    n_paths: int
    path: tuple[str, ...]
    links: tuple[int, ...]
    src_port: int | None
    #: share of the job's bytes per iteration on this connection
    share: float | None = None

    def to_json(self) -> cj.ConnectionJSON:
        out: cj.ConnectionJSON = {
            "job": self.job, "src_rank": self.src_rank, "dst_rank": self.dst_rank, "src": self.src,
            "dst": self.dst, "src_nic": self.src_nic, "dst_nic": self.dst_nic, "path_index": self.path_index,
            "n_paths": self.n_paths, "path": list(self.path), "links": list(self.links),
            "src_port": self.src_port,
        }  # fmt: skip
        if self.share is not None:
            out["share"] = self.share
        return out

    @staticmethod
    def from_json(data: object, where: str = "connection") -> Connection:
        f = Fields(data, where=where)
        return Connection(
            **{k: f.text(k) for k in ("job", "src", "dst", "src_nic", "dst_nic")},
            src_rank=f.opt_integer("src_rank"),
            dst_rank=f.opt_integer("dst_rank"),
            path_index=f.integer("path_index"),
            n_paths=f.integer("n_paths"),
            path=f.texts("path"),
            links=f.integers("links"),
            src_port=f.opt_port("src_port"),
            share=f.opt_number("share"),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkLoad:
    """Planned bytes per iteration on one link (``bytes_per_iter`` in bytes, ``capacity_bps`` in bits/s)."""

    link: int
    bytes_per_iter: float
    jobs: tuple[str, ...]
    src: str
    dst: str
    capacity_bps: float

    def to_json(self) -> cj.LinkLoadJSON:
        return {
            "link": self.link,
            "bytes_per_iter": self.bytes_per_iter,
            "jobs": list(self.jobs),
            "src": self.src,
            "dst": self.dst,
            "capacity_bps": self.capacity_bps,
        }

    @staticmethod
    def from_json(data: object, where: str = "link_load") -> LinkLoad:
        f = Fields(data, where=where)
        return LinkLoad(
            link=f.integer("link"),
            bytes_per_iter=f.number("bytes_per_iter"),
            jobs=f.texts("jobs"),
            src=f.text("src"),
            dst=f.text("dst"),
            capacity_bps=f.number("capacity_bps"),
        )


def _jobs(f: Fields) -> Mapping[str, JobDecision]:
    return MappingProxyType(
        {k: JobDecision.from_json(v, f"{f.at('jobs')}.{k}") for k, v in f.mapping("jobs").items()}
    )


class _Header(TypedDict):
    """The fields a decision and a host view share, read (keyword arguments of both)."""

    version: int
    policy: str
    hash: str | None
    priority_levels: int | None
    cause: Cause | None
    created_s: float | None


def _header(f: Fields) -> _Header:
    """The fields a decision and a host view share."""
    f.version("format", DECISION_FORMAT)
    cause = f.raw("cause", required=False)
    return {
        "version": f.integer("version"),
        "policy": f.text("policy"),
        "hash": f.opt_text("hash"),
        "priority_levels": f.opt_integer("priority_levels"),
        "cause": None if cause is None else Cause.from_json(cause, f.at("cause")),
        "created_s": f.opt_number("created_s"),
    }


def _header_json(doc: Decision | HostView) -> cj.HeaderJSON:
    out: cj.HeaderJSON = {"format": DECISION_FORMAT, "version": doc.version, "policy": doc.policy}
    if doc.hash is not None:
        out["hash"] = doc.hash
    if doc.priority_levels is not None:
        out["priority_levels"] = doc.priority_levels
    if doc.cause is not None:
        out["cause"] = doc.cause.to_json()
    if doc.created_s is not None:
        out["created_s"] = doc.created_s
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Decision:
    """One decision version of the daemon (see the module docstring); ``format`` 1."""

    version: int
    policy: str
    hash: str | None = None
    priority_levels: int | None = None
    cause: Cause | None = None
    created_s: float | None = None
    jobs: Mapping[str, JobDecision] = field(default_factory=lambda: MappingProxyType({}))
    connections: tuple[Connection, ...] = ()
    link_load: tuple[LinkLoad, ...] = ()

    def to_json(self) -> cj.DecisionJSON:
        return {
            **_header_json(self),
            "jobs": {k: v.to_json() for k, v in self.jobs.items()},
            "connections": [c.to_json() for c in self.connections],
            "link_load": [x.to_json() for x in self.link_load],
        }

    @staticmethod
    def from_json(data: object, where: str = "decision") -> Decision:
        f = Fields(data, where=where)
        return Decision(
            **_header(f),
            jobs=_jobs(f),
            connections=f.each("connections", Connection.from_json),
            link_load=f.each("link_load", LinkLoad.from_json, required=False),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class HostView:
    """A decision cut to one host: what the daemon gives that host's agent; ``format`` 1.

    ``connections`` leave the host, ``inbound`` arrive at it (the reverse direction of a connection
    it opens, for enforcing agents); ``nic_ips`` maps every NIC they use to its address.
    """

    version: int
    policy: str
    hash: str | None = None
    priority_levels: int | None = None
    cause: Cause | None = None
    created_s: float | None = None
    host: str
    jobs: Mapping[str, JobDecision] = field(default_factory=lambda: MappingProxyType({}))
    connections: tuple[Connection, ...] = ()
    inbound: tuple[Connection, ...] = ()
    nic_ips: Mapping[str, str] = field(default_factory=lambda: MappingProxyType({}))

    @staticmethod
    def of(decision: Decision, host: str, nic_ips: Mapping[str, str]) -> HostView:
        """The view of ``host`` on ``decision``, with the addresses (of ``nic_ips``) of the NICs it uses."""
        jobs = {k: v for k, v in decision.jobs.items() if host in v.hosts}
        prefix = f"{host}/"
        conns = tuple(c for c in decision.connections if c.job in jobs and c.src_nic.startswith(prefix))
        inbound = tuple(c for c in decision.connections if c.job in jobs and c.dst_nic.startswith(prefix))
        used = {n for c in conns + inbound for n in (c.src_nic, c.dst_nic)}
        return HostView(
            version=decision.version,
            policy=decision.policy,
            hash=decision.hash,
            priority_levels=decision.priority_levels,
            cause=decision.cause,
            created_s=decision.created_s,
            host=host,
            jobs=MappingProxyType(jobs),
            connections=conns,
            inbound=inbound,
            nic_ips=MappingProxyType({n: nic_ips[n] for n in sorted(used) if n in nic_ips}),
        )

    def to_json(self) -> cj.HostViewJSON:
        return {
            **_header_json(self),
            "host": self.host,
            "jobs": {k: v.to_json() for k, v in self.jobs.items()},
            "connections": [c.to_json() for c in self.connections],
            "inbound": [c.to_json() for c in self.inbound],
            "nic_ips": dict(self.nic_ips),
        }

    @staticmethod
    def from_json(data: object, where: str = "host view") -> HostView:
        f = Fields(data, where=where)
        ips = f.mapping("nic_ips", required=False)
        if not all(isinstance(v, str) for v in ips.values()):
            raise InputError("an address that is not a string", where=f.at("nic_ips"), expected="NIC -> IP")
        return HostView(
            **_header(f),
            host=f.text("host"),
            jobs=_jobs(f),
            connections=f.each("connections", Connection.from_json),
            inbound=f.each("inbound", Connection.from_json, required=False),
            nic_ips=MappingProxyType(ips),
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class PortAnswer:
    """The agent's answer for one connection of a job: source port and mark (``api`` 1).

    ``source``: ``probe`` (the probe table's measured port), ``hash-model`` (the decision's port from
    commsched's ECMP hash model) or ``unrouted`` (a connection the decision does not route: any port,
    the job's mark). ``stale``: the agent answers from its last decision while the daemon is away.
    """

    version: int | None
    job: str
    src_rank: int
    dst_rank: int
    priority_class: int
    mark: Mark
    src_port: int | None = None
    path: tuple[str, ...] | None = None
    links: tuple[int, ...] | None = None
    source: str = "unrouted"
    stale: bool = False

    def to_json(self) -> cj.PortAnswerJSON:
        return {
            "api": PORT_API,
            "version": self.version,
            "job": self.job,
            "src_rank": self.src_rank,
            "dst_rank": self.dst_rank,
            "class": self.priority_class,
            "dscp": self.mark.dscp,
            "tos": self.mark.tos,
            "src_port": self.src_port,
            "path": None if self.path is None else list(self.path),
            "links": None if self.links is None else list(self.links),
            "source": self.source,
            "stale": self.stale,
        }

    @staticmethod
    def from_json(data: object, where: str = "port answer") -> PortAnswer:
        f = Fields(data, where=where)
        f.version("api", PORT_API)
        source = f.text("source")
        if source not in PORT_SOURCES:
            raise InputError(
                f"{source!r}", where=f.at("source"), expected="one of " + ", ".join(PORT_SOURCES)
            )
        return PortAnswer(
            version=f.opt_integer("version"),
            job=f.text("job"),
            src_rank=f.integer("src_rank"),
            dst_rank=f.integer("dst_rank"),
            priority_class=f.integer("class"),
            mark=f.mark(),
            src_port=f.opt_port("src_port"),
            path=None if f.raw("path", required=False) is None else f.texts("path"),
            links=None if f.raw("links", required=False) is None else f.integers("links"),
            source=source,
            stale=f.flag("stale"),
        )
