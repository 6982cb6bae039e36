"""A one-switch star of hosts in network namespaces, every NIC shaped to the same rate both ways.

BytePS's §4.1 network: a full-bisection switch whose only bottlenecks are the NICs. A hub namespace
``<prefix><pid>h`` holds a Linux bridge; each host ``i`` is a namespace ``<prefix><pid>n<i>`` joined to
the bridge by a veth pair (host end ``<prefix><pid>e<i>`` with address ``10.214.0.<i+1>/24``, hub end
``<prefix><pid>p<i>``). The host end's egress (what the host sends) and the hub end's egress (what it
receives) each go through an HTB class at the rate with a bounded ``bfifo`` leaf
(:func:`commsched.testbed.htb.shaped_egress_lines`), as :mod:`commsched.testbed.shaped_link` shapes its link.

This module names the star's parts (:func:`plan_star`, pure); :func:`commsched.testbed.fabric.plan_fabric`
plans it as every fabric is planned and :func:`commsched.testbed.fabric.star_fabric` builds it (one
``ip``/``tc`` batch per namespace, all at once) and removes it on exit.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.testbed.htb import queue_bytes_for

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
