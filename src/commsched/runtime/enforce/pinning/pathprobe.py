"""Which path a 5-tuple takes, learned from TTL probes and the topology (the probing oracle's logic).

The topology gives every equal-cost path of a NIC pair as the routers it crosses (hop 1 = the
source's ToR; OCS circuits do not count a hop). A probe expiring at hop ``k`` names the ``k``-th
router; :class:`PathProbing` probes each tuple only at the hops where its candidate paths differ
(on a two-layer Clos: hop 2, the Agg), level by level, until one path is left.

**Misses.** Routers answer at most a burst of 6 probes per source address, then one a second
(:class:`~.probe.IcmpBudget` keeps the buckets). A miss is *clean* when every router the
probe may have met answered fewer probes in its round than the bucket model gave it: none ran
dry, so the probe met a router that does not answer at all. A router that never answered
though :attr:`ProbeSettings.silent_after` answers were expected of it is *silent*; a tuple
missed cleanly twice at a hop with one silent candidate is inferred to cross it. Otherwise the tuple stays
unresolved (and is said to be).

**Port search** (:meth:`PathProbing.find`): candidate source ports from 20000 up, probed in rounds
sized to half the answers the routers still owe (a fresh source address: 24 on an 8-Agg fabric);
a port whose path is the decided one is kept. What a port does is cached per ``(src, dst, dport)``
for :attr:`ProbeSettings.refresh_s` (a new decision for the same key reuses it without a probe).
The search stops at ``want`` ports, or after :attr:`ProbeSettings.hold_s` with at least one port,
or gives up after :attr:`ProbeSettings.max_s`.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from commsched.runtime.enforce.pinning.probe import IcmpBudget, Probe
from commsched.topology import NodeId, NodeKind, Topology

__all__ = ["FabricMap", "PathProbing", "ProbeSettings", "Route", "Traced"]

PORT_BASE = 20000
PORT_LIMIT = 32767
ROUTER_KINDS = frozenset({NodeKind.TOR, NodeKind.AGG, NodeKind.CORE})
Flow = tuple[str, str, int, int]  # src ip, dst ip, source port, destination port
SendRound = Callable[[Sequence[Probe]], list[str | None]]


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeSettings:
    """The probe budget (seconds and counts) and the routers' ICMP limits it assumes."""

    #: a connection's first ports: stop searching after this once at least one port is found
    #: (the held SYN leaves with TCP's retransmission at 1 s or 3 s)
    hold_s: float = 2.5
    #: give up on a key after this (TCP's third SYN retransmission leaves at 7 s)
    max_s: float = 6.0
    #: a port's path learned by probing is trusted this long, then probed again
    refresh_s: float = 300.0
    #: a router that never answered though this many answers were expected of it (the tuples
    #: probed at its hop, each shared among that hop's candidate routers) is silent; a router that
    #: answers can be missed so often by chance with probability about ``exp(-silent_after)``
    silent_after: float = 6.0
    #: most new ports probed in one round
    round_max: int = 64
    #: the routers' ICMP limits (Linux defaults: ``icmp_ratelimit`` 1000 ms, burst 6)
    icmp_interval_s: float = 1.0
    icmp_burst: int = 6


