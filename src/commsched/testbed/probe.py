"""Find a TCP source port for every equal-cost path of a NIC pair, with the routers' own oracle.

The hash inside commsched (:mod:`commsched.topology.ecmp`) is not the kernel's, so the routers are
asked: ``ip route get DST from SRC iif IF ipproto tcp sport S dport D`` in a router's namespace names
the next hop the kernel will pick for that 5-tuple (hash policy 3, fields ``0x37``). Candidate ports
are walked hop by hop, all pairs at once, one ``ip -j -batch`` process per router and hop level;
the links crossed make the path, named by the scheduling layer's link ids. This is Crux's probing
(§5.2) on real routers. Ports are searched from :data:`PORT_BASE` upwards, below the ephemeral range.
"""

from __future__ import annotations

import json
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from commsched.errors import InputError, TestbedError
from commsched.testbed import netns
from commsched.testbed.layout import End, Layout
from commsched.topology import LinkId, NodeId, Topology

PORT_BASE = 20000
PORT_LIMIT = 32767  # stay below the ephemeral range (32768-60999)
#: give up on a pair after this many ports per path (pinned pairs reach only their pinned path)
TRIES_PER_PATH = 64

PathKey = tuple[LinkId, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class PairProbe:
    """The probe result of one NIC pair: a source port per path (by link ids), paths not found."""

    src: NodeId
    dst: NodeId
    ports: dict[PathKey, int]
    missing: tuple[PathKey, ...] = ()
    unmodelled: tuple[PathKey, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ProbeResult:
    """Ports for every probed pair, valid for destination port ``dport`` (the hash includes it)."""

    dport: int
    pairs: tuple[PairProbe, ...]
    tried: int = 0
    _index: dict[tuple[NodeId, NodeId], PairProbe] = field(default_factory=dict, compare=False)

    def __post_init__(self) -> None:
        self._index.update({(p.src, p.dst): p for p in self.pairs})

    def pair(self, src: NodeId | str, dst: NodeId | str) -> PairProbe:
        hit = self._index.get((NodeId(src), NodeId(dst)))
        if hit is None:
            raise InputError(
                f"pair {src} -> {dst} was not probed", where="probe", expected="a probed NIC pair"
            )
        return hit

    def source_port(self, src: NodeId | str, dst: NodeId | str, links: Sequence[int]) -> int:
        """The source port that sends ``src -> dst`` (to :attr:`dport`) over the path ``links``."""
        pp = self.pair(src, dst)
        key = tuple(LinkId(int(x)) for x in links)
        if key not in pp.ports:
            raise InputError(f"no port found for path {list(key)} of {src} -> {dst}", where="probe")
        return pp.ports[key]

    @property
    def coverage(self) -> float:
        """Fraction of the model's paths (over probed pairs) that got a port."""
        found = sum(len(p.ports) for p in self.pairs)
        total = found + sum(len(p.missing) for p in self.pairs)
        return found / total if total else 1.0

    def to_json(self) -> dict[str, object]:
        return {
            "dport": self.dport,
            "tried": self.tried,
            "coverage": self.coverage,
            "pairs": [
                {
                    "src": p.src,
                    "dst": p.dst,
                    "ports": [{"links": list(k), "sport": v} for k, v in p.ports.items()],
                    "missing": [list(k) for k in p.missing],
                    "unmodelled": [list(k) for k in p.unmodelled],
                }
                for p in self.pairs
            ],
        }

    @staticmethod
    def from_json(data: dict[str, Any]) -> ProbeResult:
        pairs = []
        for p in data["pairs"]:
            pairs.append(
                PairProbe(
                    src=NodeId(p["src"]),
                    dst=NodeId(p["dst"]),
                    ports={tuple(LinkId(x) for x in e["links"]): int(e["sport"]) for e in p["ports"]},
                    missing=tuple(tuple(LinkId(x) for x in k) for k in p["missing"]),
                    unmodelled=tuple(tuple(LinkId(x) for x in k) for k in p["unmodelled"]),
                )
            )
        return ProbeResult(dport=int(data["dport"]), pairs=tuple(pairs), tried=int(data.get("tried", 0)))


def nic_pairs(topo: Topology, *, limit: int, seed: int = 0) -> list[tuple[NodeId, NodeId]]:
    """Ordered NIC pairs on different hosts (intra-host traffic is not emulated); a seeded sample above
    ``limit``, always covering every source host."""
    nics = [(h.id, n) for h in topo.hosts for n in h.nics]
    pairs = [(a, b) for ha, a in nics for hb, b in nics if ha != hb]
    if len(pairs) <= limit:
        return pairs
    rng = np.random.default_rng(seed)
    order = rng.permutation(len(pairs))
    return sorted((pairs[i] for i in order[:limit]), key=lambda p: (p[0], p[1]))


def _ends(layout: Layout) -> dict[tuple[str, str], tuple[End, End]]:
    out: dict[tuple[str, str], tuple[End, End]] = {}
    for c in layout.cables:
        out[(layout.node_ns(c.a), c.a.iface)] = (c.a, c.b)
        out[(layout.node_ns(c.b), c.b.iface)] = (c.b, c.a)
    return out


@dataclass(slots=True)
class _Walk:
    pair: int
    sport: int
    links: list[LinkId]
    ns: str
    iif: str
    dport: int


def _oracle(groups: dict[str, list[str]]) -> dict[str, list[str]]:
    """Run every namespace's ``route get`` lines; return the output device of each line, in order."""
    names = list(groups)
    outs = netns.run_many(
        [(["ip", "-j", "-n", ns, "-batch", "-"], "\n".join(groups[ns]) + "\n") for ns in names]
    )
    res: dict[str, list[str]] = {}
    for ns, out in zip(names, outs, strict=True):
        devs = [json.loads(line)[0]["dev"] for line in out.splitlines() if line.strip()]
        if len(devs) != len(groups[ns]):
            raise TestbedError(f"route get in {ns}: {len(devs)} answers for {len(groups[ns])} questions")
        res[ns] = devs
    return res


def _walk(
    layout: Layout,
    pairs: Sequence[tuple[NodeId, NodeId]],
    sports: Sequence[Sequence[int]],
    dport: int | Sequence[int],
) -> list[tuple[int, int, PathKey]]:
    """Follow each (pair, sport) hop by hop; return (pair index, sport, links) for every walk.

    ``dport``: one destination port for all pairs, or one per pair.
    """
    ends = _ends(layout)
    walks: list[_Walk] = []
    for i, (s, _) in enumerate(pairs):
        cable = layout.nic_cable(s)
        dp = dport if isinstance(dport, int) else dport[i]
        for sp in sports[i]:
            walks.append(
                _Walk(
                    pair=i,
                    sport=sp,
                    links=list(cable.a.links_out),
                    ns=layout.node_ns(cable.b),
                    iif=cable.b.iface,
                    dport=dp,
                )
            )
    done: list[tuple[int, int, PathKey]] = []
    for _ in range(64):
        if not walks:
            break
        groups: dict[str, list[str]] = defaultdict(list)
        for w in walks:
            s, d = pairs[w.pair]
            groups[w.ns].append(
                f"route get {layout.nic_ip[d]} from {layout.nic_ip[s]} iif {w.iif} "
                f"ipproto tcp sport {w.sport} dport {w.dport}"
            )
        answers = _oracle(groups)
        pos: dict[str, int] = defaultdict(int)
        nxt: list[_Walk] = []
        for w in walks:
            dev = answers[w.ns][pos[w.ns]]
            pos[w.ns] += 1
            own, peer = ends[(w.ns, dev)]
            w.links.extend(own.links_out)
            if peer.node in layout.nic_ip:
                done.append((w.pair, w.sport, tuple(w.links)))
            else:
                w.ns, w.iif = layout.node_ns(peer), peer.iface
                nxt.append(w)
        walks = nxt
    if walks:
        raise TestbedError("route get walk did not reach the destination (routing loop?)")
    return done


def probe(
    topo: Topology, layout: Layout, pairs: Sequence[tuple[NodeId, NodeId]], *, dport: int
) -> ProbeResult:
    """Find a source port per equal-cost path for every pair (ports ``PORT_BASE`` upwards)."""
    model = [{p.links: None for p in topo.equal_cost_paths(s, d)} for s, d in pairs]
    found: list[dict[PathKey, int]] = [{} for _ in pairs]
    odd: list[set[PathKey]] = [set() for _ in pairs]
    nxt = [PORT_BASE] * len(pairs)
    tried = 0
    while True:
        todo = [
            i
            for i in range(len(pairs))
            if len(found[i]) < len(model[i])
            and nxt[i] <= min(PORT_LIMIT, PORT_BASE + TRIES_PER_PATH * len(model[i]))
        ]
        if not todo:
            break
        batch: list[list[int]] = [[] for _ in pairs]
        for i in todo:
            n = max(16, 4 * (len(model[i]) - len(found[i])))
            batch[i] = list(range(nxt[i], min(PORT_LIMIT + 1, nxt[i] + n)))
            nxt[i] += n
            tried += len(batch[i])
        for i, sport, key in sorted(_walk(layout, pairs, batch, dport)):
            if key in model[i]:
                found[i].setdefault(key, sport)
            else:
                odd[i].add(key)
    out = [
        PairProbe(
            src=s,
            dst=d,
            ports=dict(sorted(found[i].items())),
            missing=tuple(k for k in model[i] if k not in found[i]),
            unmodelled=tuple(sorted(odd[i])),
        )
        for i, (s, d) in enumerate(pairs)
    ]
    return ProbeResult(dport=dport, pairs=tuple(out), tried=tried)


def trace_ports(layout: Layout, flows: Sequence[tuple[NodeId, NodeId, int]], *, dport: int) -> list[PathKey]:
    """The links each TCP flow ``(src NIC, dst NIC, source port)`` to ``dport`` takes, per the routers.

    The same oracle as :func:`probe`, for given ports: what the kernel's multipath hash does with a
    connection that is already open (its path under ECMP, or a check that a pinned port stayed put).
    """
    if not flows:
        return []
    pairs = [(s, d) for s, d, _ in flows]
    walked = _walk(layout, pairs, [[sport] for _, _, sport in flows], dport)
    out: list[PathKey] = [() for _ in flows]
    for i, _sport, key in walked:
        out[i] = tuple(LinkId(x) for x in key)
    return out


def trace_tuples(layout: Layout, flows: Sequence[tuple[NodeId, NodeId, int, int]]) -> list[PathKey]:
    """The links of each TCP flow ``(src NIC, dst NIC, source port, destination port)``, per the routers.

    :func:`trace_ports` with a destination port per flow: both directions of a connection at once
    (its replies travel ``dst -> src`` from the listening port to the connecting side's port).
    """
    if not flows:
        return []
    pairs = [(s, d) for s, d, _, _ in flows]
    walked = _walk(layout, pairs, [[sp] for _, _, sp, _ in flows], [dp for *_, dp in flows])
    out: list[PathKey] = [() for _ in flows]
    for i, _sport, key in walked:
        out[i] = tuple(LinkId(x) for x in key)
    return out
