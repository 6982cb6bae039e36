"""The JSON shapes of the agent's answers (its local API, :mod:`.app` and :mod:`.jobs_api`), from which
FastAPI describes them; the enforcer's own records (a job's report, connections, traffic, processes)
are typed where they are made (:mod:`commsched.runtime.enforce`)."""

from __future__ import annotations

from typing_extensions import TypedDict  # pydantic reads these on Python 3.11

from commsched.runtime.enforce.marking.nccl import JobEnvironmentJSON
from commsched.runtime.enforce.reports import ConnectionRowJSON
from commsched.runtime.protocol.control_json import HostViewJSON

__all__ = [
    "AdoptAnswer",
    "AgentDecisionJSON",
    "AgentHealthJSON",
    "ConnectionsAnswer",
    "CountersJSON",
    "EnforceHealthJSON",
    "ForgetAnswer",
    "JobEnvAnswer",
    "StopAnswer",
]


class EnforceHealthJSON(TypedDict):
    """An enforcing agent's part of ``GET /health``: its table, its jobs, its loops' last errors."""

    table: str
    jobs: list[str]
    errors: list[str]


class AgentHealthJSON(TypedDict):
    """``GET /health``."""

    status: str
    api: int
    host: str
    version: int
    connected: bool
    registered: bool
    last_error: str
    probe_entries: int
    enforce: EnforceHealthJSON | None


class AgentDecisionJSON(HostViewJSON):
    """``GET /v1/decision``: the host view the agent holds, and whether the daemon is away (``stale``)."""

    api: int
    stale: bool


class CountersJSON(TypedDict):
    """``GET /v1/counters``: counter name -> value, and whether they were sent to the daemon."""

    host: str
    counters: dict[str, float]
    reported: bool


class JobEnvAnswer(JobEnvironmentJSON):
    """``GET /v1/jobs/{job}/env``: the job's environment on this host, for decision ``version``."""

    job: str
    version: int
    enforcing: bool


class AdoptAnswer(TypedDict):
    """``POST /v1/jobs/{job}/adopt``: every PID moved into the job's cgroup."""

    job: str
    adopted: list[int]


class StopAnswer(TypedDict):
    """``DELETE /v1/jobs/{job}/processes``: PID -> exit code (``None``: it did not exit)."""

    job: str
    stopped: dict[str, int | None]


class ConnectionsAnswer(TypedDict):
    """``GET /v1/jobs/{job}/connections``."""

    job: str
    connections: list[ConnectionRowJSON]


class ForgetAnswer(TypedDict):
    """``DELETE /v1/jobs/{job}``."""

    job: str
    removed: bool
