"""Every queueing rule of the testbed: HTB trees, their ``bfifo`` leaves and filters (``tc`` lines, pure).

Three shapes, one module (nothing else in the package writes an HTB rule):

* a routed fabric's egress (:func:`egress_tc_lines`): one parent class at the scaled link rate (burst
  ~1 ms of traffic) and :data:`LEVELS` strict-priority leaf classes keyed by DSCP (the default DSCP
  table of :mod:`commsched.scheduling.dscp`, class 0 highest), each with a tiny guaranteed rate and a
  byte-limited ``bfifo`` queue; unmarked traffic (DSCP 0) falls in the lowest class; above them a
  control class (DSCP 48, the agents' pure TCP ACKs) guaranteed :data:`CONTROL_SHARE` of the rate,
  which HTB serves before any class that borrows;
* a NIC shaped to one rate (:func:`shaped_egress_lines`, the star) or a shaped link with one leaf per
  worker address (:func:`link_tree_lines`, :func:`link_class_lines`): ``burst = 1 ms x rate``,
  byte-limited ``bfifo`` leaves, as runtime-notes §12 measured to shape within a few per cent;
* a host's loopback shaped per destination (:func:`loopback_lines`), for the intra-host hops of a run.

Every function returns ``tc -batch`` lines (one ``tc`` command each, without the leading ``tc``).
"""

from __future__ import annotations

import re
from collections import defaultdict
from collections.abc import Sequence
from dataclasses import dataclass

from commsched.scheduling.dscp import CONTROL_DSCP, default_dscp_table, tos_byte
from commsched.testbed.layout import Layout

__all__ = [
    "CONTROL_MINOR",
    "CONTROL_SHARE",
    "LEAF_QUANTUM_BYTES",
    "LEVELS",
    "LoopbackHop",
    "burst_bytes",
    "class_bytes_sent",
    "class_of_dscp",
    "egress_class_lines",
    "egress_tc_lines",
    "link_class_lines",
    "link_tree_lines",
    "loopback_lines",
    "namespace_tc_lines",
    "queue_bytes_for",
    "queue_limit_lines",
    "shaped_egress_lines",
]

#: strict-priority classes of a routed fabric's egress
LEVELS = 8
#: HTB minor of the control class (DSCP ``CONTROL_DSCP``), above the :data:`LEVELS` job classes
CONTROL_MINOR = 9
#: share of an egress's rate the control class is guaranteed: HTB serves a class under its own rate
#: before any class that borrows, so up to this share the control class goes first
CONTROL_SHARE = 0.05
_CLASS_SENT = re.compile(r"^class htb (\S+) .*?\n\s*Sent (\d+) bytes", re.M)
#: HTB quantum of a shaped link's leaves (bytes): at least one GSO super-packet of a veth
LEAF_QUANTUM_BYTES = 200_000


def _rate(bps: float) -> str:
    return f"{max(8000, round(bps))}bit"


def egress_tc_lines(iface: str, rate_bps: float) -> list[str]:
    """``tc -batch`` lines for one egress: HTB parent at the rate, 8 strict-priority DSCP leaves.

    Examples
    --------
    >>> egress_tc_lines("c0", 5e8)[0]
    'qdisc replace dev c0 root handle 1: htb default 17'
    >>> egress_tc_lines("c0", 5e8)[1].split(" htb ")[1]
    'rate 500000000bit ceil 500000000bit burst 65536 cburst 65536'
    """
    burst = max(65536, round(rate_bps / 8 * 1e-3))  # bytes: ~1 ms of traffic (bits / 8 = bytes)
    limit = max(196608, round(rate_bps / 8 * 5e-3))  # bytes: ~5 ms of queue per class
    classes = egress_class_lines(iface, rate_bps, burst)
    c = CONTROL_MINOR
    out = [
        f"qdisc replace dev {iface} root handle 1: htb default {10 + LEVELS - 1}",
        classes[0],
        classes[1],
        f"qdisc add dev {iface} parent 1:{c} handle {c}: bfifo limit {limit}",
        f"filter add dev {iface} parent 1: protocol ip prio {LEVELS + 1} u32 "
        f"match ip dsfield {tos_byte(CONTROL_DSCP):#04x} 0xfc flowid 1:{c}",
    ]
    table = default_dscp_table()
    for level in range(LEVELS):
        minor = 10 + level
        out += [
            classes[2 + level],
            f"qdisc add dev {iface} parent 1:{minor} handle {minor}: bfifo limit {limit}",
            f"filter add dev {iface} parent 1: protocol ip prio {level + 1} u32 "
            f"match ip dsfield {tos_byte(table.dscp[level]):#04x} 0xfc flowid 1:{minor}",
        ]
    return out


