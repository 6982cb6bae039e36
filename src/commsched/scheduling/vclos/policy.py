"""vClos placement and routing as simulator policies (``PlacementFn`` and ``PolicyFn``).

Placement: :class:`FabricPlacement` rebuilds the :class:`FabricState` from the running jobs of a
request (their GPUs and reserved fibres, :func:`~commsched.scheduling.vclos.wiring.state_from_running`),
runs one of the pure allocators (``allocate_vclos``, ``allocate_ocs_vclos``, ``allocate_best``,
``allocate_packed``) and returns an :class:`Allocation` with the reserved fibres (both directions of
every leaf port and spine port of the job's virtual Clos) and the pinned route of every inter-leaf
connection (the equal-cost path whose leaf uplink and downlink are the ones source routing assigns).

Routing: :class:`PinnedRouting` (vClos / OCS-vClos: the pinned routes), :class:`SourceRouting`
(``sr``: the default port map f(i) = i for every job, no isolation), :class:`EcmpRouting` (5-tuple
MurmurHash3 over random source ports); ``balanced-ecmp`` routes with the communication policy of that
name (:func:`commsched.scheduling.policies.balanced_ecmp.balanced_ecmp_policy`), one algorithm per name.

References
----------
vClos §5.2 (source routing), §6 (vClos), §7 (OCS-vClos), §9.3 (baselines: SR, ECMP, Balanced, Best).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum
from types import MappingProxyType

from commsched.errors import InfeasibleError
from commsched.scheduling.interfaces import Allocation, PlacementRequest, PolicyContext
from commsched.scheduling.routing import ecmp_routes, network_pair
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
from commsched.scheduling.traffic import job_connections
from commsched.scheduling.vclos.fabric import FabricState, GpuAddr, JobRequest, Placement
from commsched.scheduling.vclos.placement import Allocator
from commsched.scheduling.vclos.wiring import Wiring, WiringCache, new_cache, state_from_running
from commsched.topology import LinkId, LinkKind, NodeId, Topology

Routes = Mapping[ConnectionKey, int]


class RefusalCause(StrEnum):
    """Why a job could not be placed (fragmentation causes of vClos Table 2)."""

    GPU_TOTAL = "gpu-total"  # fewer idle GPUs than the job needs
    GPU_SHAPE = "gpu-shape"  # enough idle GPUs, but not in the shape locality needs
    NETWORK = "network"  # the GPUs fit, but the links the job needs are reserved


@dataclass(frozen=True, slots=True, kw_only=True)
class Refusal:
    """One refused placement attempt (a job at the head of the queue on a new cluster state)."""

    job: str
    time_s: float
    cause: RefusalCause


def classify_refusal(state: FabricState, job: JobRequest, allocate: Allocator) -> RefusalCause:
    """Why ``allocate`` refuses ``job`` on ``state`` (pure; call it on a refused state).

    GPU-caused when the job does not fit even with every link free (in total, or in shape);
    network-caused when it would fit with every link free.

    Examples
    --------
    >>> from commsched.scheduling.vclos import Fabric, empty_state, allocate_vclos
    >>> s = empty_state(Fabric(leaves=2, spines=2, servers_per_leaf=1, gpus_per_server=2))
    >>> classify_refusal(s, JobRequest(job_id="x", gpus=8), allocate_vclos).value
    'gpu-total'

    References
    ----------
    vClos §7, Table 2 (fragmentation count with causes).
    """
    f = state.fabric
    if sum(o is None for o in state.gpu_owner) < job.gpus:
        return RefusalCause.GPU_TOTAL
    free_links = FabricState(
        fabric=f,
        gpu_owner=state.gpu_owner,
        cable_owner=(None,) * len(state.cable_owner),
        spine_port_owner=(None,) * len(state.spine_port_owner),
        placements={},
    )
    try:
        allocate(free_links, job)
    except InfeasibleError:
        return RefusalCause.GPU_SHAPE
    return RefusalCause.NETWORK


# ---------------------------------------------------------------------------------------------- paths


def fabric_links(topo: Topology, links: Iterable[LinkId]) -> list[LinkId]:
    """The switch-to-switch links among ``links``."""
    return [lk for lk in links if topo.links[lk].kind == LinkKind.FABRIC]


def path_through(topo: Topology, key: ConnectionKey, required: Iterable[LinkId]) -> int | None:
    """Index of the first equal-cost path of a connection that takes every ``required`` link."""
    pair = network_pair(topo, key)
    if pair is None:
        return None
    need = set(required)
    for i, p in enumerate(topo.equal_cost_paths(*pair)):
        if need.issubset(p.links):
            return i
    return None


def least_used_path(topo: Topology, key: ConnectionKey, load: Counter[LinkId], rank: int) -> int:
    """The equal-cost path whose busiest fabric link carries the fewest flows; ties by ``rank``."""
    pair = network_pair(topo, key)
    if pair is None:
        return 0
    paths = topo.equal_cost_paths(*pair)
    score = [max((load[lk] for lk in fabric_links(topo, p.links)), default=0) for p in paths]
    best = [i for i, s in enumerate(score) if s == min(score)]
    return best[rank % len(best)]


def inter_leaf(wiring: Wiring, key: ConnectionKey) -> tuple[GpuAddr, GpuAddr] | None:
    """The fabric addresses of a connection's ends when they sit under different leaves."""
    a, b = wiring.addr_of.get(key.src), wiring.addr_of.get(key.dst)
    if a is None or b is None or a.leaf == b.leaf:
        return None
    return a, b


