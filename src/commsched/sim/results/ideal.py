"""Each job's *ideal* iteration time: the one reference that no policy and no timing changes.

The ideal of a job is its iteration alone on the **empty** cluster (the topology of the scenario, not a
policy's changed one):

1. placed as its job scheduler would place it there: its explicit GPUs when it has them, else the
   placement's grant for it with every GPU free and nothing running (on an abstract cluster, no GPUs);
2. each of its flows (one per NIC pair, :func:`commsched.scheduling.paths.job_flows`) on the least
   loaded of its equal-cost candidate paths given only its own flows: the flows taken in decreasing
   bytes per iteration, each adding its bytes to the links of the path it gets, each choosing the path
   whose most loaded link (bytes over capacity) is least loaded after it, then the least total, then the
   lowest index (:func:`commsched.scheduling.paths.greedy_routes` on this one job). Routes pinned by the
   placement are kept. A job whose own flows cannot avoid each other keeps that cost;
3. timed as the engine times a job alone (:class:`commsched.sim.decide.decisions.DecisionApplier`): per step
   its latency plus its largest transfer at its tightest link's pace, ``max(c, o c + comm)`` (with the
   overlap of a layer-wise iteration model where the job has one), or a grouped job's two streams alone
   (:meth:`commsched.sim.jobs.streams.StreamPlan.alone_s`).

A job's ``standalone_iteration_s`` keeps its meaning: alone on the routes the *policy* gave it, which
ECMP's hash collisions can make slower than the ideal. Slowdown and throughput loss are measured against
the ideal under every policy, so a policy's own collisions show as cost; a job given a duration runs
``round(duration_s / ideal)`` iterations under every policy, so every policy runs the same work.

Examples
--------
A 16-GPU ring over two hosts under different switches has two flows (one each way), each with two
equal-cost paths; alone they never share a link, so the ideal is the closed form ``c + 2 (n-1)/n M / B``:

>>> from commsched.scheduling.placement import pack
>>> from commsched.topology import two_layer_clos
>>> from commsched.workload import ModelProfile, job_from_model
>>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=1, host_template="pcie_only", latency_s=0.0,
...                       host_link_bps=8e9, uplink_bps=8e9)
>>> prof = ModelProfile(name="m", gpu="test", compute_s=1.0, sync_bytes=1.6e9, overlap=1.0, source="doc")
>>> job = SimJob(spec=job_from_model("a", prof, gpus=16))
>>> comm = 2 * 15 / 16 * 1.6e9 / 1e9  # ring all-reduce: 2 (n-1)/n M over 1e9 bytes/s
>>> bool(abs(ideal_iteration_s(topo, job, pack) - (1.0 + comm)) < 1e-6)
True
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Sequence
from dataclasses import replace

import numpy as np

from commsched.intrajob.tiein import effective_overlap
from commsched.scheduling.freegpus import FreeGpus
from commsched.scheduling.interfaces import PlacementFn, PlacementRequest
from commsched.scheduling.paths import FlowWeight, PathSettings, PathTable, greedy_routes, job_flows
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import JobTraffic, job_traffic
from commsched.sim.jobs.runs import JobRun, SimJob
from commsched.sim.jobs.streams import stream_plan
from commsched.topology import Topology
from commsched.topology.records import NETWORK_LINK_KINDS
from commsched.workload import JobId

__all__ = ["IdealReference", "ideal_iteration_s", "reference_s", "with_ideals"]


class IdealReference:
    """The ideal iterations of one cluster and job scheduler, reusing what jobs of one shape share.

    The empty cluster's free-GPU index and candidate paths are built once; jobs that differ only in id,
    arrival, length or priority (the same model, size, collective and explicit GPUs) share one ideal.
    """

    def __init__(self, topology: Topology, placement: PlacementFn) -> None:
        self.topology = topology
        self._placement = placement
        self._abstract = len(topology.hosts) == 0
        self._free = None if self._abstract else FreeGpus(topology)
        self._table = PathTable(topology)
        self._capacity_bytes_per_s = topology.capacity_bps / 8.0  # bits/s -> bytes/s
        self._network = topology.links_of_kind(NETWORK_LINK_KINDS)
        self._cache: dict[Hashable, float] = {}

    def of(self, job: SimJob) -> float:
        """The job's ideal iteration time in seconds (``nan`` when its scheduler cannot place it even on
        the empty cluster)."""
        key = _shape(job)
        if key is not None and key in self._cache:
            return self._cache[key]
        value = self._compute(job)
        if key is not None:
            self._cache[key] = value
        return value

    def _place(self, job: SimJob) -> PlacedJob | None:
        spec = job.spec
        if job.gpus:
            return PlacedJob(spec=spec, gpus=tuple(job.gpus))
        if self._free is None:
            return PlacedJob(spec=spec, gpus=())
        if spec.gpus > len(self._free):
            return None
        req = PlacementRequest(topology=self.topology, job=spec, free_gpus=self._free, now_s=spec.arrival_s)
        alloc = self._placement(req)
        if alloc is None:
            return None
        return PlacedJob(
            spec=spec,
            gpus=tuple(alloc.gpus),
            reserved_links=alloc.reserved_links,
            pinned_routes=alloc.pinned_routes,
        )

    def _compute(self, job: SimJob) -> float:
        placed = self._place(job)
        if placed is None:
            return float("nan")
        flows = job_flows(self._table, placed) if placed.gpus else ()
        routes = (
            greedy_routes(
                self._table, [(placed, flows)], {placed.id: FlowWeight(per_byte=1.0)}, PathSettings()
            ).of(placed.id)
            if flows
            else {}
        )
        traffic = job_traffic(self.topology, placed, routes)
        return self._alone_s(job, traffic)

    def _alone_s(self, job: SimJob, traffic: JobTraffic) -> float:
        """The engine's standalone iteration of ``job`` on ``traffic`` (see the module notes)."""
        p = job.spec.profile
        if job.spec.parallel is not None:
            plan = stream_plan(traffic, self._capacity_bytes_per_s, job.spec.parallel.parallel, self._network)
            return plan.alone_s(p.compute_s, p.overlap)
        comm = 0.0
        for s in traffic.steps:
            pace = float(np.min(self._capacity_bytes_per_s[s.links] / s.share))
            comm += s.repeat * (s.latency_s + s.max_flow_bytes / pace)
        overlap = p.overlap
        if job.iteration_model is not None:
            overlap = effective_overlap(p.compute_s, comm, job.iteration_model(comm))
        return max(p.compute_s, overlap * p.compute_s + comm)


