"""Pinned paths: ``source-routing`` (vClos, one path per NIC pair) and ``pinned`` (per connection).

A :class:`Pin` names a path by the scheduling layer's link ids. On every router of the path a
policy rule (``ip rule from SRC to DST [ipproto tcp sport S dport D] lookup T``) sends the matching
packets to a table ``T`` that holds a single default route out of the path's next interface, the
ACL-style rules of the vClos paper (§5.2). Rules with ports (one connection) come before rules
without (a NIC pair), and both before the ECMP routes of the main table.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from commsched.errors import InputError
from commsched.testbed.config import PIN_TABLE_BASE
from commsched.testbed.layout import Layout
from commsched.topology import LinkId, NodeId, Topology

PREF_CONNECTION = 200
PREF_PAIR = 300


@dataclass(frozen=True, slots=True, kw_only=True)
class Pin:
    """One pinned path: NIC ``src`` -> NIC ``dst`` over ``links``; ports given pin one TCP connection."""

    src: NodeId
    dst: NodeId
    links: tuple[LinkId, ...]
    sport: int | None = None
    dport: int | None = None

    def to_json(self) -> dict[str, Any]:
        return {
            "src": self.src,
            "dst": self.dst,
            "links": list(self.links),
            "sport": self.sport,
            "dport": self.dport,
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> Pin:
        return Pin(
            src=NodeId(str(data["src"])),
            dst=NodeId(str(data["dst"])),
            links=tuple(LinkId(int(x)) for x in data["links"]),
            sport=None if data.get("sport") is None else int(data["sport"]),
            dport=None if data.get("dport") is None else int(data["dport"]),
        )


def check_pin(topo: Topology, pin: Pin, where: str) -> None:
    """A pin's links must be one of the equal-cost paths between its NICs."""
    paths = {p.links for p in topo.equal_cost_paths(pin.src, pin.dst)}
    if pin.links not in paths:
        raise InputError(
            f"links {list(pin.links)} are not an equal-cost path {pin.src} -> {pin.dst}",
            where=where,
            expected="a path of the scheduling layer",
        )


def _match(layout: Layout, pin: Pin) -> tuple[int, str]:
    """The rule preference and selector of a pin."""
    match = f"from {layout.nic_ip[pin.src]} to {layout.nic_ip[pin.dst]}"
    if pin.sport is None and pin.dport is None:
        return PREF_PAIR, match
    match += " ipproto tcp"
    match += "" if pin.sport is None else f" sport {pin.sport}"
    match += "" if pin.dport is None else f" dport {pin.dport}"
    return PREF_CONNECTION, match


def _hops(layout: Layout, pin: Pin, egress: Mapping[LinkId, tuple[str, str]]) -> list[tuple[str, str]]:
    """The (router namespace, interface) egresses of a pin's path, in order (hosts excluded)."""
    hosts = {layout.netns(h) for h in layout.hosts}
    hops: list[tuple[str, str]] = []
    for lk in pin.links:
        hop = egress[lk]
        if hop[0] not in hosts and (not hops or hops[-1] != hop):
            hops.append(hop)
    return hops


def pin_lines(layout: Layout, pins: list[Pin]) -> dict[str, list[str]]:
    """Router namespace -> ``ip -batch`` lines: one table per used interface, one rule per pin and hop."""
    egress = layout.egress()
    peer: dict[tuple[str, str], str] = {}
    index: dict[tuple[str, str], int] = {}
    for c in layout.cables:
        peer[(layout.node_ns(c.a), c.a.iface)] = c.b.ip
        peer[(layout.node_ns(c.b), c.b.iface)] = c.a.ip
        index[(layout.node_ns(c.a), c.a.iface)] = index[(layout.node_ns(c.b), c.b.iface)] = c.index
    tables: dict[str, set[str]] = defaultdict(set)
    rules: dict[str, list[str]] = defaultdict(list)
    for pin in pins:
        pref, match = _match(layout, pin)
        for ns, iface in _hops(layout, pin, egress):
            table = PIN_TABLE_BASE + index[(ns, iface)]
            tables[ns].add(f"route replace default via {peer[(ns, iface)]} dev {iface} onlink table {table}")
            rules[ns].append(f"rule add pref {pref} {match} lookup {table}")
    return {ns: sorted(tables[ns]) + rules[ns] for ns in rules}


@dataclass(frozen=True, slots=True, kw_only=True)
class PlannedPath:
    """A plan connection that crosses the network: its NIC pair and the links of its path."""

    index: int  # position in the plan's ``connections``
    job: str
    src: NodeId
    dst: NodeId
    links: tuple[LinkId, ...]
    src_port: int | None


