"""Decisions as pure functions over a ``ClusterState``: placement, routing, priorities, compression.

A communication policy is a plain callable ``(ClusterState, PolicyContext) -> Decisions``; a placement
is ``(PlacementRequest) -> Allocation | None``. Names map to them only at the edges
(:mod:`commsched.catalog`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from commsched._lazy import lazy_exports

if TYPE_CHECKING:
    from commsched.scheduling.basic import fair_policy, static_policy
    from commsched.scheduling.interfaces import (
        Allocation,
        PlacementFn,
        PlacementRequest,
        PolicyBundle,
        PolicyContext,
        PolicyFn,
        QueueOrderFn,
        TopologyFn,
    )
    from commsched.scheduling.jobsched import job_schedulers
    from commsched.scheduling.placement import pack
    from commsched.scheduling.policies import (
        CruxSettings,
        Plan,
        PlanFn,
        communication_plans,
        communication_policies,
        crux_plan,
    )
    from commsched.scheduling.routing import ecmp_routes, network_pair
    from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
    from commsched.scheduling.traffic import job_connections

_EXPORTS = {
    "fair_policy": "commsched.scheduling.basic",
    "static_policy": "commsched.scheduling.basic",
    "Allocation": "commsched.scheduling.interfaces",
    "PlacementFn": "commsched.scheduling.interfaces",
    "PlacementRequest": "commsched.scheduling.interfaces",
    "PolicyBundle": "commsched.scheduling.interfaces",
    "PolicyContext": "commsched.scheduling.interfaces",
    "PolicyFn": "commsched.scheduling.interfaces",
    "QueueOrderFn": "commsched.scheduling.interfaces",
    "TopologyFn": "commsched.scheduling.interfaces",
    "job_schedulers": "commsched.scheduling.jobsched",
    "pack": "commsched.scheduling.placement",
    "CruxSettings": "commsched.scheduling.policies",
    "Plan": "commsched.scheduling.policies",
    "PlanFn": "commsched.scheduling.policies",
    "communication_plans": "commsched.scheduling.policies",
    "communication_policies": "commsched.scheduling.policies",
    "crux_plan": "commsched.scheduling.policies",
    "ecmp_routes": "commsched.scheduling.routing",
    "network_pair": "commsched.scheduling.routing",
    "ClusterState": "commsched.scheduling.state",
    "ConnectionKey": "commsched.scheduling.state",
    "Decisions": "commsched.scheduling.state",
    "PlacedJob": "commsched.scheduling.state",
    "job_connections": "commsched.scheduling.traffic",
}

__all__ = [
    "Allocation",
    "ClusterState",
    "ConnectionKey",
    "CruxSettings",
    "Decisions",
    "PlacedJob",
    "PlacementFn",
    "PlacementRequest",
    "Plan",
    "PlanFn",
    "PolicyBundle",
    "PolicyContext",
    "PolicyFn",
    "QueueOrderFn",
    "TopologyFn",
    "communication_plans",
    "communication_policies",
    "crux_plan",
    "ecmp_routes",
    "fair_policy",
    "job_connections",
    "job_schedulers",
    "network_pair",
    "pack",
    "static_policy",
]

__getattr__, __dir__ = lazy_exports(__name__, _EXPORTS, globals())
