"""The physical cluster: nodes, directed links, builders, equal-cost paths and ECMP hashing."""

from commsched.topology.graph import Topology
from commsched.topology.records import Host, HostId, Link, LinkId, LinkKind, Node, NodeId, NodeKind, Path

__all__ = ["Host", "HostId", "Link", "LinkId", "LinkKind", "Node", "NodeId", "NodeKind", "Path", "Topology"]
