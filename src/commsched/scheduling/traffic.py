"""What a placed job puts on which links per iteration: connections and step loads.

A job's per-iteration communication is its collective schedule (``commsched.workload.collectives``)
mapped onto its GPUs (rank ``i`` on ``gpus[i]``) and onto routes chosen by a policy. The result is a
sequence of :class:`StepLoad` records, one per step of the schedule, each with the bytes it puts on
every link it touches, its group kind (``tp``, ``pp``, ``dp``, ``ep``; an ungrouped job's steps are
``dp``) and whether the compute waits for it (a grouped job's TP, PP and EP steps:
:mod:`commsched.scheduling.groups`). On an abstract topology (``single_link``, no hosts) a job's
traffic is one transfer of its ``sync_bytes`` across the link ``a -> b``: every job's traffic crosses
that link.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field, replace

import numpy as np
from numpy.typing import NDArray

from commsched.errors import TopologyError
from commsched.scheduling.groups import KINDS, grouped_schedule, grouped_steps
from commsched.scheduling.state import ConnectionKey, PlacedJob
from commsched.scheduling.sync import SyncPlan, endpoint_route, sync_plan
from commsched.topology import NodeId, Topology
from commsched.workload import CollectiveSchedule, Step, SyncKind
from commsched.workload.collectives import build_collective

#: the two ends of the abstract single link
ABSTRACT_SRC = NodeId("a")
ABSTRACT_DST = NodeId("b")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class StepLoad:
    """One (possibly repeated) synchronous step of a job's communication, projected on links.

    The step's transfers progress in lockstep (a ring's flows move at the pace of its slowest edge):
    when the step runs at pace ``r`` bytes/s for its largest transfer, link ``links[i]`` carries
    ``r * share[i]`` bytes/s where ``share = bytes_per_rep / max_flow_bytes`` counts "flow
    equivalents". Each repetition also costs ``latency_s`` (the longest path latency of its transfers).
    """

    links: NDArray[np.int64]
    bytes_per_rep: NDArray[np.float64]
    max_flow_bytes: float
    repeat: int
    latency_s: float
    share: NDArray[np.float64]  # bytes_per_rep / max_flow_bytes ("flow equivalents" per link)
    group: str = "dp"  # the parallel group kind: tp, pp, dp or ep
    blocking: bool = False  # the compute waits for it (TP, PP, EP of a grouped job)

    @property
    def total_bytes(self) -> float:
        return float(self.bytes_per_rep.sum()) * self.repeat


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobTraffic:
    """A job's per-iteration traffic: its steps in order, and bytes per link per iteration."""

    steps: tuple[StepLoad, ...]
    link_ids: NDArray[np.int64]
    link_bytes: NDArray[np.float64]
    #: bytes per iteration leaving a NIC onto the fabric, per group kind (see fabric_bytes_by_kind)
    fabric_bytes: Mapping[str, float] = field(default_factory=lambda: dict.fromkeys(KINDS, 0.0))

    def bottleneck_time_s(
        self, capacity_bps: NDArray[np.float64], links: NDArray[np.int64] | None = None
    ) -> float:
        """``t_j = max_e M_{j,e} / B_e`` over the given links (default: all links it uses).

        ``capacity_bps`` is in bits/s; ``M`` in bytes, hence the factor 8.
        """
        if self.link_ids.size == 0:
            return 0.0
        mask = np.ones(self.link_ids.size, dtype=bool) if links is None else np.isin(self.link_ids, links)
        if not mask.any():
            return 0.0
        return float(np.max(self.link_bytes[mask] * 8.0 / capacity_bps[self.link_ids[mask]]))


