"""Shared machinery of the named communication policies: the plan, per-decision context, facts, classes.

A policy computes once per decision the candidate paths, the network-link mask and the flows of every
job (``PolicyCtx``), derives each job's facts (traffic, intensity) under some routes, and turns a ranking
into classes, one per rank or compressed to ``K`` levels over the contention DAG
(:func:`contention_matrix`). The policies themselves are in the other modules of this package, one per
policy; :mod:`commsched.scheduling.policies` names them.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.1-§4.3; crux-spec §2-§4.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

from commsched.scheduling.compression import Compression
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.memo import Memo, maybe
from commsched.scheduling.paths import (
    Flow,
    FlowWeight,
    PathSettings,
    PathTable,
    greedy_routes,
    job_flows,
)
from commsched.scheduling.priority import (
    JobFacts,
    Ranking,
    job_facts,
    network_link_mask,
)
from commsched.scheduling.routemap import by_job
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
from commsched.topology import Topology
from commsched.workload import JobId

__all__ = [
    "Compressor",
    "Plan",
    "PlanFn",
    "PolicyCtx",
    "Routes",
    "arrival_order",
    "compressed_classes",
    "contention_matrix",
    "flow_weight",
    "make_plan",
    "one_class_plan",
    "routed_facts",
    "standalone_facts",
]


Routes = Mapping[ConnectionKey, int]


@dataclass(frozen=True, slots=True, kw_only=True)
class Plan:
    """A policy's decisions with what they were derived from.

    ``intensity`` is ``I_j`` under the decided routes; ``factor`` holds Crux's ``k_j`` (empty for
    baselines).
    """

    decisions: Decisions
    intensity: Mapping[JobId, float]
    factor: Mapping[JobId, float] = field(default_factory=dict)


PlanFn = Callable[[ClusterState, PolicyContext], Plan]


@dataclass(frozen=True, slots=True)
class PolicyCtx:
    """What one decision computes once: candidate paths, network-link mask, flows per job."""

    table: PathTable
    network: NDArray[np.bool_]
    flows: dict[JobId, tuple[Flow, ...]]
    memo: Memo | None = None

    @staticmethod
    def of(state: ClusterState, memo: Memo | None = None) -> PolicyCtx:
        topo = state.topology
        table = maybe(memo, "path-table", lambda: PathTable(topo))
        flows = {j.id: maybe(memo, ("flows", j.id), partial(job_flows, table, j)) for j in state.jobs}
        network = maybe(memo, "network-mask", lambda: network_link_mask(topo))
        return PolicyCtx(table=table, network=network, flows=flows, memo=memo)


def arrival_order(state: ClusterState) -> list[PlacedJob]:
    return sorted(state.jobs, key=lambda j: j.start_s)  # stable: state order among equal starts


def flow_weight(facts: JobFacts, settings: PathSettings) -> FlowWeight:
    if settings.metric == "rate":
        return FlowWeight(per_byte=1.0 / max(facts.period_s, 1e-12))
    if settings.metric == "intensity":
        return FlowWeight(per_flow=facts.intensity.value)
    return FlowWeight(per_flow=1.0)


def routed_facts(state: ClusterState, c: PolicyCtx, routes: Routes) -> list[JobFacts]:
    if c.memo is None:
        return [job_facts(state.topology, j, routes, c.network) for j in state.jobs]
    jr = by_job(routes)
    return [
        c.memo.get(
            ("facts", j.id, jr.of(j.id)),  # keyed by the job's own routes (a RouteMap hashes once)
            partial(job_facts, state.topology, j, jr.of(j.id), c.network),
        )
        for j in state.jobs
    ]


def standalone_facts(state: ClusterState, c: PolicyCtx, settings: PathSettings) -> list[JobFacts]:
    """Each job's facts under its *solo* routes: its own flows spread on an empty network."""
    unit = FlowWeight(per_byte=1.0) if settings.metric == "rate" else FlowWeight(per_flow=1.0)

    def solo_facts(j: PlacedJob) -> JobFacts:
        solo = greedy_routes(c.table, [(j, c.flows[j.id])], {j.id: unit}, settings)
        return job_facts(state.topology, j, solo, c.network)

    return [maybe(c.memo, ("solo", j.id, settings), partial(solo_facts, j)) for j in state.jobs]


def contention_matrix(
    topology: Topology,
    facts: Sequence[JobFacts],
    network: NDArray[np.bool_],
    in_flight: Mapping[JobId, tuple[int, ...]] | None = None,
) -> NDArray[np.bool_]:
    """``sharing[a, b]``: jobs ``a`` and ``b`` (in ``facts`` order) share a network link (crux-spec §4.3).

    A job's links are those of its decided routes and, with ``in_flight``, those it may still be on
    from the previous decision (a step in flight finishes on its old routes): a pair that shares a
    link only during that transition is still ordered.
    """
    n = len(facts)
    links = []
    for f in facts:
        ids = f.traffic.link_ids
        old = in_flight.get(f.job.id) if in_flight else None
        if old:
            ids = np.union1d(ids, np.asarray(old, dtype=ids.dtype))
        links.append(ids[network[ids]])
    rows = [np.full(ids.size, i) for i, ids in enumerate(links)]
    if n == 0 or not any(r.size for r in rows):
        return np.zeros((n, n), dtype=bool)
    used, cols = np.unique(np.concatenate(links), return_inverse=True)  # these jobs' links only
    inc = sparse.csr_matrix(
        (np.ones(cols.size), (np.concatenate(rows), cols.astype(np.int64))), shape=(n, used.size)
    )
    share: NDArray[np.bool_] = np.asarray((inc @ inc.T).toarray() > 0, dtype=bool)
    np.fill_diagonal(share, False)
    return share


Compressor = Callable[[NDArray[np.bool_], NDArray[np.float64], int], Compression]


def compressed_classes(
    state: ClusterState,
    ranking: Ranking,
    facts: Sequence[JobFacts],
    compress: Compressor | None,
    network: NDArray[np.bool_],
) -> dict[JobId, int]:
    """Classes from a ranking: one per rank (``compress`` None) or a compression to K levels."""
    if compress is None:
        return {jid: r for r, jid in enumerate(ranking.order)}
    by_id = {f.job.id: f for f in facts}
    ranked = [by_id[jid] for jid in ranking.order]
    share = contention_matrix(state.topology, ranked, network, state.in_flight_links)
    inten = np.array([f.intensity.value for f in ranked], dtype=np.float64)
    comp = compress(share, inten, state.priority_levels)
    return {jid: int(level) for jid, level in zip(ranking.order, comp.levels, strict=True)}


def _decisions(routes: Routes, ranking: Ranking, classes: Mapping[JobId, int]) -> Decisions:
    return Decisions(
        routes=by_job(routes),
        ranking=MappingProxyType({jid: r for r, jid in enumerate(ranking.order)}),
        classes=MappingProxyType(dict(classes)),
    )


def make_plan(
    routes: Routes, ranking: Ranking, classes: Mapping[JobId, int], facts: Sequence[JobFacts]
) -> Plan:
    return Plan(
        decisions=_decisions(routes, ranking, classes),
        intensity=MappingProxyType({f.job.id: f.intensity.value for f in facts}),
        factor=MappingProxyType(dict(ranking.factor)),
    )


def one_class_plan(state: ClusterState, routes: Routes, c: PolicyCtx) -> Plan:
    """The plan of ``routes`` with every job in class 0 and no ranking."""
    facts = routed_facts(state, c, routes)
    return make_plan(routes, Ranking(order=()), {j.id: 0 for j in state.jobs}, facts)
