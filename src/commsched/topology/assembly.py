"""Incremental assembly of a :class:`Topology`: nodes, duplex cables and stamped-out hosts.

Builders use one :class:`Assembler` each; link ids are given in creation order, which fixes the
canonical order of equal-cost paths (see :mod:`commsched.topology.paths`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from commsched.errors import TopologyError
from commsched.topology.graph import Topology
from commsched.topology.hosts import HostTemplate
from commsched.topology.records import Host, HostId, Link, LinkId, LinkKind, Node, NodeId, NodeKind


@dataclass(frozen=True, slots=True, kw_only=True)
class CableSpec:
    """Speed and latency of a duplex cable (each direction gets ``capacity_bps``)."""

    capacity_bps: float
    latency_s: float = 0.0


def nic_ip(host_index: int, nic_index: int) -> int:
    """IPv4 address (as an int) of NIC ``nic_index`` of host ``host_index``: ``10.{h//256}.{h%256}.{n+1}``.

    Examples
    --------
    >>> import ipaddress
    >>> str(ipaddress.IPv4Address(nic_ip(300, 2)))
    '10.1.44.3'
    """
    if not (0 <= host_index < 65536 and 0 <= nic_index < 255):
        raise TopologyError(f"no IPv4 address scheme for host {host_index} NIC {nic_index}")
    return (10 << 24) | (host_index << 8) | (nic_index + 1)


class Assembler:
    """Collects nodes, links and hosts, then freezes them into a :class:`Topology`.

    Examples
    --------
    >>> asm = Assembler("demo")
    >>> a = asm.node("a", NodeKind.ENDPOINT)
    >>> b = asm.node("b", NodeKind.ENDPOINT)
    >>> asm.cable(a, b, CableSpec(capacity_bps=1e9), LinkKind.ABSTRACT)
    >>> asm.finish({}).links[1].src
    'b'
    """

    def __init__(self, name: str) -> None:
        self.name = name
        self._nodes: list[Node] = []
        self._links: list[Link] = []
        self._hosts: list[Host] = []

    def node(
        self, node_id: str, kind: NodeKind, *, host: HostId | None = None, ip: int | None = None
    ) -> NodeId:
        nid = NodeId(node_id)
        self._nodes.append(Node(id=nid, kind=kind, host=host, ip=ip))
        return nid

    def switches(self, prefix: str, n: int, kind: NodeKind) -> list[NodeId]:
        """``n`` switches ``{prefix}0 .. {prefix}{n-1}`` of ``kind``."""
        return [self.node(f"{prefix}{i}", kind) for i in range(n)]

    def mesh(self, lower: Sequence[NodeId], upper: Sequence[NodeId], parallel: int, spec: CableSpec) -> None:
        """``parallel`` fabric cables from every ``lower`` to every ``upper`` switch (lower-major order)."""
        for lo in lower:
            for up in upper:
                for _ in range(parallel):
                    self.cable(lo, up, spec, LinkKind.FABRIC)

    def cable(self, a: NodeId, b: NodeId, spec: CableSpec, kind: LinkKind) -> None:
        """A full-duplex cable: link ``a -> b`` then link ``b -> a``."""
        for src, dst in ((a, b), (b, a)):
            self._links.append(
                Link(
                    id=LinkId(len(self._links)),
                    src=src,
                    dst=dst,
                    capacity_bps=spec.capacity_bps,
                    latency_s=spec.latency_s,
                    kind=kind,
                )
            )

    def host(
        self,
        template: HostTemplate,
        index: int,
        uplinks: Sequence[Sequence[NodeId]],
        spec: CableSpec,
        label: str = "",
    ) -> Host:
        """Stamp out host ``h{index}``; ``uplinks[k]`` lists the switches NIC ``k`` is cabled to."""
        if len(uplinks) != template.n_nics:
            raise TopologyError(f"host h{index}: {len(uplinks)} NIC uplink lists for {template.n_nics} NICs")
        hid = HostId(f"h{index}")
        nic_index = {n: k for k, n in enumerate(template.nics)}
        ids = {}
        for part in template.parts:
            ip = nic_ip(index, nic_index[part.name]) if part.name in nic_index else None
            ids[part.name] = self.node(f"{hid}/{part.name}", part.kind, host=hid, ip=ip)
        for w in template.wires:
            self.cable(ids[w.a], ids[w.b], CableSpec(capacity_bps=w.capacity_bps), w.kind)
        for k, switches in enumerate(uplinks):
            for sw in switches:
                self.cable(ids[template.nics[k]], sw, spec, LinkKind.ACCESS)
        host = Host(
            id=hid,
            template=template.name,
            gpus=tuple(ids[g] for g in template.gpus),
            nics=tuple(ids[n] for n in template.nics),
            gpu_nic=tuple(ids[n] for n in template.gpu_nic),
            tors=tuple(dict.fromkeys(sw for sws in uplinks for sw in sws)),
            label=label,
        )
        self._hosts.append(host)
        return host

    def finish(self, params: dict[str, object]) -> Topology:
        return Topology(
            name=self.name, nodes=self._nodes, links=self._links, hosts=self._hosts, params=params
        )
