"""A shaped link between two network namespaces (servers on one side, workers on the other).

Two namespaces ``<prefix><pid>a`` (servers) and ``<prefix><pid>b`` (workers) joined by one veth pair;
each end's egress goes through an HTB class at the requested rate with ``burst = 1 ms x rate`` and
byte-limited ``bfifo`` leaves (bounded queues), as runtime-notes §12 measured to shape within a few
per cent. Each worker has its own address in the worker namespace (``DMLC_NODE_HOST``; its
connections leave from it) and its own leaf in each direction (``u32`` on source / destination
address) at ``rate / workers`` that may borrow up to the whole rate: the workers share the link
max-min fairly, as the models assume (one FIFO leaf for all of them splits it unevenly, measured up to
10 % between two workers within an iteration, and every part then completes at the slower worker's
pace). :meth:`ShapedLink.set_rate` changes the rate in place (``tc class change``). This module names
the link's parts (:func:`plan_link`, pure); :func:`commsched.testbed.fabric.plan_fabric` plans it as
every fabric is planned and :func:`commsched.testbed.fabric.shaped_link` builds it and removes it on
exit (deleting a namespace deletes its veth end and qdiscs).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from commsched.testbed import htb
from commsched.testbed.netns import run as run_command

SERVER_IP = "10.213.0.1"
WORKER_IP = "10.213.0.2"
#: most workers a shaped link gives their own address and leaf (10.213.0.2 ...)
MAX_WORKERS = 64


def worker_ips(workers: int) -> tuple[str, ...]:
    """The worker namespace's addresses, one per worker.

    Examples
    --------
    >>> worker_ips(2)
    ('10.213.0.2', '10.213.0.3')
    """
    return tuple(f"10.213.0.{2 + i}" for i in range(workers))


@dataclass(frozen=True, slots=True, kw_only=True)
class ShapedLink:
    """A live shaped link; ``server_ns`` holds ``server_ip``, ``worker_ns`` the ``worker_ips``."""

    server_ns: str
    worker_ns: str
    server_dev: str
    worker_dev: str
    server_ip: str = SERVER_IP
    worker_ip: str = WORKER_IP
    worker_ips: tuple[str, ...] = (WORKER_IP,)

    def argv(self, ns: str, argv: Sequence[str]) -> list[str]:
        """``argv`` run inside namespace ``ns``."""
        return ["ip", "netns", "exec", ns, *argv]

    def set_rate(self, rate_bps: float) -> None:
        """Change both directions' rate in place (``tc class change``)."""
        for ns, dev in ((self.server_ns, self.server_dev), (self.worker_ns, self.worker_dev)):
            for line in htb.link_class_lines(dev, rate_bps, len(self.worker_ips), "change"):
                run_command(self.argv(ns, ["tc", *line.split()]))


@dataclass(frozen=True, slots=True, kw_only=True)
class LoopbackLink:
    """Every role on this host's loopback, unshaped (same interface as :class:`ShapedLink`)."""

    server_ns: str = ""
    worker_ns: str = ""
    server_ip: str = "127.0.0.1"
    worker_ip: str = "127.0.0.1"
    worker_ips: tuple[str, ...] = ("127.0.0.1",)

    def argv(self, ns: str, argv: Sequence[str]) -> list[str]:
        return list(argv)


def plan_link(*, prefix: str = "csp", workers: int = 1) -> ShapedLink:
    """The names and addresses of a shaped link with ``workers`` worker addresses (nothing is created).

    Examples
    --------
    >>> link = plan_link(prefix="t", workers=2)
    >>> link.worker_ips, link.server_ns.endswith("a")
    (('10.213.0.2', '10.213.0.3'), True)
    """
    tag = f"{prefix}{os.getpid()}"
    ips = worker_ips(workers)
    return ShapedLink(server_ns=f"{tag}a", worker_ns=f"{tag}b", server_dev=f"{tag}x", worker_dev=f"{tag}y",
                      worker_ip=ips[0], worker_ips=ips)  # fmt: skip
