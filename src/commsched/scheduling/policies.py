"""Named communication policies: Crux (PA, PS-PA, full) and the baselines it is compared with.

Every policy is a plain :data:`PolicyFn`; :func:`communication_policies` maps names to them (the edge's
registry is built from it). Each policy also exists as a *plan* function returning the decisions
together with the per-job intensities and correction factors behind them (``commsched plan``).

==================  ==============================  ========================  =======================
name                paths                           ranking                   classes
==================  ==============================  ========================  =======================
``static``          ECMP hash                       -                         the jobs' own priorities
``fair``            ECMP hash                       -                         one class
``ecmp-fair``       ECMP hash                       -                         one class
``crux-pa``         ECMP hash                       ``P_j = k_j I_j``         unique: class = rank
``crux-ps-pa``      Crux path selection             ``P_j = k_j I_j``         unique: class = rank
``crux-full``       Crux path selection             ``P_j = k_j I_j``         Max K-Cut, K levels
``crux-full-guard`` Crux path selection             ``P_j = k_j I_j``         Max K-Cut + loss guard
``sincronia``       ECMP hash                       BSSI (big switch)         Sincronia-style split
``varys``           ECMP hash                       SEBF (big switch)         Varys-style split
``taccl-star``      least congested, arrival order  most hops first           Varys-style split
``cassini``         ECMP hash                       - (time shifts)           one class
``balanced-ecmp``   least loaded, arrival order     -                         one class
``source-routing``  fixed port mapping (vClos)      -                         one class
==================  ==============================  ========================  =======================

``K`` is the state's ``priority_levels``. Crux-PA and Crux-PS-PA use as many classes as jobs
(unique priorities, the ideal of crux-spec §6.6). TACCL* has no compression of its own; it gets the
balanced (Varys-style) split of its hop-count ranking, which keeps equally long jobs together.
Random draws (ECMP source ports, BFS orders of the compression) derive from ``ctx.seed`` and
``ctx.epoch``. ``crux-full-guard`` is ``crux-full`` with the opt-in starvation guard of
:mod:`commsched.scheduling.guard` at :data:`GUARD_LOSS`.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.1-§4.4, §6.6; crux-spec §2-§4, §6.6, §8.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from functools import partial
from types import MappingProxyType

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from commsched.scheduling.basic import fair_policy, static_policy
from commsched.scheduling.cassini import CassiniSettings, cassini_shifts
from commsched.scheduling.compression import (
    Compression,
    crux_compression,
    cut_weight,
    sincronia_compression,
    varys_compression,
)
from commsched.scheduling.guard import guard_classes
from commsched.scheduling.interfaces import PolicyContext, PolicyFn
from commsched.scheduling.memo import Memo, maybe
from commsched.scheduling.paths import (
    Flow,
    FlowWeight,
    Granularity,
    GreedyTrail,
    PathSettings,
    PathTable,
    greedy_routes,
    job_flows,
    source_routes,
)
from commsched.scheduling.priority import (
    CruxPriority,
    JobFacts,
    Ranking,
    crux_ranking,
    job_facts,
    network_link_mask,
    sincronia_ranking,
    taccl_ranking,
    varys_ranking,
)
from commsched.scheduling.routing import ecmp_routes
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
from commsched.topology import Topology
from commsched.workload import JobId

__all__ = [
    "CruxSettings",
    "Plan",
    "PlanFn",
    "balanced_ecmp_routes",
    "communication_plans",
    "communication_policies",
    "componentwise_compression",
    "contention_matrix",
    "crux_plan",
    "crux_routes",
    "taccl_routes",
]

Routes = Mapping[ConnectionKey, int]

#: the throughput-loss bound of ``crux-full-guard`` (a job may lose at most 60 % of its standalone rate)
GUARD_LOSS = 0.6


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


@dataclass(frozen=True, slots=True, kw_only=True)
class CruxSettings:
    """Which Crux mechanisms run and how.

    Attributes
    ----------
    select_paths
        Crux path selection (else ECMP hashing).
    compress
        Compress to ``priority_levels`` classes (else one class per job).
    paths
        Metric and granularity of path selection.
    priority
        Resolution of the pairwise comparison behind ``k_j``.
    orders
        Number ``m`` of sampled BFS orders of the compression.
    guard_loss
        Opt-in starvation guard: promote jobs whose predicted throughput loss exceeds this fraction
        (:mod:`commsched.scheduling.guard`); ``None`` = Crux as published.
    """

    select_paths: bool = True
    compress: bool = True
    paths: PathSettings = field(default_factory=PathSettings)
    priority: CruxPriority = field(default_factory=CruxPriority)
    orders: int = 10
    guard_loss: float | None = None


# ---------------------------------------------------------------------------------------------- helpers
@dataclass(frozen=True, slots=True)
class _Ctx:
    """What one decision computes once: candidate paths, network-link mask, flows per job."""

    table: PathTable
    network: NDArray[np.bool_]
    flows: dict[JobId, tuple[Flow, ...]]
    memo: Memo | None = None

    @staticmethod
    def of(state: ClusterState, memo: Memo | None = None) -> _Ctx:
        topo = state.topology
        table = maybe(memo, "path-table", lambda: PathTable(topo))
        flows = {j.id: maybe(memo, ("flows", j.id), partial(job_flows, table, j)) for j in state.jobs}
        network = maybe(memo, "network-mask", lambda: network_link_mask(topo))
        return _Ctx(table=table, network=network, flows=flows, memo=memo)


def _rng(ctx: PolicyContext) -> np.random.Generator:
    return np.random.default_rng([ctx.seed & 0xFFFFFFFF, ctx.epoch])


def _arrival_order(state: ClusterState) -> list[PlacedJob]:
    return sorted(state.jobs, key=lambda j: j.start_s)  # stable: state order among equal starts


def _weight(facts: JobFacts, settings: PathSettings) -> FlowWeight:
    if settings.metric == "rate":
        return FlowWeight(per_byte=1.0 / max(facts.period_s, 1e-12))
    if settings.metric == "intensity":
        return FlowWeight(per_flow=facts.intensity.value)
    return FlowWeight(per_flow=1.0)


def _facts(state: ClusterState, c: _Ctx, routes: Routes) -> list[JobFacts]:
    if c.memo is None:
        return [job_facts(state.topology, j, routes, c.network) for j in state.jobs]
    own: dict[JobId, list[tuple[ConnectionKey, int]]] = {}
    for key, path in routes.items():
        own.setdefault(key.job, []).append((key, path))
    return [
        c.memo.get(
            ("facts", j.id, frozenset(own.get(j.id, ()))),
            partial(job_facts, state.topology, j, routes, c.network),
        )
        for j in state.jobs
    ]


def _solo_facts(state: ClusterState, c: _Ctx, settings: PathSettings) -> list[JobFacts]:
    """Each job's facts under its *solo* routes: its own flows spread on an empty network."""
    unit = FlowWeight(per_byte=1.0) if settings.metric == "rate" else FlowWeight(per_flow=1.0)

    def solo_facts(j: PlacedJob) -> JobFacts:
        solo = greedy_routes(c.table, [(j, c.flows[j.id])], {j.id: unit}, settings)
        return job_facts(state.topology, j, solo, c.network)

    return [maybe(c.memo, ("solo", j.id, settings), partial(solo_facts, j)) for j in state.jobs]


