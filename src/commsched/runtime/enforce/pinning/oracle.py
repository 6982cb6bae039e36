"""Which translated source ports put a connection on its decided paths, in both directions.

A TCP connection ``src:p -> dst:q`` carries data both ways. The routers hash the 5-tuple of each
packet, destination port included (fields ``0x37``): the connecting side's packets take the path of
``(src, dst, p, q)``, the accepting side's replies the path of ``(dst, src, q, p)``. The accepting
side cannot choose its source port (``q`` is its listening port), but the connecting side's
translated port ``p`` enters both hashes, so :func:`find_ports` looks for ports ``p`` for which both
directions land on the paths the decision gives them (the connection ``src -> dst`` and, where the
decision has it, ``dst -> src``). A real fabric's hash is unknown, so the paths are asked from a
:class:`PathOracle` (on the testbed, the routers themselves: :class:`TestbedOracle`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

__all__ = [
    "PORT_BASE",
    "PORT_LIMIT",
    "FoundPorts",
    "PathOracle",
    "PortFinder",
    "PortSearch",
    "TestbedOracle",
    "find_ports",
]

#: translated ports are searched here: below the ephemeral range (32768-60999), above the listeners
PORT_BASE = 20000
PORT_LIMIT = 32767

Flow = tuple[str, str, int, int]  # src ip, dst ip, source port, destination port


class PathOracle(Protocol):
    """Tells the links a TCP packet with a given 4-tuple crosses, and how many paths a pair has."""

    def trace(self, flows: Sequence[Flow]) -> list[tuple[int, ...]]: ...

    def n_paths(self, src: str, dst: str) -> int: ...


@dataclass(frozen=True, slots=True, kw_only=True)
class PortSearch:
    """One search: ``src -> dst:dport`` whose forward / reverse packets must take these links."""

    src: str
    dst: str
    dport: int
    forward: tuple[int, ...] | None
    reverse: tuple[int, ...] | None
    want: int = 8
    max_tries: int = 4096
    batch: int = 256
    exclude: frozenset[int] = frozenset()


@dataclass(frozen=True, slots=True, kw_only=True)
class FoundPorts:
    """What an oracle that searches by itself found: the ports, whether they pin the key, and why."""

    ports: tuple[int, ...]
    pinned: bool
    reason: str


@runtime_checkable
class PortFinder(Protocol):
    """An oracle that searches ports itself, within its own budget (the probing oracle)."""

    def find(self, s: PortSearch) -> FoundPorts: ...


def find_ports(oracle: PathOracle, s: PortSearch) -> tuple[int, ...]:
    """Up to ``s.want`` source ports (ascending from :data:`PORT_BASE`) meeting both constraints.

    Empty when none is found within ``s.max_tries`` candidates.
    """
    found: list[int] = []
    nxt = PORT_BASE
    while len(found) < s.want and nxt <= min(PORT_LIMIT, PORT_BASE + s.max_tries - 1):
        cands = [p for p in range(nxt, min(PORT_LIMIT + 1, nxt + s.batch)) if p not in s.exclude]
        nxt += s.batch
        flows: list[Flow] = []
        if s.forward is not None:
            flows += [(s.src, s.dst, p, s.dport) for p in cands]
        if s.reverse is not None:
            flows += [(s.dst, s.src, s.dport, p) for p in cands]
        links = oracle.trace(flows) if flows else []
        fwd = links[: len(cands)] if s.forward is not None else [None] * len(cands)
        rev = links[-len(cands) :] if s.reverse is not None else [None] * len(cands)
        for p, f, r in zip(cands, fwd, rev, strict=True):
            if (s.forward is None or f == s.forward) and (s.reverse is None or r == s.reverse):
                found.append(p)
    return tuple(found[: s.want])


class TestbedOracle:
    """The emulated fabric's routers as the oracle (``ip route get`` per hop, all flows at once)."""

    __test__ = False  # not a pytest class

    def __init__(self, name: str) -> None:
        from commsched.testbed import Testbed

        tb = Testbed.load(name)
        self._layout: Any = tb.layout
        self._topology = tb.topology
        self._nic_of = {ip: nic for nic, ip in tb.layout.nic_ip.items()}

    def knows(self, ip: str) -> bool:
        return ip in self._nic_of

    def trace(self, flows: Sequence[Flow]) -> list[tuple[int, ...]]:
        from commsched.testbed.probe import trace_tuples

        rows = [(self._nic_of[s], self._nic_of[d], sp, dp) for s, d, sp, dp in flows]
        return [tuple(int(x) for x in links) for links in trace_tuples(self._layout, rows)]

    def n_paths(self, src: str, dst: str) -> int:
        return len(self._topology.equal_cost_paths(self._nic_of[src], self._nic_of[dst]))