def egress_class_lines(iface: str, rate_bps: float, burst: int, verb: str = "add") -> list[str]:
    """The HTB classes of one routed egress (parent, control class, the :data:`LEVELS` leaves), each
    with ``burst`` and ``cburst`` of ``burst`` bytes; ``verb`` ``change`` resets them on a built one.

    The burst is what a class may send at once after an idle time: a switch has none (its link sends
    at the line rate), so a run for real jobs sets it to about one segment
    (:func:`commsched.testbed.tuning.tighten_bursts`).

    Examples
    --------
    >>> egress_class_lines("c0", 5e8, 17898, "change")[2].split(" htb ")[1]
    'rate 500000bit ceil 500000000bit prio 0 quantum 60000 burst 17898 cburst 17898'
    """
    floor = max(8000.0, rate_bps * 1e-3)  # guaranteed rate of every class (0.1 % of the link)
    tail = f"quantum 60000 burst {burst} cburst {burst}"
    out = [
        f"class {verb} dev {iface} parent 1: classid 1:1 htb rate {_rate(rate_bps)} ceil {_rate(rate_bps)} "
        f"burst {burst} cburst {burst}",
        f"class {verb} dev {iface} parent 1:1 classid 1:{CONTROL_MINOR} htb rate "
        f"{_rate(rate_bps * CONTROL_SHARE)} ceil {_rate(rate_bps)} prio 0 {tail}",
    ]
    for level in range(LEVELS):
        out.append(
            f"class {verb} dev {iface} parent 1:1 classid 1:{10 + level} htb rate {_rate(floor)} "
            f"ceil {_rate(rate_bps)} prio {level} {tail}"
        )
    return out


def namespace_tc_lines(layout: Layout, rate_scale: float) -> dict[str, list[str]]:
    """Namespace -> ``tc -batch`` lines shaping every egress at capacity x ``rate_scale``."""
    out: dict[str, list[str]] = defaultdict(list)
    for c in layout.cables:
        for e in (c.a, c.b):
            out[layout.node_ns(e)] += egress_tc_lines(e.iface, c.capacity_bps * rate_scale)
    return dict(out)


def class_of_dscp(dscp: int) -> int:
    """The HTB leaf minor (``1:MINOR``) that DSCP ``dscp`` lands in (unknown code points: lowest class)."""
    table = default_dscp_table()
    for level in range(LEVELS):
        if table.dscp[level] == dscp:
            return 10 + level
    return 10 + LEVELS - 1


def class_bytes_sent(text: str) -> dict[str, int]:
    """Class id -> bytes it sent, from ``tc -s class show`` (iproute2 has no JSON for HTB classes).

    Examples
    --------
    >>> class_bytes_sent("class htb 1:10 parent 1:1 prio 0 rate 8Kbit\\n Sent 1500 bytes 1 pkt")
    {'1:10': 1500}
    """
    return {m[0]: int(m[1]) for m in _CLASS_SENT.findall(text)}


def queue_limit_lines(iface: str, limit_bytes: int) -> list[str]:
    """Set every class queue of one routed egress (:func:`egress_tc_lines`) to ``limit_bytes``.

    Examples
    --------
    >>> queue_limit_lines("c0", 1000)[0]
    'qdisc change dev c0 parent 1:10 handle 10: bfifo limit 1000'
    """
    return [
        f"qdisc change dev {iface} parent 1:{10 + level} handle {10 + level}: bfifo limit {limit_bytes}"
        for level in range(LEVELS)
    ]


def burst_bytes(rate_bps: float) -> int:
    """HTB burst for a rate: 1 ms of it in bytes, at least 256 KiB (1 Gb/s then shapes to 99.7 %)."""
    return max(256 << 10, int(rate_bps / 8 / 1000))


def queue_bytes_for(rate_bps: float) -> int:
    """Byte limit of a shaped link's queue: 5 ms of traffic at the rate, at least 256 KiB."""
    return max(256 << 10, int(rate_bps / 8 * 0.005))