def plan_paths(topo: Topology, plan: Mapping[str, Any], *, where: str = "plan") -> list[PlannedPath]:
    """The network paths of ``commsched plan --json`` output, one per connection between hosts.

    A connection's ``path`` (node ids, GPU to GPU) gives its NIC-to-NIC links. A plan names nodes,
    not cables: where parallel cables join two switches, the path with the lowest link ids among those
    visiting the same nodes is taken.
    """
    conns = plan.get("connections")
    if not isinstance(conns, list):
        raise InputError("no connections list", where=where, expected="the output of 'commsched plan --json'")
    nic_ids = _nic_ids(topo)
    out: list[PlannedPath] = []
    for i, c in enumerate(conns):
        nodes = [NodeId(str(n)) for n in c.get("path", ())]
        nics = [k for k, n in enumerate(nodes) if n in nic_ids]
        if len(nics) < 2 or topo.node(nodes[nics[0]]).host == topo.node(nodes[nics[-1]]).host:
            continue
        seg = tuple(nodes[nics[0] : nics[-1] + 1])
        match = [p for p in topo.equal_cost_paths(seg[0], seg[-1]) if p.nodes == seg]
        if not match:
            raise InputError(
                f"path {list(seg)} is not an equal-cost path", where=f"{where}: connections[{i}]"
            )
        sport = c.get("src_port")
        out.append(
            PlannedPath(
                index=i,
                job=str(c.get("job", "")),
                src=seg[0],
                dst=seg[-1],
                links=match[0].links,
                src_port=None if sport is None else int(sport),
            )
        )
    return out


def pins_from_plan(topo: Topology, plan: Mapping[str, Any], *, where: str = "plan") -> list[Pin]:
    """Pins from ``commsched plan --json`` output (:func:`plan_paths`): with a ``src_port`` a pin
    matches that TCP source port (one connection), otherwise the whole NIC pair."""
    pins: list[Pin] = []
    seen: set[tuple[NodeId, NodeId, int | None]] = set()
    for pp in plan_paths(topo, plan, where=where):
        key = (pp.src, pp.dst, pp.src_port)
        if key not in seen:
            seen.add(key)
            pins.append(Pin(src=pp.src, dst=pp.dst, links=pp.links, sport=pp.src_port))
    return pins


def _nic_ids(topo: Topology) -> frozenset[NodeId]:
    return frozenset(n for h in topo.hosts for n in h.nics)


def source_routing_pins(topo: Topology) -> list[Pin]:
    """vClos source routing (default leaf map: down port ``i`` -> up port ``i``) as one pin per NIC pair.

    Every GPU has its own NIC (the vClos host); the path of a GPU pair under different leaves is the
    equal-cost path through the up fibre and the destination leaf's down fibre that
    :func:`commsched.scheduling.vclos.routing.route` names.

    References
    ----------
    vClos §5.2 (source routing, ACL rules on the leaves).
    """
    from commsched.scheduling.vclos.fabric import Flow
    from commsched.scheduling.vclos.routing import LinkDir, default_routing, route
    from commsched.scheduling.vclos.wiring import wiring_of

    wiring = wiring_of(topo)
    fabric = wiring.fabric
    routing = default_routing(fabric)
    up = fabric.up_ports
    pins: list[Pin] = []
    addrs = sorted(wiring.view.gpu_ids.items(), key=lambda kv: (kv[0].leaf, kv[0].port))
    for sa, sg in addrs:
        for da, dg in addrs:
            if sa.leaf == da.leaf:
                continue
            links = route(fabric, routing, Flow(src=sa, dst=da))
            need: set[LinkId] = set()
            for dl in links:
                if dl.dir is LinkDir.LEAF_TO_SPINE:
                    need.add(wiring.leaf_fibre[dl.leaf * up + dl.port][0])
                elif dl.dir is LinkDir.SPINE_TO_LEAF:
                    need.add(wiring.leaf_fibre[dl.leaf * up + dl.port][1])
            snic, dnic = topo.nic_of(sg), topo.nic_of(dg)
            match = [p for p in topo.equal_cost_paths(snic, dnic) if need <= set(p.links)]
            if len(match) != 1:
                raise InputError(
                    f"no unique path for {snic} -> {dnic} under source routing", where="topology"
                )
            pins.append(Pin(src=snic, dst=dnic, links=match[0].links))
    return pins
