"""Routes kept per job: what lets a decision over many jobs cost what changed, not what exists.

A policy's routes are a ``Mapping[ConnectionKey, int]`` (connection -> equal-cost path index,
:class:`~commsched.scheduling.state.Decisions`). Built as one flat dictionary, a domain of large jobs
means tens of thousands of entries copied, merged and compared at every decision. :class:`JobRoutes`
is the same mapping kept as one :class:`RouteMap` per job: a policy that reuses a job's routes hands
back the very same :class:`RouteMap`, so finding that nothing changed is an identity test, and a
:class:`RouteMap` hashes once, so it can key the memoised per-job results (traffic, facts) computed
under it.

Examples
--------
>>> from commsched.topology import NodeId
>>> from commsched.workload import JobId
>>> k = ConnectionKey(job=JobId("a"), src=NodeId("h0/gpu0"), dst=NodeId("h1/gpu0"))
>>> routes = JobRoutes({JobId("a"): RouteMap({k: 3})})
>>> routes[k], len(routes), routes.of(JobId("b")) == {}
(3, 1, True)
>>> routes_of({k: 3}, JobId("a")) == routes.of(JobId("a"))
True
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping

from commsched.scheduling.state import ConnectionKey
from commsched.workload import JobId

__all__ = ["EMPTY", "JobRoutes", "RouteMap", "by_job", "routes_of"]


class RouteMap(Mapping[ConnectionKey, int]):
    """One job's routes (connection -> path index): immutable, hashed once by its content."""

    __slots__ = ("_d", "_hash")

    def __init__(self, items: Mapping[ConnectionKey, int] | Iterable[tuple[ConnectionKey, int]] = ()) -> None:
        self._d: dict[ConnectionKey, int] = dict(items)
        self._hash: int | None = None

    def __getitem__(self, key: ConnectionKey) -> int:
        return self._d[key]

    def __iter__(self) -> Iterator[ConnectionKey]:
        return iter(self._d)

    def __len__(self) -> int:
        return len(self._d)

    def __contains__(self, key: object) -> bool:
        return key in self._d

    def __hash__(self) -> int:
        if self._hash is None:
            self._hash = hash(frozenset(self._d.items()))
        return self._hash

    def __eq__(self, other: object) -> bool:
        if other is self:
            return True
        if isinstance(other, RouteMap):
            return hash(self) == hash(other) and self._d == other._d
        if isinstance(other, Mapping):
            return self._d == dict(other.items())
        return NotImplemented

    def __repr__(self) -> str:
        return f"RouteMap({self._d!r})"


#: the routes of a job that has none (single-path or intra-host connections only)
EMPTY = RouteMap()


class JobRoutes(Mapping[ConnectionKey, int]):
    """The routes of several jobs, one :class:`RouteMap` per job; looked up through the key's job."""

    __slots__ = ("_by_job",)

    def __init__(self, by_job: Mapping[JobId, RouteMap] | None = None) -> None:
        self._by_job: dict[JobId, RouteMap] = dict(by_job or {})

    def of(self, job: JobId) -> RouteMap:
        """The job's own routes (:data:`EMPTY` if none)."""
        return self._by_job.get(job, EMPTY)

    def jobs(self) -> Mapping[JobId, RouteMap]:
        return self._by_job

    def __getitem__(self, key: ConnectionKey) -> int:
        return self._by_job.get(key.job, EMPTY)[key]

    def __contains__(self, key: object) -> bool:
        return isinstance(key, ConnectionKey) and key in self._by_job.get(key.job, EMPTY)

    def __iter__(self) -> Iterator[ConnectionKey]:
        for routes in self._by_job.values():
            yield from routes

    def __len__(self) -> int:
        return sum(len(r) for r in self._by_job.values())

    def __repr__(self) -> str:
        return f"JobRoutes({self._by_job!r})"


def by_job(routes: Mapping[ConnectionKey, int]) -> JobRoutes:
    """``routes`` kept per job (itself when it already is)."""
    if isinstance(routes, JobRoutes):
        return routes
    groups: dict[JobId, dict[ConnectionKey, int]] = {}
    for key, path in routes.items():
        groups.setdefault(key.job, {})[key] = path
    return JobRoutes({job: RouteMap(d) for job, d in groups.items()})


def routes_of(routes: Mapping[ConnectionKey, int], job: JobId) -> RouteMap:
    """One job's routes out of any routes mapping (``O(1)`` for :class:`JobRoutes`)."""
    if isinstance(routes, JobRoutes):
        return routes.of(job)
    return RouteMap((k, v) for k, v in routes.items() if k.job == job)
