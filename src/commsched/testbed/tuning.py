"""A built testbed tuned for real jobs: deep class queues, steady TCP, small packets and bursts, shaped lo.

Deeper switch queues are a lossless fabric, as RoCE with PFC is (Crux §6, vClos §8). The testbed's
class queues hold ~5 ms of traffic (at least 192 KiB), right for its shaping and priority checks. A
data-parallel job starts every ring step with a burst on all its connections at once; on a ToR uplink
shared 2:1 those bursts overflow such a queue, and a TCP flow of a few dozen segments that loses its
tail waits for a retransmission timeout (200 ms minimum on Linux), several iterations' worth. The
fabrics the papers measured do not drop (RoCE with priority flow control), and the fluid simulator has
no loss either, so a run gives every class queue room for every byte a step can have in flight.

The queues stay FIFOs: a FIFO shares a link less evenly among the TCP flows in it than the
simulator's max-min share, and a ring step ends with its slowest flow. A per-flow fair queue
(``fq_codel``, ``sfq``, ``fq``) would match the model better, but the kernels this runs on here have
none of them built (only ``bfifo``/``pfifo`` under HTB).

The queueing rules themselves are :mod:`.htb`'s.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping, Sequence

from commsched.testbed import htb, netns
from commsched.testbed.handle import Testbed

__all__ = [
    "LOOPBACK_MAX_BPS",
    "deepen_queues",
    "segment_packets",
    "shape_loopback",
    "steady_tcp",
    "tight_burst_bytes",
    "tighten_bursts",
]

#: the fastest rate a hop over a host's loopback is shaped to: HTB held 2 Gbit/s within 5-11 % here
#: (docs/testbed.md); a faster intra-host link is left unshaped (loopback's own speed, several
#: Gbit/s for a Python TCP flow on this machine, and the report says so)
LOOPBACK_MAX_BPS = 2e9


def deepen_queues(tb: Testbed, limit_bytes: int) -> int:
    """Set every class queue of every emulated egress to ``limit_bytes``; returns how many changed."""
    lines: dict[str, list[str]] = defaultdict(list)
    for cable in tb.layout.cables:
        for end in (cable.a, cable.b):
            lines[tb.layout.node_ns(end)] += htb.queue_limit_lines(end.iface, limit_bytes)
    for ns, batch in lines.items():
        netns.run(["ip", "netns", "exec", ns, "tc", "-batch", "-"], "\n".join(batch) + "\n")
    return sum(len(b) for b in lines.values())


def steady_tcp(tb: Testbed) -> None:
    """No slow start after idle in the host namespaces (``net.ipv4.tcp_slow_start_after_idle=0``).

    A job's connections idle during its compute; Linux would restart each from the initial window at
    every iteration, which no RDMA transport does and the fluid model does not assume.
    """
    for host in tb.topology.hosts:
        ns = tb.host_namespace(host.id)
        netns.run(["ip", "netns", "exec", ns, "sysctl", "-q", "-w", "net.ipv4.tcp_slow_start_after_idle=0"])


def segment_packets(tb: Testbed, size_bytes: int) -> int:
    """Hosts segment TCP into packets of at most ``size_bytes`` (``gso_max_size`` on every host NIC);
    returns how many NICs changed.

    A sender's TCP stack otherwise hands 64 KB segments down the veth, and every router stores and
    forwards each of them whole through an HTB bucket of about the same size. A switch forwards
    frames of the MTU: strict priority there waits at most one frame of a lower class, where here a
    top-class packet waits behind a whole lower-class segment, 64 KB x 8 / rate at every hop (8.4 ms
    at 62.5 Mbit/s), time the lower classes take from it. ``1500`` is MTU packets (the most CPU).
    """
    lines: dict[str, list[str]] = defaultdict(list)
    for host in tb.topology.hosts:
        for nic in tb.host_addresses(host.id):
            end = tb.layout.nic_cable(nic).a
            lines[tb.layout.node_ns(end)].append(f"link set dev {end.iface} gso_max_size {int(size_bytes)}")
    for ns, batch in lines.items():
        netns.run(["ip", "-n", ns, "-batch", "-"], "\n".join(batch) + "\n")
    return sum(len(b) for b in lines.values())


def tight_burst_bytes(segment_bytes: int) -> int:
    """The HTB burst that lets a class send one whole segment at once and no more: the segment plus
    its Ethernet header, and one frame of slack (bytes).

    >>> tight_burst_bytes(16384)
    17912
    """
    return int(segment_bytes) + 14 + 1514


def tighten_bursts(tb: Testbed, burst_bytes: int) -> int:
    """Set the burst of every HTB class of every emulated egress to ``burst_bytes``; returns how many
    classes changed.

    A token bucket fills while its link idles and then sends that much at once (a veth has no line
    rate of its own): with the fabric's default burst (64 KiB or 1 ms of the rate) a ring step that
    follows a pause crossed a 62.5 Mbit/s link 8 ms sooner than its bytes at the rate, where a
    switch's port sends at its line rate whatever came before (docs/testbed-run.md, "Measured").
    """
    lines: dict[str, list[str]] = defaultdict(list)
    for cable in tb.layout.cables:
        rate = cable.capacity_bps * tb.rate_scale  # bits/s
        for end in (cable.a, cable.b):
            lines[tb.layout.node_ns(end)] += htb.egress_class_lines(end.iface, rate, burst_bytes, "change")
    for ns, batch in lines.items():
        netns.run(["ip", "netns", "exec", ns, "tc", "-batch", "-"], "\n".join(batch) + "\n")
    return sum(len(b) for b in lines.values())


def shape_loopback(tb: Testbed, hops: Mapping[str, Sequence[htb.LoopbackHop]]) -> None:
    """Shape the loopback of every host of ``hops`` (host id -> its hops, as
    :func:`.htb.loopback_lines` takes them).

    A hop ``GPU a -> GPU b`` of one host runs between two listeners of that host's namespace, so its
    packets cross the namespace's loopback; one HTB class per destination (address and port) holds it
    to its rate. The loopback's old root qdisc (if any) is replaced.
    """
    for host, host_hops in hops.items():
        if not host_hops:
            continue
        ns = tb.host_namespace(host)
        netns.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root"], check=False)
        batch = htb.loopback_lines(host_hops)
        netns.run(["ip", "netns", "exec", ns, "tc", "-batch", "-"], "\n".join(batch) + "\n")
