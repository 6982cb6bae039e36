"""The reverse direction under the probing oracle: the accepting host chooses its replies' port.

A connection ``A:p -> B:q`` (``p`` the port ``A``'s agent translated to) carries replies
``B:q -> A:p``; ``B``'s routers hash them, and their ICMP answers go to ``B``, so ``A`` cannot
probe them. ``B`` can: its agent probes tuples ``B:q' -> A:p`` like any of its own and picks a
port ``q'`` whose packets take the decided path ``B -> A``. Both agents then rewrite the port
statelessly, outside connection tracking, so neither socket ever sees it:

* ``B`` (accepting): ``postrouting``, after connection tracking, ``tcp sport set`` from the map
  ``rout`` (``A . q . p : q'``): its replies leave as ``B:q' -> A:p``.
* ``A`` (connecting): ``prerouting``, before connection tracking (priority ``raw``), ``tcp sport
  set`` from the map ``rin`` (``B . p : q``, one element per translated port of each key): the
  replies are ``B:q -> A:p`` again when the connection's entry is looked up. ``A`` gives a port to
  one key per peer only, so ``B . p`` names one listening port.

Until ``B`` has found ``q'`` (a search within the probing budget, :mod:`.pathprobe`) the replies
leave from ``q`` (on the path the routers hash them to); the report says which port they used.
Every agent of the fabric must run the probing oracle: an agent that does not restore ports
would see replies from a port it never connected to.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from commsched.runtime.enforce.marking import nft
from commsched.runtime.enforce.marking.conns import read_conntrack
from commsched.runtime.enforce.pinning.oracle import PortSearch
from commsched.runtime.enforce.pinning.probeoracle import ProbeOracle
from commsched.runtime.protocol.control import HostView

__all__ = ["ReplyPorts", "replies_base_script", "rin_script", "rout_script"]

WATCH_S = 0.1
Out = tuple[str, int, int]  # peer (connecting) address, listening port q, peer's port p


def replies_base_script(table: str) -> str:
    """Add the two maps and chains to the agent's table (they go with it)."""
    t = f"inet {table}"
    return (
        f"add map {t} rout {{ type ipv4_addr . inet_service . inet_service : inet_service; }}\n"
        f"add map {t} rin {{ type ipv4_addr . inet_service : inet_service; }}\n"
        f"add chain {t} rpost {{ type filter hook postrouting priority 300; policy accept; }}\n"
        f"add rule {t} rpost tcp sport set ip daddr . tcp sport . tcp dport map @rout\n"
        f"add chain {t} rpre {{ type filter hook prerouting priority raw; policy accept; }}\n"
        f"add rule {t} rpre tcp sport set ip saddr . tcp dport map @rin\n"
    )


def rin_script(table: str, peer: str, dport: int, ports: Iterable[int], *, old: Iterable[int] = ()) -> str:
    """Restore replies from ``peer`` to each of ``ports`` to source port ``dport`` (drop ``old``)."""
    lines = [f"delete element inet {table} rin {{ {peer} . {p} }}" for p in sorted(set(old))]
    new = sorted(set(ports))
    if new:
        elems = ", ".join(f"{peer} . {p} : {dport}" for p in new)
        lines.append(f"add element inet {table} rin {{ {elems} }}")
    return "\n".join(lines) + "\n"


def rout_script(table: str, key: Out, port: int, *, replace: bool) -> str:
    """Replies to ``key``'s peer leave from ``port`` instead of the listening port."""
    peer, q, p = key
    lines = [f"delete element inet {table} rout {{ {peer} . {q} . {p} }}"] if replace else []
    lines.append(f"add element inet {table} rout {{ {peer} . {q} . {p} : {port} }}")
    return "\n".join(lines) + "\n"


class ReplyPorts:
    """Both halves for one enforcer: restoring (its pins) and choosing (its accepted connections).

    ``e`` is the enforcer (its table, lock, jobs and view); ``oracle`` probes from this host.
    """

    def __init__(self, e: Any, oracle: ProbeOracle) -> None:
        self.e = e
        self.oracle = oracle
        self.chosen: dict[Out, int] = {}  # (peer, q, p) -> q'
        self.why: dict[Out, str] = {}  # every key searched once, with its outcome
        self._restored: dict[tuple[str, int], tuple[int, ...]] = {}  # (peer, q) -> ports restored
        self._busy: set[Out] = set()
        self._stop = threading.Event()
        self._pool = ThreadPoolExecutor(max_workers=1, thread_name_prefix="replies")
        self._thread = threading.Thread(target=self._watch, name="enforce-replies", daemon=True)

    def start(self) -> None:
        nft.run_nft(replies_base_script(self.e.table))
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=2.0)
        self._pool.shutdown(wait=False, cancel_futures=True)

    # ------------------------------------------------------------------ connecting side

    def restore(self, peer: str, dport: int, ports: tuple[int, ...]) -> None:
        """Replies from ``peer`` to any of ``ports`` come from ``dport`` (a new set of a key).

        The ports of earlier sets stay restored: connections opened with them live on.
        """
        old = self._restored.get((peer, dport), ())
        new = [p for p in ports if p not in old]
        if new:
            nft.run_nft(rin_script(self.e.table, peer, dport, new))
        self._restored[(peer, dport)] = tuple(sorted(set(old) | set(new)))

    def taken(self, peer: str, dport: int) -> frozenset[int]:
        """Ports restored for ``peer``'s other listening ports (a port names one per peer)."""
        return frozenset(p for (x, q), ps in self._restored.items() if x == peer and q != dport for p in ps)

    # ------------------------------------------------------------------ accepting side

    def port_of(self, peer: str, q: int, p: int) -> int | None:
        """The source port replies to ``peer:p`` from listening port ``q`` leave with (``None``: ``q``)."""
        return self.chosen.get((peer, q, p))

    def _watch(self) -> None:
        while not self._stop.wait(WATCH_S):
            try:
                self._scan()
            except Exception as exc:  # the loop outlives a failed read; the reason is kept
                self.why[("", 0, 0)] = f"{type(exc).__name__}: {exc}"

    def _scan(self) -> None:
        with self.e.lock:
            marks = {j.mark: j.id for j in self.e.jobs.values()}
            view = self.e.view
        ips = view.nic_ips
        local = {ips[c.src_nic] for c in view.connections if c.src_nic in ips}
        for t in read_conntrack():
            peer, p, me, q = t.orig
            key = (peer, q, p)
            if t.mark not in marks or me not in local or key in self.why or key in self._busy:
                continue
            target = self._decided(view, marks[t.mark], me, peer)
            if target is None or self.oracle.n_paths(me, peer) == 1:
                continue
            self._busy.add(key)
            self._pool.submit(self._choose, key, me, target)

    @staticmethod
    def _decided(view: HostView, job: str, me: str, peer: str) -> tuple[int, ...] | None:
        ips = view.nic_ips
        for c in view.connections:
            if c.job == job and ips.get(c.src_nic) == me and ips.get(c.dst_nic) == peer:
                return c.links
        return None

    def _choose(self, key: Out, me: str, target: tuple[int, ...]) -> None:
        peer, _, p = key
        try:
            s = PortSearch(src=me, dst=peer, dport=p, forward=target, reverse=None, want=1)
            got = self.oracle.find(s)
            if got.ports:
                nft.run_nft(rout_script(self.e.table, key, got.ports[0], replace=False))
                self.chosen[key] = got.ports[0]
            self.why[key] = got.reason
        except Exception as exc:  # e.g. the table is gone (the agent stops): not searched again
            self.why[key] = f"{type(exc).__name__}: {exc}"
        finally:
            self._busy.discard(key)
