"""The ``Topology`` owner: an immutable cluster graph with lookups and cached route queries."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from commsched.errors import TopologyError
from commsched.topology.records import (
    INTRA_HOST_LINK_KINDS,
    Host,
    HostId,
    Link,
    LinkId,
    LinkKind,
    Node,
    NodeId,
    NodeKind,
    Path,
)

SWITCH_KINDS: frozenset[NodeKind] = frozenset({NodeKind.TOR, NodeKind.AGG, NodeKind.CORE, NodeKind.OCS})


class Topology:
    """An immutable cluster graph.

    Build one with a builder (``commsched.topology.builders``) or a loader; the constructor checks that
    ids are unique, link ids are dense ``0..L-1`` and every link end exists.

    Per-link quantities are NumPy arrays indexed by ``LinkId``: :attr:`capacity_bps`, :attr:`latency_s`.
    Route queries (:meth:`equal_cost_paths`, :meth:`gpu_route`) are cached on the instance.
    """

    def __init__(
        self,
        *,
        name: str,
        nodes: Sequence[Node],
        links: Sequence[Link],
        hosts: Sequence[Host],
        params: dict[str, object] | None = None,
    ) -> None:
        self.name = name
        self.params: dict[str, object] = dict(params or {})
        self.nodes: tuple[Node, ...] = tuple(nodes)
        self.links: tuple[Link, ...] = tuple(links)
        self.hosts: tuple[Host, ...] = tuple(hosts)
        self._node: dict[NodeId, Node] = {}
        for n in self.nodes:
            if n.id in self._node:
                raise TopologyError(f"duplicate node id {n.id!r}")
            self._node[n.id] = n
        self._link_between: dict[tuple[NodeId, NodeId], LinkId] = {}
        self._out: dict[NodeId, list[Link]] = {n.id: [] for n in self.nodes}
        for i, lk in enumerate(self.links):
            if lk.id != i:
                raise TopologyError(f"link ids must be dense and ordered; link {i} has id {lk.id}")
            if lk.src not in self._node or lk.dst not in self._node:
                raise TopologyError(f"link {lk.id} joins unknown node(s) {lk.src!r} -> {lk.dst!r}")
            if lk.capacity_bps <= 0:
                raise TopologyError(f"link {lk.id} {lk.src}->{lk.dst} has non-positive capacity")
            self._link_between.setdefault((lk.src, lk.dst), lk.id)
            self._out[lk.src].append(lk)
        self._host: dict[HostId, Host] = {}
        self._gpu_host: dict[NodeId, Host] = {}
        self._gpu_nic: dict[NodeId, NodeId] = {}
        for h in self.hosts:
            if h.id in self._host:
                raise TopologyError(f"duplicate host id {h.id!r}")
            self._host[h.id] = h
            for g, nic in zip(h.gpus, h.gpu_nic, strict=True):
                self._gpu_host[g] = h
                self._gpu_nic[g] = nic
        self.capacity_bps: NDArray[np.float64] = np.array([lk.capacity_bps for lk in self.links], dtype=float)
        self.latency_s: NDArray[np.float64] = np.array([lk.latency_s for lk in self.links], dtype=float)
        self.capacity_bps.setflags(write=False)
        self.latency_s.setflags(write=False)
        self._ecmp_cache: dict[tuple[NodeId, NodeId], tuple[Path, ...]] = {}
        self._intra_cache: dict[tuple[NodeId, NodeId], Path] = {}

    # ------------------------------------------------------------------ lookups
    def node(self, node_id: NodeId | str) -> Node:
        try:
            return self._node[NodeId(node_id)]
        except KeyError:
            raise TopologyError(f"unknown node {node_id!r} in topology {self.name!r}") from None

    def has_node(self, node_id: NodeId | str) -> bool:
        return NodeId(node_id) in self._node

    def host(self, host_id: HostId | str) -> Host:
        try:
            return self._host[HostId(host_id)]
        except KeyError:
            raise TopologyError(f"unknown host {host_id!r} in topology {self.name!r}") from None

    def link(self, link_id: LinkId | int) -> Link:
        return self.links[link_id]

    def link_id(self, src: NodeId | str, dst: NodeId | str) -> LinkId:
        """The id of the (first) directed link ``src -> dst``."""
        try:
            return self._link_between[(NodeId(src), NodeId(dst))]
        except KeyError:
            raise TopologyError(f"no link {src!r} -> {dst!r} in topology {self.name!r}") from None

    def out_links(self, node_id: NodeId) -> tuple[Link, ...]:
        return tuple(self._out[node_id])

    def nodes_of_kind(self, kind: NodeKind) -> tuple[Node, ...]:
        return tuple(n for n in self.nodes if n.kind is kind)

    @property
    def gpus(self) -> tuple[NodeId, ...]:
        """All GPUs, host by host in host order."""
        return tuple(g for h in self.hosts for g in h.gpus)

    @property
    def n_gpus(self) -> int:
        return sum(len(h.gpus) for h in self.hosts)

    def host_of(self, gpu: NodeId | str) -> Host:
        try:
            return self._gpu_host[NodeId(gpu)]
        except KeyError:
            raise TopologyError(f"{gpu!r} is not a GPU of topology {self.name!r}") from None

    def nic_of(self, gpu: NodeId | str) -> NodeId:
        """The NIC a GPU uses for inter-host traffic (its nearest one)."""
        self.host_of(gpu)
        return self._gpu_nic[NodeId(gpu)]

    def links_of_kind(self, kinds: Iterable[LinkKind]) -> NDArray[np.int64]:
        ks = frozenset(kinds)
        return np.array([lk.id for lk in self.links if lk.kind in ks], dtype=np.int64)

    # ------------------------------------------------------------------ routes
    def _shortest_paths(self, src: NodeId, dst: NodeId, allowed: frozenset[NodeKind] | None) -> list[Path]:
        """All shortest paths ``src -> dst`` through nodes whose kind is in ``allowed`` (ends excepted)."""
        dist: dict[NodeId, int] = {src: 0}
        preds: dict[NodeId, list[Link]] = {src: []}
        queue: deque[NodeId] = deque([src])
        while queue:
            u = queue.popleft()
            if u == dst:
                continue
            if dist.get(dst) is not None and dist[u] >= dist[dst]:
                continue
            for lk in self._out[u]:
                v = lk.dst
                if v != dst and allowed is not None and self._node[v].kind not in allowed:
                    continue
                if v not in dist:
                    dist[v] = dist[u] + 1
                    preds[v] = [lk]
                    queue.append(v)
                elif dist[v] == dist[u] + 1:
                    preds[v].append(lk)
        if dst not in dist:
            return []
        out: list[Path] = []

        def walk(v: NodeId, links: list[LinkId], nodes: list[NodeId]) -> None:
            if v == src:
                out.append(Path(nodes=(src, *reversed(nodes)), links=tuple(reversed(links))))
                return
            for lk in preds[v]:
                walk(lk.src, [*links, lk.id], [*nodes, v])

        walk(dst, [], [])
        out.sort(key=lambda p: p.nodes)
        return out

    def equal_cost_paths(self, src: NodeId | str, dst: NodeId | str) -> tuple[Path, ...]:
        """Every equal-cost shortest network path between two NICs (or endpoints), in a canonical order.

        The order is deterministic (lexicographic by node ids), so a path index is stable and can be
        used as an ECMP bucket. Cached per pair.
        """
        key = (NodeId(src), NodeId(dst))
        hit = self._ecmp_cache.get(key)
        if hit is not None:
            return hit
        self.node(src)
        self.node(dst)
        paths = tuple(self._shortest_paths(key[0], key[1], SWITCH_KINDS))
        if not paths:
            raise TopologyError(f"no network path {src!r} -> {dst!r} in topology {self.name!r}")
        self._ecmp_cache[key] = paths
        return paths

    def intra_host_path(self, src: NodeId | str, dst: NodeId | str) -> Path:
        """The shortest route between two nodes of one host over intra-host links (NVLink/PCIe)."""
        key = (NodeId(src), NodeId(dst))
        hit = self._intra_cache.get(key)
        if hit is not None:
            return hit
        if key[0] == key[1]:
            path = Path(nodes=(key[0],), links=())
        else:
            host = self.node(src).host
            if host is None or self.node(dst).host != host:
                raise TopologyError(f"{src!r} and {dst!r} are not in the same host")
            intra = frozenset(
                {NodeKind.GPU, NodeKind.CPU, NodeKind.PCIE_SWITCH, NodeKind.NVSWITCH, NodeKind.NIC}
            )
            cands = [
                p
                for p in self._shortest_paths(key[0], key[1], intra)
                if all(self.links[i].kind in INTRA_HOST_LINK_KINDS for i in p.links)
            ]
            if not cands:
                raise TopologyError(f"no intra-host path {src!r} -> {dst!r}")
            # prefer the fattest route among the shortest ones (NVLink over PCIe), then canonical order
            path = max(cands, key=lambda p: float(min(self.capacity_bps[list(p.links)])))
        self._intra_cache[key] = path
        return path

    def gpu_route(self, src_gpu: NodeId | str, dst_gpu: NodeId | str, choice: int = 0) -> Path:
        """The full route between two GPUs.

        Same host: the intra-host path. Different hosts: GPU -> its NIC (intra-host), then equal-cost
        network path number ``choice % n`` between the two NICs, then NIC -> GPU.
        """
        a, b = NodeId(src_gpu), NodeId(dst_gpu)
        ha, hb = self.host_of(a), self.host_of(b)
        if ha.id == hb.id:
            return self.intra_host_path(a, b)
        nic_a, nic_b = self._gpu_nic[a], self._gpu_nic[b]
        paths = self.equal_cost_paths(nic_a, nic_b)
        mid = paths[choice % len(paths)]
        first = self.intra_host_path(a, nic_a)
        last = self.intra_host_path(nic_b, b)
        return Path(
            nodes=first.nodes[:-1] + mid.nodes + last.nodes[1:],
            links=first.links + mid.links + last.links,
        )

    def __repr__(self) -> str:
        return (
            f"Topology({self.name!r}, hosts={len(self.hosts)}, gpus={self.n_gpus}, "
            f"nodes={len(self.nodes)}, links={len(self.links)})"
        )
