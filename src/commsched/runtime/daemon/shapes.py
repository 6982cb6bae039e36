"""The JSON shapes of the daemon's records and of its HTTP answers (what ``to_json`` writes, what a route
returns; FastAPI describes the answers from these in the OpenAPI document).

The records' shapes are also the rows of the SQLite store (:mod:`.store`), read back by ``from_json``.
A host's body (its NICs, where its agent serves) is the agent's registration
(:class:`commsched.runtime.protocol.control_json.HostJSON`).
"""

from __future__ import annotations

from typing import Any

from typing_extensions import TypedDict  # pydantic reads these on Python 3.11

from commsched.runtime.protocol.control_json import CauseJSON, HostJSON

__all__ = [
    "ClusterAnswer",
    "ClusterConfigJSON",
    "ClusterJSON",
    "CountersAnswer",
    "EventJSON",
    "HealthJSON",
    "HeartbeatAnswer",
    "HistoryRowJSON",
    "HostAnswer",
    "HostListedJSON",
    "JobJSON",
    "JobListedJSON",
    "JobStartedAnswer",
    "ParallelJSON",
    "ProfileJSON",
    "VersionAnswer",
]


class ClusterConfigJSON(TypedDict):
    """:meth:`~commsched.runtime.daemon.records.ClusterConfig.to_json`."""

    #: a scenario file's ``topology`` section: ``{"kind": NAME, PARAM: VALUE, ...}``, its parameters
    #: those of the builder it names (arbitrary JSON here; the topology builders check them)
    topology: dict[str, Any]
    priority_levels: int
    policy: str
    placement: str
    hash_name: str
    seed: int
    profiling_window_s: float
    heartbeat_timeout_s: float


class ClusterJSON(ClusterConfigJSON):
    """The cluster as ``GET /v1/cluster`` shows it: ``hash`` as ``PUT`` takes it, beside ``hash_name``."""

    hash: str


class ProfileJSON(TypedDict):
    """:meth:`~commsched.runtime.daemon.records.ProfileRecord.to_json`."""

    compute_s: float
    comm_bytes: float
    period_s: float
    overlap: float | None


class ParallelJSON(TypedDict, total=False):
    """A job's parallel groups: the :class:`~commsched.workload.parallel.ParallelSpec` fields it gave."""

    tp: int
    pp: int
    dp: int
    ep: int
    zero: int
    micro_batches: int
    schedule: str
    order: str


class JobJSON(TypedDict):
    """:meth:`~commsched.runtime.daemon.records.JobRecord.to_json` (``GET /v1/jobs/{id}``)."""

    id: str
    gpus: list[str]
    compute_s: float
    comm_bytes: float
    overlap: float
    collective: str
    model: str | None
    started_s: float
    profiling: bool
    profiling_until_s: float
    profile: ProfileJSON | None
    parallel: ParallelJSON | None
    priority: int | None


class JobListedJSON(JobJSON):
    """A job in ``GET /v1/jobs``: with the age of its last heartbeat."""

    heartbeat_age_s: float


class HostListedJSON(HostJSON):
    """A host in ``GET /v1/hosts``: its registration and its last counters (``at_s``: when they came)."""

    counters: dict[str, float] | None


class EventJSON(TypedDict):
    """One row of the event log (``GET /v1/events``)."""

    seq: int
    at_s: float
    kind: str
    job: str | None
    #: what the event carried; its keys depend on ``kind`` (a job's GPUs, a profile, a cluster, ...)
    detail: dict[str, Any]


class HistoryRowJSON(TypedDict):
    """One decision in ``GET /v1/decisions`` (its document left out)."""

    version: int
    created_s: float
    cause: CauseJSON


class HealthJSON(TypedDict):
    """``GET /health``."""

    status: str
    api: int
    version: int
    jobs: int
    caches_warm: bool


class VersionAnswer(TypedDict):
    """A change's answer: the decision version it made."""

    version: int


class ClusterAnswer(TypedDict):
    """``PUT /v1/cluster``."""

    version: int
    cluster: ClusterJSON


class JobStartedAnswer(TypedDict):
    """``POST /v1/jobs``."""

    job: JobJSON
    version: int


class HeartbeatAnswer(TypedDict):
    """``POST /v1/jobs/{id}/heartbeat``: the timeout the job must beat within."""

    timeout_s: float
    version: int


class HostAnswer(TypedDict):
    """``POST /v1/hosts``."""

    host: str
    version: int


class CountersAnswer(TypedDict):
    """``POST /v1/hosts/{host}/counters``."""

    host: str
