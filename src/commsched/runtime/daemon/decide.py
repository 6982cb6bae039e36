"""One recompute of the daemon: running jobs in, a decision document out (pure, no I/O).

The same scheduling code as ``commsched plan`` and the simulator decides: the registered
communication policy (:func:`commsched.scheduling.policies.communication_plans`) runs, one contention
domain at a time as in the simulator (:func:`commsched.scheduling.domains.plan_per_domain`), on a
:class:`~commsched.scheduling.state.ClusterState` built from the running jobs, and the routes become
source ports with :func:`commsched.scheduling.ports.connection_ports`, classes become DSCP values with
:mod:`commsched.scheduling.dscp`.

Temporary top class during profiling (Crux §5.4): while some jobs are still being profiled, class 0
is theirs alone; the policy decides the other jobs with ``priority_levels - 1`` classes, shifted one
class down. With a single priority level there is nothing to reserve and no shift. Routes are decided
for all jobs together (a profiling job's declared profile stands in for the measured one).

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §5 (Fig. 17 control loop), §5.4 (profiling at the highest
   priority); crux-spec §5.4-5.5.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from types import MappingProxyType
from typing import Any

from commsched.runtime.daemon.records import ClusterConfig, JobRecord
from commsched.runtime.daemon.replay import placed_routing, replay_placement
from commsched.runtime.protocol.control import (
    DECISION_FORMAT,
    Cause,
    Connection,
    Decision,
    JobDecision,
    LinkLoad,
)
from commsched.runtime.protocol.control_json import DecisionJSON
from commsched.runtime.protocol.marks import mark_for_class
from commsched.scheduling.memo import Memo
from commsched.scheduling.policies.common import PlanFn
from commsched.scheduling.state import ClusterState, PlacedJob
from commsched.topology import NodeId, Topology
from commsched.workload import JobId, JobSpec, ModelProfile

__all__ = ["DECISION_FORMAT", "Cause", "daemon_plans", "decide", "decision", "placed_job", "replay_placement"]


def placed_job(job: JobRecord) -> PlacedJob:
    """The scheduling layer's view of a running job (its current profile on its GPUs)."""
    profile = ModelProfile(
        name=job.model or f"job:{job.id}",
        gpu="abstract",
        compute_s=job.compute_s,
        sync_bytes=job.comm_bytes,
        overlap=job.overlap,
        source="measured by the job's profiler" if job.profile else "declared when the job started",
    )
    spec = JobSpec(
        id=JobId(job.id),
        profile=profile,
        gpus=len(job.gpus),
        model=job.model,
        gpu_ids=job.gpus,
        collective=job.collective,
        priority=job.priority,
    )
    if job.parallel is not None:  # checked when the job started; compute_s is per GPU already
        from commsched.workload.grouped_jobs import grouped_workload
        from commsched.workload.parallel import ParallelSpec

        par = ParallelSpec(**job.parallel)
        spec = replace(
            spec, parallel=grouped_workload(profile, par, gpus=len(job.gpus), where=f"job {job.id}")
        )
    return PlacedJob(spec=spec, gpus=tuple(NodeId(g) for g in job.gpus), start_s=job.started_s)


def _classes(
    cfg: ClusterConfig, jobs: Sequence[JobRecord], ranking: dict[str, int], classes: dict[str, int]
) -> tuple[dict[str, int], dict[str, int]]:
    """Apply the temporary top class: profiling jobs first (by start), the others shifted one down."""
    profiling = sorted((j for j in jobs if j.profiling), key=lambda j: (j.started_s, j.id))
    if not profiling or cfg.priority_levels < 2:
        return ranking, classes
    first = {j.id: r for r, j in enumerate(profiling)}
    rest = sorted((j for j in jobs if not j.profiling), key=lambda j: (ranking.get(j.id, 0), j.id))
    rank = dict(first)
    rank.update({j.id: len(first) + r for r, j in enumerate(rest)})
    cls = {j.id: 0 for j in profiling}
    cls.update({j.id: min(classes.get(j.id, 0) + 1, cfg.priority_levels - 1) for j in rest})
    return rank, cls


