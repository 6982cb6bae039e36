"""Sincronia as a communication policy: ECMP paths, the BSSI ranking, a Sincronia-style split (crux-spec §8).

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §6; crux-spec §2.3, §8.
"""

from __future__ import annotations

from commsched.scheduling.compression import sincronia_compression
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.policies.common import Plan, PolicyCtx, compressed_classes, make_plan, routed_facts
from commsched.scheduling.priority import sincronia_ranking
from commsched.scheduling.routing import ecmp_routes
from commsched.scheduling.state import ClusterState

__all__ = ["sincronia_plan"]


def sincronia_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """ECMP paths, Sincronia BSSI ranking (weight 1), Sincronia-style split to K levels."""
    c = PolicyCtx.of(state, ctx.memo)
    routes = ecmp_routes(state, seed=ctx.seed, memo=ctx.memo)
    facts = routed_facts(state, c, routes)
    ranking = sincronia_ranking(state.topology, facts)
    return make_plan(
        routes, ranking, compressed_classes(state, ranking, facts, sincronia_compression, c.network), facts
    )
