"""vClos and OCS-vClos: contention-free source routing and placement with link reservation.

Layers inside the package: ``fabric`` (records, state) <- ``routing``/``patterns`` (Definition 1,
contention check, collective patterns) <- ``ilp`` (HiGHS programs) <- ``state`` (commit/release,
shapes) <- ``placement`` (vClos, baselines) <- ``ocs`` (OCS-vClos) <- ``queues`` (FIFO/SF/EDF).

References
----------
Han et al., "Isolated Scheduling for Distributed Training Tasks in GPU Clusters" (vClos),
``papers/vclos-paper.txt``.
"""

from commsched.registry import Registry
from commsched.scheduling.vclos.adapter import FabricView, fabric_from_topology
from commsched.scheduling.vclos.fabric import (
    Cable,
    Fabric,
    FabricState,
    Flow,
    GpuAddr,
    JobRequest,
    Placement,
    SourceRouting,
    Stage,
    empty_state,
    free_cables,
    free_spine_ports,
    idle_gpus_per_server,
    idle_servers_per_leaf,
)
from commsched.scheduling.vclos.ocs import allocate_ocs_vclos
from commsched.scheduling.vclos.patterns import (
    aligned_layout,
    halving_doubling,
    pairwise_all_to_all,
    pipeline,
    place_pattern,
    ring,
)
from commsched.scheduling.vclos.placement import Allocator, allocate_best, allocate_packed, allocate_vclos
from commsched.scheduling.vclos.queues import (
    Admission,
    admit,
    edf_order,
    fifo_order,
    queue_registry,
    smallest_first_order,
)
from commsched.scheduling.vclos.routing import (
    DirectedLink,
    contended_links,
    default_routing,
    is_contention_free,
    is_leaf_wise_permutation,
    merge_routings,
    route,
    routing_with_leaf_maps,
)
from commsched.scheduling.vclos.state import clos_shapes, release


def placement_registry() -> Registry[Allocator]:
    """A fresh registry of placement policies by name.

    ``vclos`` and ``ocs-vclos`` reserve links; ``best`` assumes one non-blocking switch; ``sr``,
    ``ecmp``, ``balanced-ecmp`` and ``ecmp-redundant`` share locality packing without reservation
    (they differ only in routing, which is not decided here).

    Examples
    --------
    >>> placement_registry().get("sr") is allocate_packed
    True
    """
    reg: Registry[Allocator] = Registry("placement policy")
    reg.register("vclos", allocate_vclos)
    reg.register("ocs-vclos", allocate_ocs_vclos)
    reg.register("best", allocate_best)
    for name in ("sr", "ecmp", "balanced-ecmp", "ecmp-redundant"):
        reg.register(name, allocate_packed)
    return reg


__all__ = [
    "Admission",
    "Allocator",
    "Cable",
    "DirectedLink",
    "Fabric",
    "FabricState",
    "FabricView",
    "Flow",
    "GpuAddr",
    "JobRequest",
    "Placement",
    "SourceRouting",
    "Stage",
    "admit",
    "aligned_layout",
    "allocate_best",
    "allocate_ocs_vclos",
    "allocate_packed",
    "allocate_vclos",
    "clos_shapes",
    "contended_links",
    "default_routing",
    "edf_order",
    "empty_state",
    "fabric_from_topology",
    "fifo_order",
    "free_cables",
    "free_spine_ports",
    "halving_doubling",
    "idle_gpus_per_server",
    "idle_servers_per_leaf",
    "is_contention_free",
    "is_leaf_wise_permutation",
    "merge_routings",
    "pairwise_all_to_all",
    "pipeline",
    "place_pattern",
    "placement_registry",
    "queue_registry",
    "release",
    "ring",
    "route",
    "routing_with_leaf_maps",
    "smallest_first_order",
]
