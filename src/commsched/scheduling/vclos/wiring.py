"""The bridge between the abstract vClos fabric and a simulator :class:`~commsched.topology.Topology`.

A :class:`Wiring` names, for every leaf up port and every spine port of the abstract
:class:`~commsched.scheduling.vclos.fabric.Fabric`, the two directed topology links of its fibre,
and for every GPU its (leaf, port) address. With it a placement policy can rebuild the
:class:`~commsched.scheduling.vclos.fabric.FabricState` from the running jobs of a
:class:`~commsched.scheduling.interfaces.PlacementRequest` (GPUs + reserved links) and turn a
:class:`~commsched.scheduling.vclos.fabric.Placement` back into reserved links.

Fibres
------
* Without OCS a leaf–spine cable is one fibre: leaf ``n``'s up port ``u`` (cable ``u // S`` to spine
  ``u % S``) *is* spine ``u % S``'s port ``n * p + u // S``; its links are the ``k``-th parallel
  ``leaf -> spine`` link and its reverse.
* With the OCS layer of :func:`commsched.topology.builders.leaf_spine` (``ocs=True``, one OCS device)
  leaf ``n``'s uplink ``j`` runs to cross-connect ``ocs0/c{n*up + j}``, statically cabled to spine
  ``j // p``. The leaf port's fibre is ``leaf <-> ocs0/c..``; spine ``m``'s port ``q`` is the fibre
  ``ocs0/c{(q // p) * up + m * p + q % p} <-> spine m``. A rewired circuit joins a leaf fibre to a
  spine fibre inside the OCS; both fibres are reserved for the job.

References
----------
vClos §4.1 (architecture), §5.2 (source routing), §6 (link reservation), §7 (OCS layer).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.vclos.adapter import FabricView, fabric_from_topology
from commsched.scheduling.vclos.fabric import Fabric, FabricState, GpuAddr
from commsched.topology import LinkId, NodeId, NodeKind, Topology

Fibre = tuple[LinkId, LinkId]  # (up: towards the spine, down: towards the leaf)


@dataclass(frozen=True, slots=True, kw_only=True)
class Wiring:
    """A fabric view plus the topology links of every leaf port and spine port.

    ``leaf_fibre[n * up_ports + u]`` and ``spine_fibre[m * spine_ports + q]`` are the (up, down)
    link pairs; ``link_owner_index`` maps a link id to ``("leaf", i)`` / ``("spine", i)`` flat
    indices (a non-OCS cable is both).
    """

    view: FabricView
    addr_of: Mapping[NodeId, GpuAddr]
    leaf_fibre: tuple[Fibre, ...]
    spine_fibre: tuple[Fibre, ...]
    leaf_of_link: Mapping[LinkId, int]
    spine_of_link: Mapping[LinkId, int]

    @property
    def fabric(self) -> Fabric:
        return self.view.fabric


def _pairs(topo: Topology, src: NodeId, dst: NodeId) -> list[Fibre]:
    ups = [lk.id for lk in topo.out_links(src) if lk.dst == dst]
    downs = [lk.id for lk in topo.out_links(dst) if lk.dst == src]
    return list(zip(ups, downs, strict=True))


def _static_fibres(topo: Topology, view: FabricView) -> tuple[list[Fibre], list[Fibre]]:
    f = view.fabric
    leaf = [(LinkId(-1), LinkId(-1))] * (f.leaves * f.up_ports)
    spine = [(LinkId(-1), LinkId(-1))] * (f.spines * f.spine_ports)
    for n, lid in enumerate(view.leaf_ids):
        for m, sid in enumerate(view.spine_ids):
            for k, fib in enumerate(_pairs(topo, lid, sid)):
                leaf[n * f.up_ports + k * f.spines + m] = fib
                spine[m * f.spine_ports + n * f.cables_per_pair + k] = fib
    return leaf, spine


def _ocs_fibres(topo: Topology, view: FabricView) -> tuple[list[Fibre], list[Fibre]]:
    f = view.fabric
    up, p = f.up_ports, f.cables_per_pair
    leaf: list[Fibre] = []
    for n, lid in enumerate(view.leaf_ids):
        for j in range(up):
            leaf.extend(_pairs(topo, lid, NodeId(f"ocs0/c{n * up + j}")))
    spine: list[Fibre] = []
    for m, sid in enumerate(view.spine_ids):
        for q in range(f.spine_ports):
            cross = NodeId(f"ocs0/c{(q // p) * up + m * p + q % p}")
            spine.extend(_pairs(topo, cross, sid))
    return leaf, spine


def wiring_of(topo: Topology) -> Wiring:
    """The :class:`Wiring` of a leaf-spine topology (with or without the OCS layer).

    Examples
    --------
    >>> from commsched.topology.builders import leaf_spine
    >>> w = wiring_of(leaf_spine(leaves=2, spines=2, gpus_per_host=2, hosts_per_leaf=1))
    >>> w.fabric.up_ports, len(w.leaf_fibre), len(w.spine_fibre)
    (2, 4, 4)

    Raises
    ------
    InputError
        When the topology is not a uniform leaf-spine, or its OCS layer is not the builder's.
    """
    view = fabric_from_topology(topo)
    f = view.fabric
    ocs = bool(topo.nodes_of_kind(NodeKind.OCS))
    leaf, spine = _ocs_fibres(topo, view) if ocs else _static_fibres(topo, view)
    if (
        len(leaf) != f.leaves * f.up_ports
        or len(spine) != f.spines * f.spine_ports
        or min(min(a, b) for a, b in (*leaf, *spine)) < 0
    ):
        raise InputError(f"cannot map the fibres of topology {topo.name!r}", where="topology")
    return Wiring(
        view=view,
        addr_of={g: a for a, g in view.gpu_ids.items()},
        leaf_fibre=tuple(leaf),
        spine_fibre=tuple(spine),
        leaf_of_link={lk: i for i, fib in enumerate(leaf) for lk in fib},
        spine_of_link={lk: i for i, fib in enumerate(spine) for lk in fib},
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class WiringCache:
    """Memo of :func:`wiring_of` per topology object (owned by one placement policy instance)."""

    memo: dict[int, tuple[Topology, Wiring]]

    def get(self, topo: Topology) -> Wiring:
        hit = self.memo.get(id(topo))
        if hit is None or hit[0] is not topo:
            hit = (topo, wiring_of(topo))
            self.memo[id(topo)] = hit
        return hit[1]


def new_cache() -> WiringCache:
    """An empty :class:`WiringCache`."""
    return WiringCache(memo={})


def job_addrs(wiring: Wiring, job: PlacedJob) -> list[GpuAddr]:
    """The fabric GPUs a running job holds: its GPUs, or its whole servers when it spans servers.

    The locality rule of vClos gives a job of more than T GPUs whole servers (§6.1), so a job of
    12 GPUs on 8-GPU servers holds 16; only its ranks appear in ``job.gpus``.
    """
    f = wiring.fabric
    addrs = [wiring.addr_of[g] for g in job.gpus]
    if job.spec.gpus <= f.gpus_per_server:
        return addrs
    t = f.gpus_per_server
    servers = {(a.leaf, a.port // t) for a in addrs}
    return [GpuAddr(leaf=n, port=s * t + g) for n, s in sorted(servers) for g in range(t)]


def state_from_running(wiring: Wiring, running: Iterable[PlacedJob]) -> FabricState:
    """The fabric occupancy implied by the running jobs (GPUs, whole servers, reserved fibres).

    ``placements`` is left empty: the returned state serves one placement decision.
    """
    f = wiring.fabric
    gpu: list[str | None] = [None] * f.n_gpus
    leaf: list[str | None] = [None] * (f.leaves * f.up_ports)
    spine: list[str | None] = [None] * (f.spines * f.spine_ports)
    for job in running:
        for a in job_addrs(wiring, job):
            gpu[a.leaf * f.down_ports + a.port] = job.id
        for lk in job.reserved_links:
            if (i := wiring.leaf_of_link.get(lk)) is not None:
                leaf[i] = job.id
            if (i := wiring.spine_of_link.get(lk)) is not None:
                spine[i] = job.id
    return FabricState(
        fabric=f,
        gpu_owner=tuple(gpu),
        cable_owner=tuple(leaf),
        spine_port_owner=tuple(spine),
        placements={},
    )