def _shape(job: SimJob) -> Hashable | None:
    """What a job's ideal depends on (``None``: not hashable, computed afresh)."""
    if job.iteration_model is not None:
        return None
    spec = replace(job.spec, id=JobId("_"), arrival_s=0.0, iterations=None, duration_s=None, priority=None)
    key = (spec, tuple(job.gpus))
    try:
        hash(key)
    except TypeError:
        return None
    return key


def ideal_iteration_s(topology: Topology, job: SimJob, placement: PlacementFn) -> float:
    """One job's ideal iteration time on the empty ``topology`` under its job scheduler ``placement``."""
    return IdealReference(topology, placement).of(job)


def with_ideals(topology: Topology, jobs: Sequence[SimJob], placement: PlacementFn) -> tuple[SimJob, ...]:
    """``jobs`` with their ideal iteration times filled in where they have none."""
    if all(j.ideal_iteration_s is not None for j in jobs):
        return tuple(jobs)
    ref = IdealReference(topology, placement)
    return tuple(
        j if j.ideal_iteration_s is not None else replace(j, ideal_iteration_s=ref.of(j)) for j in jobs
    )


def reference_s(run: JobRun) -> float:
    """The iteration a job's duration is counted in: its ideal, or its standalone time where the ideal is
    unknown (a scheduler that cannot place it on the empty cluster)."""
    ideal = run.ideal_s
    return ideal if math.isfinite(ideal) and ideal > 0 else run.standalone_s
