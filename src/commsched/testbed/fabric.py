"""Every fabric of the testbed, planned by one function and built by one executor.

Three kinds: a routed topology (:class:`RoutedSpec`: routers and hosts in namespaces, ECMP routes,
8-class DSCP queues; ``commsched testbed up``), a one-switch star of hosts whose only bottlenecks are
their NICs (:class:`StarSpec`, BytePS §4.1) and a shaped link between a server and a worker namespace
(:class:`LinkSpec`). :func:`plan_fabric` turns any of them into a :class:`FabricPlan` (pure: the
namespaces, sysctls, root-namespace veth lines, and per namespace its ``ip`` and ``tc`` batches; the
queueing rules are :mod:`.htb`'s); :func:`create_step` runs one step of a plan (:data:`FABRIC_STEPS`,
in order) and :func:`built` all of them, removing what it created on exit (also on failure; deleting a
namespace deletes its veth ends and qdiscs). :func:`star_fabric` and :func:`shaped_link` are the star
and the shaped link as context managers; :func:`commsched.testbed.build.up` builds a routed fabric
step by step, recording its phase in the state file.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field

from commsched.errors import InputError
from commsched.testbed import config, htb, netns
from commsched.testbed.layout import Layout, plan_layout
from commsched.testbed.shaped_link import MAX_WORKERS, ShapedLink, plan_link
from commsched.testbed.star import StarFabric, plan_star
from commsched.topology import Topology

__all__ = [
    "FABRIC_STEPS",
    "FabricPlan",
    "LinkSpec",
    "RoutedSpec",
    "StarSpec",
    "built",
    "create_step",
    "plan_fabric",
    "run_batches",
    "shaped_link",
    "star_fabric",
]

#: the steps that build a fabric, in order
FABRIC_STEPS = ("namespaces", "sysctls", "links", "routes", "queues")


@dataclass(frozen=True, slots=True, kw_only=True)
class RoutedSpec:
    """A routed topology named ``name``: links at capacity x ``rate_scale``, hash seeds from ``seed``."""

    topology: Topology
    name: str
    rate_scale: float
    seed: int = 0


@dataclass(frozen=True, slots=True, kw_only=True)
class StarSpec:
    """A star of ``hosts`` hosts, every NIC shaped to ``rate_bps`` both ways (``queue_bytes``: 5 ms)."""

    rate_bps: float
    hosts: int
    prefix: str = "cs6"
    queue_bytes: int | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkSpec:
    """A link shaped to ``rate_bps`` each way, with ``workers`` worker addresses and leaves."""

    rate_bps: float
    prefix: str = "csp"
    workers: int = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class FabricPlan:
    """What building a fabric runs (nothing is created): per step, the lines or settings it applies.

    ``links``: root-namespace ``ip -batch`` lines (veth pairs, each end in its namespace); ``ip`` and
    ``tc``: namespace -> its ``ip -batch`` / ``tc -batch`` lines; ``sysctls``: namespace -> settings.
    ``fabric``: the kind's own description (a routed topology's :class:`~.layout.Layout`, a
    :class:`~.star.StarFabric` or a :class:`~.shaped_link.ShapedLink`).
    """

    namespaces: tuple[str, ...]
    links: tuple[str, ...]
    ip: dict[str, list[str]]
    tc: dict[str, list[str]]
    fabric: Layout | StarFabric | ShapedLink
    sysctls: dict[str, dict[str, str]] = field(default_factory=dict)


def plan_fabric(spec: RoutedSpec | StarSpec | LinkSpec) -> FabricPlan:
    """The plan of a fabric of any kind (pure: nothing is created).

    Examples
    --------
    >>> plan = plan_fabric(StarSpec(rate_bps=1e9, hosts=2, prefix="t"))
    >>> sum(len(v) for v in plan.tc.values())  # each NIC shaped both ways: 3 lines per veth end
    12
    >>> plan = plan_fabric(LinkSpec(rate_bps=1e9, prefix="t", workers=2))
    >>> len(plan.namespaces), len(plan.links)
    (2, 1)
    """
    if isinstance(spec, RoutedSpec):
        return _routed(spec)
    if isinstance(spec, StarSpec):
        return _star(
            plan_star(spec.rate_bps, hosts=spec.hosts, prefix=spec.prefix, queue_bytes=spec.queue_bytes)
        )
    if not 1 <= spec.workers <= MAX_WORKERS:
        raise InputError(f"{spec.workers} workers", where="workers", expected=f"1..{MAX_WORKERS}")
    return _link(plan_link(prefix=spec.prefix, workers=spec.workers), spec.rate_bps)


def _routed(spec: RoutedSpec) -> FabricPlan:
    layout = plan_layout(spec.topology, spec.name)
    sysctls = {layout.netns(h): config.host_sysctls() for h in layout.hosts}
    sysctls.update({layout.netns(r): config.router_sysctls(spec.seed, r) for r in layout.routers})
    return FabricPlan(
        namespaces=layout.namespaces,
        links=tuple(config.veth_lines(layout)),
        ip=config.namespace_ip_lines(layout),
        tc=htb.namespace_tc_lines(layout, spec.rate_scale),
        fabric=layout,
        sysctls=sysctls,
    )


def _star(fab: StarFabric) -> FabricPlan:
    links: list[str] = []
    ip: dict[str, list[str]] = {fab.hub_ns: ["link add br0 type bridge", "link set br0 up", "link set lo up"]}
    tc: dict[str, list[str]] = {fab.hub_ns: []}
    ends = zip(fab.host_ns, fab.host_ip, fab.host_dev, fab.hub_dev, strict=True)
    for ns, ip_addr, host_dev, hub_dev in ends:
        links.append(f"link add {host_dev} netns {ns} type veth peer name {hub_dev} netns {fab.hub_ns}")
        ip[fab.hub_ns] += [f"link set {hub_dev} master br0", f"link set {hub_dev} up"]
        ip[ns] = [f"addr add {ip_addr}/24 dev {host_dev}", f"link set {host_dev} up", "link set lo up"]
        tc[ns] = htb.shaped_egress_lines(host_dev, fab.rate_bps, fab.queue_bytes)
        tc[fab.hub_ns] += htb.shaped_egress_lines(hub_dev, fab.rate_bps, fab.queue_bytes)
    return FabricPlan(namespaces=(fab.hub_ns, *fab.host_ns), links=tuple(links), ip=ip, tc=tc, fabric=fab)


def _link(link: ShapedLink, rate_bps: float) -> FabricPlan:
    ip: dict[str, list[str]] = {}
    tc: dict[str, list[str]] = {}
    sides = ((link.server_ns, link.server_dev, (link.server_ip,), "dst"),
             (link.worker_ns, link.worker_dev, link.worker_ips, "src"))  # fmt: skip
    for ns, dev, own, match in sides:
        ip[ns] = [*(f"addr add {a}/24 dev {dev}" for a in own), f"link set {dev} up", "link set lo up"]
        tc[ns] = htb.link_tree_lines(dev, rate_bps, match=match, ips=link.worker_ips)
    veth = (
        f"link add {link.server_dev} netns {link.server_ns} type veth "
        f"peer name {link.worker_dev} netns {link.worker_ns}"
    )
    return FabricPlan(namespaces=(link.server_ns, link.worker_ns), links=(veth,), ip=ip, tc=tc, fabric=link)


def run_batches(tool: str, per_ns: dict[str, list[str]]) -> None:
    """Run every namespace's ``tool -batch`` lines of ``per_ns`` (``ip`` or ``tc``), all at once."""
    netns.run_many(
        [([tool, "-n", ns, "-batch", "-"], "\n".join(ls) + "\n") for ns, ls in per_ns.items() if ls]
    )