def source_routed(topo: Topology, wiring: Wiring, placement: Placement, key: ConnectionKey) -> int | None:
    """The path index source routing assigns a connection: leaf uplink f(src) and the plane's downlink.

    References
    ----------
    vClos §5.2 (Case 2), :func:`commsched.scheduling.vclos.routing.route`.
    """
    ends = inter_leaf(wiring, key)
    r = placement.routing
    if ends is None or r is None or ends[0] not in r.uplink:
        return None
    a, b = ends
    u = r.uplink[a]
    plane = r.plane.get((a.leaf, u))
    down = r.downlink_gpu.get((plane, b)) if plane is not None else None
    if down is None and plane is not None:
        down = r.downlink.get((plane, b.leaf))
    if down is None:
        return None
    up_port = wiring.fabric.up_ports
    need = (wiring.leaf_fibre[a.leaf * up_port + u][0], wiring.leaf_fibre[b.leaf * up_port + down][1])
    return path_through(topo, key, need)


def reserved_fibres(wiring: Wiring, placement: Placement) -> frozenset[LinkId]:
    """Both directions of every leaf port and spine port of a placement's cables."""
    f = wiring.fabric
    out: set[LinkId] = set()
    for c in placement.cables:
        out.update(wiring.leaf_fibre[c.leaf * f.up_ports + c.port])
        out.update(wiring.spine_fibre[c.spine * f.spine_ports + c.spine_port])
    return frozenset(out)


def _spec_job(req: PlacementRequest, gpus: tuple[NodeId, ...]) -> PlacedJob:
    return PlacedJob(spec=req.job, gpus=gpus, start_s=req.now_s)


def pin_routes(req: PlacementRequest, wiring: Wiring, placement: Placement, *, ocs: bool) -> Routes:
    """Pinned path of every inter-leaf connection of a placed job.

    Fixed cabling: the source-routed path (its spine is the plane of the source's uplink). OCS:
    the simulator's OCS topology keeps its static circuits, so a rewired circuit is represented by a
    free static path: the source-routed one when it exists, else the equal-cost path with the fewest
    links held by other jobs' fibres or already used by this job (see ``bundles`` module notes).
    """
    topo = req.topology
    gpus = tuple(wiring.view.gpu_ids[a] for a in placement.ranks)
    blocked: Counter[LinkId] = Counter(lk for j in req.running for lk in j.reserved_links)
    out: dict[ConnectionKey, int] = {}
    for key in job_connections(topo, _spec_job(req, gpus)):
        if inter_leaf(wiring, key) is None:
            continue
        idx = source_routed(topo, wiring, placement, key)
        if idx is None and ocs:
            idx = least_used_path(topo, key, blocked, 0)
        if idx is None:
            continue
        out[key] = idx
        pair = network_pair(topo, key)
        if pair is not None:
            blocked.update(fabric_links(topo, topo.equal_cost_paths(*pair)[idx].links))
    return MappingProxyType(out)


# ---------------------------------------------------------------------------------------------- placement


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricPlacement:
    """A vClos-family allocator as a simulator placement policy.

    ``pin`` is ``"source"`` (pin source-routed paths), ``"ocs"`` (source-routed or free static
    paths) or ``"none"``. Refused attempts are memoised per (job, running set) so a blocked queue
    head does not re-solve the same program, and logged with their cause in ``refusals`` (analysis
    only; the log is this instance's, one simulation per instance).
    """

    allocate: Allocator
    pin: str = "none"
    cache: WiringCache
    refused: dict[str, frozenset[str]]
    refusals: list[Refusal]

    def __call__(self, req: PlacementRequest) -> Allocation | None:
        wiring = self.cache.get(req.topology)
        sig = frozenset(j.id for j in req.running)
        if self.refused.get(req.job.id) == sig:
            return None
        state = state_from_running(wiring, req.running)
        job = JobRequest(job_id=req.job.id, gpus=req.job.gpus, arrival_s=req.job.arrival_s)
        try:
            _, placement = self.allocate(state, job)
        except InfeasibleError:
            self.refused[req.job.id] = sig
            cause = classify_refusal(state, job, self.allocate)
            self.refusals.append(Refusal(job=req.job.id, time_s=req.now_s, cause=cause))
            return None
        self.refused.pop(req.job.id, None)
        routes: Routes = MappingProxyType({})
        if self.pin != "none":
            routes = pin_routes(req, wiring, placement, ocs=self.pin == "ocs")
        return Allocation(
            gpus=tuple(wiring.view.gpu_ids[a] for a in placement.ranks),
            reserved_links=reserved_fibres(wiring, placement),
            pinned_routes=routes,
        )


