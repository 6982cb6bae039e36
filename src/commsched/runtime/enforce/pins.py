"""Which source ports an enforcer installs for each ``(job mark, source, destination, port)`` key.

A key is decided once (a held connection, or a job's master address before it starts) and again
whenever a new decision changes its paths; every set of ports is remembered, so that a connection
that opened with an earlier set is reported on the paths decided then (a live connection keeps its
port: new decisions reach the next connections).
"""

from __future__ import annotations

import socket
import threading
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import NotRequired, Protocol

from typing_extensions import TypedDict  # pydantic reads these on Python 3.11 (the agent's answers)

from commsched.runtime.enforce.host import EnforcerView
from commsched.runtime.enforce.ledger import Ledger, PinSetJSON, write_ledger
from commsched.runtime.enforce.marking import nft
from commsched.runtime.enforce.marking.conns import read_conntrack
from commsched.runtime.enforce.pinning.oracle import PathOracle, PortFinder, PortSearch, find_ports

__all__ = ["Key", "PinHost", "PinJSON", "PinOfJSON", "PinState", "Pinning"]

Key = tuple[int, str, str, int]  # job mark, source address, destination address, destination port


class PortSetJSON(TypedDict):
    """One set of ports of a key: the decision it was made for and the links it pins."""

    ports: list[int]
    decision: int
    forward: list[int] | None
    reverse: list[int] | None


class PinJSON(TypedDict):
    """A key of :meth:`Pinning.to_json`: its current ports and why, and every set it had."""

    mark: int
    src: str
    dst: str
    dport: int
    ports: list[int]
    pinned: bool
    reason: str
    decision: int
    earlier: int  # how many sets it had before
    sets: list[PortSetJSON]


class PinOfJSON(TypedDict):
    """:meth:`Pinning.pin_of`: whether one connection is pinned, on which decided links, and why."""

    pinned: bool
    reason: str
    forward: list[int] | None
    reverse: list[int] | None
    decision: int | None
    current: NotRequired[bool]  # its port is of the key's current set


def _links(links: tuple[int, ...] | None) -> list[int] | None:
    return None if links is None else list(links)


@dataclass(slots=True)
class PinState:
    """The decision for one key ``(mark, src, dst, dport)``: its ports, paths and why."""

    chain: int | None
    ports: tuple[int, ...]
    forward: tuple[int, ...] | None
    reverse: tuple[int, ...] | None
    pinned: bool
    reason: str
    version: int = 0  # the decision it was made for
    #: the sets installed before (a connection keeps the port, and the paths, it opened with)
    earlier: list[PinState] = field(default_factory=list)

    def opened_with(self, port: int) -> PinState | None:
        """The set a connection translated to ``port`` got its port from (``None``: none of them)."""
        for st in [self, *reversed(self.earlier)]:
            if port in st.ports:
                return st
        return None


class PinHost(EnforcerView, Protocol):
    """What the pins need of their enforcer besides its view: the path oracle and its ledger."""

    @property
    def oracle(self) -> PathOracle | None: ...

    def ledger(self) -> Ledger:
        """What the enforcer made, as its ledger records it."""
        ...


