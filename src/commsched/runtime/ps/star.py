"""A one-switch star of hosts in network namespaces, every NIC shaped to the same rate both ways.

A hub namespace ``<prefix><pid>h`` holds a Linux bridge; each host ``i`` is a namespace
``<prefix><pid>n<i>`` joined to the bridge by a veth pair (host end ``<prefix><pid>e<i>`` with address
``10.214.0.<i+1>/24``, hub end ``<prefix><pid>p<i>``). The host end's egress (what the host sends) and
the hub end's egress (what it receives) each go through an HTB class at the rate with a bounded
``bfifo`` leaf, as :mod:`commsched.runtime.ps.shaped_link` shapes its link: a full-bisection switch
whose only bottlenecks are the NICs, BytePS's §4.1 network. Everything is removed in ``finally``
(deleting a namespace deletes its veth ends and qdiscs). Needs root.
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.runtime.ps.shaped_link import burst_bytes, queue_bytes_for, require_root, run_command

SUBNET = "10.214.0"
MAX_HOSTS = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class StarFabric:
    """A live star: ``host_ns[i]`` holds ``host_ip[i]``; every NIC shaped to ``rate_bps`` each way."""

    hub_ns: str
    host_ns: tuple[str, ...]
    host_ip: tuple[str, ...]
    rate_bps: float

    def argv(self, host: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside host ``host``'s namespace."""
        return ["ip", "netns", "exec", self.host_ns[host], *argv]


def _shape(ns: str, dev: str, rate_bps: float, queue_bytes: int | None) -> None:
    rate, burst = f"{int(rate_bps)}bit", str(burst_bytes(rate_bps))
    exe = ["ip", "netns", "exec", ns, "tc"]
    run_command([*exe, "qdisc", "add", "dev", dev, "root", "handle", "1:", "htb", "default", "1"])
    htb = ["htb", "rate", rate, "ceil", rate, "burst", burst, "cburst", burst]
    run_command([*exe, "class", "add", "dev", dev, "parent", "1:", "classid", "1:1", *htb])
    run_command([*exe, "qdisc", "add", "dev", dev, "parent", "1:1", "handle", "10:", "bfifo", "limit",
          str(queue_bytes or queue_bytes_for(rate_bps))])  # fmt: skip


@contextmanager
def star_fabric(
    rate_bps: float, *, hosts: int, prefix: str = "cs6", queue_bytes: int | None = None
) -> Iterator[StarFabric]:
    """Build the star of ``hosts`` hosts shaped at ``rate_bps``; remove it on exit (also on failure).

    Examples
    --------
    >>> with star_fabric(3e8, hosts=3) as fab:  # doctest: +SKIP
    ...     subprocess.run(fab.argv(0, ["ping", "-c1", fab.host_ip[2]]))
    """
    if not 2 <= hosts <= MAX_HOSTS:
        raise InputError(f"{hosts} hosts", where="hosts", expected=f"2..{MAX_HOSTS}")
    if not rate_bps > 0:
        raise InputError(f"rate {rate_bps!r}", where="rate_bps", expected="> 0 bits/s")
    require_root()
    tag = f"{prefix}{os.getpid()}"
    fab = StarFabric(
        hub_ns=f"{tag}h",
        host_ns=tuple(f"{tag}n{i}" for i in range(hosts)),
        host_ip=tuple(f"{SUBNET}.{i + 1}" for i in range(hosts)),
        rate_bps=rate_bps,
    )
    created: list[str] = []
    hub = ["ip", "netns", "exec", fab.hub_ns]
    try:
        for ns in (fab.hub_ns, *fab.host_ns):
            run_command(["ip", "netns", "add", ns])
            created.append(ns)
        run_command([*hub, "ip", "link", "add", "br0", "type", "bridge"])
        run_command([*hub, "ip", "link", "set", "br0", "up"])
        run_command([*hub, "ip", "link", "set", "lo", "up"])
        for i, ns in enumerate(fab.host_ns):
            host_dev, hub_dev = f"{tag}e{i}", f"{tag}p{i}"
            run_command(["ip", "link", "add", host_dev, "netns", ns, "type", "veth", "peer", "name", hub_dev,
                  "netns", fab.hub_ns])  # fmt: skip
            run_command([*hub, "ip", "link", "set", hub_dev, "master", "br0"])
            run_command([*hub, "ip", "link", "set", hub_dev, "up"])
            run_command(fab.argv(i, ["ip", "addr", "add", f"{fab.host_ip[i]}/24", "dev", host_dev]))
            run_command(fab.argv(i, ["ip", "link", "set", host_dev, "up"]))
            run_command(fab.argv(i, ["ip", "link", "set", "lo", "up"]))
            _shape(ns, host_dev, rate_bps, queue_bytes)
            _shape(fab.hub_ns, hub_dev, rate_bps, queue_bytes)
        yield fab
    finally:
        for ns in reversed(created):
            subprocess.run(["ip", "netns", "del", ns], capture_output=True, check=False)
