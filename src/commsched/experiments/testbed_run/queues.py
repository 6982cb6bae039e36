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
from typing import Any

from commsched.runtime.launch.jobs import JobLayout
from commsched.testbed import Testbed, netns
from commsched.testbed.config import LEVELS

__all__ = ["LOOPBACK_MAX_BPS", "deepen_queues", "mtu_packets", "shape_loopback", "steady_tcp"]


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


#: the fastest rate a hop over a host's loopback is shaped to: HTB held 2 Gbit/s within 5-11 % here
#: (docs/testbed.md); a faster intra-host link is left unshaped (loopback's own speed, several
#: Gbit/s for a Python TCP flow on this machine, and the report says so)
LOOPBACK_MAX_BPS = 2e9


def shape_loopback(tb: Testbed, jobs: list[JobLayout]) -> dict[str, Any]:
    """Shape every intra-host hop of the flat rings of ``jobs`` to its link's scaled rate, on ``lo``.

    A hop ``GPU a -> GPU b`` of one host runs between two listeners of that host's namespace, so its
    packets cross the namespace's loopback; one HTB class per destination (address and port) holds
    it to ``min capacity of the intra-host path x rate scale`` (bit/s), unless that is above
    :data:`LOOPBACK_MAX_BPS`. Returns ``{"shaped": [...], "unshaped": [...], "links": {link: bps}}``
    (``links``: the intra-host links at the rate they were shaped to, for the twin).
    """
    out: dict[str, Any] = {"shaped": [], "unshaped": [], "links": {}}
    lines: dict[str, list[str]] = defaultdict(list)
    topo = tb.topology
    for job in (j for j in jobs if j.flat):
        for a, b in job.ring():
            if a.host_index != b.host_index:
                continue
            path = topo.intra_host_path(a.gpu, b.gpu)
            rate = float(min(topo.capacity_bps[list(path.links)])) * tb.rate_scale  # bits/s
            hop = {"job": job.id, "src": str(a.gpu), "dst": str(b.gpu), "rate_bps": rate}
            if rate > LOOPBACK_MAX_BPS:
                out["unshaped"].append({**hop, "why": f"above {LOOPBACK_MAX_BPS:.0e} bit/s"})
                continue
            ns = tb.host_namespace(job.hosts[a.host_index])
            minor = 10 + sum(1 for x in lines[ns] if x.startswith("class"))
            burst = max(64 << 10, int(rate / 8 * 1e-3))  # ~1 ms of traffic, bytes
            lines[ns] += [
                f"class add dev lo parent 1: classid 1:{minor} htb rate {rate:.0f}bit ceil {rate:.0f}bit "
                f"burst {burst} cburst {burst} quantum 65536",
                f"filter add dev lo parent 1: protocol ip prio 1 u32 match ip dst {b.ip}/32 "
                f"match ip dport {b.port} 0xffff flowid 1:{minor}",
            ]
            out["shaped"].append(hop)
            out["links"].update({int(lk): rate for lk in path.links})
    for ns, batch in lines.items():
        netns.run(["ip", "netns", "exec", ns, "tc", "qdisc", "del", "dev", "lo", "root"], check=False)
        head = [
            "qdisc add dev lo root handle 1: htb default 1",
            "class add dev lo parent 1: classid 1:1 htb rate 100gbit",
        ]
        netns.run(["ip", "netns", "exec", ns, "tc", "-batch", "-"], "\n".join(head + batch) + "\n")
    return out
