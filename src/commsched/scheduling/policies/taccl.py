"""TACCL*: least-congested paths job by job in arrival order, most hops first, a Varys-style split.

TACCL has no compression of its own; it gets the balanced (Varys-style) split of its hop-count ranking
(crux-spec §2.3, §8).

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §6; crux-spec §2.3, §8.
"""

from __future__ import annotations

from commsched.scheduling.compression import varys_compression
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.paths import PathSettings, greedy_routes
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
from commsched.scheduling.priority import taccl_ranking
from commsched.scheduling.state import ClusterState

__all__ = ["taccl_plan", "taccl_routes"]


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
