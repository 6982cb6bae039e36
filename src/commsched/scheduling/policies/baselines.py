"""The baseline communication policies Crux is compared with (crux-spec §8).

Sincronia and Varys (ECMP paths, big-switch rankings, their style of compression), TACCL*
(least-congested paths in arrival order, most hops first), balanced ECMP, plain source routing and
CASSINI time shifts; see the table of :mod:`commsched.scheduling.policies`.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §6; crux-spec §2.3, §8.
"""

from __future__ import annotations

from types import MappingProxyType

from commsched.scheduling.cassini import CassiniSettings, cassini_shifts
from commsched.scheduling.compression import sincronia_compression, varys_compression
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.paths import FlowWeight, Granularity, PathSettings, greedy_routes
from commsched.scheduling.policies.common import (
    Plan,
    PolicyCtx,
    Routes,
    arrival_order,
    compressed_classes,
    flow_weight,
    make_plan,
    routed_facts,
    standalone_facts,
)
from commsched.scheduling.ports import source_routes
from commsched.scheduling.priority import Ranking, sincronia_ranking, taccl_ranking, varys_ranking
from commsched.scheduling.routing import ecmp_routes
from commsched.scheduling.state import ClusterState, Decisions

__all__ = [
    "balanced_ecmp_plan",
    "balanced_ecmp_policy",
    "balanced_ecmp_routes",
    "cassini_plan",
    "sincronia_plan",
    "source_routing_plan",
    "taccl_plan",
    "taccl_routes",
    "varys_plan",
]


def sincronia_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """ECMP paths, Sincronia BSSI ranking (weight 1), Sincronia-style split to K levels."""
    c = PolicyCtx.of(state, ctx.memo)
    routes = ecmp_routes(state, seed=ctx.seed, memo=ctx.memo)
    facts = routed_facts(state, c, routes)
    ranking = sincronia_ranking(state.topology, facts)
    return make_plan(
        routes, ranking, compressed_classes(state, ranking, facts, sincronia_compression, c.network), facts
    )


def varys_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """ECMP paths, Varys SEBF ranking, Varys-style split to K levels."""
    c = PolicyCtx.of(state, ctx.memo)
    routes = ecmp_routes(state, seed=ctx.seed, memo=ctx.memo)
    facts = routed_facts(state, c, routes)
    ranking = varys_ranking(state.topology, facts)
    return make_plan(
        routes, ranking, compressed_classes(state, ranking, facts, varys_compression, c.network), facts
    )


def taccl_routes(state: ClusterState, settings: PathSettings | None = None) -> Routes:
    """TACCL*: least-congested paths job by job in arrival order (crux-spec §2.3)."""
    return _taccl_routes(state, PolicyCtx.of(state), settings)


def _taccl_routes(state: ClusterState, c: PolicyCtx, settings: PathSettings | None = None) -> Routes:
    cfg = settings or PathSettings()
    solo = {f.job.id: f for f in standalone_facts(state, c, cfg)}
    jobs = arrival_order(state)
    weights = {j.id: flow_weight(solo[j.id], cfg) for j in jobs}
    return greedy_routes(c.table, [(j, c.flows[j.id]) for j in jobs], weights, cfg, views=c.memo)


def taccl_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """TACCL*: least-congested paths in arrival order, most hops first, Varys-style split."""
    c = PolicyCtx.of(state, ctx.memo)
    routes = _taccl_routes(state, c)
    facts = routed_facts(state, c, routes)
    ranking = taccl_ranking(state.topology, facts, routes)
    return make_plan(
        routes, ranking, compressed_classes(state, ranking, facts, varys_compression, c.network), facts
    )


def balanced_ecmp_routes(state: ClusterState, granularity: Granularity = "connection") -> Routes:
    """Balanced ECMP: each flow, in arrival order, on the path with the fewest flows."""
    return _balanced_routes(state, PolicyCtx.of(state), granularity)


def _balanced_routes(state: ClusterState, c: PolicyCtx, granularity: Granularity = "connection") -> Routes:
    cfg = PathSettings(metric="flows", granularity=granularity)
    jobs = arrival_order(state)
    unit = {j.id: FlowWeight(per_flow=1.0) for j in jobs}
    return greedy_routes(c.table, [(j, c.flows[j.id]) for j in jobs], unit, cfg, views=c.memo)


def _one_class(state: ClusterState, routes: Routes, c: PolicyCtx) -> Plan:
    facts = routed_facts(state, c, routes)
    return make_plan(routes, Ranking(order=()), {j.id: 0 for j in state.jobs}, facts)


def balanced_ecmp_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """Balanced ECMP paths (least loaded at arrival), one class."""
    c = PolicyCtx.of(state, ctx.memo)
    return _one_class(state, _balanced_routes(state, c), c)


def balanced_ecmp_policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
    """``balanced-ecmp``: each flow, job by job in arrival order, on the equal-cost path whose busiest
    link carries the fewest flows so far (per unit of capacity; ties: fewest in total, then the
    lowest path index); one class.

    The one algorithm behind the name: the simulator (through the vClos bundle of the same name, which
    adds locality packing), ``commsched plan`` and the daemon route with it. Deterministic: the routes
    are a function of the jobs and their arrival order.

    References
    ----------
    vClos §9.3 (Balanced ECMP, "the least congested ports"); Crux §6 (baselines).
    """
    return balanced_ecmp_plan(state, ctx).decisions


def source_routing_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """Plain source routing with a fixed port mapping, one class."""
    return _one_class(state, source_routes(state), PolicyCtx.of(state, ctx.memo))


def cassini_plan(state: ClusterState, ctx: PolicyContext, settings: CassiniSettings | None = None) -> Plan:
    """ECMP paths, one class, CASSINI time shifts of the iteration starts."""
    c = PolicyCtx.of(state, ctx.memo)
    routes = ecmp_routes(state, seed=ctx.seed, memo=ctx.memo)
    facts = routed_facts(state, c, routes)
    shifts = cassini_shifts(state.topology, facts, c.network, settings)
    base = make_plan(routes, Ranking(order=()), {j.id: 0 for j in state.jobs}, facts)
    d = base.decisions
    decisions = Decisions(routes=d.routes, classes=d.classes, time_shift_s=MappingProxyType(shifts))
    return Plan(decisions=decisions, intensity=base.intensity)
