"""Probing a 5-tuple's path from the host: TCP probes with a rising TTL, ICMP time exceeded back.

A router that decrements a packet's TTL to zero drops it and answers the sender with ICMP *time
exceeded* (type 11), from one of its own addresses, quoting the packet's IP header and the first
8 bytes of its TCP header (ports and sequence number). A probe that carries exactly the 5-tuple of
a connection (same addresses, protocol and ports: routers hash all five) and expires at hop ``k``
names the ``k``-th router that connection's packets cross.

* **The probes** are bare TCP segments with the RST flag, sent from a raw socket bound to the
  connection's source address (so the host's policy routing sends them out of that NIC). A reset
  opens no connection-tracking entry on the sending host (a SYN would, and its entry would keep
  the port from being given to the real connection for two minutes), and routers hash it like any
  other segment of the tuple. Each probe has its own sequence number: the quoted header tells
  which probe an answer is for.
* **Routers limit their ICMP** (Linux: ``net.ipv4.icmp_ratelimit`` 1 s and a burst of 6 per
  destination address, for the types of ``icmp_ratemask``, time exceeded among them).
  :class:`IcmpBudget` keeps that token bucket per ``(router, peer)`` as the kernel does
  (``inet_peer_xrlim_allow``): tokens grow with time up to the burst, and an answer costs one.
  A probe that finds its router's bucket empty is simply not answered; the bucket model tells
  such a miss from a router that never answers.

:class:`RawProber` is the only part that touches the network (it needs ``CAP_NET_RAW``).
"""

from __future__ import annotations

import ipaddress
import os
import select
import socket
import struct
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

__all__ = [
    "IcmpBudget",
    "Probe",
    "RawProber",
    "checksum",
    "parse_time_exceeded",
    "probe_packet",
]

#: TCP flags of a probe: RST (no connection-tracking entry on the sender, none opened anywhere)
RST = 0x04
ICMP_TIME_EXCEEDED = 11


@dataclass(frozen=True, slots=True, kw_only=True)
class Probe:
    """One probe: the 5-tuple (TCP) ``src:sport -> dst:dport``, expiring at hop ``ttl``."""

    src: str
    dst: str
    sport: int
    dport: int
    ttl: int


def checksum(data: bytes) -> int:
    """The Internet checksum (RFC 1071) of ``data``: one's complement of the one's-complement sum.

    Examples
    --------
    >>> hex(checksum(bytes.fromhex("45000073000040004011") + bytes(2) + bytes.fromhex("c0a80001c0a800c7")))
    '0xb861'
    """
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack(f"!{len(data) // 2}H", data))
    while total >> 16:
        total = (total & 0xFFFF) + (total >> 16)
    return int(~total & 0xFFFF)


def probe_packet(p: Probe, *, seq: int, ident: int = 0) -> bytes:
    """The IPv4 packet of probe ``p``: a 20-byte IP header (TTL ``p.ttl``) and a 20-byte TCP RST."""
    src, dst = socket.inet_aton(p.src), socket.inet_aton(p.dst)
    tcp = struct.pack("!HHIIBBHHH", p.sport, p.dport, seq & 0xFFFFFFFF, 0, 5 << 4, RST, 0, 0, 0)
    pseudo = src + dst + struct.pack("!BBH", 0, socket.IPPROTO_TCP, len(tcp))
    tcp = tcp[:16] + struct.pack("!H", checksum(pseudo + tcp)) + tcp[18:]
    hdr = struct.pack("!BBHHHBBH4s4s", 0x45, 0, 40, ident & 0xFFFF, 0, p.ttl, socket.IPPROTO_TCP, 0, src, dst)
    hdr = hdr[:10] + struct.pack("!H", checksum(hdr)) + hdr[12:]
    return hdr + tcp


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeExceeded:
    """What an ICMP time-exceeded answer says: who answered, and the probe it quotes."""

    router: str
    src: str
    dst: str
    sport: int
    dport: int
    seq: int


def parse_time_exceeded(packet: bytes) -> TimeExceeded | None:
    """Parse an IPv4 packet read from a raw ICMP socket; ``None`` unless it is a TCP time exceeded."""
    if len(packet) < 20 or packet[0] >> 4 != 4:
        return None
    ihl = (packet[0] & 0x0F) * 4
    icmp = packet[ihl:]
    if len(icmp) < 8 + 20 + 8 or icmp[0] != ICMP_TIME_EXCEEDED or icmp[1] != 0:
        return None
    inner = icmp[8:]
    iihl = (inner[0] & 0x0F) * 4
    if inner[0] >> 4 != 4 or inner[9] != socket.IPPROTO_TCP or len(inner) < iihl + 8:
        return None
    sport, dport, seq = struct.unpack("!HHI", inner[iihl : iihl + 8])
    return TimeExceeded(
        router=socket.inet_ntoa(packet[12:16]),
        src=socket.inet_ntoa(inner[12:16]),
        dst=socket.inet_ntoa(inner[16:20]),
        sport=sport,
        dport=dport,
        seq=seq,
    )


