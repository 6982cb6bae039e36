"""The configuration text of every namespace of a routed fabric: sysctls and ``ip -batch`` lines (pure).

Routing (default ``ecmp``): every router holds a ``/32`` route to every NIC with one ``onlink``
next hop per interface that lies on a shortest path (all parallel cables included); the kernel's
multipath hash then picks one per flow. Routers use hash policy 3 with fields ``0x37`` (source and
destination address, protocol, source and destination port) and a per-router seed derived from the
scenario seed, so ``ip route get ... sport S dport D`` predicts the path exactly and the mapping is
the same on every build. A host sends from NIC ``i``'s address through NIC ``i`` (one policy table
per NIC), so the first hop of a connection is fixed by its source address and the source port picks
the rest, as in Crux.

Queues: every egress is HTB with strict-priority leaf classes keyed by DSCP (:mod:`.htb`, the one
module that writes HTB rules).
"""

from __future__ import annotations

import hashlib
from collections import defaultdict, deque
from collections.abc import Mapping

from commsched.testbed.layout import End, Layout
from commsched.topology import NodeId

NIC_TABLE_BASE = 100
PIN_TABLE_BASE = 1000


#: settings newer kernels have (hash seed: 6.11, reflected TOS: 5.10); without them the testbed still
#: works: the prober asks the routers, so paths stay exact, only their mapping changes between builds
OPTIONAL_SYSCTLS = frozenset({"net.ipv4.fib_multipath_hash_seed", "net.ipv4.tcp_reflect_tos"})


def router_seed(seed: int, node: NodeId) -> int:
    """The multipath hash seed of one router: a stable 31-bit digest of the scenario seed and its id."""
    digest = hashlib.sha256(f"{seed}/{node}".encode()).digest()
    return int.from_bytes(digest[:4], "big") & 0x7FFFFFFF or 1


def router_sysctls(seed: int, node: NodeId) -> dict[str, str]:
    """Forwarding, no reverse-path filter, L4 multipath hash on 5 fields, fixed seed, no IPv6."""
    return {
        "net.ipv6.conf.all.disable_ipv6": "1",
        "net.ipv6.conf.default.disable_ipv6": "1",
        "net.ipv4.ip_forward": "1",
        "net.ipv4.conf.all.rp_filter": "0",
        "net.ipv4.conf.default.rp_filter": "0",
        "net.ipv4.fib_multipath_hash_policy": "3",
        "net.ipv4.fib_multipath_hash_fields": "0x37",
        "net.ipv4.fib_multipath_hash_seed": str(router_seed(seed, node)),
    }


def host_sysctls() -> dict[str, str]:
    """No IPv6, no reverse-path filter, replies carry the DSCP of the request (``tcp_reflect_tos``)."""
    return {
        "net.ipv6.conf.all.disable_ipv6": "1",
        "net.ipv6.conf.default.disable_ipv6": "1",
        "net.ipv4.conf.all.rp_filter": "0",
        "net.ipv4.conf.default.rp_filter": "0",
        "net.ipv4.tcp_reflect_tos": "1",
    }


def veth_lines(layout: Layout) -> list[str]:
    """``ip -batch`` lines (root namespace) creating every veth pair directly in its two namespaces."""
    return [
        f"link add {c.a.iface} netns {layout.node_ns(c.a)} address {c.a.mac} type veth "
        f"peer name {c.b.iface} netns {layout.node_ns(c.b)} address {c.b.mac}"
        for c in layout.cables
    ]


def _ends_by_ns(layout: Layout) -> dict[str, list[tuple[End, End]]]:
    """Namespace -> its (own end, peer end) pairs."""
    out: dict[str, list[tuple[End, End]]] = defaultdict(list)
    for c in layout.cables:
        out[layout.node_ns(c.a)].append((c.a, c.b))
        out[layout.node_ns(c.b)].append((c.b, c.a))
    return out


def _interface_lines(pairs: list[tuple[End, End]]) -> list[str]:
    lines = ["link set lo up"]
    for own, peer in pairs:
        lines += [
            f"addr add {own.ip}/32 dev {own.iface}",
            f"link set {own.iface} up",
            f"neigh replace {peer.ip} lladdr {peer.mac} dev {own.iface} nud permanent",
        ]
    return lines