@dataclass(frozen=True, slots=True, kw_only=True)
class Route:
    """One equal-cost path: its directed link ids and the routers it crosses, hop 1 first."""

    links: tuple[int, ...]
    hops: tuple[NodeId, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricMap:
    """What the probing host knows of the fabric: the topology and who answers from which address.

    ``routers``: every address a router may answer from -> the router (an operator's inventory;
    on the testbed, every router interface's address). ``nics``: NIC address -> NIC node.
    """

    topology: Topology
    routers: Mapping[str, NodeId]
    nics: Mapping[str, NodeId]
    _routes: dict[tuple[str, str], tuple[Route, ...]] = field(default_factory=dict, compare=False)

    @staticmethod
    def from_testbed(name: str) -> FabricMap:
        """The map of testbed ``name`` (its layout's addresses)."""
        from commsched.testbed import Testbed

        tb = Testbed.load(name)
        lay = tb.layout
        routers = {e.ip: e.node for c in lay.cables for e in (c.a, c.b) if e.node in lay.routers}
        return FabricMap(topology=tb.topology, routers=routers, nics={ip: n for n, ip in lay.nic_ip.items()})

    def routes(self, src: str, dst: str) -> tuple[Route, ...]:
        """The equal-cost paths of ``src -> dst`` (addresses); empty for an address not on the map."""
        hit = self._routes.get((src, dst))
        if hit is None:
            a, b = self.nics.get(src), self.nics.get(dst)
            hit = ()
            if a is not None and b is not None:
                kinds = {n.id: n.kind for n in self.topology.nodes}
                hit = tuple(
                    Route(
                        links=tuple(int(x) for x in p.links),
                        hops=tuple(n for n in p.nodes if kinds[n] in ROUTER_KINDS),
                    )
                    for p in self.topology.equal_cost_paths(a, b)
                )
            self._routes[(src, dst)] = hit
        return hit


def _level(cands: Sequence[Route]) -> int | None:
    """The first hop (1-based) where ``cands`` differ; ``None`` when no hop tells them apart."""
    if len(cands) < 2:
        return None
    for k in range(min(len(c.hops) for c in cands)):
        if len({c.hops[k] for c in cands}) > 1:
            return k + 1
    return None


@dataclass(slots=True)
class _Tuple:
    flow: Flow
    cands: list[Route]
    clean_misses: int = 0
    inferred: bool = False
    counted: set[int] = field(default_factory=set)  # hops whose routers' expectations it added to
    done: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class Traced:
    """A tuple's path (``links`` empty: not found) and how it was found."""

    links: tuple[int, ...]
    reason: str


@dataclass(frozen=True, slots=True, kw_only=True)
class Found:
    """The ports a search kept, the probes it sent, and why it stopped."""

    ports: tuple[int, ...]
    probes: int
    elapsed_s: float
    reason: str


class PathProbing:
    """Learns the paths of tuples from one host (see the module docstring). Thread-safe."""

    def __init__(
        self,
        fabric: FabricMap,
        send_round: SendRound,
        settings: ProbeSettings | None = None,
        *,
        clock: Callable[[], float] = time.monotonic,
        sleep: Callable[[float], None] = time.sleep,
    ) -> None:
        self.fabric = fabric
        self.settings = settings or ProbeSettings()
        self._send = send_round
        self.clock = clock
        self.sleep = sleep
        self.budget = IcmpBudget(interval_s=self.settings.icmp_interval_s, burst=self.settings.icmp_burst)
        self._expected: dict[NodeId, float] = defaultdict(float)
        self._answers: dict[NodeId, int] = defaultdict(int)
        self._cache: dict[tuple[str, str, int], dict[int, tuple[tuple[int, ...], float]]] = {}
        self._lock = threading.Lock()
        self.sent = 0

    # ------------------------------------------------------------------ state

    def silent(self, router: NodeId) -> bool:
        """``router`` never answered though :attr:`ProbeSettings.silent_after` answers were expected."""
        return self._answers[router] == 0 and self._expected[router] >= self.settings.silent_after

    def silent_routers(self) -> list[str]:
        """The routers judged silent so far."""
        return sorted(str(r) for r in list(self._expected) if self.silent(r))

    def _capacity(self, items: Sequence[_Tuple]) -> int:
        """Half the answers the routers at the items' next hops still owe their peers (at least 1)."""
        owed: dict[tuple[NodeId, str], int] = {}
        now = self.clock()
        for it in items:
            k = _level(it.cands)
            if k is None:
                continue
            for c in it.cands:
                key = (c.hops[k - 1], it.flow[0])
                if key not in owed and not self.silent(key[0]):
                    owed[key] = self.budget.available(str(key[0]), key[1], now=now)
        return max(1, sum(owed.values()) // 2)

    # ------------------------------------------------------------------ one round

    def _round(self, items: Sequence[_Tuple]) -> None:
        """Probe every item once at its next distinguishing hop and narrow its candidates."""
        now = self.clock()
        plan = [(it, k) for it in items if (k := _level(it.cands)) is not None]
        if not plan:
            return
        owed: dict[tuple[NodeId, str], int] = {}
        for it, k in plan:
            for c in it.cands:
                key = (c.hops[k - 1], it.flow[0])
                owed.setdefault(key, self.budget.available(str(key[0]), key[1], now=now))
        probes = [
            Probe(src=it.flow[0], dst=it.flow[1], sport=it.flow[2], dport=it.flow[3], ttl=k) for it, k in plan
        ]
        answers = self._send(probes)
        self.sent += len(probes)
        got: dict[tuple[NodeId, str], int] = defaultdict(int)
        for (it, k), addr in zip(plan, answers, strict=True):
            self._count(it, k)
            if addr is not None:
                self._answered(it, k, addr, got, now)
        for (it, k), addr in zip(plan, answers, strict=True):
            if addr is None:
                self._missed(it, k, got, owed)

    def _count(self, it: _Tuple, k: int) -> None:
        """Each tuple adds once per hop to the answers expected of that hop's candidate routers."""
        if k not in it.counted:
            it.counted.add(k)
            hop = {c.hops[k - 1] for c in it.cands}
            for r in hop:
                self._expected[r] += 1 / len(hop)

    def _answered(
        self, it: _Tuple, k: int, addr: str, got: dict[tuple[NodeId, str], int], now: float
    ) -> None:
        node = self.fabric.routers.get(addr)
        if node is None:  # an answer from an address the map does not know
            it.cands, it.done = [], True
            return
        self.budget.spend(str(node), it.flow[0], now=now)
        self._answers[node] += 1
        got[(node, it.flow[0])] += 1
        it.cands = [c for c in it.cands if c.hops[k - 1] == node]
        it.clean_misses = 0

    def _missed(
        self, it: _Tuple, k: int, got: dict[tuple[NodeId, str], int], owed: dict[tuple[NodeId, str], int]
    ) -> None:
        hop = {(c.hops[k - 1], it.flow[0]) for c in it.cands}
        if any(got[key] >= owed[key] for key in hop if not self.silent(key[0])):
            return  # a router it may have met ran dry: no evidence
        it.clean_misses += 1
        quiet = [c for c in it.cands if self.silent(c.hops[k - 1])]
        if it.clean_misses >= 2 and len({c.hops[k - 1] for c in quiet}) == 1:
            it.cands, it.inferred = quiet, True

    def _wait_for_tokens(self) -> None:
        self.sleep(min(0.25, self.settings.icmp_interval_s / 4))

    # ------------------------------------------------------------------ tracing

    def trace(self, flows: Sequence[Flow], *, deadline_s: float | None = None) -> list[Traced]:
        """The path of every flow (its source must be this host's), within ``deadline_s``."""
        with self._lock:
            return self._trace(flows, self.settings.max_s if deadline_s is None else deadline_s)

    def _trace(self, flows: Sequence[Flow], deadline_s: float) -> list[Traced]:
        items = [_Tuple(flow=f, cands=list(self.fabric.routes(f[0], f[1]))) for f in flows]
        end = self.clock() + deadline_s
        while True:
            todo = [it for it in items if not it.done and _level(it.cands) is not None]
            if not todo or self.clock() >= end:
                break
            cap = self._capacity(todo)
            self._round(todo[:cap])
            if len(todo) > cap:
                self._wait_for_tokens()
        return [self._traced(it) for it in items]

    def _traced(self, it: _Tuple) -> Traced:
        if not self.fabric.routes(it.flow[0], it.flow[1]):
            return Traced(links=(), reason="an address not on the fabric map")
        if len(it.cands) == 1:
            why = "inferred: a silent router on the only path left" if it.inferred else "probed"
            return Traced(links=it.cands[0].links, reason=why)
        if not it.cands:
            return Traced(links=(), reason="answered from an address outside the fabric map")
        if _level(it.cands) is None:
            return Traced(links=(), reason="paths the routers' answers cannot tell apart")
        k = _level(it.cands)
        return Traced(
            links=(), reason=f"hop {k} did not answer within the probe budget (silent or rate-limited)"
        )

    # ------------------------------------------------------------------ port search

    def _settle(
        self,
        items: list[_Tuple],
        target: tuple[int, ...],
        cache: dict[int, tuple[tuple[int, ...], float]],
        found: list[int],
    ) -> list[_Tuple]:
        """Cache the ports resolved, keep those on ``target`` in ``found``; the items still open."""
        keep: list[_Tuple] = []
        for it in items:
            if len(it.cands) == 1:
                cache[it.flow[2]] = (it.cands[0].links, self.clock())
                if it.cands[0].links == target:
                    found.append(it.flow[2])
            elif not it.done and target in {c.links for c in it.cands}:
                keep.append(it)
        return keep

    def find(
        self, flow: tuple[str, str, int], target: tuple[int, ...], *, want: int, exclude: frozenset[int]
    ) -> Found:
        """Up to ``want`` source ports whose packets ``src -> dst:dport`` take the path ``target``."""
        with self._lock:
            return self._find(flow, target, want, exclude)

    def _find(
        self, flow: tuple[str, str, int], target: tuple[int, ...], want: int, exclude: frozenset[int]
    ) -> Found:
        src, dst, dport = flow
        t0 = self.clock()
        sent0 = self.sent
        if target not in {r.links for r in self.fabric.routes(src, dst)}:
            return Found(
                ports=(), probes=0, elapsed_s=0.0, reason="the decided path is not on the fabric map"
            )
        if len(self.fabric.routes(src, dst)) == 1:  # one path: every port takes it
            ports = [p for p in range(PORT_BASE, PORT_LIMIT + 1) if p not in exclude][:want]
            return Found(ports=tuple(ports), probes=0, elapsed_s=0.0, reason="one path")
        cache = self._cache.setdefault((src, dst, dport), {})
        fresh = {p: links for p, (links, t) in cache.items() if t0 - t < self.settings.refresh_s}
        found = [p for p, links in sorted(fresh.items()) if links == target and p not in exclude][:want]
        nxt = PORT_BASE
        open_items: list[_Tuple] = []
        routes = list(self.fabric.routes(src, dst))
        while len(found) < want:
            now = self.clock()
            if now - t0 >= self.settings.max_s or (found and now - t0 >= self.settings.hold_s):
                break
            cap = min(
                self.settings.round_max, self._capacity([_Tuple(flow=(src, dst, 0, dport), cands=routes)])
            )
            while len(open_items) < cap and nxt <= PORT_LIMIT:
                if nxt not in exclude and nxt not in fresh:
                    open_items.append(_Tuple(flow=(src, dst, nxt, dport), cands=list(routes)))
                nxt += 1
            if not open_items:
                break
            before = self.sent
            self._round(open_items[:cap])
            open_items = self._settle(open_items, target, cache, found)
            if self.sent == before or len(open_items) >= cap:
                self._wait_for_tokens()
        why = (
            "probed"
            if len(found) >= want
            else ("probe budget spent" if found else "no port within the probe budget")
        )
        return Found(
            ports=tuple(found[:want]), probes=self.sent - sent0, elapsed_s=self.clock() - t0, reason=why
        )
