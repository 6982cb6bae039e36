"""Names -> policies, at the edge (CLI, scenario files). One strict registry per family."""

from __future__ import annotations

from commsched.registry import Registry
from commsched.scheduling.interfaces import PlacementFn, PolicyBundle, QueueOrderFn
from commsched.scheduling.jobsched import job_schedulers
from commsched.scheduling.policies import communication_policies
from commsched.scheduling.vclos.bundles import vclos_bundles, vclos_queue_orders

#: one line per communication policy, shown by ``commsched policies``
DESCRIPTIONS = {
    "static": "classes = the priorities written on the jobs; ECMP routes",
    "fair": "one class (max-min fair everywhere); ECMP routes",
    "ecmp-fair": "one class (max-min fair everywhere); ECMP routes (Crux's baseline name)",
    "crux-pa": "Crux priority assignment (P = k I), unique priorities; ECMP routes",
    "crux-ps-pa": "Crux path selection + priority assignment, unique priorities",
    "crux-full": "Crux path selection + priority assignment + Max K-Cut compression to the levels",
    "crux-full-guard": "crux-full, promoting any job whose predicted throughput loss exceeds 60 %",
    "sincronia": "Sincronia BSSI order on a NIC big switch, Sincronia-style split; ECMP routes",
    "varys": "Varys SEBF order, Varys-style split; ECMP routes",
    "taccl-star": "TACCL*: least-congested paths in arrival order, longer paths first",
    "cassini": "CASSINI: one class, per-job time shifts from link compatibility; ECMP routes",
    "source-routing": "fixed port mapping (vClos-style source routing without isolation), one class",
}


def policy_registry() -> Registry[PolicyBundle]:
    """Every named policy: communication policies, and the vClos bundles (placement + routing + cluster).

    Where a vClos bundle and a communication policy share a name (``balanced-ecmp``), the bundle wins:
    it is the same routing with the placement the vClos evaluation pairs it with.
    """
    reg: Registry[PolicyBundle] = Registry("policy")
    bundles = vclos_bundles()
    taken = {b.name for b in bundles}
    for name, fn in communication_policies().items():
        if name not in taken:
            reg.register(
                name, PolicyBundle(name=name, communication=fn, description=DESCRIPTIONS.get(name, ""))
            )
    for b in bundles:
        reg.register(b.name, b)
    return reg


def placement_registry() -> Registry[PlacementFn]:
    """Every placement (job scheduler) policy by name."""
    reg: Registry[PlacementFn] = Registry("placement")
    for name, fn in job_schedulers().items():
        reg.register(name, fn)
    return reg


def queue_registry() -> Registry[QueueOrderFn | None]:
    """Orders of the waiting queue by name (``fifo`` = arrival order)."""
    reg: Registry[QueueOrderFn | None] = Registry("queue order")
    reg.register("fifo", None)
    for name, fn in vclos_queue_orders().items():
        reg.register(name, fn)
    return reg


def policy_names() -> tuple[str, ...]:
    return policy_registry().names()


def placement_names() -> tuple[str, ...]:
    return placement_registry().names()
