"""Read the abstract vClos fabric off a :class:`commsched.topology.Topology` of a leaf-spine cluster."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.scheduling.vclos.fabric import Fabric, GpuAddr
from commsched.topology import NodeId, NodeKind, Topology


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricView:
    """A :class:`Fabric` with the topology names behind its indices."""

    fabric: Fabric
    leaf_ids: tuple[NodeId, ...]
    spine_ids: tuple[NodeId, ...]
    gpu_ids: Mapping[GpuAddr, NodeId]

    def gpu_addr(self, gpu: NodeId | str) -> GpuAddr:
        """The (leaf, port) address of a topology GPU."""
        for addr, node in self.gpu_ids.items():
            if node == gpu:
                return addr
        raise InputError(f"{gpu!r} is not a GPU of this fabric", where="gpu")


def fabric_from_topology(topo: Topology) -> FabricView:
    """The vClos fabric of a two-tier leaf-spine topology (ToR = leaf, Agg = spine).

    Leaves and spines are numbered in the topology's node order; a leaf's hosts in host order, each
    host's GPUs in its own order, one down port per GPU. Cables per leaf–spine pair are the ToR->Agg
    links (or ToR->OCS links divided over the spines when OCS nodes sit between them; then
    ``ocs_groups`` is the number of OCS devices, circuit nodes ``"ocs0/c3"`` counting as device
    ``"ocs0"``, the convention of ``commsched.topology.builders.leaf_spine``).

    Raises
    ------
    InputError
        When the topology is not a uniform leaf-spine (different host counts per leaf, different GPU
        counts per host, uneven leaf–spine cabling, hosts on several leaves).
    """
    leaves = tuple(n.id for n in topo.nodes_of_kind(NodeKind.TOR))
    spines = tuple(n.id for n in topo.nodes_of_kind(NodeKind.AGG))
    ocs = {n.id for n in topo.nodes_of_kind(NodeKind.OCS)}
    if not leaves or not spines:
        raise InputError(
            f"topology {topo.name!r} has no ToR or no Agg switches",
            where="topology",
            expected="a leaf-spine topology",
        )
    hosts: dict[NodeId, list[int]] = {t: [] for t in leaves}
    for i, h in enumerate(topo.hosts):
        if len(set(h.tors)) != 1 or h.tors[0] not in hosts:
            raise InputError(f"host {h.id!r} is not attached to exactly one leaf", where=f"hosts[{i}]")
        hosts[h.tors[0]].append(i)
    per_leaf = {len(v) for v in hosts.values()}
    per_host = {len(h.gpus) for h in topo.hosts}
    if len(per_leaf) != 1 or len(per_host) != 1:
        raise InputError("leaves must have equal host counts and hosts equal GPU counts", where="topology")
    spine_set = set(spines)
    ups = Counter(lk.src for lk in topo.links if lk.src in hosts and (lk.dst in spine_set or lk.dst in ocs))
    pairs = Counter((lk.src, lk.dst) for lk in topo.links if lk.src in hosts and lk.dst in spine_set)
    if len(set(ups.values())) != 1 or len(ups) != len(leaves):
        raise InputError("leaves have unequal numbers of spine-facing links", where="topology")
    up = next(iter(ups.values()))
    if not ocs and (len(pairs) != len(leaves) * len(spines) or len(set(pairs.values())) != 1):
        raise InputError("leaf–spine cabling is not a uniform bipartite graph", where="topology")
    fabric = Fabric(
        leaves=len(leaves),
        spines=len(spines),
        servers_per_leaf=per_leaf.pop(),
        gpus_per_server=per_host.pop(),
        cables_per_pair=max(1, up // len(spines)),
        ocs_groups=len({str(o).split("/")[0] for o in ocs}),
    )
    t = fabric.gpus_per_server
    gpu_ids = {
        GpuAddr(leaf=n, port=j * t + g): gid
        for n, tor in enumerate(leaves)
        for j, hi in enumerate(hosts[tor])
        for g, gid in enumerate(topo.hosts[hi].gpus)
    }
    return FabricView(fabric=fabric, leaf_ids=leaves, spine_ids=spines, gpu_ids=gpu_ids)