def _crux_routes(state: ClusterState, c: _Ctx, solo: Sequence[JobFacts], settings: PathSettings) -> Routes:
    """Crux path selection: jobs in decreasing ``I_j`` (solo), ties by id (crux-spec §2.2 item 4)."""
    order = sorted(solo, key=lambda f: (-f.intensity.value, f.job.id))
    weights = {f.job.id: _weight(f, settings) for f in solo}
    # the jobs ranked above the one that arrived or left are placed as in the previous decision
    trail = maybe(c.memo, ("greedy-trail", settings), GreedyTrail)
    return greedy_routes(c.table, [(f.job, c.flows[f.job.id]) for f in order], weights, settings, trail)


def contention_matrix(
    topology: Topology, facts: Sequence[JobFacts], network: NDArray[np.bool_]
) -> NDArray[np.bool_]:
    """``sharing[a, b]``: jobs ``a`` and ``b`` (in ``facts`` order) share a network link (crux-spec §4.3)."""
    n = len(facts)
    rows = [np.full(int(network[f.traffic.link_ids].sum()), i) for i, f in enumerate(facts)]
    cols = [f.traffic.link_ids[network[f.traffic.link_ids]] for f in facts]
    if n == 0 or not any(r.size for r in rows):
        return np.zeros((n, n), dtype=bool)
    inc = sparse.csr_matrix(
        (np.ones(sum(r.size for r in rows)), (np.concatenate(rows), np.concatenate(cols))),
        shape=(n, len(topology.links)),
    )
    share: NDArray[np.bool_] = np.asarray((inc @ inc.T).toarray() > 0, dtype=bool)
    np.fill_diagonal(share, False)
    return share


