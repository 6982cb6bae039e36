"""Pace each parameter-server connection by its share of its NICs' bytes (``SO_MAX_PACING_RATE``).

``commsched byteps`` (:func:`commsched.intrajob.byteps.byteps_times`) takes an iteration to last the
busiest NIC's bytes at full rate: every NIC busy in both directions for the whole iteration, i.e.
every flow sent at a rate proportional to the bytes it carries. TCP does not do that by itself: it
shares a NIC max-min among its flows, so a worker feeds a CPU server that is owed 3x more than a
co-located one at the same rate (``experiments.byteps_maxmin``). :func:`share_pacing` computes the
schedule the model assumes: on every NIC each flow gets ``goodput x (its bytes per iteration / that
NIC's bytes per iteration)`` (the busier direction; a flow crosses its sender's uplink and its
receiver's downlink and takes the lower of the two rates), and :func:`pace_socket` asks the kernel to
hold a socket to it. Linux paces a socket with ``SO_MAX_PACING_RATE`` in TCP itself (no ``fq`` qdisc
needed, Linux >= 4.13); the rate counts payload bytes (measured on the ``ps versus-ring`` star: a
socket paced at 10 MB/s moved 80.1 Mb/s through a 0.2 Gb/s NIC).

Hosts: worker ``r`` runs on host ``r`` (``0..n-1``), CPU server ``j < k`` on host ``n + j``, the
co-located server ``k + i`` on worker host ``i``; a worker's connection to its own host's server never
crosses a NIC and is not paced.
"""

from __future__ import annotations

import socket
from collections.abc import Sequence
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.runtime.ps.errors import PSError

#: ``SO_MAX_PACING_RATE`` of ``<asm-generic/socket.h>`` (Python's socket module does not name it)
SO_MAX_PACING_RATE = 47
#: the largest rate a C ``int`` option value holds, bytes/s (about 17 Gb/s)
MAX_RATE_BYTES_S = (1 << 31) - 1
#: bits per byte (bits/s <-> bytes/s)
BITS_PER_BYTE = 8


def pace_socket(sock: socket.socket, rate_bytes_s: float | None) -> None:
    """Hold ``sock``'s sending rate to ``rate_bytes_s`` (bytes/s of payload); ``None`` leaves it unpaced.

    Raises
    ------
    PSError
        The kernel refused the option (a kernel without ``SO_MAX_PACING_RATE``, or not a TCP socket).
    """
    if rate_bytes_s is None:
        return
    if not rate_bytes_s > 0:
        raise InputError(f"{rate_bytes_s!r}", where="pacing rate", expected="> 0 bytes/s or None")
    try:
        sock.setsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE, min(MAX_RATE_BYTES_S, round(rate_bytes_s)))
    except OSError as exc:
        raise PSError(f"cannot pace a socket at {rate_bytes_s:.0f} B/s (SO_MAX_PACING_RATE): {exc}") from None


def paced_rate(sock: socket.socket) -> int | None:
    """The socket's ``SO_MAX_PACING_RATE`` in bytes/s, ``None`` when unpaced."""
    value = sock.getsockopt(socket.SOL_SOCKET, SO_MAX_PACING_RATE)
    return None if value in (-1, 0xFFFFFFFF) else int(value)


@dataclass(frozen=True, slots=True, kw_only=True)
class SharePacing:
    """Pacing rates (bytes/s) of one BytePS job on a star of equal NICs; ``None``: not paced.

    Attributes
    ----------
    push_bytes_s
        ``[rank][server]``: worker ``rank``'s connection to ``server`` (its pushes).
    reply_bytes_s
        ``[server][rank]``: ``server``'s connection to worker ``rank`` (its pull replies).
    nic_load
        Bytes per iteration of every host's busier direction, in model sizes (hosts as above).
    """

    push_bytes_s: tuple[tuple[float | None, ...], ...]
    reply_bytes_s: tuple[tuple[float | None, ...], ...]
    nic_load: tuple[float, ...]


def server_host(server: int, *, workers: int, cpu_machines: int) -> int:
    """The host of ``server``: CPU servers ``0..k-1`` on hosts ``n..n+k-1``, server ``k+i`` on host ``i``.

    Examples
    --------
    >>> [server_host(j, workers=4, cpu_machines=2) for j in range(6)]
    [4, 5, 0, 1, 2, 3]
    """
    return workers + server if server < cpu_machines else server - cpu_machines


def share_pacing(
    shares: Sequence[float], *, workers: int, cpu_machines: int, goodput_bps: float, headroom: float = 1.0
) -> SharePacing:
    """Rates that keep every NIC busy for the whole iteration: each flow ``∝`` the bytes it carries.

    Parameters
    ----------
    shares
        Each server's share of the model's bytes (CPU servers first), e.g. ``VersusSpec.shares()``.
    workers, cpu_machines
        ``n`` and ``k``; ``len(shares) == n + k``.
    goodput_bps
        One NIC's TCP goodput, bits/s.
    headroom
        Factor on every rate (1: the NIC's goodput exactly shared out; more lets a flow that fell
        behind catch up, at the price of queueing: on the ``ps versus-ring`` star 1.05 and 1.1 made
        BytePS's iteration 3 % and 8 % slower than 1).

    Examples
    --------
    Two workers and one CPU server owed 0.6 of the model: the CPU host carries ``2 x 0.6`` model
    sizes each way, a worker host ``0.6 + 0.2`` out (its pushes) plus ``0.2`` (its server's reply to
    the other worker), so a push to the CPU server gets ``0.6 / 1.2`` of the goodput (1 MB/s) and a
    push to the other worker's server ``0.2 / 1.0``:

    >>> p = share_pacing([0.6, 0.2, 0.2], workers=2, cpu_machines=1, goodput_bps=8e6)
    >>> p.nic_load
    (1.0, 1.0, 1.2)
    >>> p.push_bytes_s[0]
    (500000.0, None, 200000.0)
    """
    n, k = workers, cpu_machines
    if len(shares) != n + k or min(shares, default=0.0) < 0:
        raise InputError(f"{len(shares)} shares", where="shares", expected=f"{n + k} non-negative shares")
    if not (goodput_bps > 0 and headroom > 0):
        raise InputError(f"goodput {goodput_bps!r}, headroom {headroom!r}", where="pacing", expected="> 0")
    up, down = [0.0] * (n + k), [0.0] * (n + k)
    flows: list[tuple[int, int, int, float]] = []  # (rank, server, server's host, bytes in model sizes)
    for j, s in enumerate(shares):
        h = server_host(j, workers=n, cpu_machines=k)
        for r in range(n):
            if r != h:  # a worker and its co-located server talk over loopback
                up[r] += s
                down[h] += s
                up[h] += s
                down[r] += s
                flows.append((r, j, h, s))
    load = tuple(max(u, d) for u, d in zip(up, down, strict=True))
    rate = headroom * goodput_bps / BITS_PER_BYTE  # bits -> bytes
    push: list[list[float | None]] = [[None] * (n + k) for _ in range(n)]
    reply: list[list[float | None]] = [[None] * n for _ in range(n + k)]
    for r, j, h, s in flows:
        if s > 0:
            push[r][j] = reply[j][r] = rate * s / max(load[r], load[h])
    return SharePacing(
        push_bytes_s=tuple(tuple(row) for row in push),
        reply_bytes_s=tuple(tuple(row) for row in reply),
        nic_load=load,
    )
