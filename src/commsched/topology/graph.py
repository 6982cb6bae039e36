"""The ``Topology`` owner: an immutable cluster graph with lookups and cached route queries."""

from __future__ import annotations

from collections import deque
from collections.abc import Iterable, Sequence

import numpy as np
from numpy.typing import NDArray

from commsched.errors import TopologyError
from commsched.topology.paths import SWITCH_KINDS, SwitchPathIndex
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


class Topology:
    """An immutable cluster graph.

    Build one with a builder (``commsched.topology.builders``) or a loader; the constructor checks that
    ids are unique, link ids are dense ``0..L-1`` and every link end exists.

    Per-link quantities are NumPy arrays indexed by ``LinkId``: :attr:`capacity_bps`, :attr:`latency_s`.
    Route queries (:meth:`equal_cost_paths`, :meth:`gpu_route`) are cached on the instance.

    Examples
    --------
    >>> from commsched.topology import two_layer_clos
    >>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)
    >>> (topo.n_gpus, len(topo.hosts))
    (32, 4)
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
        self._gpus: tuple[NodeId, ...] = tuple(g for h in self.hosts for g in h.gpus)
        self._node: dict[NodeId, Node] = {}
        for n in self.nodes:
            if n.id in self._node:
                raise TopologyError(f"duplicate node id {n.id!r}")
            self._node[n.id] = n
        self._link_between: dict[tuple[NodeId, NodeId], LinkId] = {}
        self._out: dict[NodeId, list[Link]] = {n.id: [] for n in self.nodes}
        self._in: dict[NodeId, list[Link]] = {n.id: [] for n in self.nodes}
        for i, lk in enumerate(self.links):
            if lk.id != i:
                raise TopologyError(f"link ids must be dense and ordered; link {i} has id {lk.id}")
            if lk.src not in self._node or lk.dst not in self._node:
                raise TopologyError(f"link {lk.id} joins unknown node(s) {lk.src!r} -> {lk.dst!r}")
            if lk.capacity_bps <= 0:
                raise TopologyError(f"link {lk.id} {lk.src}->{lk.dst} has non-positive capacity")
            self._link_between.setdefault((lk.src, lk.dst), lk.id)
            self._out[lk.src].append(lk)
            self._in[lk.dst].append(lk)
        self._link_dst: list[NodeId] = [lk.dst for lk in self.links]
        self._switch_paths = SwitchPathIndex(self.nodes, self.links)
        self._host: dict[HostId, Host] = {}
        self._host_label: dict[str, Host] = {h.label: h for h in self.hosts if h.label}
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
        self._route_cache: dict[tuple[NodeId, NodeId, int], Path] = {}
        self._latency_cache: dict[tuple[LinkId, ...], float] = {}

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
    def switches(self) -> tuple[Node, ...]:
        """Every switch node (ToR, Agg, Core, OCS circuit), in node order."""
        return tuple(n for n in self.nodes if n.kind in SWITCH_KINDS)

    @property
    def gpus(self) -> tuple[NodeId, ...]:
        """All GPUs, host by host in host order."""
        return self._gpus

    @property
    def n_gpus(self) -> int:
        return len(self._gpus)

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
        preds = self._shortest_preds(src, dst, allowed)
        if dst not in preds:
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

    def _shortest_preds(
        self, src: NodeId, dst: NodeId, allowed: frozenset[NodeKind] | None
    ) -> dict[NodeId, list[Link]]:
        """Breadth-first from ``src`` to ``dst``'s distance: each reached node's links on a shortest path."""
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
        return preds

    def _ends(self, node_id: NodeId, *, outgoing: bool) -> list[tuple[LinkId | None, NodeId]]:
        """The (access link, switch) pairs where a network path from/to ``node_id`` enters the switches."""
        if self._switch_paths.is_switch(node_id):
            return [(None, node_id)]
        links = self._out[node_id] if outgoing else self._in[node_id]
        return [
            (lk.id, lk.dst if outgoing else lk.src)
            for lk in links
            if self._switch_paths.is_switch(lk.dst if outgoing else lk.src)
        ]

    def _network_paths(self, src: NodeId, dst: NodeId) -> list[Path]:
        """All shortest ``src -> dst`` paths through switches, sorted by their link-id sequences."""
        direct = [Path(nodes=(src, dst), links=(lk.id,)) for lk in self._out[src] if lk.dst == dst]
        if direct:
            return direct
        combos = [
            (h, a, t, b)
            for h, a in self._ends(src, outgoing=True)
            for t, b in self._ends(dst, outgoing=False)
        ]
        dists = [self._switch_paths.distance(a, b) for _, a, _, b in combos]
        finite = [d for d in dists if d is not None]
        if not finite:
            return []
        best = min(finite)
        out: list[Path] = []
        for (h, a, t, b), d in zip(combos, dists, strict=True):
            if d != best:
                continue
            hl, hn = ((), (a,)) if h is None else ((h,), (src, a))
            tl, tn = ((), ()) if t is None else ((t,), (dst,))
            out.extend(
                Path(nodes=hn + mn + tn, links=hl + ml + tl) for ml, mn in self._switch_paths.hops(a, b)
            )
        if len(combos) > 1:
            out.sort(key=lambda p: p.links)
        return out

    def _as_path(self, start: NodeId, links: tuple[LinkId, ...]) -> Path:
        dst = self._link_dst
        return Path(nodes=(start, *[dst[i] for i in links]), links=links)

    def equal_cost_paths(self, src: NodeId | str, dst: NodeId | str) -> tuple[Path, ...]:
        """Every equal-cost shortest network path between two NICs (or endpoints), in a canonical order.

        Intermediate nodes are switches only (ToR, Agg, Core, OCS). The order is deterministic
        (lexicographic by link-id sequence, see :mod:`commsched.topology.paths`), so a path index is
        stable and can be used as an ECMP bucket. Switch-to-switch paths are indexed once per
        destination switch and shared by all NIC pairs; the result is cached per pair.

        Examples
        --------
        >>> from commsched.topology.builders import two_layer_clos
        >>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=1, uplinks_per_tor=2)
        >>> [p.nodes[2] for p in topo.equal_cost_paths("h0/nic0", "h1/nic0")]
        ['agg0', 'agg1']
        """
        key = (NodeId(src), NodeId(dst))
        hit = self._ecmp_cache.get(key)
        if hit is not None:
            return hit
        self.node(src)
        self.node(dst)
        if key[0] == key[1]:
            raise TopologyError(f"source and destination are the same node {src!r}")
        paths = tuple(self._network_paths(key[0], key[1]))
        if not paths:
            raise TopologyError(f"no network path {src!r} -> {dst!r} in topology {self.name!r}")
        self._ecmp_cache[key] = paths
        return paths

    def switch_paths(self, a: NodeId | str, b: NodeId | str) -> tuple[Path, ...]:
        """Every shortest switch-only path between two switches (for example ToR to ToR), canonical order."""
        na, nb = NodeId(a), NodeId(b)
        for n in (na, nb):
            if not self._switch_paths.is_switch(n):
                raise TopologyError(f"{n!r} is not a switch of topology {self.name!r}")
        return tuple(self._as_path(na, ls) for ls in self._switch_paths.link_paths(na, nb))

    def index_switch_paths(self, kind: NodeKind = NodeKind.TOR) -> int:
        """Index the shortest paths between every ordered pair of switches of ``kind``; return their number.

        Later :meth:`equal_cost_paths` queries between NICs under these switches only wrap the indexed
        paths with access links.
        """
        ids = [n.id for n in self.nodes_of_kind(kind)]
        return sum(len(self._switch_paths.link_paths(a, b)) for b in ids for a in ids if a != b)

    def attached_switches(self, node_id: NodeId | str) -> tuple[NodeId, ...]:
        """The switches a NIC (or endpoint) is cabled to, in link order, without repeats."""
        self.node(node_id)
        return tuple(dict.fromkeys(a for _, a in self._ends(NodeId(node_id), outgoing=True)))

    def host_by_label(self, label: str) -> Host:
        """The host whose external ``label`` (e.g. the Lingjun ``ip`` hash) is ``label``."""
        hit = self._host_label.get(label)
        if hit is None:
            raise TopologyError(f"no host labelled {label!r} in topology {self.name!r}")
        return hit

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
        hit = self._route_cache.get((a, b, choice))
        if hit is not None:
            return hit
        ha, hb = self.host_of(a), self.host_of(b)
        if ha.id == hb.id:
            path = self.intra_host_path(a, b)
        else:
            nic_a, nic_b = self._gpu_nic[a], self._gpu_nic[b]
            paths = self.equal_cost_paths(nic_a, nic_b)
            mid = paths[choice % len(paths)]
            first = self.intra_host_path(a, nic_a)
            last = self.intra_host_path(nic_b, b)
            path = Path(
                nodes=first.nodes[:-1] + mid.nodes + last.nodes[1:],
                links=first.links + mid.links + last.links,
            )
        self._route_cache[(a, b, choice)] = path
        return path

    def path_latency(self, path: Path) -> float:
        """The summed latency of a path's links (seconds)."""
        hit = self._latency_cache.get(path.links)
        if hit is None:
            hit = self._latency_cache[path.links] = (
                float(self.latency_s[list(path.links)].sum()) if path.links else 0.0
            )
        return hit

    def __repr__(self) -> str:
        return (
            f"Topology({self.name!r}, hosts={len(self.hosts)}, gpus={self.n_gpus}, "
            f"nodes={len(self.nodes)}, links={len(self.links)})"
        )
