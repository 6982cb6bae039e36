"""Plain source routing as a communication policy: a fixed port mapping (vClos-style), one class.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §6; crux-spec §2.3, §8.
"""

from __future__ import annotations

from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.policies.common import Plan, PolicyCtx, one_class_plan
from commsched.scheduling.ports import source_routes
from commsched.scheduling.state import ClusterState

__all__ = ["source_routing_plan"]


def source_routing_plan(state: ClusterState, ctx: PolicyContext) -> Plan:
    """Plain source routing with a fixed port mapping, one class."""
    return one_class_plan(state, source_routes(state), PolicyCtx.of(state, ctx.memo))
