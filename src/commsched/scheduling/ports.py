"""Routes from ports and ports for routes: plain source routing, and the source ports that pin a path.

:func:`source_routes` is the vClos-style baseline (a NIC's downlink port picks its equal-cost path);
:func:`connection_ports` turns routes into the RoCEv2 UDP source ports that make the switches' ECMP hash
send each connection along its chosen path (the runtime and ``commsched plan`` use it).

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §5.2-5.3 (source ports); crux-spec §5.2, §5.3.
.. [2] vClos (source routing with a fixed port mapping), commsched.scheduling.vclos.routing.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType

from commsched.scheduling.paths import PathTable, job_flows
from commsched.scheduling.routing import network_pair
from commsched.scheduling.state import ClusterState, ConnectionKey
from commsched.topology import NodeId, NodeKind, Topology
from commsched.topology.ecmp import port_for_path

__all__ = ["connection_ports", "source_routes"]


def _downlink_ports(topology: Topology) -> dict[NodeId, int]:
    """Each NIC's port number on its (first) ToR: its position among the ToR's NIC-facing links."""
    ports: dict[NodeId, int] = {}
    for tor in topology.nodes_of_kind(NodeKind.TOR):
        k = 0
        for lk in topology.out_links(tor.id):
            if topology.node(lk.dst).kind is NodeKind.NIC and lk.dst not in ports:
                ports[lk.dst] = k
                k += 1
    return ports


def source_routes(state: ClusterState) -> MappingProxyType[ConnectionKey, int]:
    """Plain source routing with a fixed port mapping (vClos-style): path = source NIC port mod paths.

    The source NIC's downlink port number ``p`` on its ToR picks equal-cost path ``p mod n`` (the
    default leaf map "down port i -> up port i" of vClos §5.2, on the canonical path order),
    whatever else runs.

    References
    ----------
    vClos §5.2 (source routing); crux-spec §2 (baseline list of the issue).
    """
    topo = state.topology
    ports = _downlink_ports(topo)
    table = PathTable(topo)
    out: dict[ConnectionKey, int] = {}
    for job in state.jobs:
        for f in job_flows(table, job):
            pair = network_pair(topo, f.keys[0])
            src_nic = NodeId(pair[0]) if pair is not None else topo.nic_of(f.keys[0].src)
            choice = ports.get(src_nic, 0) % f.candidates.shape[0]
            out.update(dict.fromkeys(f.keys, choice))
    return MappingProxyType(out)


def connection_ports(
    topology: Topology, routes: Mapping[ConnectionKey, int], *, hash_name: str = "murmur3"
) -> dict[ConnectionKey, int]:
    """The RoCEv2 source port that makes the ECMP hash send each routed connection along its path.

    Only inter-host connections get a port. Ports are computed once per (NIC pair, path).

    References
    ----------
    Crux §5.2-5.3 (path pinned through the UDP source port); crux-spec §5.2, §5.3.
    """
    cache: dict[tuple[NodeId, NodeId, int], int] = {}
    out: dict[ConnectionKey, int] = {}
    for key, index in routes.items():
        pair = network_pair(topology, key)
        if pair is None:
            continue
        src, dst = NodeId(pair[0]), NodeId(pair[1])
        n = len(topology.equal_cost_paths(src, dst))
        ck = (src, dst, index % n)
        if ck not in cache:
            cache[ck] = port_for_path(topology, src, dst, index % n, hash_name)
        out[key] = cache[ck]
    return out
