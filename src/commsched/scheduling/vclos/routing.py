"""Source routing on a leaf-spine fabric, the leaf-wise permutation check and the contention check.

A flow ``src -> dst`` between GPUs of one server uses no network link (NVLink). Otherwise it leaves
its GPU on the access link ``GPU_TO_LEAF``; if both GPUs hang off one leaf the leaf forwards it
directly; else the source leaf sends it up its port ``f(src port)`` (the leaf map) into a plane
(virtual spine), which delivers it down the destination leaf's cable of that plane.
"""

from __future__ import annotations

from collections import Counter, defaultdict
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import TypeVar

from commsched.errors import InputError
from commsched.scheduling.vclos.fabric import Fabric, Flow, GpuAddr, PlaneId, SourceRouting

K = TypeVar("K")
V = TypeVar("V")


class LinkDir(StrEnum):
    """Direction and layer of a directed link."""

    GPU_TO_LEAF = "gpu->leaf"
    LEAF_TO_SPINE = "leaf->spine"
    SPINE_TO_LEAF = "spine->leaf"
    LEAF_TO_GPU = "leaf->gpu"


@dataclass(frozen=True, slots=True, kw_only=True, order=True)
class DirectedLink:
    """A directed link named by its leaf end: ``port`` is a down port for access links, an up port
    for leaf–spine links."""

    dir: LinkDir
    leaf: int
    port: int


def default_routing(fabric: Fabric) -> SourceRouting:
    """Source routing with the default leaf map (down port i -> up port i) on uniform wiring.

    Examples
    --------
    >>> f = Fabric(leaves=2, spines=2, servers_per_leaf=2, gpus_per_server=1)
    >>> r = default_routing(f)
    >>> r.uplink[GpuAddr(leaf=1, port=1)]
    1

    References
    ----------
    vClos §5.2 (Source Routing: any one-to-one map f_m per leaf).
    """
    leaves, ups = range(fabric.leaves), range(fabric.up_ports)
    return SourceRouting(
        uplink={GpuAddr(leaf=n, port=p): p for n in leaves for p in range(fabric.down_ports)},
        plane={(n, u): u for n in leaves for u in ups},
        downlink={(u, n): u for n in leaves for u in ups},
    )


def routing_with_leaf_maps(fabric: Fabric, maps: Sequence[Sequence[int]]) -> SourceRouting:
    """Source routing with a given one-to-one map per leaf (``maps[leaf][down port] = up port``).

    Raises
    ------
    InputError
        When a map is not one-to-one or names a port that does not exist.
    """
    if len(maps) != fabric.leaves:
        raise InputError(f"{len(maps)} leaf maps for {fabric.leaves} leaves", where="maps")
    uplink: dict[GpuAddr, int] = {}
    for n, m in enumerate(maps):
        if len(m) != fabric.down_ports or len(set(m)) != len(m):
            raise InputError(
                f"leaf {n} map is not one-to-one over {fabric.down_ports} ports", where=f"maps[{n}]"
            )
        if any(not 0 <= u < fabric.up_ports for u in m):
            raise InputError(
                f"leaf {n} map names a missing up port",
                where=f"maps[{n}]",
                expected=f"ports 0..{fabric.up_ports - 1}",
            )
        uplink.update({GpuAddr(leaf=n, port=p): u for p, u in enumerate(m)})
    base = default_routing(fabric)
    return SourceRouting(uplink=uplink, plane=base.plane, downlink=base.downlink)


def _union(target: dict[K, V], source: Mapping[K, V]) -> None:
    for k, v in source.items():
        if target.get(k, v) != v:
            raise InputError(f"conflicting routing entries for {k!r}", where="merge_routings")
        target[k] = v


def merge_routings(routings: Iterable[SourceRouting]) -> SourceRouting:
    """Union of the routing entries of several jobs (their entries must not conflict)."""
    uplink: dict[GpuAddr, int] = {}
    plane: dict[tuple[int, int], PlaneId] = {}
    down: dict[tuple[PlaneId, int], int] = {}
    down_gpu: dict[tuple[PlaneId, GpuAddr], int] = {}
    for r in routings:
        _union(uplink, r.uplink)
        _union(plane, r.plane)
        _union(down, r.downlink)
        _union(down_gpu, r.downlink_gpu)
    return SourceRouting(uplink=uplink, plane=plane, downlink=down, downlink_gpu=down_gpu)


