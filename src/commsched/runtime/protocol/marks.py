"""From a priority class to the bits on a socket: the one place the runtime turns classes into marks.

A job's priority class (0 = highest, the daemon's decision) selects a DSCP code point through the
default table of :mod:`commsched.scheduling.dscp` (class 0 -> 46, class 1 -> 40, ...); the IP header
carries it in the upper six bits of the TOS byte (IPv4 ``IP_TOS``) or the traffic class (IPv6
``IPV6_TCLASS``), the lower two being ECN, which the kernel manages for TCP. So the byte set on a
socket is ``dscp << 2``, never the DSCP itself: :class:`Mark` computes it, :func:`mark_for_class`
is the class -> mark function every runtime part calls (daemon, agent, NCCL environment, PS runtime,
collectives), and :func:`mark_socket` / :func:`socket_mark` set and read it for either address family.

Examples
--------
>>> mark_for_class(0)
Mark(dscp=46)
>>> mark_for_class(0).tos, mark_for_class(1).tos
(184, 160)
>>> import socket
>>> with socket.socket() as s:
...     mark_socket(s, Mark(dscp=10))
...     s.getsockopt(socket.IPPROTO_IP, socket.IP_TOS), socket_mark(s)
(40, Mark(dscp=10))

References
----------
.. [1] RFC 2474 §3 (the DS field is the upper six bits of the IPv4 TOS / IPv6 traffic class octet),
   RFC 3168 (the lower two bits are ECN).
.. [2] Crux (SIGCOMM 2024) §5.3 (the transport sets every connection's traffic class).
"""

from __future__ import annotations

import operator
import socket
from dataclasses import dataclass
from typing import SupportsIndex

from commsched.errors import InputError
from commsched.runtime.protocol.control_json import MarkJSON
from commsched.scheduling.dscp import DscpTable, default_dscp_table, dscp_for_level, tos_byte

__all__ = ["MAX_DSCP", "Mark", "mark_for_class", "mark_socket", "socket_mark"]

MAX_DSCP = 63


def _int_in(value: object, lo: int, hi: int, where: str) -> int:
    """``value`` as an ``int`` in ``lo..hi`` (booleans and floats refused), else :class:`InputError`."""
    try:
        out = operator.index(value)  # type: ignore[arg-type]
    except TypeError:
        out = None
    if isinstance(value, bool) or out is None or not lo <= out <= hi:
        raise InputError(f"{value!r}", where=where, expected=f"an integer in {lo}..{hi}")
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class Mark:
    """The marking of a connection: its DSCP code point; :attr:`tos` is the byte the socket carries.

    Examples
    --------
    >>> Mark(dscp=46).tos
    184
    >>> Mark.from_tos(160)
    Mark(dscp=40)
    >>> Mark(dscp=64)
    Traceback (most recent call last):
    ...
    commsched.errors.InputError: dscp: 64 (expected an integer in 0..63)
    """

    dscp: int

    def __post_init__(self) -> None:
        _int_in(self.dscp, 0, MAX_DSCP, "dscp")

    @property
    def tos(self) -> int:
        """The IPv4 TOS / IPv6 traffic-class byte: the DSCP in the upper six bits, ECN bits zero."""
        return tos_byte(self.dscp)

    @classmethod
    def from_tos(cls, tos: SupportsIndex) -> Mark:
        """The mark of a TOS byte (``0..255``; the ECN bits are ignored)."""
        return cls(dscp=_int_in(tos, 0, 255, "tos") >> 2)

    def to_json(self) -> MarkJSON:
        return {"dscp": self.dscp, "tos": self.tos}


def mark_for_class(priority_class: SupportsIndex, table: DscpTable | None = None) -> Mark:
    """The mark of priority class ``priority_class`` (0 = highest) under ``table`` (default 8 classes).

    A class past the table's last level gets the last (lowest) level's DSCP, as the daemon's
    decisions do when a policy uses more classes than the switches have.

    Examples
    --------
    >>> [m.dscp for m in map(mark_for_class, range(9))]
    [46, 40, 34, 32, 26, 18, 10, 0, 0]
    """
    table = default_dscp_table() if table is None else table
    level = _int_in(priority_class, 0, 1 << 30, "class")
    return Mark(dscp=dscp_for_level(table, min(level, table.levels - 1)))


def mark_socket(sock: socket.socket, mark: Mark) -> None:
    """Mark ``sock`` (open, listening or connected): ``IPV6_TCLASS`` for IPv6, else ``IP_TOS``.

    Set before ``listen``/``connect`` to mark the handshake too; an accepted socket copies its
    listener's mark.
    """
    if sock.family == socket.AF_INET6:
        sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS, mark.tos)
    else:
        sock.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, mark.tos)


def socket_mark(sock: socket.socket) -> Mark:
    """The mark ``sock`` currently sends with (read back with ``getsockopt``)."""
    if sock.family == socket.AF_INET6:
        return Mark.from_tos(sock.getsockopt(socket.IPPROTO_IPV6, socket.IPV6_TCLASS))
    return Mark.from_tos(sock.getsockopt(socket.IPPROTO_IP, socket.IP_TOS))
