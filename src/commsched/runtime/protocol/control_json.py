"""The JSON shapes of the control protocol's records (:mod:`commsched.runtime.protocol.control`), as
their ``to_json`` methods write them."""

from __future__ import annotations

from typing import NotRequired

from typing_extensions import TypedDict  # pydantic reads these on Python 3.11 (FastAPI answers)

__all__ = [
    "CauseJSON",
    "ConnectionJSON",
    "DecisionJSON",
    "HeaderJSON",
    "HostJSON",
    "HostViewJSON",
    "JobDecisionJSON",
    "LinkLoadJSON",
    "MarkJSON",
    "NicJSON",
    "PortAnswerJSON",
    "RegistrationJSON",
]


class CauseJSON(TypedDict):
    """:meth:`Cause.to_json`."""

    kind: str
    job: str | None
    detail: str


#: :meth:`JobDecision.to_json` (``class`` is a keyword, hence the functional form)
JobDecisionJSON = TypedDict(
    "JobDecisionJSON",
    {
        "rank": int | None,
        "class": int,
        "dscp": int,
        "tos": int,
        "profiling": bool,
        "gpus": list[str],
        "hosts": list[str],
        "intensity": float | None,
        "k": float | None,
        "compute_s": float,
        "comm_bytes": float,
    },
)


class LinkLoadJSON(TypedDict):
    """:meth:`LinkLoad.to_json`."""

    link: int
    bytes_per_iter: float
    jobs: list[str]
    src: str
    dst: str
    capacity_bps: float


#: :meth:`PortAnswer.to_json`
PortAnswerJSON = TypedDict(
    "PortAnswerJSON",
    {
        "api": int,
        "version": int | None,
        "job": str,
        "src_rank": int,
        "dst_rank": int,
        "class": int,
        "dscp": int,
        "tos": int,
        "src_port": int | None,
        "path": list[str] | None,
        "links": list[int] | None,
        "source": str,
        "stale": bool,
    },
)


class MarkJSON(TypedDict):
    """:meth:`commsched.runtime.protocol.marks.Mark.to_json`."""

    dscp: int
    tos: int


class ConnectionJSON(TypedDict):
    """:meth:`Connection.to_json` (``share`` only where the decision gives it)."""

    job: str
    src_rank: int | None
    dst_rank: int | None
    src: str
    dst: str
    src_nic: str
    dst_nic: str
    path_index: int
    n_paths: int
    path: list[str]
    links: list[int]
    src_port: int | None
    share: NotRequired[float]


class HeaderJSON(TypedDict):
    """The keys a decision and a host view share (the optional ones only where set)."""

    format: int
    version: int
    policy: str
    hash: NotRequired[str]
    priority_levels: NotRequired[int]
    cause: NotRequired[CauseJSON]
    created_s: NotRequired[float]


class DecisionJSON(HeaderJSON):
    """:meth:`Decision.to_json` (``GET /v1/decisions/latest``)."""

    jobs: dict[str, JobDecisionJSON]
    connections: list[ConnectionJSON]
    link_load: list[LinkLoadJSON]


class HostViewJSON(HeaderJSON):
    """:meth:`HostView.to_json` (``GET /v1/decisions/latest?host=H``, the agent's state file)."""

    host: str
    jobs: dict[str, JobDecisionJSON]
    connections: list[ConnectionJSON]
    inbound: list[ConnectionJSON]
    nic_ips: dict[str, str]


class NicJSON(TypedDict):
    """A NIC an agent registers: its id in the topology and its address on the fabric."""

    id: str
    ip: str | None


class HostJSON(TypedDict):
    """What an agent registers of its host (the daemon keeps it per host name)."""

    nics: list[NicJSON]
    agent: str | None


class RegistrationJSON(HostJSON):
    """The body of ``POST /v1/hosts``: the host's name and :class:`HostJSON`."""

    name: str