def daemon_plans(policy: str | None = None) -> dict[str, PlanFn]:
    """The policies the daemon serves: name -> plan function (decisions + intensities).

    Every communication plan of :func:`commsched.scheduling.policies.communication_plans`, and the
    routing of every other bundle of the policy registry (the vClos bundles ``ecmp``, ``sr``,
    ``vclos``, ``ocs-vclos``, ...): its communication policy on the jobs as they were placed (the
    daemon does not place jobs; a bundle's placement and cluster change are the launcher's). A
    bundle's plan has no intensities, and all its jobs share one class unless its decisions say
    otherwise. A bundle that places jobs (``vclos``, ``ocs-vclos``, ...) has its placement replayed on
    the running jobs first (:func:`replay_placement`), so the routes it pins are the ones served. With
    ``policy``, only that bundle is built (the registry builds bundles on demand).
    """
    from types import MappingProxyType

    from commsched.catalog import policy_registry
    from commsched.scheduling.policies import communication_plans
    from commsched.scheduling.policies.common import Plan

    plans = dict(communication_plans())
    reg = policy_registry()
    wanted = reg.names() if policy is None else (policy,) if policy in reg else ()
    for name in wanted:
        if name in plans:
            continue
        bundle = reg.get(name)
        fn, place = bundle.communication, bundle.placement

        def plan(state: ClusterState, ctx: Any, fn: Any = fn, place: Any = place) -> Plan:
            if place is not None:
                state = replay_placement(state, place)
            return Plan(decisions=fn(state, ctx), intensity=MappingProxyType({}))

        plans[name] = plan
    return plans


def decide(
    topology: Topology,
    cfg: ClusterConfig,
    jobs: Sequence[JobRecord],
    *,
    version: int,
    cause: Cause,
    memo: Memo | None = None,
    port_cache: dict[tuple[str, str, int], int] | None = None,
) -> DecisionJSON:
    """:func:`decision` as its JSON document (``format`` 1; see ``docs/runtime-daemon.md``)."""
    return decision(
        topology, cfg, jobs, version=version, cause=cause, memo=memo, port_cache=port_cache
    ).to_json()


def decision(
    topology: Topology,
    cfg: ClusterConfig,
    jobs: Sequence[JobRecord],
    *,
    version: int,
    cause: Cause,
    memo: Memo | None = None,
    port_cache: dict[tuple[str, str, int], int] | None = None,
) -> Decision:
    """The decision of ``cfg.policy`` for the running ``jobs``.

    Parameters
    ----------
    topology
        The cluster, built from ``cfg.topology``.
    cfg
        Policy, priority levels, hash and seed.
    jobs
        The running jobs with their GPUs.
    version
        The version this decision will carry; also the policy's epoch (reproducible random choices).
    cause
        The event that triggered the recompute.
    memo
        Pure per-job results the policy may reuse from the previous decision
        (:mod:`commsched.scheduling.memo`); the caller must drop it when a job id's record changes.
    port_cache
        ``(src NIC, dst NIC, path index) -> source port`` under ``cfg.hash_name`` on this topology,
        filled as ports are computed (the search over the port range is the costly part).

    Returns
    -------
    Decision
        Per job its rank, class and mark (:func:`commsched.runtime.protocol.marks.mark_for_class`); every
        inter-host connection with its path and source port; the planned load per link.
    """
    from commsched.errors import UnknownNameError
    from commsched.scheduling.domains import plan_per_domain
    from commsched.scheduling.interfaces import PolicyContext

    plans = daemon_plans(cfg.policy)
    if cfg.policy not in plans:
        raise UnknownNameError("policy", cfg.policy, list(plans), where="policy")
    ordered = sorted(jobs, key=lambda j: (j.started_s, j.id))
    placed = [placed_job(j) for j in ordered]
    reserve = any(j.profiling for j in ordered) and cfg.priority_levels >= 2
    levels = cfg.priority_levels - 1 if reserve else cfg.priority_levels
    state = ClusterState(topology=topology, jobs=tuple(placed), priority_levels=levels)
    # per contention domain, as the simulator decides (commsched.scheduling.domains)
    ctx = PolicyContext(seed=cfg.seed, now_s=0.0, epoch=version, memo=memo)
    replayed = placed_routing(cfg.policy, state)
    if replayed is None:
        plan = plan_per_domain(plans[cfg.policy], state, ctx)
    else:
        state, routing = replayed
        plan = plan_per_domain(routing, state, ctx)
    d = plan.decisions
    ranking = {str(k): v for k, v in d.ranking.items()}
    classes = {j.id: d.class_of(JobId(j.id)) for j in ordered}
    ranking, classes = _classes(cfg, ordered, ranking, classes)
    out_jobs = {
        j.id: JobDecision(
            rank=ranking.get(j.id),
            priority_class=classes[j.id],
            mark=mark_for_class(classes[j.id]),
            profiling=j.profiling,
            gpus=tuple(j.gpus),
            hosts=tuple(_hosts(topology, j.gpus)),
            intensity=plan.intensity.get(JobId(j.id)),
            k=plan.factor.get(JobId(j.id)),
            compute_s=j.compute_s,
            comm_bytes=j.comm_bytes,
        )
        for j in ordered
    }
    conns, load = _connections(topology, cfg, placed, d.routes, {} if port_cache is None else port_cache)
    return Decision(
        version=version,
        policy=cfg.policy,
        hash=cfg.hash_name,
        priority_levels=cfg.priority_levels,
        cause=cause,
        jobs=MappingProxyType(out_jobs),
        connections=tuple(conns),
        link_load=tuple(load),
    )


