"""The interfaces through which decisions enter the simulator: communication policy and placement."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass, field
from types import MappingProxyType

from commsched.scheduling.memo import Memo
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
from commsched.topology import LinkId, NodeId, Topology
from commsched.workload import JobSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """What a communication policy may know besides the cluster state.

    ``seed`` is the simulation's seed; ``epoch`` counts the decisions taken so far (a policy that draws
    random numbers derives its generator from both, so runs are reproducible). ``memo`` is the
    simulation's store of pure per-job and per-pair results that a policy may reuse from one decision
    to the next (:mod:`commsched.scheduling.memo`); ``None`` outside a simulation.

    Examples
    --------
    >>> ctx = PolicyContext(seed=1, now_s=0.0, epoch=0)
    >>> (ctx.seed, ctx.epoch, ctx.memo is None)
    (1, 0, True)
    """

    seed: int
    now_s: float
    epoch: int
    memo: Memo | None = field(default=None, compare=False, repr=False)


#: A communication policy: paths, ranking, classes (and time shifts) for the running jobs.
PolicyFn = Callable[[ClusterState, PolicyContext], Decisions]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementRequest:
    """A job asking for GPUs: the GPUs free now, and the running jobs with their allocations.

    Examples
    --------
    >>> from commsched.scheduling.placement import pack
    >>> from commsched.topology import two_layer_clos
    >>> from commsched.workload import ModelProfile, job_from_model
    >>> prof = ModelProfile(name="m", gpu="test", compute_s=1.0, sync_bytes=1e9, overlap=1.0, source="doc")
    >>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)
    >>> req = PlacementRequest(topology=topo, job=job_from_model("a", prof, gpus=8),
    ...                        free_gpus=frozenset(topo.gpus))
    >>> len(pack(req).gpus)
    8
    """

    topology: Topology
    job: JobSpec
    #: the free GPUs: any set; the simulator hands a live index
    #: (:class:`~commsched.scheduling.freegpus.FreeGpus`) that placements may query directly
    free_gpus: AbstractSet[NodeId]
    running: tuple[PlacedJob, ...] = ()
    now_s: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Allocation:
    """What a placement policy grants: GPUs in rank order, and optionally reserved links and pinned routes.

    ``reserved_links`` are links no other job may be routed over while this job runs (vClos link
    reservation); ``pinned_routes`` fix the route of the job's connections (source routing).

    Examples
    --------
    >>> from commsched.topology import NodeId
    >>> a = Allocation(gpus=(NodeId("h0/gpu0"), NodeId("h0/gpu1")))
    >>> (len(a.gpus), a.reserved_links, dict(a.pinned_routes))
    (2, frozenset(), {})
    """

    gpus: tuple[NodeId, ...]
    reserved_links: frozenset[LinkId] = frozenset()
    pinned_routes: Mapping[ConnectionKey, int] = field(default_factory=lambda: MappingProxyType({}))


#: A placement policy: an allocation for the job, or ``None`` when it does not fit now (it waits).
PlacementFn = Callable[[PlacementRequest], Allocation | None]

#: Orders the waiting jobs before each placement round (default: arrival order, FIFO).
QueueOrderFn = Callable[[Sequence[JobSpec], float], Sequence[JobSpec]]


#: Changes the cluster a policy runs on (e.g. one non-blocking switch for "best", extra links).
TopologyFn = Callable[[Topology], Topology]


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyBundle:
    """A named policy as ``compare`` and ``simulate`` see it: a communication policy plus, optionally,
    the placement, queue order and cluster change it comes with (vClos reserves links at placement;
    "best" runs on one non-blocking switch).

    Examples
    --------
    >>> from commsched.scheduling.basic import fair_policy
    >>> b = PolicyBundle(name="fair-packed", communication=fair_policy, description="fair, packed")
    >>> (b.name, b.placement is None, b.topology is None)
    ('fair-packed', True, True)
    """

    name: str
    communication: PolicyFn
    placement: PlacementFn | None = None
    queue_order: QueueOrderFn | None = None
    topology: TopologyFn | None = None
    description: str = ""
