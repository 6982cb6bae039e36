"""The shared data model of decisions: ``ClusterState`` in, ``Decisions`` out.

One set of records serves the simulator and the runtime. A policy is a plain callable
``(ClusterState, PolicyContext) -> Decisions``; names map to policies only at the edges.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from types import MappingProxyType

from commsched.topology import LinkId, NodeId, Topology
from commsched.workload import JobId, JobSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionKey:
    """A directed connection of a job between two of its endpoints (GPUs, or single-link ends).

    Examples
    --------
    >>> from commsched.topology import NodeId
    >>> from commsched.workload import JobId
    >>> key = ConnectionKey(job=JobId("a"), src=NodeId("h0/gpu0"), dst=NodeId("h1/gpu0"))
    >>> (key.job, key.src, key.dst)
    ('a', 'h0/gpu0', 'h1/gpu0')
    """

    job: JobId
    src: NodeId
    dst: NodeId


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacedJob:
    """A job with its GPUs, in rank order (rank ``i`` of the collective runs on ``gpus[i]``).

    On an abstract single-link topology ``gpus`` is empty and ``spec.gpus`` is only a count.

    Examples
    --------
    >>> from commsched.workload import ModelProfile, job_from_model
    >>> prof = ModelProfile(name="m", gpu="test", compute_s=1.0, sync_bytes=1e9, overlap=1.0, source="doc")
    >>> j = PlacedJob(spec=job_from_model("a", prof, gpus=4), gpus=())
    >>> (j.id, j.n_gpus)
    ('a', 4)
    """

    spec: JobSpec
    gpus: tuple[NodeId, ...]
    reserved_links: frozenset[LinkId] = frozenset()
    pinned_routes: Mapping[ConnectionKey, int] = field(default_factory=lambda: MappingProxyType({}))
    start_s: float = 0.0

    @property
    def id(self) -> JobId:
        return self.spec.id

    @property
    def n_gpus(self) -> int:
        return len(self.gpus) if self.gpus else self.spec.gpus


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterState:
    """The cluster as the deciders see it: topology, running jobs, available priority levels, and the
    links each job's traffic may still be on from the previous decision.

    Examples
    --------
    >>> from commsched.topology import single_link
    >>> from commsched.workload import ModelProfile, job_from_model
    >>> prof = ModelProfile(name="m", gpu="test", compute_s=1.0, sync_bytes=1e9, overlap=1.0, source="doc")
    >>> job = PlacedJob(spec=job_from_model("a", prof, gpus=4), gpus=())
    >>> st = ClusterState(topology=single_link(), jobs=(job,), priority_levels=2)
    >>> (st.job("a").n_gpus, st.priority_levels)
    (4, 2)
    """

    topology: Topology
    jobs: tuple[PlacedJob, ...]
    priority_levels: int = 8
    #: per running job, the links (indices into ``topology.links``) of the routes in force before this
    #: decision: a step in flight finishes on them, so a job may still share them with another after
    #: the decision moves it (empty: the decider knows of none)
    in_flight_links: Mapping[JobId, tuple[int, ...]] = field(default_factory=lambda: MappingProxyType({}))

    def job(self, job_id: JobId) -> PlacedJob:
        for j in self.jobs:
            if j.id == job_id:
                return j
        raise KeyError(job_id)


def _frozen(m: Mapping[JobId, int] | None = None) -> Mapping[JobId, int]:
    return MappingProxyType(dict(m or {}))


@dataclass(frozen=True, slots=True, kw_only=True)
class Decisions:
    """What a policy decided for a ``ClusterState``.

    Attributes
    ----------
    routes
        Connection -> index into ``topology.equal_cost_paths(nic_src, nic_dst)``; connections not listed
        use index 0 (intra-host connections have a single route).
    ranking
        Job -> unique rank (0 = most important). Empty when the policy does not rank.
    classes
        Job -> priority class after compression (0 = highest). Jobs not listed use class 0.
    time_shift_s
        Job -> delay of its iteration starts (CASSINI-style time shifts), seconds.
    src_ports
        Connection -> UDP source port realising the route under the configured ECMP hash (runtime only).

    Examples
    --------
    >>> d = Decisions(ranking={"a": 0, "b": 1}, classes={"b": 1})
    >>> (d.class_of("a"), d.class_of("b"))
    (0, 1)
    """

    routes: Mapping[ConnectionKey, int] = field(default_factory=lambda: MappingProxyType({}))
    ranking: Mapping[JobId, int] = field(default_factory=_frozen)
    classes: Mapping[JobId, int] = field(default_factory=_frozen)
    time_shift_s: Mapping[JobId, float] = field(default_factory=lambda: MappingProxyType({}))
    src_ports: Mapping[ConnectionKey, int] = field(default_factory=lambda: MappingProxyType({}))

    def class_of(self, job: JobId) -> int:
        return self.classes.get(job, 0)

    def route_of(self, key: ConnectionKey) -> int:
        return self.routes.get(key, 0)
