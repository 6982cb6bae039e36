"""The physical cluster: nodes, directed links, builders, equal-cost paths and ECMP hashing.

Public API (see each module): records (:mod:`.records`), the :class:`Topology` owner (:mod:`.graph`),
host templates (:mod:`.hosts`), builders and ``build_topology`` (:mod:`.builders`), ECMP hashing
(:mod:`.hashes`, :mod:`.ecmp`) and summaries (:mod:`.summary`).
"""

from commsched.topology.builders import (
    build_topology,
    crux_testbed,
    leaf_spine,
    load_lingjun_topo,
    single_link,
    three_layer_double_sided,
    topology_builders,
    two_layer_clos,
)
from commsched.topology.ecmp import (
    FiveTuple,
    ecmp_path_index,
    ecmp_path_indices,
    path_for_port,
    port_for_path,
    source_port_for_path,
)
from commsched.topology.graph import Topology
from commsched.topology.hashes import hash_functions
from commsched.topology.hosts import HostTemplate, host_templates
from commsched.topology.records import Host, HostId, Link, LinkId, LinkKind, Node, NodeId, NodeKind, Path
from commsched.topology.summary import oversubscription, summarize

__all__ = [
    "FiveTuple",
    "Host",
    "HostId",
    "HostTemplate",
    "Link",
    "LinkId",
    "LinkKind",
    "Node",
    "NodeId",
    "NodeKind",
    "Path",
    "Topology",
    "build_topology",
    "crux_testbed",
    "ecmp_path_index",
    "ecmp_path_indices",
    "hash_functions",
    "host_templates",
    "leaf_spine",
    "load_lingjun_topo",
    "oversubscription",
    "path_for_port",
    "port_for_path",
    "single_link",
    "source_port_for_path",
    "summarize",
    "three_layer_double_sided",
    "topology_builders",
    "two_layer_clos",
]
