"""Balanced ECMP: each flow, in arrival order, on the equal-cost path with the fewest flows; one class.

The one algorithm behind the name ``balanced-ecmp`` (vClos §9.3; a Crux baseline, §6).

References
----------
.. [1] vClos §9.3 (Balanced ECMP); J. Cao et al., "Crux", SIGCOMM 2024, §6; crux-spec §8.
"""

from __future__ import annotations

from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.paths import FlowWeight, Granularity, PathSettings, greedy_routes
from commsched.scheduling.policies.common import Plan, PolicyCtx, Routes, arrival_order, one_class_plan
from commsched.scheduling.state import ClusterState, Decisions

__all__ = ["balanced_ecmp_plan", "balanced_ecmp_policy", "balanced_ecmp_routes"]


def balanced_ecmp_routes(state: ClusterState, granularity: Granularity = "connection") -> Routes:
    """Balanced ECMP: each flow, in arrival order, on the path with the fewest flows."""
    return _balanced_routes(state, PolicyCtx.of(state), granularity)


def _balanced_routes(state: ClusterState, c: PolicyCtx, granularity: Granularity = "connection") -> Routes:
    cfg = PathSettings(metric="flows", granularity=granularity)
    jobs = arrival_order(state)
    unit = {j.id: FlowWeight(per_flow=1.0) for j in jobs}
    return greedy_routes(c.table, [(j, c.flows[j.id]) for j in jobs], unit, cfg, views=c.memo)


def balanced_ecmp_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """Balanced ECMP paths (least loaded at arrival), one class."""
    c = PolicyCtx.of(state, ctx.memo)
    return one_class_plan(state, _balanced_routes(state, c), c)


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
