"""CASSINI as a communication policy: ECMP paths, one class, time shifts of the iteration starts.

The shifts themselves are computed by :mod:`commsched.scheduling.cassini`.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §6; crux-spec §2.3, §8.
"""

from __future__ import annotations

from types import MappingProxyType

from commsched.scheduling.cassini import CassiniSettings, cassini_shifts
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.policies.common import Plan, PolicyCtx, make_plan, routed_facts
from commsched.scheduling.priority import Ranking
from commsched.scheduling.routing import ecmp_routes
from commsched.scheduling.state import ClusterState, Decisions

__all__ = ["cassini_plan"]


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
