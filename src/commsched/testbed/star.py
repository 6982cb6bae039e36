"""A one-switch star of hosts in network namespaces, every NIC shaped to the same rate both ways.

BytePS's §4.1 network: a full-bisection switch whose only bottlenecks are the NICs. A hub namespace
``<prefix><pid>h`` holds a Linux bridge; each host ``i`` is a namespace ``<prefix><pid>n<i>`` joined to
the bridge by a veth pair (host end ``<prefix><pid>e<i>`` with address ``10.214.0.<i+1>/24``, hub end
``<prefix><pid>p<i>``). The host end's egress (what the host sends) and the hub end's egress (what it
receives) each go through an HTB class at the rate with a bounded ``bfifo`` leaf
(:func:`commsched.testbed.htb.shaped_egress_lines`), as :mod:`commsched.testbed.shaped_link` shapes its link.

The star is built with the testbed's machinery (:mod:`commsched.testbed.netns`): the same capability
check, and the whole configuration as ``ip``/``tc`` batches (:func:`star_lines`, pure, so the layout is
testable without root), the root namespace's first, then one batch per namespace, all at once.
Everything is removed in ``finally`` (deleting a namespace deletes its veth ends and qdiscs).
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.testbed import netns
from commsched.testbed.htb import queue_bytes_for, shaped_egress_lines

SUBNET = "10.214.0"
MAX_HOSTS = 200


@dataclass(frozen=True, slots=True, kw_only=True)
class StarFabric:
    """A star: ``host_ns[i]`` holds ``host_ip[i]`` on ``host_dev[i]``; every NIC shaped to ``rate_bps``."""

    hub_ns: str
    host_ns: tuple[str, ...]
    host_ip: tuple[str, ...]
    host_dev: tuple[str, ...]
    hub_dev: tuple[str, ...]
    rate_bps: float
    queue_bytes: int

    def argv(self, host: int, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside host ``host``'s namespace."""
        return ["ip", "netns", "exec", self.host_ns[host], *argv]


@dataclass(frozen=True, slots=True, kw_only=True)
class StarLines:
    """The star's configuration: root-namespace ``ip -batch`` lines, then per-namespace ``ip``/``tc``."""

    root: tuple[str, ...]
    ip: dict[str, list[str]]
    tc: dict[str, list[str]]


def plan_star(
    rate_bps: float, *, hosts: int, prefix: str = "cs6", queue_bytes: int | None = None
) -> StarFabric:
    """The names and addresses of a star of ``hosts`` hosts (nothing is created).

    Examples
    --------
    >>> fab = plan_star(3e8, hosts=3, prefix="t")
    >>> fab.host_ip
    ('10.214.0.1', '10.214.0.2', '10.214.0.3')
    """
    if not 2 <= hosts <= MAX_HOSTS:
        raise InputError(f"{hosts} hosts", where="hosts", expected=f"2..{MAX_HOSTS}")
    if not rate_bps > 0:
        raise InputError(f"rate {rate_bps!r}", where="rate_bps", expected="> 0 bits/s")
    tag = f"{prefix}{os.getpid()}"
    return StarFabric(
        hub_ns=f"{tag}h",
        host_ns=tuple(f"{tag}n{i}" for i in range(hosts)),
        host_ip=tuple(f"{SUBNET}.{i + 1}" for i in range(hosts)),
        host_dev=tuple(f"{tag}e{i}" for i in range(hosts)),
        hub_dev=tuple(f"{tag}p{i}" for i in range(hosts)),
        rate_bps=rate_bps,
        queue_bytes=queue_bytes or queue_bytes_for(rate_bps),
    )


def star_lines(fab: StarFabric) -> StarLines:
    """Every command that builds ``fab``.

    Examples
    --------
    >>> lines = star_lines(plan_star(1e9, hosts=2, prefix="t"))
    >>> sum(len(v) for v in lines.tc.values())  # each NIC shaped both ways: 3 lines per veth end
    12
    """
    root = [f"netns add {ns}" for ns in (fab.hub_ns, *fab.host_ns)]
    ip: dict[str, list[str]] = {fab.hub_ns: ["link add br0 type bridge", "link set br0 up", "link set lo up"]}
    tc: dict[str, list[str]] = {fab.hub_ns: []}
    ends = zip(fab.host_ns, fab.host_ip, fab.host_dev, fab.hub_dev, strict=True)
    for ns, ip_addr, host_dev, hub_dev in ends:
        root.append(f"link add {host_dev} netns {ns} type veth peer name {hub_dev} netns {fab.hub_ns}")
        ip[fab.hub_ns] += [f"link set {hub_dev} master br0", f"link set {hub_dev} up"]
        ip[ns] = [f"addr add {ip_addr}/24 dev {host_dev}", f"link set {host_dev} up", "link set lo up"]
        tc[ns] = shaped_egress_lines(host_dev, fab.rate_bps, fab.queue_bytes)
        tc[fab.hub_ns] += shaped_egress_lines(hub_dev, fab.rate_bps, fab.queue_bytes)
    return StarLines(root=tuple(root), ip=ip, tc=tc)


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
    fab = plan_star(rate_bps, hosts=hosts, prefix=prefix, queue_bytes=queue_bytes)
    netns.require_capability()
    lines = star_lines(fab)
    try:
        netns.run(["ip", "-batch", "-"], "\n".join(lines.root) + "\n")
        for tool, per_ns in (("ip", lines.ip), ("tc", lines.tc)):
            netns.run_many(
                [([tool, "-n", ns, "-batch", "-"], "\n".join(ls) + "\n") for ns, ls in per_ns.items() if ls]
            )
        yield fab
    finally:
        for ns in (fab.hub_ns, *fab.host_ns):
            if netns.exists(ns):
                netns.run(["ip", "netns", "del", ns], check=False)
