"""The simplest communication policies: ``static`` priorities and one ``fair`` class, both over ECMP."""

from __future__ import annotations

from types import MappingProxyType

from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.routing import ecmp_routes
from commsched.scheduling.state import ClusterState, Decisions


def static_policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
    """Classes from the priorities written on the jobs (0 = highest; none = 0), ECMP routes.

    Priorities beyond the available levels share the lowest class.
    """
    top = state.priority_levels - 1
    classes = {j.id: min(j.spec.priority or 0, top) for j in state.jobs}
    return Decisions(
        routes=ecmp_routes(state, seed=ctx.seed, memo=ctx.memo), classes=MappingProxyType(classes)
    )


def fair_policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
    """Every job in one class (max-min fair sharing everywhere), ECMP routes."""
    return Decisions(
        routes=ecmp_routes(state, seed=ctx.seed, memo=ctx.memo),
        classes=MappingProxyType({j.id: 0 for j in state.jobs}),
    )
