"""Equal-cost shortest paths through the switch layer, indexed once per destination switch.

A network path between two NICs is ``NIC -> first switch -> ... -> last switch -> NIC``; its middle part
runs through switches only. :class:`SwitchPathIndex` answers "all shortest switch-only paths ``a -> b``"
with one backward breadth-first search per destination switch ``b`` and a memo of the path suffixes
from every switch to ``b``, so the paths from all ToRs to ``b`` share their common tails (the Agg->ToR
and Core->Agg->ToR parts are built once). :meth:`Topology.equal_cost_paths` wraps these switch paths
with the NIC's access links.

Canonical order: paths are sorted lexicographically by their sequence of link ids. The builders create
links in a natural order (the uplinks of a ToR by Agg, then by parallel cable), so path ``k`` of a Clos
climbs through Agg ``k // p**2`` (``p`` parallel cables per ToR-Agg pair).

References
----------
Crux (SIGCOMM'24) §5.2 (candidate paths per host pair); reference/crux-spec.md §2.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Sequence

from commsched.topology.records import Link, LinkId, Node, NodeId, NodeKind

SWITCH_KINDS: frozenset[NodeKind] = frozenset({NodeKind.TOR, NodeKind.AGG, NodeKind.CORE, NodeKind.OCS})

LinkSeq = tuple[LinkId, ...]
NodeSeq = tuple[NodeId, ...]
#: a path's links and the nodes it visits after its first node
Hops = tuple[LinkSeq, NodeSeq]


class _Sink:
    """Distances to one destination switch and a memo of all shortest link sequences to it."""

    __slots__ = ("dist", "memo", "target")

    def __init__(self, target: NodeId, dist: dict[NodeId, int]) -> None:
        self.target = target
        self.dist = dist
        self.memo: dict[NodeId, tuple[Hops, ...]] = {target: (((), ()),)}


class SwitchPathIndex:
    """All shortest switch-only paths between switches, computed lazily and cached.

    Parameters
    ----------
    nodes
        Every node of the topology (only switches are used).
    links
        Every directed link, in id order.

    Examples
    --------
    >>> from commsched.topology.records import Link, LinkId, LinkKind, Node, NodeId, NodeKind
    >>> ns = [Node(id=NodeId(n), kind=NodeKind.TOR) for n in ("t0", "t1")]
    >>> ns.append(Node(id=NodeId("a0"), kind=NodeKind.AGG))
    >>> pairs = [("t0", "a0"), ("a0", "t0"), ("t1", "a0"), ("a0", "t1")]
    >>> ls = [Link(id=LinkId(i), src=NodeId(s), dst=NodeId(d), capacity_bps=1.0, latency_s=0.0,
    ...            kind=LinkKind.FABRIC) for i, (s, d) in enumerate(pairs)]
    >>> SwitchPathIndex(ns, ls).link_paths(NodeId("t0"), NodeId("t1"))
    ((0, 3),)
    """

    def __init__(self, nodes: Sequence[Node], links: Sequence[Link]) -> None:
        switches = {n.id for n in nodes if n.kind in SWITCH_KINDS}
        self._out: dict[NodeId, list[Link]] = {s: [] for s in switches}
        self._in: dict[NodeId, list[Link]] = {s: [] for s in switches}
        for lk in links:
            if lk.src in switches and lk.dst in switches:
                self._out[lk.src].append(lk)
                self._in[lk.dst].append(lk)
        self._sinks: dict[NodeId, _Sink] = {}

    def is_switch(self, node_id: NodeId) -> bool:
        return node_id in self._out

    def _sink(self, target: NodeId) -> _Sink:
        hit = self._sinks.get(target)
        if hit is not None:
            return hit
        dist: dict[NodeId, int] = {target: 0}
        queue: deque[NodeId] = deque([target])
        while queue:
            v = queue.popleft()
            dv = dist[v] + 1
            for lk in self._in[v]:
                if lk.src not in dist:
                    dist[lk.src] = dv
                    queue.append(lk.src)
        sink = _Sink(target, dist)
        self._sinks[target] = sink
        return sink

    def distance(self, a: NodeId, b: NodeId) -> int | None:
        """Hops of the shortest switch-only path ``a -> b``, or ``None`` when there is none."""
        return self._sink(b).dist.get(a)

    def link_paths(self, a: NodeId, b: NodeId) -> tuple[LinkSeq, ...]:
        """Every shortest switch-only path ``a -> b`` as link-id sequences, in canonical order."""
        return tuple(links for links, _ in self.hops(a, b))

    def hops(self, a: NodeId, b: NodeId) -> tuple[Hops, ...]:
        """Every shortest switch-only path ``a -> b`` as (links, nodes after ``a``), in canonical order."""
        sink = self._sink(b)
        if a not in sink.dist:
            return ()
        return self._from(sink, a)

    def _from(self, sink: _Sink, u: NodeId) -> tuple[Hops, ...]:
        hit = sink.memo.get(u)
        if hit is not None:
            return hit
        want = sink.dist[u] - 1
        out: list[Hops] = []
        for lk in self._out[u]:  # in link-id order, so the result is sorted
            if sink.dist.get(lk.dst) == want:
                lh, nh = (lk.id,), (lk.dst,)
                out.extend((lh + lt, nh + nt) for lt, nt in self._from(sink, lk.dst))
        res = tuple(out)
        sink.memo[u] = res
        return res
