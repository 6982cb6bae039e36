"""Names -> policies, at the edge (CLI, scenario files). One strict registry per family."""

from __future__ import annotations

from commsched.registry import Registry
from commsched.scheduling.basic import fair_policy, static_policy
from commsched.scheduling.interfaces import PlacementFn, PolicyFn
from commsched.scheduling.placement import pack


def policy_registry() -> Registry[PolicyFn]:
    """Every communication policy by name."""
    reg: Registry[PolicyFn] = Registry("policy")
    reg.register("static", static_policy)
    reg.register("fair", fair_policy)
    return reg


def placement_registry() -> Registry[PlacementFn]:
    """Every placement (job scheduler) policy by name."""
    reg: Registry[PlacementFn] = Registry("placement")
    reg.register("pack", pack)
    return reg


def policy_names() -> tuple[str, ...]:
    return policy_registry().names()


def placement_names() -> tuple[str, ...]:
    return placement_registry().names()
