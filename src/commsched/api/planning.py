"""``plan``: a policy's decisions for a scenario's time-0 jobs, without simulating.

Placement: jobs with explicit GPUs keep them; the others are placed with the scenario's placement
policy in arrival order, as the simulator does at time 0 — only the jobs that arrive at time 0 are
planned, in strict FIFO order (the first job that does not fit stops placement, like the simulator's
queue without backfill). Jobs not planned are listed under ``waiting``.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from commsched.io.scenario import Scenario
from commsched.scheduling.domains import decide_per_domain, plan_per_domain
from commsched.scheduling.freegpus import FreeGpus
from commsched.scheduling.inorder import OrderRules, place_in_order
from commsched.scheduling.interfaces import PlacementFn, PolicyContext
from commsched.scheduling.state import ClusterState, Decisions, PlacedJob
from commsched.workload import JobId

if TYPE_CHECKING:
    from commsched.api.running import PlacementLike, PolicyLike

__all__ = ["PlanReport", "plan", "plan_json"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlanReport:
    """A policy's decisions for the jobs a scenario runs at time 0.

    Attributes
    ----------
    policy
        The policy's name.
    state
        The cluster state the policy decided on (topology, placed jobs, priority levels).
    decisions
        Routes, ranking, classes and time shifts.
    intensity
        Job -> GPU intensity ``I_j`` under the decided routes (built-in policies only; else empty).
    factor
        Job -> Crux correction factor ``k_j`` (Crux policies only; else empty).
    waiting
        Jobs not planned: they arrive later or do not fit at time 0.

    Examples
    --------
    >>> rep = plan("crux-fig19", "crux-full")
    >>> (rep.policy, len(rep.state.jobs), rep.waiting, rep.factor["gpt"] > 0)
    ('crux-full', 4, (), True)
    """

    policy: str
    state: ClusterState
    decisions: Decisions
    intensity: Mapping[JobId, float] = field(default_factory=dict)
    factor: Mapping[JobId, float] = field(default_factory=dict)
    waiting: tuple[JobId, ...] = ()


def _placed_jobs(sc: Scenario, place: PlacementFn) -> tuple[list[PlacedJob], list[JobId]]:
    jobs = sorted(sc.jobs, key=lambda j: j.spec.arrival_s)
    now = [PlacedJob(spec=j.spec, gpus=tuple(j.gpu_ids)) for j in jobs if j.spec.arrival_s <= 0]
    placed = place_in_order(now, free=FreeGpus(sc.topology), rules=OrderRules(placement=place))
    gone = {p.position for p in placed}
    waiting = [j.id for k, j in enumerate(now) if k not in gone]
    waiting += [j.spec.id for j in jobs[len(now) :]]
    return [p.job for p in placed], waiting


def plan(
    scenario: Scenario | str | Path,
    policy: PolicyLike | None = None,
    *,
    placement: PlacementLike | None = None,
    seed: int | None = None,
) -> PlanReport:
    """The decisions a policy takes for a scenario's time-0 jobs (what ``commsched plan`` prints).

    Parameters
    ----------
    scenario
        A loaded scenario, or a file or shipped name.
    policy
        A name, a communication policy ``(ClusterState, PolicyContext) -> Decisions`` or a
        ``PolicyBundle``; default: the scenario's.
    placement
        A placement name or function; default: the policy bundle's own, else the scenario's.
    seed
        Seed the policy derives its random draws from; default: the scenario's.

    Examples
    --------
    >>> rep = plan("crux-fig19", "crux-full")
    >>> sorted(str(j) for j in rep.decisions.ranking)
    ['bert1', 'bert2', 'bert3', 'gpt']
    >>> sorted(rep.decisions.ranking.values())
    [0, 1, 2, 3]
    """
    from commsched.api.running import prepare_run
    from commsched.api.scenarios import load_scenario
    from commsched.scheduling.policies import communication_plans

    sc = load_scenario(scenario)
    run = prepare_run(sc, policy, placement, None, seed)
    topo = run.bundle.topology(sc.topology) if run.bundle.topology is not None else sc.topology
    if topo is not sc.topology:
        from dataclasses import replace

        sc = replace(sc, topology=topo)
    jobs, waiting = _placed_jobs(sc, run.placement)
    state = ClusterState(topology=sc.topology, jobs=tuple(jobs), priority_levels=sc.priority_levels)
    ctx = PolicyContext(seed=run.seed, now_s=0.0, epoch=0)
    plans = communication_plans()
    name = run.bundle.name
    by_name = isinstance(policy if policy is not None else sc.policy, str)
    if by_name and name in plans and run.bundle.placement is None and run.bundle.topology is None:
        # a built-in communication policy: its plan also reports intensities and correction factors
        p = plan_per_domain(plans[name], state, ctx)  # per contention domain, as the simulator decides
        return PlanReport(
            policy=name,
            state=state,
            decisions=p.decisions,
            intensity=p.intensity,
            factor=p.factor,
            waiting=tuple(waiting),
        )
    decisions = decide_per_domain(run.bundle.communication, state, ctx)
    return PlanReport(policy=name, state=state, decisions=decisions, waiting=tuple(waiting))


def plan_json(report: PlanReport, *, hash_name: str = "murmur3") -> dict[str, Any]:
    """The ``commsched plan --json`` object of a plan: jobs (rank, class, DSCP), connections, ports.

    Parameters
    ----------
    report
        What :func:`plan` returned.
    hash_name
        The ECMP hash the UDP source ports are computed for.

    Examples
    --------
    >>> out = plan_json(plan("crux-fig19", "crux-full"))
    >>> sorted(out)
    ['connections', 'hash', 'jobs', 'policy', 'waiting']
    >>> sorted(out["jobs"][0])
    ['class', 'dscp', 'id', 'intensity', 'k', 'rank']
    """
    from commsched.scheduling.dscp import default_dscp_table, dscp_for_level
    from commsched.scheduling.ports import connection_ports
    from commsched.scheduling.routing import network_pair
    from commsched.scheduling.traffic import job_connections

    d = report.decisions
    topo = report.state.topology
    jobs = report.state.jobs
    table = default_dscp_table()
    rows = []
    for j in jobs:
        cls = d.class_of(j.id)
        rows.append(
            {
                "id": str(j.id),
                "rank": d.ranking.get(j.id),
                "class": cls,
                "dscp": dscp_for_level(table, cls) if cls < table.levels else None,
                "intensity": report.intensity.get(j.id),
                "k": report.factor.get(j.id),
            }
        )
    routes = {key: d.route_of(key) for j in jobs for key in job_connections(topo, j)}
    ports = connection_ports(topo, routes, hash_name=hash_name) if topo.hosts else {}
    conns = []
    for key, index in routes.items():
        if topo.hosts:
            path = [str(n) for n in topo.gpu_route(key.src, key.dst, index).nodes]
        else:
            path = [str(key.src), str(key.dst)]
        pair = network_pair(topo, key)
        conns.append(
            {
                "job": str(key.job),
                "src": str(key.src),
                "dst": str(key.dst),
                "path": path,
                "src_port": ports.get(key) if pair is not None else None,
            }
        )
    out: dict[str, Any] = {"policy": report.policy, "hash": hash_name, "jobs": rows, "connections": conns}
    out["waiting"] = [str(w) for w in report.waiting]
    shifts = {str(k): v for k, v in d.time_shift_s.items() if v}
    if shifts:
        out["time_shift_s"] = shifts
    return out