def _hosts(topology: Topology, gpus: Sequence[str]) -> list[str]:
    seen: dict[str, None] = {}
    for g in gpus:
        seen.setdefault(str(topology.host_of(g).id), None)
    return list(seen)


def _unit_bytes(job: PlacedJob) -> PlacedJob:
    """``job`` with one byte per iteration (its connections' shares of the job's bytes)."""
    from dataclasses import replace

    return replace(job, spec=replace(job.spec, profile=replace(job.spec.profile, sync_bytes=1.0)))


def _connections(
    topology: Topology,
    cfg: ClusterConfig,
    placed: Sequence[PlacedJob],
    routes: Any,
    port_cache: dict[tuple[str, str, int], int],
) -> tuple[list[Connection], list[LinkLoad]]:
    """Every inter-host connection with its path and model source port; planned bytes per link.

    Ports are :func:`commsched.topology.ecmp.port_for_path`, as
    :func:`commsched.scheduling.ports.connection_ports` (``commsched plan``) computes them.
    """
    from commsched.scheduling.routing import network_pair
    from commsched.scheduling.traffic import job_connections
    from commsched.topology.ecmp import port_for_path

    conns: list[Connection] = []
    load: dict[int, tuple[float, list[str]]] = {}  # link -> (bytes per iteration, jobs)
    for job in placed:
        rank_of = {g: r for r, g in enumerate(job.gpus)}
        keys = job_connections(topology, job)
        total = job.spec.profile.sync_bytes
        # share of the job's bytes per iteration on each connection (an agent that measures a host's
        # bytes turns them back into the job's with it); from a unit profile when none is declared
        unit = keys if total > 0 else job_connections(topology, _unit_bytes(job))
        scale = 1.0 / total if total > 0 else 1.0
        for key in keys:
            pair = network_pair(topology, key)
            if pair is None:
                continue
            paths = topology.equal_cost_paths(*pair)
            index = routes.get(key, 0) % len(paths)
            path = paths[index]
            ck = (pair[0], pair[1], index)
            if ck not in port_cache:
                port_cache[ck] = port_for_path(topology, pair[0], pair[1], index, cfg.hash_name)
            conns.append(
                Connection(
                    job=str(key.job),
                    src_rank=rank_of.get(key.src),
                    dst_rank=rank_of.get(key.dst),
                    src=str(key.src),
                    dst=str(key.dst),
                    src_nic=pair[0],
                    dst_nic=pair[1],
                    path_index=index,
                    n_paths=len(paths),
                    path=tuple(str(n) for n in path.nodes),
                    links=tuple(int(x) for x in path.links),
                    src_port=port_cache[ck],
                    share=unit[key] * scale,
                )
            )
            for link in path.links:
                nbytes, on = load.get(int(link), (0.0, []))
                load[int(link)] = (nbytes + keys[key], on if str(key.job) in on else [*on, str(key.job)])
    return conns, [_link_load(topology, link, nbytes, on) for link, (nbytes, on) in sorted(load.items())]


def _link_load(topology: Topology, link_id: int, nbytes: float, jobs: list[str]) -> LinkLoad:
    link = topology.links[link_id]
    return LinkLoad(
        link=link_id,
        bytes_per_iter=nbytes,  # bytes, not bits
        jobs=tuple(jobs),
        src=str(link.src),
        dst=str(link.dst),
        capacity_bps=link.capacity_bps,
    )
