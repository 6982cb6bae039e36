"""How a topology becomes namespaces, veth pairs and addresses (pure: no system calls).

Mapping
-------
* Every host is one network namespace ``{name}-{host}`` holding all its NICs; every switch (ToR/leaf,
  Agg/spine, core) is a router namespace ``{name}-{switch}``. OCS circuit nodes get no namespace: a
  circuit is a plain veth pair between its leaf and its spine (light is not packet-switched).
* Every cable (two directed links, one each way) is one veth pair; both ends are called ``c{k}``
  (``k`` the cable index) inside their own namespaces, so names never clash and stay short.
* A NIC's interface carries the topology's NIC address as ``/32``; a router interface carries
  ``100.64.0.0 + end`` as ``/32`` (``end = 2 k + side``). Next hops are ``onlink`` with static
  neighbour entries, so no ARP or IPv6 packet ever appears on a link.
* The egress of directed link ``l`` is the interface at its source end; its transmitted bytes are the
  link's load. A circuit's two links (leaf->circuit, circuit->spine) share the leaf's interface.
* Intra-host links (NVLink, PCIe) are not emulated: they have no interface.
"""

from __future__ import annotations

import ipaddress
import re
from collections import defaultdict
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.topology import LinkId, LinkKind, NodeId, NodeKind, Topology

ROUTER_KINDS = frozenset({NodeKind.TOR, NodeKind.AGG, NodeKind.CORE})
ROUTER_NET = int(ipaddress.IPv4Address("100.64.0.0"))
NAME_RE = re.compile(r"^[a-z][a-z0-9]{0,15}$")


def check_name(name: str) -> str:
    """A testbed name: 1-16 lower-case letters and digits, starting with a letter."""
    if not NAME_RE.match(name):
        raise InputError(f"bad testbed name {name!r}", where="--name", expected="[a-z][a-z0-9]{0,15}")
    return name


@dataclass(frozen=True, slots=True, kw_only=True)
class End:
    """One end of a cable: the namespace node, its interface, address and MAC."""

    node: NodeId
    iface: str
    ip: str
    mac: str
    links_out: tuple[LinkId, ...]  # directed topology links whose egress is this interface


@dataclass(frozen=True, slots=True, kw_only=True)
class Cable:
    """A veth pair ``a <-> b`` and the capacity (bits/s, unscaled) of each direction."""

    index: int
    a: End
    b: End
    capacity_bps: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Layout:
    """The namespaces and cables of one testbed built from one topology."""

    name: str
    hosts: tuple[NodeId, ...]  # host ids, one namespace each
    routers: tuple[NodeId, ...]
    cables: tuple[Cable, ...]
    nic_ip: dict[NodeId, str]  # NIC node -> its address
    nic_host: dict[NodeId, NodeId]  # NIC node -> host id

    def netns(self, node: NodeId | str) -> str:
        """The namespace of a host or router node."""
        return f"{self.name}-{node}"

    @property
    def namespaces(self) -> tuple[str, ...]:
        return tuple(self.netns(n) for n in (*self.hosts, *self.routers))

    def nic_cable(self, nic: NodeId) -> Cable:
        """The cable of a NIC (its ``a`` end is the NIC)."""
        for c in self.cables:
            if c.a.node == nic:
                return c
        raise InputError(f"{nic!r} has no cable in testbed {self.name!r}", where="nic")

    def node_ns(self, end: End) -> str:
        """The namespace an end lives in (a NIC end lives in its host's namespace)."""
        return self.netns(self.nic_host.get(end.node, end.node))

    def egress(self) -> dict[LinkId, tuple[str, str]]:
        """Directed link id -> (namespace, interface) whose transmitted bytes are the link's load."""
        out: dict[LinkId, tuple[str, str]] = {}
        for c in self.cables:
            for e in (c.a, c.b):
                for lk in e.links_out:
                    out[lk] = (self.node_ns(e), e.iface)
        return out


def _ip(value: int) -> str:
    return str(ipaddress.IPv4Address(value))


def _mac(end: int) -> str:
    b = end.to_bytes(4, "big")
    return "02:c5:" + ":".join(f"{x:02x}" for x in b)


def _contract(topo: Topology) -> list[tuple[NodeId, NodeId, tuple[LinkId, ...]]]:
    """Directed network "wires" between router/NIC nodes; an OCS circuit joins its two links."""
    kinds = {n.id: n.kind for n in topo.nodes}
    wires: list[tuple[NodeId, NodeId, tuple[LinkId, ...]]] = []
    for lk in topo.links:
        if lk.kind not in (LinkKind.ACCESS, LinkKind.FABRIC):
            continue
        if kinds[lk.src] is NodeKind.OCS:
            continue
        if kinds[lk.dst] is NodeKind.OCS:
            nxt = [x for x in topo.out_links(lk.dst) if x.dst != lk.src]
            if len(nxt) != 1:
                raise InputError(f"OCS circuit {lk.dst!r} is not a single circuit", where="topology")
            wires.append((lk.src, nxt[0].dst, (lk.id, nxt[0].id)))
        else:
            wires.append((lk.src, lk.dst, (lk.id,)))
    return wires