class Pinning:
    """The pins of one enforcer (its lock guards them; searches run on two worker threads)."""

    def __init__(self, enforcer: PinHost) -> None:
        self.e = enforcer
        self.pins: dict[Key, PinState] = {}
        self.inflight: set[Key] = set()
        self.inherited: dict[Key, list[PinState]] = {}
        self._chains = 0
        self._workers = ThreadPoolExecutor(max_workers=2, thread_name_prefix="pin")
        self._one = threading.Lock()

    def close(self) -> None:
        self._workers.shutdown(wait=True, cancel_futures=True)

    def history(self, mark: int) -> list[PinSetJSON]:
        """Every set of ports installed for job ``mark`` (for the ledger: a successor reports them)."""
        out: list[PinSetJSON] = []
        with self.e.lock:
            for k, st in self.pins.items():
                if k[0] == mark:
                    for x in [*st.earlier, st]:
                        if x.ports:
                            out.append(
                                {"key": list(k), "ports": list(x.ports), "forward": _links(x.forward),
                                 "reverse": _links(x.reverse), "pinned": x.pinned, "version": x.version}
                            )  # fmt: skip
        return out

    def inherit(self, mark: int, rows: list[PinSetJSON]) -> None:
        """The sets a predecessor installed for job ``mark``: connections it opened are reported
        on the paths decided for them then."""
        for row in rows:
            _, src, dst, dport = row["key"]
            key = (mark, str(src), str(dst), int(dport))
            fwd, rev = row.get("forward"), row.get("reverse")
            st = PinState(
                chain=None,
                ports=tuple(int(p) for p in row["ports"]),
                forward=tuple(fwd) if fwd else None,
                reverse=tuple(rev) if rev else None,
                pinned=bool(row.get("pinned")),
                reason="pinned by this host's previous agent",
                version=int(row.get("version", 0)),
            )
            self.inherited.setdefault(key, []).append(st)

    def forget(self, mark: int) -> None:
        """Drop the keys of job ``mark`` (its rules go with the job's)."""
        for key in [k for k in self.pins if k[0] == mark]:
            del self.pins[key]

    def refresh(self) -> None:
        """Search again every key whose decided paths changed (call after a new view)."""
        with self.e.lock:
            stale = [k for k, st in self.pins.items() if self.decided(k) != (st.forward, st.reverse)]
        for key in stale:
            self._workers.submit(self.pin, key)

    def to_json(self) -> list[PinJSON]:
        """Every key with its current ports and paths, and how many sets it had before."""
        with self.e.lock:
            return [
                {
                    "mark": k[0],
                    "src": k[1],
                    "dst": k[2],
                    "dport": k[3],
                    "ports": list(st.ports),
                    "pinned": st.pinned,
                    "reason": st.reason,
                    "decision": st.version,
                    "earlier": len(st.earlier),
                    "sets": [
                        {
                            "ports": list(x.ports),
                            "decision": x.version,
                            "forward": _links(x.forward),
                            "reverse": _links(x.reverse),
                        }
                        for x in [*st.earlier, st]
                    ],
                }
                for k, st in self.pins.items()
            ]

    def widen(self) -> None:
        """Give a fresh set of ports to every key whose current set is at least half taken.

        The translated ports of a key are handed out in turn; a port still held by a tracked
        connection (open, or in ``TIME_WAIT``) cannot be given again, and a SYN that gets one is
        dropped by connection tracking. A fresh search excludes the taken ports.
        """
        with self.e.lock:
            sets = {k: set(st.ports) for k, st in self.pins.items() if st.ports}
        if not sets:
            return
        taken: dict[Key, int] = {}
        for t in read_conntrack():
            for k, ports in sets.items():
                if t.orig[0] == k[1] and t.orig[2:] == (k[2], k[3]) and t.wire_sport in ports:
                    taken[k] = taken.get(k, 0) + 1
        for k, n in taken.items():
            if 2 * n >= len(sets[k]):
                self._workers.submit(self.pin, k, True)

    def pin_of(self, mark: int, src: str, dst: str, dport: int, port: int) -> PinOfJSON:
        """Whether a connection that left with source ``port`` is pinned, and on which decided paths."""
        with self.e.lock:
            pin = self.pins.get((mark, src, dst, dport))
            hit = pin.opened_with(port) if pin is not None and pin.ports else pin
            if hit is None or not hit.ports:  # not from a set of this agent's: its predecessor's?
                old = self.inherited.get((mark, src, dst, dport), [])
                hit = next((st for st in reversed(old) if port in st.ports), hit)
                pin = pin or hit
        if pin is None or hit is None:
            why = "opened before its key was decided" if pin is None else "its port is in no set installed"
            return {"pinned": False, "reason": why, "forward": None, "reverse": None, "decision": None}
        return {
            "pinned": hit.pinned,
            "reason": hit.reason,
            "forward": list(hit.forward) if hit.forward else None,  # () or None: no decided path
            "reverse": list(hit.reverse) if hit.reverse else None,
            "decision": hit.version,
            "current": hit is pin,
        }

    def decided(
        self, key: tuple[int, str, str, int]
    ) -> tuple[tuple[int, ...] | None, tuple[int, ...] | None]:
        """The decided links of ``src -> dst`` and ``dst -> src`` for the job of ``key``'s mark."""
        mark, src, dst, _ = key
        job = next((j.id for j in self.e.jobs.values() if j.mark == mark), None)
        view = self.e.view
        ips = view.nic_ips
        fwd = rev = None
        for c in view.connections:
            if c.job == job and ips.get(c.src_nic) == src and ips.get(c.dst_nic) == dst:
                fwd = c.links
        for c in view.inbound:
            if c.job == job and ips.get(c.src_nic) == dst and ips.get(c.dst_nic) == src:
                rev = c.links
        return fwd, rev

    def prepin(self, mark: int, dst: str, dport: int) -> None:
        """Pin the connections of job ``mark`` to ``dst:dport`` now (the source the kernel would choose)."""
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            try:
                s.connect((dst, dport))
            except OSError:
                return
            src = s.getsockname()[0]
        if src == dst or dst.startswith("127."):
            return
        self.pin((mark, src, dst, dport))

    def request(self, key: tuple[int, str, str, int]) -> None:
        """Pin ``key`` on a worker thread (once at a time per key)."""
        with self.e.lock:
            if key in self.inflight or key in self.pins:
                return
            self.inflight.add(key)
        self._workers.submit(self.pin, key)

    def pin(self, key: tuple[int, str, str, int], fresh: bool = False) -> PinState:
        """Decide ``key``'s ports from the current view and install them (or mark it undecided).

        ``fresh``: search again even when the decided paths did not change (:meth:`widen`). One key
        at a time (two searches for one key would each replace the other's set).
        """
        try:
            with self._one:
                return self._pin(key, fresh)
        finally:
            with self.e.lock:
                self.inflight.discard(key)

    def _pin(self, key: tuple[int, str, str, int], fresh: bool) -> PinState:
        with self.e.lock:
            fwd, rev = self.decided(key)
            old = self.pins.get(key)
        if old is not None and (old.forward, old.reverse) == (fwd, rev) and not fresh:
            return old  # decided already (a second request while the first was searching)
        state = self.search(key, fwd, rev)
        with self.e.lock:
            self._chains += 1
            chain = self._chains if state.ports else None
            pin = nft.Pin(mark=key[0], src=key[1], dst=key[2], dport=key[3], ports=state.ports)
            old_chain = old.chain if old is not None else None
            script = nft.pin_script(self.e.table, pin, chain or 0, old_chain=old_chain, known=old is not None)
            nft.run_nft(script)
            replies = self.e.replies  # the probing oracle's reverse direction
            if replies is not None and state.ports:
                replies.restore(key[2], key[3], state.ports)
            state.chain = chain
            state.version = self.e.view.version
            if old is not None:
                state.earlier = [*old.earlier, old][-16:]
                old.earlier = []
            self.pins[key] = state
        write_ledger(self.e.cfg.ledger, self.e.ledger())  # a successor reports what this decided
        return state

    def search(
        self, key: tuple[int, str, str, int], fwd: tuple[int, ...] | None, rev: tuple[int, ...] | None
    ) -> PinState:
        _, src, dst, dport = key
        if fwd is None and rev is None:
            return PinState(
                chain=None, ports=(), forward=None, reverse=None, pinned=False, reason="no decision"
            )
        if self.e.oracle is None:
            return PinState(
                chain=None, ports=(), forward=fwd, reverse=rev, pinned=False, reason="no path oracle"
            )
        if self.e.oracle.n_paths(src, dst) == 1 and self.e.oracle.n_paths(dst, src) == 1:
            return PinState(chain=None, ports=(), forward=fwd, reverse=rev, pinned=True, reason="single path")
        busy = frozenset(
            t.wire_sport for t in read_conntrack() if t.orig[0] == src and t.orig[2:] == (dst, dport)
        )
        replies = self.e.replies
        if replies is not None:  # a port names one listening port per peer
            busy |= replies.taken(dst, dport)
        s = PortSearch(src=src, dst=dst, dport=dport, forward=fwd, reverse=rev, exclude=busy)
        if isinstance(self.e.oracle, PortFinder):  # it searches within its own budget (probes)
            got = self.e.oracle.find(s)
            return PinState(
                chain=None, ports=got.ports, forward=fwd, reverse=rev, pinned=got.pinned, reason=got.reason
            )
        ports = find_ports(self.e.oracle, s)
        if ports:
            return PinState(chain=None, ports=ports, forward=fwd, reverse=rev, pinned=True, reason="ports")
        if fwd is not None and rev is not None:  # both directions together not found: forward alone
            ports = find_ports(
                self.e.oracle, PortSearch(src=src, dst=dst, dport=dport, forward=fwd, reverse=None)
            )
        reason = "reverse direction not pinned: no port for both paths" if ports else "no port for the path"
        return PinState(chain=None, ports=ports, forward=fwd, reverse=rev, pinned=False, reason=reason)
