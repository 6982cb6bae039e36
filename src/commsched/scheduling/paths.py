"""Path selection: Crux's intensity-ordered least-congested paths and the routing baselines (Crux §4.1).

A job's inter-host connections are grouped into *flows*, one per (source NIC, destination NIC) pair
(its GPUs' connections between the same two NICs share one RoCE connection's path, crux-spec §2.2
item 2). Every flow between NICs under different switches has a set of equal-cost candidate paths
(:meth:`Topology.equal_cost_paths`, crux-spec §2.2 item 3); a decision is an index into that set.

Greedy least-congested selection (:func:`greedy_routes`)
--------------------------------------------------------
Jobs are taken in a given order (Crux: decreasing GPU intensity ``I_j``, ties by id; TACCL*: arrival
order); inside a job, flows in decreasing bytes per iteration. Each flow adds a *weight* to every
link of the path it gets, and picks the path minimising, lexicographically,

1. ``max_e (load_e + w) / B_e`` over the path's links (bottleneck congestion after placing it),
2. ``sum_e (load_e + w) / B_e`` (total congestion),
3. the path index (deterministic).

The weight ``w`` of a flow depends on the metric (``PathSettings.metric``, crux-spec §2.2 item 1):

``rate`` (default)
    its average rate ``M / T_iter`` in bytes/s, ``T_iter = max(c, o c + t_j)`` the job's standalone
    iteration time estimate; the ratio to ``B_e`` (bytes/s) is link utilisation.
``intensity``
    the job's ``I_j`` per flow (keeps two intensive jobs off one link); divided by ``B_e`` in bits/s
    only to break ties between links of different speed.
``flows``
    1 per flow (balanced ECMP: fewest flows).

Granularity (``PathSettings.granularity``): ``connection`` chooses per flow; ``job`` chooses one
index ``k`` for the whole job (flow ``f`` takes path ``k mod n_f``), scored on the union of its
flows — the choice the microbenchmark enumerates. Routes pinned by the placement
(``PlacedJob.pinned_routes``) are kept and counted as load.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.1, §4.4 (footnote 3, TACCL*), §5.2-5.3 (source ports); crux-spec §2.

Source routing by port and the source ports that pin a path: :mod:`commsched.scheduling.ports`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

import numpy as np
from numpy.typing import NDArray

from commsched.errors import InputError
from commsched.scheduling.greedy_view import JobView, candidate_links
from commsched.scheduling.memo import Memo
from commsched.scheduling.routemap import JobRoutes, RouteMap
from commsched.scheduling.routing import network_pair
from commsched.scheduling.state import ConnectionKey, PlacedJob
from commsched.scheduling.traffic import job_connections
from commsched.topology import NodeId, Topology
from commsched.workload import JobId

__all__ = [
    "Flow",
    "FlowWeight",
    "Granularity",
    "GreedyTrail",
    "Metric",
    "PathSettings",
    "PathTable",
    "greedy_routes",
    "job_flows",
]

Metric = Literal["rate", "intensity", "flows"]
Granularity = Literal["connection", "job"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PathSettings:
    """Knobs of the greedy path selection (defaults: crux-spec §2.2 proposals).

    Attributes
    ----------
    metric
        ``rate``, ``intensity`` or ``flows`` (module docstring).
    granularity
        ``connection`` (one choice per NIC pair) or ``job`` (one index for all of a job's flows).
    """

    metric: Metric = "rate"
    granularity: Granularity = "connection"

    def __post_init__(self) -> None:
        if self.metric not in ("rate", "intensity", "flows"):
            raise InputError(
                f"{self.metric!r}", where="PathSettings.metric", expected="rate, intensity or flows"
            )
        if self.granularity not in ("connection", "job"):
            raise InputError(
                f"{self.granularity!r}", where="PathSettings.granularity", expected="connection or job"
            )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Flow:
    """A job's connections between one NIC pair: their keys, bytes per iteration and candidate paths.

    ``candidates[i]`` are the link ids of equal-cost path ``i`` (all paths have the same hop count).
    """

    job: JobId
    keys: tuple[ConnectionKey, ...]
    size_bytes: float
    candidates: NDArray[np.int64]


class PathTable:
    """Candidate-path link arrays per NIC pair, built once per decision (a per-call cache, no global).

    It also holds the inverse link capacities (s/byte) the greedy selection scores with, and a zeroed
    scratch array of link loads that a pass without a trail borrows and zeroes again where it wrote, so
    that a pass costs what its jobs' flows touch, not the size of the cluster.
    """

    def __init__(self, topology: Topology) -> None:
        self.topology = topology
        self._cache: dict[tuple[NodeId, NodeId], NDArray[np.int64]] = {}
        self.inv_cap_bytes: NDArray[np.float64] = 8.0 / topology.capacity_bps  # bits/s -> s per byte
        self.scratch: NDArray[np.float64] = np.zeros(topology.capacity_bps.size)

    def candidates(self, src_nic: NodeId, dst_nic: NodeId) -> NDArray[np.int64]:
        key = (src_nic, dst_nic)
        hit = self._cache.get(key)
        if hit is None:
            paths = self.topology.equal_cost_paths(src_nic, dst_nic)
            hit = np.array([p.links for p in paths], dtype=np.int64).reshape(len(paths), -1)
            self._cache[key] = hit
        return hit


def job_flows(table: PathTable, job: PlacedJob) -> tuple[Flow, ...]:
    """A job's inter-host flows, in decreasing bytes per iteration (ties: first use).

    References
    ----------
    crux-spec §2.2 items 2, 3 and 5 (flows per NIC pair, ECMP candidate set, network links only).
    """
    topo = table.topology
    groups: dict[tuple[NodeId, NodeId], tuple[list[ConnectionKey], list[float]]] = {}
    for key, size in job_connections(topo, job).items():
        pair = network_pair(topo, key)
        if pair is None:
            continue
        keys, sizes = groups.setdefault((NodeId(pair[0]), NodeId(pair[1])), ([], []))
        keys.append(key)
        sizes.append(size)
    flows = [
        Flow(job=job.id, keys=tuple(keys), size_bytes=sum(sizes), candidates=table.candidates(*pair))
        for pair, (keys, sizes) in groups.items()
    ]
    return tuple(sorted(flows, key=lambda f: -f.size_bytes))


@dataclass(frozen=True, slots=True, kw_only=True)
class FlowWeight:
    """Weight a job's flow adds to a link: ``per_byte * size_bytes + per_flow``."""

    per_byte: float = 0.0
    per_flow: float = 0.0


def _best(scores: NDArray[np.float64]) -> int:
    """Index of the least congested candidate: max, then sum, then index (rows = candidates)."""
    primary = scores.max(axis=1)
    ties = np.flatnonzero(primary == primary.min())
    if ties.size == 1:
        return int(ties[0])
    return int(ties[np.argmin(scores[ties].sum(axis=1))])  # argmin: the lowest index among equal sums


@dataclass(slots=True)
class _Load:
    """Mutable congestion bookkeeping of one greedy pass (load per link, capacity per link)."""

    load: NDArray[np.float64]
    inv_cap: NDArray[np.float64]
    log: list[tuple[NDArray[np.int64], float]] | None = None  # the additions, for a GreedyTrail

    def add(self, links: NDArray[np.int64], w: float) -> None:
        self.load[links] += w  # a path never repeats a link
        if self.log is not None:
            self.log.append((links, w))


def _place_flow(state: _Load, flow: Flow, w: float) -> int:
    cands = flow.candidates
    choice = 0 if cands.shape[0] == 1 else _best((state.load[cands] + w) * state.inv_cap[cands])
    state.add(cands[choice], w)
    return choice


def _place_job(state: _Load, flows: Sequence[Flow], weight: FlowWeight) -> int:
    """One index for all of a job's flows (``job`` granularity)."""
    n_max = max(f.candidates.shape[0] for f in flows)
    best_k, best_key = 0, (np.inf, np.inf)
    for k in range(n_max):
        tmp = state.load.copy()
        links = []
        for f in flows:
            path = f.candidates[k % f.candidates.shape[0]]
            np.add.at(tmp, path, weight.per_byte * f.size_bytes + weight.per_flow)
            links.append(path)
        used = np.unique(np.concatenate(links))
        rel = tmp[used] * state.inv_cap[used]
        key = (float(rel.max()), float(rel.sum()))
        if key < best_key:
            best_k, best_key = k, key
    for f in flows:
        state.add(
            f.candidates[best_k % f.candidates.shape[0]], weight.per_byte * f.size_bytes + weight.per_flow
        )
    return best_k


class GreedyTrail:
    """What a greedy pass did after each job, so that the next pass over the same first jobs resumes there.

    Crux recomputes its path selection on every arrival and departure over all running jobs in
    decreasing intensity; the jobs ranked above the one that arrived or left are processed exactly as
    before. A trail holds, per processed job, its key (id and weight), the link loads after it and its
    choices; :func:`greedy_routes` restarts after the longest common prefix, with the same floating-point
    operations in the same order, so the routes are the same as from scratch. A trail belongs to one
    path table and one :class:`PathSettings` (the caller keys it by them).
    """

    __slots__ = ("adds", "keys", "loads", "routes")

    #: a copy of the link loads is kept after every this many jobs; the loads after any other job are
    #: rebuilt from the copy before it by repeating the additions in order (bit for bit the same)
    EVERY = 8

    def __init__(self) -> None:
        self.keys: list[tuple[JobId, FlowWeight | None]] = []
        self.adds: list[list[tuple[NDArray[np.int64], float]]] = []  # per job: (links, weight) in order
        self.loads: list[NDArray[np.float64]] = []  # loads after jobs EVERY-1, 2*EVERY-1, ...
        self.routes: list[dict[ConnectionKey, int]] = []

    def truncate(self, n: int) -> None:
        """Keep the first ``n`` jobs."""
        del self.keys[n:], self.adds[n:], self.routes[n:], self.loads[n // self.EVERY :]

    def load_after(self, n: int, size: int) -> NDArray[np.float64]:
        """The link loads after the first ``n`` jobs (a fresh array)."""
        c = n // self.EVERY
        load = self.loads[c - 1].copy() if c else np.zeros(size)
        for adds in self.adds[c * self.EVERY : n]:
            for links, w in adds:
                load[links] += w
        return load


def greedy_routes(
    table: PathTable,
    jobs: Sequence[tuple[PlacedJob, Sequence[Flow]]],
    weights: Mapping[JobId, FlowWeight],
    settings: PathSettings,
    trail: GreedyTrail | None = None,
    *,
    views: Memo | None = None,
) -> JobRoutes:
    """Least-congested paths for the flows of ``jobs``, taken in the given order.

    Parameters
    ----------
    table
        The candidate paths (and the topology).
    jobs
        ``(job, its flows)`` in processing order; within one trail, a job id names one placement and
        one set of flows.
    weights
        Per job, what one of its flows adds to the links it crosses.
    settings
        Granularity (the metric is already folded into ``weights``).
    trail
        The previous pass with the same table and settings, resumed after the common first jobs and
        updated in place (same result as without it).
    views
        Where each job's last turn is kept (:mod:`commsched.scheduling.greedy_view`): a job that finds
        the same loads on its candidate links as in its last turn repeats it without recomputing (same
        result as without it). Not with a ``trail``.

    Returns
    -------
    JobRoutes
        Connection -> equal-cost path index, for every inter-host connection (kept per job).

    References
    ----------
    Crux §4.1 ("the least congested path from all available options at that moment"); crux-spec §2.
    """
    n_links = table.inv_cap_bytes.size
    start = 0
    keys = [(job.id, weights.get(job.id)) for job, _ in jobs]
    if trail is not None:
        while start < min(len(keys), len(trail.keys)) and trail.keys[start] == keys[start]:
            start += 1
        trail.truncate(start)
        state = _Load(load=trail.load_after(start, n_links), inv_cap=table.inv_cap_bytes, log=[])
        return _greedy_pass(state, jobs[start:], keys[start:], settings, trail=trail)
    state = _Load(load=table.scratch, inv_cap=table.inv_cap_bytes, log=[])
    try:
        return _greedy_pass(state, jobs, keys, settings, trail=None, views=views)
    finally:  # give the scratch array back zeroed
        for adds in state.log or ():
            table.scratch[adds[0]] = 0.0


def _greedy_pass(
    state: _Load,
    jobs: Sequence[tuple[PlacedJob, Sequence[Flow]]],
    keys: Sequence[tuple[JobId, FlowWeight | None]],
    settings: PathSettings,
    *,
    trail: GreedyTrail | None,
    views: Memo | None = None,
) -> JobRoutes:
    """The greedy pass over ``jobs`` from the loads in ``state`` (see :func:`greedy_routes`)."""
    out: dict[JobId, RouteMap] = {}
    if trail is not None:
        for (jid, _), done in zip(trail.keys, trail.routes, strict=True):
            out[jid] = RouteMap(done)
    for key, (job, flows) in zip(keys, jobs, strict=True):
        seen = views.peek(("greedy-view", job.id, settings)) if views is not None else None
        if isinstance(seen, JobView) and seen.matches(key, flows, state.load):
            seen.replay(state.load)
            if state.log is not None:
                state.log.append((seen.add_links, 0.0))  # for the scratch array's zeroing only
            out[job.id] = seen.routes
            continue
        logged = len(state.log) if state.log is not None else 0
        links = candidate_links([f.candidates for f in flows]) if views is not None else None
        found = state.load[links] if links is not None else None
        mine = _route_job(state, job, flows, key[1] or FlowWeight(per_flow=1.0), settings)
        routes = out[job.id] = RouteMap(mine)
        if views is not None and links is not None and found is not None and state.log is not None:
            turn = JobView.of(
                key=key, flows=flows, links=links, view=found, adds=state.log[logged:], routes=routes
            )
            views.put(("greedy-view", job.id, settings), turn)
        if trail is not None and state.log is not None:
            trail.keys.append(key)
            trail.adds.append(state.log)
            trail.routes.append(mine)
            state.log = []
            if len(trail.keys) % GreedyTrail.EVERY == 0:
                trail.loads.append(state.load.copy())
    return JobRoutes(out)


def _route_job(
    state: _Load, job: PlacedJob, flows: Sequence[Flow], weight: FlowWeight, settings: PathSettings
) -> dict[ConnectionKey, int]:
    """One job's turn: its pinned routes counted as load, then its free flows placed."""
    mine: dict[ConnectionKey, int] = {}
    pinned = [f for f in flows if f.keys[0] in job.pinned_routes]
    free = [f for f in flows if f.keys[0] not in job.pinned_routes]
    for f in pinned:
        choice = job.pinned_routes[f.keys[0]] % f.candidates.shape[0]
        state.add(f.candidates[choice], weight.per_byte * f.size_bytes + weight.per_flow)
        mine.update(dict.fromkeys(f.keys, choice))
    if settings.granularity == "job" and free:
        k = _place_job(state, free, weight)
        for f in free:
            mine.update(dict.fromkeys(f.keys, k % f.candidates.shape[0]))
    else:
        for f in free:
            choice = _place_flow(state, f, weight.per_byte * f.size_bytes + weight.per_flow)
            mine.update(dict.fromkeys(f.keys, choice))
    return mine