def _next_hops(layout: Layout) -> dict[NodeId, dict[NodeId, list[End]]]:
    """Router -> destination NIC -> its own ends on a shortest path (ECMP next hops)."""
    nics = set(layout.nic_ip)
    adj: dict[NodeId, list[tuple[End, End]]] = defaultdict(list)
    for c in layout.cables:
        adj[c.a.node].append((c.a, c.b))
        adj[c.b.node].append((c.b, c.a))
    out: dict[NodeId, dict[NodeId, list[End]]] = {r: {} for r in layout.routers}
    for nic in sorted(nics):
        dist: dict[NodeId, int] = {nic: 0}
        queue: deque[NodeId] = deque([nic])
        while queue:
            v = queue.popleft()
            for _, peer in adj[v]:
                if peer.node not in dist and peer.node not in nics:
                    dist[peer.node] = dist[v] + 1
                    queue.append(peer.node)
        for r in layout.routers:
            if r not in dist:
                continue
            out[r][nic] = [own for own, peer in adj[r] if dist.get(peer.node) == dist[r] - 1]
    return out


def _hop(own: End, peer_ip: str) -> str:
    return f"via {peer_ip} dev {own.iface} onlink"


def interface_ip_lines(layout: Layout) -> dict[str, list[str]]:
    """Namespace -> ``ip -batch`` lines bringing up its interfaces with addresses and static neighbours."""
    return {ns: _interface_lines(pairs) for ns, pairs in _ends_by_ns(layout).items()}


def _peer_ips(layout: Layout) -> dict[tuple[NodeId, str], str]:
    return {(own.node, own.iface): peer.ip for pairs in _ends_by_ns(layout).values() for own, peer in pairs}


def host_route_lines(layout: Layout) -> dict[str, list[str]]:
    """Host namespace -> lines sending NIC ``i``'s traffic through NIC ``i`` (policy table per NIC)."""
    ends = _ends_by_ns(layout)
    peer_ip = _peer_ips(layout)
    out: dict[str, list[str]] = {}
    for host in layout.hosts:
        ns = layout.netns(host)
        lines: list[str] = []
        nics = [own for own, _ in ends.get(ns, []) if own.node in layout.nic_ip]
        for i, own in enumerate(nics):
            hop = _hop(own, peer_ip[(own.node, own.iface)])
            table = NIC_TABLE_BASE + i
            lines += [
                f"route add default {hop} src {own.ip} table {table}",
                f"rule add pref {table} from {own.ip} lookup {table}",
            ]
            if i == 0:
                lines.append(f"route add default {hop} src {own.ip}")
        out[ns] = lines
    return out


def router_route_lines(layout: Layout, *, verb: str = "add") -> dict[str, list[str]]:
    """Router namespace -> one ``/32`` route per NIC with every shortest-path next hop (ECMP)."""
    peer_ip = _peer_ips(layout)
    out: dict[str, list[str]] = {}
    for router, dests in _next_hops(layout).items():
        lines: list[str] = []
        for nic, hops in dests.items():
            parts = [_hop(h, peer_ip[(h.node, h.iface)]) for h in hops]
            dst = layout.nic_ip[nic]
            if len(parts) == 1:
                lines.append(f"route {verb} {dst}/32 {parts[0]}")
            else:
                lines.append(f"route {verb} {dst}/32 " + " ".join(f"nexthop {p}" for p in parts))
        out[layout.netns(router)] = lines
    return out


def namespace_ip_lines(layout: Layout) -> dict[str, list[str]]:
    """Namespace -> every ``ip -batch`` line of a fresh build: interfaces, host policy, ECMP routes."""
    out = interface_ip_lines(layout)
    for part in (host_route_lines(layout), router_route_lines(layout)):
        for ns, lines in part.items():
            out.setdefault(ns, []).extend(lines)
    return out


def seed_map(layout: Layout, seed: int) -> Mapping[str, int]:
    """Namespace -> multipath hash seed of every router (for ``status``)."""
    return {layout.netns(r): router_seed(seed, r) for r in layout.routers}
