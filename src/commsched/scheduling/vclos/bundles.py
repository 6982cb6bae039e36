"""The policies of the vClos evaluation as named :class:`PolicyBundle` records.

=================  =============================  ==========================  ===========================
name               placement                      routing                     cluster
=================  =============================  ==========================  ===========================
``best``           whole idle servers anywhere    one path (no fabric)        one non-blocking switch
``ocs-vclos``      OCS-vClos (stages 0-3)         pinned (isolated)           leaf-spine with OCS layer
``vclos``          vClos (stages 0-2)             pinned (isolated)           leaf-spine
``sr``             locality packing               source routing, f(i) = i    leaf-spine
``balanced-ecmp``  locality packing               fewest flows, arrival order leaf-spine
``ecmp``           locality packing               5-tuple MurmurHash3 ECMP    leaf-spine
``ecmp-redundant`` locality packing               5-tuple MurmurHash3 ECMP    +50% leaf-spine links
=================  =============================  ==========================  ===========================

Best
----
"An electric switch with enough ports to connect all servers" (§9.3): the same hosts (same ids,
GPUs, NICs and NIC speed) under a single leaf; traffic between hosts crosses only the two access
links of its NICs, so jobs never share a link. A two-layer fabric with full bisection would not do:
with ECMP or a fixed port map it still collides (that is the paper's point), and contention-free
routing on it *is* vClos without fragmentation.

OCS-vClos in the simulator
--------------------------
``ocs-vclos`` runs on ``leaf_spine(..., ocs=True)``: every leaf uplink is a fibre to an OCS cross-
connect node, statically cabled to one spine. Placement decides on the abstract fabric, where an idle
leaf port can be joined to any idle spine port (the rewiring, §7); it reserves both fibres of every
circuit (leaf port and spine port). The simulator's graph keeps its static circuits, so each
connection of the job is pinned to a static equal-cost path: the source-routed one when the
rewired circuits happen to coincide with static ones, otherwise the path with the fewest links held
by other jobs' fibres or already used by the job (:func:`~commsched.scheduling.vclos.policy.pin_routes`).
The up leg always starts on a leaf port the job owns; where the static path must leave the job's own
fibres, the simulator may charge contention that the rewired fabric would not have, so the
simulated OCS-vClos is a conservative (pessimistic) estimate.

References
----------
vClos §6 (vClos), §7 (OCS-vClos), §8.1 (ECMP with 50% more links), §9.3 (baselines), §4.3/§9.7 (queues).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from commsched.errors import InputError
from commsched.scheduling.interfaces import PolicyBundle, QueueOrderFn
from commsched.scheduling.policies.balanced_ecmp import balanced_ecmp_policy
from commsched.scheduling.vclos.ocs import allocate_ocs_vclos
from commsched.scheduling.vclos.placement import allocate_best, allocate_packed, allocate_vclos
from commsched.scheduling.vclos.policy import (
    EcmpRouting,
    SourceRoutingPolicy,
    fabric_placement,
    new_memo,
    pinned_policy,
)
from commsched.scheduling.vclos.wiring import new_cache
from commsched.topology import Topology
from commsched.topology.builders import leaf_spine
from commsched.workload import JobSpec

_KEYS = ("leaves", "spines", "gpus_per_host", "hosts_per_leaf", "host_link_bps", "uplink_bps", "latency_s")


def _params(topo: Topology) -> dict[str, object]:
    p = topo.params
    if p.get("kind") != "leaf_spine":
        raise InputError(
            f"topology {topo.name!r} is a {p.get('kind')!r}",
            where="topology.kind",
            expected="leaf_spine (the vClos policies need a leaf-spine fabric)",
        )
    return {k: p[k] for k in _KEYS}


def _build(base: dict[str, object], **over: object) -> Topology:
    args = {**base, **over}
    return leaf_spine(
        leaves=int(str(args["leaves"])),
        spines=int(str(args["spines"])),
        gpus_per_host=int(str(args["gpus_per_host"])),
        hosts_per_leaf=int(str(args["hosts_per_leaf"])),
        ports_per_leaf=None if args.get("ports_per_leaf") is None else int(str(args["ports_per_leaf"])),
        host_link_bps=float(str(args["host_link_bps"])),
        uplink_bps=float(str(args["uplink_bps"])),
        latency_s=float(str(args["latency_s"])),
        ocs=bool(args.get("ocs", False)),
    )


def one_switch(topo: Topology) -> Topology:
    """Best: the same hosts under one non-blocking switch (one leaf, a token spine).

    Examples
    --------
    >>> t = one_switch(leaf_spine(leaves=4, spines=8, gpus_per_host=8, hosts_per_leaf=1))
    >>> t.n_gpus, t.params["leaves"], len(t.equal_cost_paths("h0/nic0", "h3/nic0"))
    (32, 1, 1)
    """
    p = _params(topo)
    hosts = int(str(p["leaves"])) * int(str(p["hosts_per_leaf"]))
    return _build(p, leaves=1, spines=1, hosts_per_leaf=hosts)


def with_ocs(topo: Topology) -> Topology:
    """The same leaf-spine with the OCS layer between leaves and spines (static default circuits)."""
    return _build(_params(topo), ocs=True)


def redundant(topo: Topology) -> Topology:
    """ECMP-redundant: 50% more leaf–spine links, as 50% more spines (one uplink to each).

    Examples
    --------
    >>> t = redundant(leaf_spine(leaves=4, spines=8, gpus_per_host=8, hosts_per_leaf=1))
    >>> t.params["spines"], len(t.equal_cost_paths("h0/nic0", "h1/nic0"))
    (12, 12)

    References
    ----------
    vClos §8.1-8.2 (ECMP with 50% additional ports, "rECMP").
    """
    p = _params(topo)
    spines = math.ceil(1.5 * int(str(p["spines"])))
    return _build(p, spines=spines, ports_per_leaf=2 * spines)


def vclos_bundles() -> tuple[PolicyBundle, ...]:
    """Fresh bundles of the vClos evaluation (each with its own caches; one simulation per bundle).

    Examples
    --------
    >>> [b.name for b in vclos_bundles()]
    ['best', 'ocs-vclos', 'vclos', 'sr', 'balanced-ecmp', 'ecmp', 'ecmp-redundant']

    References
    ----------
    vClos §9.3, Table 5.
    """
    packed = "locality packing (server, leaf, then fewest leaves), no link reservation"
    return (
        PolicyBundle(
            name="best",
            communication=pinned_policy,
            placement=fabric_placement(allocate_best),
            topology=one_switch,
            description="upper bound: all servers on one non-blocking switch",
        ),
        PolicyBundle(
            name="ocs-vclos",
            communication=pinned_policy,
            placement=fabric_placement(allocate_ocs_vclos, pin="ocs"),
            topology=with_ocs,
            description="OCS-vClos: isolated virtual Clos per job, idle links rewired through an OCS layer",
        ),
        PolicyBundle(
            name="vclos",
            communication=pinned_policy,
            placement=fabric_placement(allocate_vclos, pin="source"),
            description="vClos: isolated virtual Clos per job (link reservation), source routing",
        ),
        PolicyBundle(
            name="sr",
            communication=SourceRoutingPolicy(cache=new_cache(), memo=new_memo()),
            placement=fabric_placement(allocate_packed),
            description=f"source routing f(i) = i for every job, {packed}",
        ),
        PolicyBundle(
            name="balanced-ecmp",
            communication=balanced_ecmp_policy,  # the one balanced-ecmp (the daemon's and plan's too)
            placement=fabric_placement(allocate_packed),
            description=f"fewest-flows equal-cost path per flow in arrival order, one class; {packed}",
        ),
        PolicyBundle(
            name="ecmp",
            communication=EcmpRouting(memo=new_memo()),
            placement=fabric_placement(allocate_packed),
            description=f"5-tuple MurmurHash3 ECMP, {packed}",
        ),
        PolicyBundle(
            name="ecmp-redundant",
            communication=EcmpRouting(memo=new_memo()),
            placement=fabric_placement(allocate_packed),
            topology=redundant,
            description=f"ECMP on 50% more leaf-spine links, {packed}",
        ),
    )


def smallest_first(queue: Sequence[JobSpec], now_s: float) -> Sequence[JobSpec]:
    """SF: fewest GPUs first, ties by arrival (vClos §9.7 "FF")."""
    del now_s
    return sorted(queue, key=lambda j: (j.gpus, j.arrival_s))


def earliest_deadline_first(queue: Sequence[JobSpec], now_s: float) -> Sequence[JobSpec]:
    """EDF on a job's own deadline proxy: arrival + requested standalone duration (``duration_s``).

    Jobs without a duration go last, ties by arrival (vClos §9.7; the paper does not define the
    deadline, and a JobSpec carries none, so the standalone finish time is used).
    """
    del now_s

    def deadline(j: JobSpec) -> float:
        return j.arrival_s + j.duration_s if j.duration_s is not None else math.inf

    return sorted(queue, key=lambda j: (deadline(j), j.arrival_s))


def vclos_queue_orders() -> dict[str, QueueOrderFn]:
    """Queue orders of the vClos evaluation besides FIFO (the simulator's default, ``None``).

    Examples
    --------
    >>> sorted(vclos_queue_orders())
    ['edf', 'sf']
    """
    return {"sf": smallest_first, "edf": earliest_deadline_first}