@dataclass(slots=True)
class IcmpBudget:
    """The routers' per-peer ICMP token buckets, as the kernel keeps them (``inet_peer_xrlim_allow``).

    A bucket holds time: it grows by the time elapsed, up to ``burst * interval_s``; an answer
    needs and takes ``interval_s``. A bucket never seen is full.

    Examples
    --------
    >>> b = IcmpBudget(interval_s=1.0, burst=6)
    >>> b.available("r", "p", now=0.0)
    6
    >>> for _ in range(6):
    ...     b.spend("r", "p", now=0.0)
    >>> b.available("r", "p", now=0.5), b.available("r", "p", now=2.0), b.available("r", "p", now=100.0)
    (0, 2, 6)
    """

    interval_s: float = 1.0
    burst: int = 6
    _level: dict[tuple[str, str], tuple[float, float]] = field(default_factory=dict)

    def _now_level(self, router: str, peer: str, now: float) -> float:
        cap = self.burst * self.interval_s
        level, stamp = self._level.get((router, peer), (cap, now))
        return min(cap, level + max(0.0, now - stamp))

    def available(self, router: str, peer: str, *, now: float) -> int:
        """How many answers ``router`` would still send to ``peer`` at time ``now``."""
        return int(self._now_level(router, peer, now) / self.interval_s + 1e-9)

    def spend(self, router: str, peer: str, *, now: float) -> None:
        """``router`` answered ``peer`` at ``now``."""
        level = self._now_level(router, peer, now)
        self._level[(router, peer)] = (max(0.0, level - self.interval_s), now)


@dataclass(slots=True)
class ProbeStats:
    """Probes sent and answered over a prober's life."""

    sent: int = 0
    answered: int = 0


class RawProber:
    """Sends probes and collects their answers (a raw socket per source address, one for ICMP).

    ``send_round`` is one round trip: it sends every probe at once and waits until each is answered
    or ``timeout_s`` passed. Not thread-safe: one caller at a time.
    """

    def __init__(self, *, timeout_s: float = 0.25, clock: Callable[[], float] = time.monotonic) -> None:
        self.timeout_s = timeout_s
        self.clock = clock
        self.stats = ProbeStats()
        self._rx = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        self._rx.setblocking(False)
        self._tx: dict[str, socket.socket] = {}
        self._seq = int.from_bytes(os.urandom(4), "big")

    def close(self) -> None:
        self._rx.close()
        for s in self._tx.values():
            s.close()
        self._tx.clear()

    def _sender(self, src: str) -> socket.socket:
        s = self._tx.get(src)
        if s is None:
            ipaddress.IPv4Address(src)
            s = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_RAW)
            s.bind((src, 0))  # the host's policy routing sends it out of this address's NIC
            self._tx[src] = s
        return s

    def _drain(self) -> None:
        while True:
            try:
                self._rx.recv(2048)
            except BlockingIOError:
                return

    def send_round(self, probes: Sequence[Probe]) -> list[str | None]:
        """Send ``probes``; the address of the router that answered each (``None``: no answer)."""
        self._drain()
        want: dict[tuple[int, str, str, int, int], int] = {}
        for i, p in enumerate(probes):
            self._seq = (self._seq + 1) & 0xFFFFFFFF
            want[(self._seq, p.src, p.dst, p.sport, p.dport)] = i
            self._sender(p.src).sendto(probe_packet(p, seq=self._seq, ident=self._seq), (p.dst, 0))
        self.stats.sent += len(probes)
        out: list[str | None] = [None] * len(probes)
        left = len(probes)
        deadline = self.clock() + self.timeout_s
        while left:
            wait = deadline - self.clock()
            if wait <= 0 or not select.select([self._rx], [], [], wait)[0]:
                break
            while left:
                try:
                    pkt = self._rx.recv(2048)
                except BlockingIOError:
                    break
                te = parse_time_exceeded(pkt)
                if te is None:
                    continue
                i = want.pop((te.seq, te.src, te.dst, te.sport, te.dport), -1)
                if i >= 0:
                    out[i] = te.router
                    left -= 1
        self.stats.answered += len(probes) - left
        return out
