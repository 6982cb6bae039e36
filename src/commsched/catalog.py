"""Names -> policies, at the edge (CLI, scenario files). One strict registry per family."""

from __future__ import annotations

from commsched.registry import Registry
from commsched.scheduling.basic import fair_policy, static_policy
from commsched.scheduling.interfaces import PlacementFn, PolicyBundle, QueueOrderFn
from commsched.scheduling.placement import pack


def policy_registry() -> Registry[PolicyBundle]:
    """Every named policy (communication policy, with the placement/cluster it implies if any)."""
    reg: Registry[PolicyBundle] = Registry("policy")
    reg.register(
        "static",
        PolicyBundle(
            name="static",
            communication=static_policy,
            description="priorities written on the jobs, ECMP routes",
        ),
    )
    reg.register(
        "fair",
        PolicyBundle(
            name="fair", communication=fair_policy, description="one class (max-min fair), ECMP routes"
        ),
    )
    return reg


def placement_registry() -> Registry[PlacementFn]:
    """Every placement (job scheduler) policy by name."""
    reg: Registry[PlacementFn] = Registry("placement")
    reg.register("pack", pack)
    return reg


def queue_registry() -> Registry[QueueOrderFn | None]:
    """Orders of the waiting queue by name (``fifo`` = arrival order)."""
    reg: Registry[QueueOrderFn | None] = Registry("queue order")
    reg.register("fifo", None)
    return reg


def policy_names() -> tuple[str, ...]:
    return policy_registry().names()


def placement_names() -> tuple[str, ...]:
    return placement_registry().names()