def job_schedule(topology: Topology, job: PlacedJob) -> CollectiveSchedule:
    """The collective schedule a job runs each iteration (its ``collective`` over its ranks).

    A ``hierarchical_ring`` needs the same number of GPUs on every host of the job; with an uneven
    placement the job runs a flat ring instead.
    """
    spec = job.spec
    ranks = len(job.gpus)
    params: dict[str, object] = {}
    name = spec.collective
    if name == "hierarchical_ring" and job.gpus:
        per_host: dict[str, int] = {}
        for g in job.gpus:
            h = str(topology.host_of(g).id)
            per_host[h] = per_host.get(h, 0) + 1
        counts = set(per_host.values())
        if len(counts) == 1:
            params["ranks_per_host"] = counts.pop()
        else:
            name = "ring"  # uneven GPUs per host: a hierarchical ring is undefined, use a flat ring
    return build_collective(name, ranks=ranks, size_bytes=spec.profile.sync_bytes, **params)


def job_sync(topology: Topology, job: PlacedJob) -> SyncPlan:
    """The schedule and endpoints of a placed job's per-iteration synchronisation."""
    if job.spec.parallel is not None:
        return SyncPlan(schedule=grouped_schedule(job.spec.parallel), endpoints=job.gpus)
    if job.spec.sync is SyncKind.ALLREDUCE:
        return SyncPlan(schedule=job_schedule(topology, job), endpoints=job.gpus)
    return sync_plan(topology, job)


def job_connections(topology: Topology, job: PlacedJob) -> dict[ConnectionKey, float]:
    """Every directed connection of a job with its bytes per iteration (insertion order = first use)."""
    out: dict[ConnectionKey, float] = {}
    if not job.gpus:
        if job.spec.profile.sync_bytes > 0:
            out[ConnectionKey(job=job.id, src=ABSTRACT_SRC, dst=ABSTRACT_DST)] = job.spec.profile.sync_bytes
        return out
    if len(job.gpus) < 2 and job.spec.sync is SyncKind.ALLREDUCE:
        return out
    plan = job_sync(topology, job)
    for step in plan.schedule.steps:
        for t in step.transfers:
            key = ConnectionKey(job=job.id, src=plan.endpoints[t.src], dst=plan.endpoints[t.dst])
            out[key] = out.get(key, 0.0) + t.size_bytes * step.repeat
    return out


RouteFn = Callable[[ConnectionKey], int]


def _step_load(
    topology: Topology, job: PlacedJob, step: Step, endpoints: tuple[NodeId, ...], route: RouteFn
) -> StepLoad | None:
    acc: dict[int, float] = {}
    max_flow = 0.0
    latency = 0.0
    for t in step.transfers:
        if t.size_bytes <= 0:
            continue
        a, b = endpoints[t.src], endpoints[t.dst]
        path = endpoint_route(topology, a, b, route(ConnectionKey(job=job.id, src=a, dst=b)))
        for lid in path.links:
            acc[lid] = acc.get(lid, 0.0) + t.size_bytes
        max_flow = max(max_flow, t.size_bytes)
        latency = max(latency, topology.path_latency(path))
    if not acc or max_flow <= 0:
        return None
    ids = np.fromiter(acc.keys(), dtype=np.int64, count=len(acc))
    vals = np.fromiter(acc.values(), dtype=float, count=len(acc))
    order = np.argsort(ids)
    return StepLoad(
        links=ids[order],
        bytes_per_rep=vals[order],
        max_flow_bytes=max_flow,
        repeat=step.repeat,
        latency_s=latency,
        share=vals[order] / max_flow,
    )