def route(fabric: Fabric, routing: SourceRouting, flow: Flow) -> tuple[DirectedLink, ...]:
    """The directed links a flow takes under source routing.

    Examples
    --------
    >>> f = Fabric(leaves=2, spines=2, servers_per_leaf=2, gpus_per_server=1)
    >>> fl = Flow(src=GpuAddr(leaf=0, port=1), dst=GpuAddr(leaf=1, port=0))
    >>> [(lk.dir.value, lk.leaf, lk.port) for lk in route(f, default_routing(f), fl)]
    [('gpu->leaf', 0, 1), ('leaf->spine', 0, 1), ('spine->leaf', 1, 1), ('leaf->gpu', 1, 0)]

    References
    ----------
    vClos §5.2, Cases 1 and 2.
    """
    src, dst = flow.src, flow.dst
    t = fabric.gpus_per_server
    if src.leaf == dst.leaf and src.port // t == dst.port // t:
        return ()
    first = DirectedLink(dir=LinkDir.GPU_TO_LEAF, leaf=src.leaf, port=src.port)
    last = DirectedLink(dir=LinkDir.LEAF_TO_GPU, leaf=dst.leaf, port=dst.port)
    if src.leaf == dst.leaf:
        return (first, last)
    try:
        up = routing.uplink[src]
        plane = routing.plane[(src.leaf, up)]
        down = routing.downlink_gpu.get((plane, dst))
        if down is None:
            down = routing.downlink[(plane, dst.leaf)]
    except KeyError as exc:
        raise InputError(
            f"flow {src} -> {dst} is not routable: no entry {exc.args[0]!r}", where="SourceRouting"
        ) from None
    return (
        first,
        DirectedLink(dir=LinkDir.LEAF_TO_SPINE, leaf=src.leaf, port=up),
        DirectedLink(dir=LinkDir.SPINE_TO_LEAF, leaf=dst.leaf, port=down),
        last,
    )


def contended_links(
    fabric: Fabric, routing: SourceRouting, flows: Iterable[Flow]
) -> Mapping[DirectedLink, int]:
    """Directed links that carry two or more of ``flows``, with their flow counts."""
    use = Counter(lk for fl in flows for lk in route(fabric, routing, fl))
    return {lk: c for lk, c in sorted(use.items()) if c > 1}


def is_contention_free(fabric: Fabric, routing: SourceRouting, flows: Iterable[Flow]) -> bool:
    """True when no directed link carries two flows (vClos §5.2).

    Examples
    --------
    >>> f = Fabric(leaves=2, spines=2, servers_per_leaf=2, gpus_per_server=1)
    >>> a, b = GpuAddr(leaf=0, port=0), GpuAddr(leaf=1, port=0)
    >>> is_contention_free(f, default_routing(f), [Flow(src=a, dst=b), Flow(src=b, dst=a)])
    True
    """
    return not contended_links(fabric, routing, flows)


def is_leaf_wise_permutation(flows: Sequence[Flow]) -> bool:
    """Definition 1: a (partial) permutation whose cross-leaf flows into any one leaf all come from
    one source leaf.

    Every GPU sends at most one flow and receives at most one; and if two cross-leaf flows leave from
    different leaves they arrive at different leaves (the condition the proof of Lemma 5.1 uses). By
    Lemma 5.1 such a pattern is contention-free under *every* source routing with uniform planes.

    Examples
    --------
    >>> g = [GpuAddr(leaf=n, port=0) for n in range(3)]
    >>> ring = [Flow(src=g[i], dst=g[(i + 1) % 3]) for i in range(3)]
    >>> is_leaf_wise_permutation(ring)
    True
    >>> is_leaf_wise_permutation([Flow(src=g[0], dst=g[2]), Flow(src=g[1], dst=GpuAddr(leaf=2, port=1))])
    False

    References
    ----------
    vClos §5.2, Definition 1 and Lemma 5.1.
    """
    srcs = [f.src for f in flows]
    dsts = [f.dst for f in flows]
    if len(set(srcs)) != len(srcs) or len(set(dsts)) != len(dsts):
        return False
    into: defaultdict[int, set[int]] = defaultdict(set)
    for f in flows:
        if f.src.leaf != f.dst.leaf:
            into[f.dst.leaf].add(f.src.leaf)
    return all(len(s) == 1 for s in into.values())