def plan_layout(topo: Topology, name: str) -> Layout:
    """The namespaces, cables and addresses of a testbed for ``topo``.

    Examples
    --------
    >>> from commsched.topology import two_layer_clos
    >>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=1, host_template="single_gpu_nic")
    >>> lay = plan_layout(topo, "t")
    >>> lay.namespaces
    ('t-h0', 't-h1', 't-tor0', 't-tor1', 't-agg0', 't-agg1')
    >>> [(c.a.node, c.b.node, c.a.iface) for c in lay.cables[:3]]
    [('h0/nic0', 'tor0', 'c0'), ('h1/nic0', 'tor1', 'c1'), ('tor0', 'agg0', 'c2')]
    """
    check_name(name)
    nic_host, nic_ip = _nic_addresses(topo)
    cables = _cables(topo, _paired_wires(topo), nic_ip)
    per_nic: dict[NodeId, int] = defaultdict(int)
    for c in cables:
        if c.a.node in nic_ip:
            per_nic[c.a.node] += 1
    if any(v != 1 for v in per_nic.values()) or len(per_nic) != len(nic_ip):
        raise InputError("a NIC without exactly one cable", where="topology", expected="one cable per NIC")
    routers = tuple(n.id for n in topo.nodes if n.kind in ROUTER_KINDS)
    return Layout(
        name=name,
        hosts=tuple(NodeId(h.id) for h in topo.hosts),
        routers=routers,
        cables=cables,
        nic_ip=nic_ip,
        nic_host=nic_host,
    )


def _nic_addresses(topo: Topology) -> tuple[dict[NodeId, NodeId], dict[NodeId, str]]:
    """Each NIC's host and address (a topology of hosts and switches only)."""
    nic_host: dict[NodeId, NodeId] = {}
    nic_ip: dict[NodeId, str] = {}
    for h in topo.hosts:
        for nic in h.nics:
            ip = topo.node(nic).ip
            if ip is None:
                raise InputError(f"NIC {nic!r} has no address", where="topology")
            nic_host[nic] = NodeId(h.id)
            nic_ip[nic] = _ip(ip)
    for n in topo.nodes:
        if n.kind is NodeKind.ENDPOINT:
            raise InputError(
                f"topology {topo.name!r} has abstract endpoints",
                where="topology",
                expected="a topology with hosts and switches",
            )
    return nic_host, nic_ip


_Pair = tuple[NodeId, NodeId, tuple[LinkId, ...], tuple[LinkId, ...]]


def _paired_wires(topo: Topology) -> list[_Pair]:
    """The wires matched into two-way pairs ``(a, b, links a->b, links b->a)``, by their first link."""
    pending: dict[tuple[NodeId, NodeId], list[tuple[LinkId, ...]]] = defaultdict(list)
    pairs: list[_Pair] = []
    for src, dst, links in _contract(topo):
        back = pending.get((dst, src))
        if back:
            rev = back.pop(0)
            pairs.append((dst, src, rev, links))
        else:
            pending[(src, dst)].append(links)
    if any(pending.values()):
        raise InputError(f"topology {topo.name!r} has a one-way link", where="topology")
    pairs.sort(key=lambda p: p[2][0])
    return pairs


def _cables(topo: Topology, pairs: list[_Pair], nic_ip: dict[NodeId, str]) -> tuple[Cable, ...]:
    """One cable per pair (a NIC's end first), its ends numbered and addressed in order."""
    kinds = {n.id: n.kind for n in topo.nodes}
    cables: list[Cable] = []
    for k, pair in enumerate(pairs):
        a, b, ab, ba = pair
        if kinds[b] is NodeKind.NIC and kinds[a] is not NodeKind.NIC:
            a, b, ab, ba = b, a, ba, ab
        ends = []
        for side, (node, out) in enumerate(((a, ab), (b, ba))):
            e = 2 * k + side
            addr = nic_ip[node] if node in nic_ip else _ip(ROUTER_NET + e)
            ends.append(End(node=node, iface=f"c{k}", ip=addr, mac=_mac(e), links_out=out))
        cap = min(float(topo.capacity_bps[i]) for i in (*ab, *ba))
        cables.append(Cable(index=k, a=ends[0], b=ends[1], capacity_bps=cap))
    return tuple(cables)