def fabric_placement(allocate: Allocator, *, pin: str = "none") -> FabricPlacement:
    """A fresh :class:`FabricPlacement` (its own wiring cache, memo and refusal log)."""
    return FabricPlacement(allocate=allocate, pin=pin, cache=new_cache(), refused={}, refusals=[])


# ---------------------------------------------------------------------------------------------- routing


def _decisions(state: ClusterState, routes: Mapping[ConnectionKey, int]) -> Decisions:
    return Decisions(
        routes=MappingProxyType(dict(routes)), classes=MappingProxyType({j.id: 0 for j in state.jobs})
    )


def pinned_policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
    """vClos / OCS-vClos routing: every connection on the route its placement pinned; one class.

    References
    ----------
    vClos §5.2, §6.1 (routes are installed at placement and never change while the job runs).
    """
    del ctx
    return _decisions(state, {k: v for j in state.jobs for k, v in j.pinned_routes.items()})


@dataclass(frozen=True, slots=True, kw_only=True)
class _Memo:
    """Routes per (seed, job, GPUs), computed once per job (routes never change while a job runs)."""

    routes: dict[tuple[int, str, tuple[NodeId, ...]], dict[ConnectionKey, int]]

    def key(self, seed: int, job: PlacedJob) -> tuple[int, str, tuple[NodeId, ...]]:
        return (seed, str(job.id), job.gpus)


@dataclass(frozen=True, slots=True, kw_only=True)
class SourceRoutingPolicy:
    """``sr``: source routing with the default leaf map (down port i -> up port i) for every job,
    without link reservation, so jobs can contend on a spine downlink.

    References
    ----------
    vClos §5.2 (Source Routing), §9.3 (SR baseline), Fig. 9 (inter-task contention under SR).
    """

    cache: WiringCache
    memo: _Memo

    def __call__(self, state: ClusterState, ctx: PolicyContext) -> Decisions:
        wiring = self.cache.get(state.topology)
        routes: dict[ConnectionKey, int] = {}
        for job in state.jobs:
            k = self.memo.key(ctx.seed, job)
            if k not in self.memo.routes:
                self.memo.routes[k] = self._job_routes(state.topology, wiring, job)
            routes.update(self.memo.routes[k])
        return _decisions(state, routes)

    @staticmethod
    def _job_routes(topo: Topology, wiring: Wiring, job: PlacedJob) -> dict[ConnectionKey, int]:
        up = wiring.fabric.up_ports
        out: dict[ConnectionKey, int] = {}
        for key in job_connections(topo, job):
            ends = inter_leaf(wiring, key)
            if ends is None:
                continue
            a, b = ends
            need = (wiring.leaf_fibre[a.leaf * up + a.port][0], wiring.leaf_fibre[b.leaf * up + a.port][1])
            idx = path_through(topo, key, need)
            if idx is not None:
                out[key] = idx
        return out


@dataclass(frozen=True, slots=True, kw_only=True)
class EcmpRouting:
    """``ecmp``: 5-tuple MurmurHash3 ECMP over random RoCEv2 source ports (seeded per connection).

    References
    ----------
    vClos §3.1, §9.3 (ECMP baseline).
    """

    memo: _Memo
    hash_name: str = "murmur3"

    def __call__(self, state: ClusterState, ctx: PolicyContext) -> Decisions:
        routes: dict[ConnectionKey, int] = {}
        for job in state.jobs:
            k = self.memo.key(ctx.seed, job)
            if k not in self.memo.routes:
                one = ClusterState(topology=state.topology, jobs=(job,))
                self.memo.routes[k] = dict(ecmp_routes(one, seed=ctx.seed, hash_name=self.hash_name))
            routes.update(self.memo.routes[k])
        return _decisions(state, routes)


def new_memo() -> _Memo:
    """An empty route memo (one per policy instance)."""
    return _Memo(routes={})
