"""Every link of every equal-cost path, found from the topology's links alone (a reference for tests).

A job's *reach* is every link its traffic could take under any route decision. This module does not
ask the path code which paths exist: it runs a breadth-first search over the topology's directed links
(from the source NIC forwards, from the destination NIC backwards, through switches only) and keeps
every link that lies on *some* shortest path, that is every link of every equal-cost path between the
two NICs of each of a job's inter-host connections. The links of the routes taken by default (route 0,
which include the links inside the hosts) come from the job's traffic. Groups of jobs whose reaches meet
are found by merging until nothing changes.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Mapping
from typing import TypeVar

from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import job_connections, job_traffic
from commsched.topology import NodeId, NodeKind, Topology

SWITCHES = frozenset({NodeKind.TOR, NodeKind.AGG, NodeKind.CORE, NodeKind.OCS})

K = TypeVar("K", bound=Hashable)


def _hops(topo: Topology, start: NodeId, *, forward: bool) -> dict[NodeId, int]:
    """Hop counts from ``start`` (or to it, ``forward=False``) along links whose inner ends are switches."""
    adjacent: dict[NodeId, list[NodeId]] = {}
    for lk in topo.links:
        a, b = (lk.src, lk.dst) if forward else (lk.dst, lk.src)
        adjacent.setdefault(a, []).append(b)
    hops = {start: 0}
    queue = deque([start])
    while queue:
        u = queue.popleft()
        if u != start and topo.node(u).kind not in SWITCHES:
            continue  # a path enters no host but its end
        for v in adjacent.get(u, []):
            if v not in hops:
                hops[v] = hops[u] + 1
                queue.append(v)
    return hops


def shortest_path_links(topo: Topology, src: NodeId, dst: NodeId) -> set[int]:
    """Every link of every shortest ``src -> dst`` network path (inner nodes switches), by two searches."""
    ahead, behind = _hops(topo, src, forward=True), _hops(topo, dst, forward=False)
    length = ahead[dst]

    def inner(node: NodeId, end: NodeId) -> bool:
        return node == end or topo.node(node).kind in SWITCHES

    return {
        lk.id
        for lk in topo.links
        if lk.src in ahead
        and lk.dst in behind
        and ahead[lk.src] + 1 + behind[lk.dst] == length
        and inner(lk.src, src)
        and inner(lk.dst, dst)
    }


def reference_reach(topo: Topology, job: PlacedJob) -> set[int]:
    """The default routes' links plus every link of every equal-cost path of each inter-host connection."""
    out = set(job_traffic(topo, job).link_ids.tolist())
    for key in job_connections(topo, job):
        if topo.host_of(key.src).id != topo.host_of(key.dst).id:
            out |= shortest_path_links(topo, topo.nic_of(key.src), topo.nic_of(key.dst))
    return out


def merged_groups(reach: Mapping[K, set[int]]) -> list[set[K]]:
    """Connected groups of jobs whose link sets meet, by repeated merging."""
    groups = [({j}, set(links)) for j, links in reach.items()]
    merged = True
    while merged:
        merged = False
        for a in range(len(groups)):
            for b in range(a + 1, len(groups)):
                if groups[a][1] & groups[b][1]:
                    groups[a] = (groups[a][0] | groups[b][0], groups[a][1] | groups[b][1])
                    del groups[b]
                    merged = True
                    break
            if merged:
                break
    return [g for g, _ in groups]