def create_step(plan: FabricPlan, step: str) -> None:
    """Run step ``step`` (one of :data:`FABRIC_STEPS`) of ``plan``; a failure raises ``TestbedError``."""
    if step == "namespaces":
        netns.run(["ip", "-batch", "-"], "".join(f"netns add {ns}\n" for ns in plan.namespaces))
    elif step == "sysctls":
        for ns, values in plan.sysctls.items():
            netns.write_sysctls(ns, values, optional=config.OPTIONAL_SYSCTLS)
    elif step == "links":
        if plan.links:
            netns.run(["ip", "-batch", "-"], "\n".join(plan.links) + "\n")
    elif step == "routes":
        run_batches("ip", plan.ip)
    elif step == "queues":
        run_batches("tc", plan.tc)
    else:
        raise ValueError(f"unknown fabric step {step!r} (expected one of {', '.join(FABRIC_STEPS)})")


@contextmanager
def built(plan: FabricPlan) -> Iterator[FabricPlan]:
    """Build ``plan`` (every step); remove the namespaces it created on exit (also on failure)."""
    netns.require_capability()
    fresh = [ns for ns in plan.namespaces if not netns.exists(ns)]
    try:
        for step in FABRIC_STEPS:
            create_step(plan, step)
        yield plan
    finally:
        for ns in reversed(fresh):
            if netns.exists(ns):
                netns.run(["ip", "netns", "del", ns], check=False)


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
    plan = plan_fabric(StarSpec(rate_bps=rate_bps, hosts=hosts, prefix=prefix, queue_bytes=queue_bytes))
    assert isinstance(plan.fabric, StarFabric)
    with built(plan):
        yield plan.fabric


@contextmanager
def shaped_link(rate_bps: float, *, prefix: str = "csp", workers: int = 1) -> Iterator[ShapedLink]:
    """Create the namespace pair shaped at ``rate_bps`` each way; remove it on exit (also on failure).

    ``workers`` addresses and leaves are made on the worker side (traffic of other addresses goes to
    the first worker's leaf).

    Examples
    --------
    >>> with shaped_link(1e9) as link:  # doctest: +SKIP
    ...     subprocess.run(link.argv(link.worker_ns, ["ping", "-c1", link.server_ip]))
    """
    plan = plan_fabric(LinkSpec(rate_bps=rate_bps, prefix=prefix, workers=workers))
    assert isinstance(plan.fabric, ShapedLink)
    with built(plan):
        yield plan.fabric
