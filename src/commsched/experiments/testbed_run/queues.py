"""Deeper switch queues for real jobs: a lossless fabric, as RoCE with PFC is (Crux §6, vClos §8).

The testbed's class queues hold ~5 ms of traffic (at least 192 KiB), right for its shaping and
priority checks. A data-parallel job starts every ring step with a burst on all its connections at
once; on a ToR uplink shared 2:1 those bursts overflow such a queue, and a TCP flow of a few dozen
segments that loses its tail waits for a retransmission timeout (200 ms minimum on Linux), several
iterations' worth. The fabrics the papers measured do not drop (RoCE with priority flow control), and
the fluid simulator has no loss either, so the run gives every class queue room for every byte a
step can have in flight.

The queues stay FIFOs: a FIFO shares a link less evenly among the TCP flows in it than the
simulator's max-min share, and a ring step ends with its slowest flow. A per-flow fair queue
(``fq_codel``, ``sfq``, ``fq``) would match the model better, but the kernels this runs on here have
none of them built (only ``bfifo``/``pfifo`` under HTB).
"""

from __future__ import annotations

from collections import defaultdict

from commsched.testbed import Testbed, netns
from commsched.testbed.config import LEVELS

__all__ = ["deepen_queues", "mtu_packets", "steady_tcp"]


def deepen_queues(tb: Testbed, limit_bytes: int) -> int:
    """Set every class queue of every emulated egress to ``limit_bytes``; returns how many changed."""
    lines: dict[str, list[str]] = defaultdict(list)
    for cable in tb.layout.cables:
        for end in (cable.a, cable.b):
            ns = tb.layout.node_ns(end)
            for level in range(LEVELS):
                minor = 10 + level
                lines[ns].append(
                    f"qdisc change dev {end.iface} parent 1:{minor} handle {minor}: bfifo limit {limit_bytes}"
                )
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


def mtu_packets(tb: Testbed) -> int:
    """No segmentation offload on the host NICs (``gso_max_size 1500``); returns how many changed.

    A sender's TCP stack otherwise hands 64 KB segments down the veth, and every router stores and
    forwards each of them whole through an HTB bucket of about the same size: tens of milliseconds
    per hop at the emulated rates, added to every ring step. A switch forwards frames of the MTU.
    """
    lines: dict[str, list[str]] = defaultdict(list)
    for host in tb.topology.hosts:
        for nic in tb.host_addresses(host.id):
            end = tb.layout.nic_cable(nic).a
            lines[tb.layout.node_ns(end)].append(f"link set dev {end.iface} gso_max_size 1500")
    for ns, batch in lines.items():
        netns.run(["ip", "-n", ns, "-batch", "-"], "\n".join(batch) + "\n")
    return sum(len(b) for b in lines.values())