def shaped_egress_lines(dev: str, rate_bps: float, queue_bytes: int) -> list[str]:
    """One NIC's egress shaped to ``rate_bps``: HTB root, one class, a ``bfifo`` of ``queue_bytes``.

    Examples
    --------
    >>> shaped_egress_lines("e0", 1e9, 1000)[2]
    'qdisc add dev e0 parent 1:1 handle 10: bfifo limit 1000'
    """
    rate, burst = f"{int(rate_bps)}bit", burst_bytes(rate_bps)
    return [
        f"qdisc add dev {dev} root handle 1: htb default 1",
        f"class add dev {dev} parent 1: classid 1:1 htb rate {rate} ceil {rate} burst {burst} cburst {burst}",
        f"qdisc add dev {dev} parent 1:1 handle 10: bfifo limit {queue_bytes}",
    ]


def _link_class(dev: str, verb: str, *, parent: str, classid: str, rate: float, ceil: float) -> str:
    burst = burst_bytes(ceil)
    line = (
        f"class {verb} dev {dev} parent {parent} classid {classid} "
        f"htb rate {int(rate)}bit ceil {int(ceil)}bit burst {burst} cburst {burst}"
    )
    return line if classid == "1:1" else f"{line} quantum {LEAF_QUANTUM_BYTES}"


def link_class_lines(dev: str, rate_bps: float, leaves: int, verb: str = "add") -> list[str]:
    """A shaped link end's classes: ``1:1`` at the rate, leaves ``1:10..`` at ``rate / leaves`` each,
    borrowing up to the rate (``verb``: ``add``, or ``change`` to set a new rate in place).

    Examples
    --------
    >>> link_class_lines("x", 1e8, 2, "change")[1].split(" htb ")[1]
    'rate 50000000bit ceil 100000000bit burst 262144 cburst 262144 quantum 200000'
    """
    out = [_link_class(dev, verb, parent="1:", classid="1:1", rate=rate_bps, ceil=rate_bps)]
    share = rate_bps / leaves
    for i in range(leaves):
        out.append(_link_class(dev, verb, parent="1:1", classid=f"1:{10 + i}", rate=share, ceil=rate_bps))
    return out


def link_tree_lines(dev: str, rate_bps: float, *, match: str, ips: Sequence[str]) -> list[str]:
    """A shaped link end: HTB root (default leaf ``1:10``), :func:`link_class_lines`, then per address
    of ``ips`` a ``bfifo`` leaf and a ``u32`` filter on the address (``match``: ``src`` or ``dst``)."""
    out = [f"qdisc add dev {dev} root handle 1: htb default 10", *link_class_lines(dev, rate_bps, len(ips))]
    limit = queue_bytes_for(rate_bps)
    for i, ip in enumerate(ips):
        leaf = f"1:{10 + i}"
        out += [
            f"qdisc add dev {dev} parent {leaf} handle {10 + i}: bfifo limit {limit}",
            f"filter add dev {dev} parent 1: protocol ip prio 1 u32 match ip {match} {ip}/32 flowid {leaf}",
        ]
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopbackHop:
    """Traffic to ``dst_ip:dport`` over a host's loopback, shaped to ``rate_bps`` (bits/s)."""

    dst_ip: str
    dport: int
    rate_bps: float


def loopback_lines(hops: Sequence[LoopbackHop]) -> list[str]:
    """A host's ``lo``: HTB root, an unshaped default class, one class and filter per hop of ``hops``.

    Examples
    --------
    >>> lines = loopback_lines([LoopbackHop(dst_ip="10.0.0.1", dport=9, rate_bps=1e9)])
    >>> lines[2].split(" htb ")[1]
    'rate 1000000000bit ceil 1000000000bit burst 125000 cburst 125000 quantum 65536'
    """
    out = [
        "qdisc add dev lo root handle 1: htb default 1",
        "class add dev lo parent 1: classid 1:1 htb rate 100gbit",
    ]
    for i, hop in enumerate(hops):
        minor, rate = 10 + i, hop.rate_bps
        burst = max(64 << 10, int(rate / 8 * 1e-3))  # ~1 ms of traffic, bytes
        out += [
            f"class add dev lo parent 1: classid 1:{minor} htb rate {rate:.0f}bit ceil {rate:.0f}bit "
            f"burst {burst} cburst {burst} quantum 65536",
            f"filter add dev lo parent 1: protocol ip prio 1 u32 match ip dst {hop.dst_ip}/32 "
            f"match ip dport {hop.dport} 0xffff flowid 1:{minor}",
        ]
    return out
