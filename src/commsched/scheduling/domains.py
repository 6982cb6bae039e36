"""Contention domains: the groups of running jobs that can ever share a link, whatever is decided.

A job's *reach* is every link its traffic could use under any decision: the links inside its hosts and
every link of every equal-cost candidate path of its network flows (a route is an index into those
candidates, :class:`~commsched.scheduling.state.Decisions`), and the links its placement reserves. Two
jobs whose reaches meet are *neighbours*; a *domain* is a connected group of neighbours. Jobs of two
domains can never share a link, so no decision about one can change what the other's jobs experience.

Every policy of commsched decides per domain: it sees the jobs of one domain at a time, and its result
for a domain depends on that domain's jobs only (Crux's reference job is the heaviest job of the
domain, a rank position is a position within the domain, a random draw is seeded by what it decides).
This is what lets the simulator re-decide only the domain an arrival or departure touches
(:mod:`commsched.sim.decide.decisions`), and the daemon decides the same way (:func:`plan_per_domain`), so
the two agree.

Examples
--------
Two jobs under different ToRs of one Clos meet on no link; a third across both ToRs meets both:

>>> from commsched.scheduling.paths import PathTable
>>> from commsched.scheduling.state import ClusterState, PlacedJob
>>> from commsched.topology import NodeId, two_layer_clos
>>> from commsched.workload import ModelProfile, job_from_model
>>> prof = ModelProfile(name="m", gpu="test", compute_s=1.0, sync_bytes=1e9, overlap=1.0, source="doc")
>>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)
>>> def placed(name, hosts):
...     gpus = tuple(NodeId(f"h{h}/gpu{g}") for h in hosts for g in range(2))
...     return PlacedJob(spec=job_from_model(name, prof, gpus=len(gpus)), gpus=gpus)
>>> a, b = placed("a", [0, 1]), placed("b", [2, 3])
>>> [[j.id for j in d] for d in domains(ClusterState(topology=topo, jobs=(a, b)))]
[['a'], ['b']]
>>> c = placed("c", [0, 2])
>>> [[j.id for j in d] for d in domains(ClusterState(topology=topo, jobs=(a, b, c)))]
[['a', 'b', 'c']]
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import TypeVar

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.memo import maybe
from commsched.scheduling.paths import Flow, PathTable, job_flows
from commsched.scheduling.policies.common import Plan
from commsched.scheduling.routemap import JobRoutes, RouteMap, by_job
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
from commsched.scheduling.traffic import job_traffic
from commsched.workload import JobId

__all__ = ["decide_per_domain", "domains", "job_reach", "merge_decisions", "plan_per_domain", "scoped"]

T = TypeVar("T")


def job_reach(table: PathTable, job: PlacedJob, flows: Sequence[Flow] | None = None) -> NDArray[np.int64]:
    """Every link (sorted ids) the job's traffic could use under any decision (module notes);
    ``flows`` are its :func:`~commsched.scheduling.paths.job_flows` when the caller has them."""
    parts = [job_traffic(table.topology, job).link_ids.astype(np.int64)]
    parts.extend(f.candidates.ravel() for f in (job_flows(table, job) if flows is None else flows))
    if job.reserved_links:
        parts.append(np.fromiter((int(x) for x in job.reserved_links), dtype=np.int64))
    return np.unique(np.concatenate(parts))


def domains(state: ClusterState, table: PathTable | None = None) -> list[tuple[PlacedJob, ...]]:
    """The domains of the state's jobs, each in the state's order, ordered by their first job."""
    tab = table or PathTable(state.topology)
    owner: dict[int, int] = {}  # link -> a job whose reach holds it
    parent = list(range(len(state.jobs)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    for i, job in enumerate(state.jobs):
        for link in job_reach(tab, job).tolist():
            j = owner.setdefault(link, i)
            ri, rj = root(i), root(j)
            if ri != rj:
                parent[max(ri, rj)] = min(ri, rj)
    groups: dict[int, list[PlacedJob]] = {}
    for i, job in enumerate(state.jobs):
        groups.setdefault(root(i), []).append(job)
    return [tuple(g) for _, g in sorted(groups.items())]


def scoped(state: ClusterState, jobs: tuple[PlacedJob, ...]) -> ClusterState:
    """The state of one domain: its jobs, and their links in flight."""
    ids = {j.id for j in jobs}
    flight = {k: v for k, v in state.in_flight_links.items() if k in ids}
    return replace(state, jobs=jobs, in_flight_links=MappingProxyType(flight))


def _per_domain(
    fn: Callable[[ClusterState, PolicyContext], T], state: ClusterState, ctx: PolicyContext
) -> list[T]:
    table = maybe(ctx.memo, "path-table", lambda: PathTable(state.topology))
    return [fn(scoped(state, d), ctx) for d in domains(state, table)]


def _merged_ranking(parts: list[Mapping[JobId, int]]) -> dict[JobId, int]:
    """One unique ranking from the domains' own: rank r of every domain before rank r + 1 of any."""
    keyed = sorted((rank, k, job) for k, part in enumerate(parts) for job, rank in part.items())
    return {job: i for i, (_, _, job) in enumerate(keyed)}


def merge_decisions(parts: list[Decisions]) -> Decisions:
    """The decisions of several domains as one (their jobs and connections are disjoint)."""
    routes: dict[JobId, RouteMap] = {}
    classes: dict[JobId, int] = {}
    shifts: dict[JobId, float] = {}
    ports: dict[ConnectionKey, int] = {}
    for d in parts:
        routes.update(by_job(d.routes).jobs())
        classes.update(d.classes)
        shifts.update(d.time_shift_s)
        ports.update(d.src_ports)
    return Decisions(
        routes=JobRoutes(routes),
        ranking=MappingProxyType(_merged_ranking([d.ranking for d in parts])),
        classes=MappingProxyType(classes),
        time_shift_s=MappingProxyType(shifts),
        src_ports=MappingProxyType(ports),
    )


def decide_per_domain(
    policy: Callable[[ClusterState, PolicyContext], Decisions], state: ClusterState, ctx: PolicyContext
) -> Decisions:
    """A policy's decisions for a whole state, taken domain by domain (the simulator's rule)."""
    return merge_decisions(_per_domain(policy, state, ctx))


def plan_per_domain(
    plan: Callable[[ClusterState, PolicyContext], Plan], state: ClusterState, ctx: PolicyContext
) -> Plan:
    """A plan function's plan for a whole state, taken domain by domain (the simulator's rule)."""
    parts = _per_domain(plan, state, ctx)
    intensity: dict[JobId, float] = {}
    factor: dict[JobId, float] = {}
    for p in parts:
        intensity.update(p.intensity)
        factor.update(p.factor)
    return Plan(
        decisions=merge_decisions([p.decisions for p in parts]),
        intensity=MappingProxyType(intensity),
        factor=MappingProxyType(factor),
    )