def job_traffic(
    topology: Topology, job: PlacedJob, routes: Mapping[ConnectionKey, int] | None = None
) -> JobTraffic:
    """Project a placed job's per-iteration collective onto links under the given route choices."""
    chosen = routes or {}

    def route(key: ConnectionKey) -> int:
        return chosen.get(key, 0)

    steps: list[StepLoad] = []
    fabric = dict.fromkeys(KINDS, 0.0)
    if not job.gpus:
        if job.spec.profile.sync_bytes > 0:
            steps.append(_abstract_load(topology, job.spec.profile.sync_bytes))
            fabric["dp"] = float(job.spec.profile.sync_bytes)
    elif job.spec.parallel is not None or len(job.gpus) >= 2 or job.spec.sync is not SyncKind.ALLREDUCE:
        steps = _project(topology, job, route, fabric)
    totals: dict[int, float] = {}
    for s in steps:
        for lid, b in zip(s.links.tolist(), s.bytes_per_rep.tolist(), strict=True):
            totals[lid] = totals.get(lid, 0.0) + b * s.repeat
    ids = np.array(sorted(totals), dtype=np.int64)
    return JobTraffic(
        steps=tuple(steps),
        link_ids=ids,
        link_bytes=np.array([totals[i] for i in ids.tolist()], dtype=float),
        fabric_bytes=fabric,
    )


def _project(topology: Topology, job: PlacedJob, route: RouteFn, fabric: dict[str, float]) -> list[StepLoad]:
    """The step loads of a placed job (grouped: every group's steps, labelled); adds its fabric bytes."""
    out: list[StepLoad] = []
    if job.spec.parallel is not None:
        hosts = _hosts(topology, job.gpus)
        for gs in grouped_steps(job.spec.parallel):
            fabric[gs.kind.value] += _cross_bytes(gs.step, hosts)
            load = _step_load(topology, job, gs.step, job.gpus, route)
            if load is not None:
                out.append(replace(load, group=gs.kind.value, blocking=gs.blocking))
        return out
    plan = job_sync(topology, job)
    hosts = _hosts(topology, plan.endpoints)
    for step in plan.schedule.steps:
        fabric["dp"] += _cross_bytes(step, hosts)
        load = _step_load(topology, job, step, plan.endpoints, route)
        if load is not None:
            out.append(load)
    return out


def _abstract_load(topology: Topology, size: float) -> StepLoad:
    """A job's traffic on the abstract single link ``a -> b``: one transfer of its ``sync_bytes``."""
    lid = topology.link_id(ABSTRACT_SRC, ABSTRACT_DST)
    return StepLoad(
        links=np.array([lid], dtype=np.int64),
        bytes_per_rep=np.array([size]),
        max_flow_bytes=size,
        repeat=1,
        latency_s=float(topology.latency_s[lid]),
        share=np.array([1.0]),
    )


def _hosts(topology: Topology, endpoints: tuple[NodeId, ...]) -> list[str]:
    """The host of each endpoint (a CPU machine, e.g. a PS server, is its own host)."""
    out = []
    for node in endpoints:
        try:
            out.append(str(topology.host_of(node).id))
        except TopologyError:
            out.append(str(node))
    return out


def _cross_bytes(step: Step, hosts: list[str]) -> float:
    """Bytes of a (repeated) step between endpoints of different hosts: they leave a NIC once."""
    return step.repeat * sum(t.size_bytes for t in step.transfers if hosts[t.src] != hosts[t.dst])


def fabric_bytes_by_kind(topology: Topology, job: PlacedJob) -> dict[str, float]:
    """Bytes per iteration that leave a NIC onto the fabric, per group kind (``tp, pp, dp, ep``).

    A transfer between endpoints of two different hosts counts once, however many fabric links it
    crosses. An ungrouped job's bytes count under ``dp``; on a topology without hosts its
    ``sync_bytes`` do (they cross the single link).

    Examples
    --------
    >>> from commsched.topology.builders import single_link
    >>> from commsched.workload import ModelProfile, job_from_model
    >>> prof = ModelProfile(name="a", gpu="test", compute_s=1.0, sync_bytes=5.0, overlap=1.0, source="doc")
    >>> job = PlacedJob(spec=job_from_model("a", prof, gpus=2), gpus=())
    >>> fabric_bytes_by_kind(single_link(), job)
    {'tp': 0.0, 'pp': 0.0, 'dp': 5.0, 'ep': 0.0}
    """
    return dict(job_traffic(topology, job).fabric_bytes)