Compressor = Callable[[NDArray[np.bool_], NDArray[np.float64], int], Compression]


def _classes(
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
    share = contention_matrix(state.topology, ranked, network)
    inten = np.array([f.intensity.value for f in ranked], dtype=np.float64)
    comp = compress(share, inten, state.priority_levels)
    return {jid: int(level) for jid, level in zip(ranking.order, comp.levels, strict=True)}


def _decisions(routes: Routes, ranking: Ranking, classes: Mapping[JobId, int]) -> Decisions:
    return Decisions(
        routes=MappingProxyType(dict(routes)),
        ranking=MappingProxyType({jid: r for r, jid in enumerate(ranking.order)}),
        classes=MappingProxyType(dict(classes)),
    )


def _plan(routes: Routes, ranking: Ranking, classes: Mapping[JobId, int], facts: Sequence[JobFacts]) -> Plan:
    return Plan(
        decisions=_decisions(routes, ranking, classes),
        intensity=MappingProxyType({f.job.id: f.intensity.value for f in facts}),
        factor=MappingProxyType(dict(ranking.factor)),
    )


# ---------------------------------------------------------------------------------------------- Crux
def componentwise_compression(
    sharing: NDArray[np.bool_],
    intensity: NDArray[np.float64],
    levels: int,
    *,
    rng: np.random.Generator,
    orders: int = 10,
) -> Compression:
    """Crux's compression run per connected component of the contention DAG.

    The cut weight and the validity of a compression are sums / conjunctions over components, so
    the Max K-Cut of the whole DAG is the union of the components' (each solved with ``orders``
    sampled BFS orders, in rank order, with one shared generator); this keeps the DP at
    ``O(m K n_c^2)`` per component instead of ``O(m K n^2)``. Jobs without contention edges are
    placed by rank position (``level = floor(position * K / n)``), which keeps the ranking's order
    among them (it matters only for intra-host sharing, which the DAG ignores).

    References
    ----------
    Crux §4.3 (Algorithm 1); crux-spec §4.3, §4.8.
    """
    n = sharing.shape[0]
    k = max(1, min(levels, n))
    out = [min(k - 1, (i * k) // max(1, n)) for i in range(n)]
    if n:
        count, labels = connected_components(sparse.csr_matrix(sharing), directed=False)
        for c in range(count):
            idx = np.flatnonzero(labels == c)
            if idx.size < 2:
                continue
            sub = crux_compression(sharing[np.ix_(idx, idx)], intensity[idx], levels, rng=rng, orders=orders)
            for i, level in zip(idx.tolist(), sub.levels, strict=True):
                out[i] = level
    levels_t = tuple(int(v) for v in out)
    return Compression(
        levels=levels_t, cut_weight=cut_weight(sharing, intensity, levels_t), order=tuple(range(n))
    )


def crux_plan(state: ClusterState, ctx: PolicyContext, settings: CruxSettings | None = None) -> Plan:
    """Crux's decisions: path selection, priority assignment and compression (as configured).

    Path selection orders the jobs by ``I_j`` under their solo routes; ranking, ``k_j``, the
    contention DAG and the reported intensities use the finally chosen routes.

    References
    ----------
    Crux §4.1-§4.3 and §5.5 (all recomputed on every arrival and departure); crux-spec §2-§4.
    """
    cfg = settings or CruxSettings()
    if not state.jobs:
        return Plan(decisions=Decisions(), intensity={})
    c = _Ctx.of(state, ctx.memo)
    if cfg.select_paths:
        solo = _solo_facts(state, c, cfg.paths)
        routes = _crux_routes(state, c, solo, cfg.paths)
        facts = _facts(state, c, routes)
    else:
        routes = ecmp_routes(state, seed=ctx.seed)
        facts = _facts(state, c, routes)
    ranking = crux_ranking(facts, cfg.priority, memo=ctx.memo)
    rng = _rng(ctx)

    def crux_k_cut(share: NDArray[np.bool_], inten: NDArray[np.float64], k: int) -> Compression:
        return componentwise_compression(share, inten, k, rng=rng, orders=cfg.orders)

    classes = _classes(state, ranking, facts, crux_k_cut if cfg.compress else None, c.network)
    if cfg.guard_loss is not None:
        classes = guard_classes(facts, classes, state.topology, c.network, cfg.guard_loss)
    return _plan(routes, ranking, classes, facts)


def _crux_variant(settings: CruxSettings) -> PlanFn:
    def plan(state: ClusterState, ctx: PolicyContext) -> Plan:
        return crux_plan(state, ctx, settings)

    return plan


# ---------------------------------------------------------------------------------------------- baselines
def sincronia_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """ECMP paths, Sincronia BSSI ranking (weight 1), Sincronia-style split to K levels."""
    c = _Ctx.of(state, ctx.memo)
    routes = ecmp_routes(state, seed=ctx.seed)
    facts = _facts(state, c, routes)
    ranking = sincronia_ranking(state.topology, facts)
    return _plan(routes, ranking, _classes(state, ranking, facts, sincronia_compression, c.network), facts)


def varys_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """ECMP paths, Varys SEBF ranking, Varys-style split to K levels."""
    c = _Ctx.of(state, ctx.memo)
    routes = ecmp_routes(state, seed=ctx.seed)
    facts = _facts(state, c, routes)
    ranking = varys_ranking(state.topology, facts)
    return _plan(routes, ranking, _classes(state, ranking, facts, varys_compression, c.network), facts)


def crux_routes(state: ClusterState, settings: PathSettings | None = None) -> Routes:
    """Crux path selection alone (jobs by decreasing solo ``I_j``), for experiments.

    References
    ----------
    Crux §4.1; crux-spec §2.2.
    """
    cfg = settings or PathSettings()
    c = _Ctx.of(state)
    return _crux_routes(state, c, _solo_facts(state, c, cfg), cfg)


def taccl_routes(state: ClusterState, settings: PathSettings | None = None) -> Routes:
    """TACCL*: least-congested paths job by job in arrival order (crux-spec §2.3)."""
    return _taccl_routes(state, _Ctx.of(state), settings)


def _taccl_routes(state: ClusterState, c: _Ctx, settings: PathSettings | None = None) -> Routes:
    cfg = settings or PathSettings()
    solo = {f.job.id: f for f in _solo_facts(state, c, cfg)}
    jobs = _arrival_order(state)
    weights = {j.id: _weight(solo[j.id], cfg) for j in jobs}
    return greedy_routes(c.table, [(j, c.flows[j.id]) for j in jobs], weights, cfg)


def taccl_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """TACCL*: least-congested paths in arrival order, most hops first, Varys-style split."""
    c = _Ctx.of(state, ctx.memo)
    routes = _taccl_routes(state, c)
    facts = _facts(state, c, routes)
    ranking = taccl_ranking(state.topology, facts, routes)
    return _plan(routes, ranking, _classes(state, ranking, facts, varys_compression, c.network), facts)


def balanced_ecmp_routes(state: ClusterState, granularity: Granularity = "connection") -> Routes:
    """Balanced ECMP: each flow, in arrival order, on the path with the fewest flows."""
    return _balanced_routes(state, _Ctx.of(state), granularity)


def _balanced_routes(state: ClusterState, c: _Ctx, granularity: Granularity = "connection") -> Routes:
    cfg = PathSettings(metric="flows", granularity=granularity)
    jobs = _arrival_order(state)
    unit = {j.id: FlowWeight(per_flow=1.0) for j in jobs}
    return greedy_routes(c.table, [(j, c.flows[j.id]) for j in jobs], unit, cfg)


def _one_class(state: ClusterState, routes: Routes, c: _Ctx) -> Plan:
    facts = _facts(state, c, routes)
    return _plan(routes, Ranking(order=()), {j.id: 0 for j in state.jobs}, facts)


def balanced_ecmp_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """Balanced ECMP paths (least loaded at arrival), one class."""
    c = _Ctx.of(state, ctx.memo)
    return _one_class(state, _balanced_routes(state, c), c)


def source_routing_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """Plain source routing with a fixed port mapping, one class."""
    return _one_class(state, source_routes(state), _Ctx.of(state, ctx.memo))


def cassini_plan(state: ClusterState, ctx: PolicyContext, settings: CassiniSettings | None = None) -> Plan:
    """ECMP paths, one class, CASSINI time shifts of the iteration starts."""
    c = _Ctx.of(state, ctx.memo)
    routes = ecmp_routes(state, seed=ctx.seed)
    facts = _facts(state, c, routes)
    shifts = cassini_shifts(state.topology, facts, c.network, settings)
    base = _plan(routes, Ranking(order=()), {j.id: 0 for j in state.jobs}, facts)
    d = base.decisions
    decisions = Decisions(routes=d.routes, classes=d.classes, time_shift_s=MappingProxyType(shifts))
    return Plan(decisions=decisions, intensity=base.intensity)


def _wrap(policy: PolicyFn) -> PlanFn:
    def plan(state: ClusterState, ctx: PolicyContext) -> Plan:
        c = _Ctx.of(state, ctx.memo)
        d = policy(state, ctx)
        facts = _facts(state, c, d.routes)
        return Plan(decisions=d, intensity=MappingProxyType({f.job.id: f.intensity.value for f in facts}))

    return plan


# ---------------------------------------------------------------------------------------------- registry
def communication_plans() -> dict[str, PlanFn]:
    """Every named policy as a plan function (decisions + intensities + factors)."""
    return {
        "static": _wrap(static_policy),
        "fair": _wrap(fair_policy),
        "ecmp-fair": _wrap(fair_policy),
        "crux-pa": _crux_variant(CruxSettings(select_paths=False, compress=False)),
        "crux-ps-pa": _crux_variant(CruxSettings(select_paths=True, compress=False)),
        "crux-full": _crux_variant(CruxSettings()),
        "crux-full-guard": _crux_variant(CruxSettings(guard_loss=GUARD_LOSS)),
        "sincronia": sincronia_plan,
        "varys": varys_plan,
        "taccl-star": taccl_plan,
        "cassini": cassini_plan,
        "balanced-ecmp": balanced_ecmp_plan,
        "source-routing": source_routing_plan,
    }


def _decisions_only(plan: PlanFn) -> PolicyFn:
    def policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
        return plan(state, ctx).decisions

    return policy


def communication_policies() -> dict[str, PolicyFn]:
    """Every named communication policy (module docstring table), for the edge's registry.

    ``static``, ``fair`` and ``ecmp-fair`` are the plain functions of :mod:`commsched.scheduling.basic`.
    """
    plans = communication_plans()
    out: dict[str, PolicyFn] = {"static": static_policy, "fair": fair_policy, "ecmp-fair": fair_policy}
    for name, plan in plans.items():
        if name not in out:
            out[name] = _decisions_only(plan)
    return out
