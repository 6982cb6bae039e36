"""Builders shared by the simulator tests."""

from __future__ import annotations

from collections.abc import Sequence
from types import MappingProxyType
from typing import Any

from commsched.scheduling.basic import fair_policy, static_policy
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.placement import pack
from commsched.scheduling.state import ClusterState, Decisions
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import Mode, SimConfig, SimResult
from commsched.topology import NodeId, Topology
from commsched.workload import JobId, JobSpec, ModelProfile


def job(
    jid: str,
    *,
    compute_s: float,
    comm_bytes: float,
    gpus: int,
    overlap: float = 1.0,
    priority: int | None = None,
    iterations: int | None = None,
    arrival_s: float = 0.0,
    gpu_ids: Sequence[str] = (),
    collective: str = "ring",
) -> SimJob:
    prof = ModelProfile(
        name=jid, gpu="test", compute_s=compute_s, sync_bytes=comm_bytes, overlap=overlap, source="test"
    )
    spec = JobSpec(
        id=JobId(jid),
        profile=prof,
        gpus=gpus,
        priority=priority,
        iterations=iterations,
        arrival_s=arrival_s,
        collective=collective,
    )
    return SimJob(spec=spec, gpus=tuple(NodeId(g) for g in gpu_ids))


def classes_policy(classes: dict[str, int]):  # type: ignore[no-untyped-def]
    def policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
        base = fair_policy(state, ctx)
        return Decisions(
            routes=base.routes, classes=MappingProxyType({j.id: classes.get(j.id, 0) for j in state.jobs})
        )

    return policy


def simulation(
    topology: Topology,
    jobs: Sequence[SimJob],
    *,
    horizon_s: float,
    mode: Mode = Mode.EXACT,
    policy=static_policy,  # type: ignore[no-untyped-def]
    seed: int = 0,
    warmup_s: float = 0.0,
) -> Simulation:
    """A simulation of ``jobs`` placed by ``pack`` (run it, then read its counters beside the result)."""
    return Simulation(
        topology=topology,
        jobs=list(jobs),
        policy=policy,
        placement=pack,
        config=SimConfig(horizon_s=horizon_s, mode=mode, seed=seed, warmup_s=warmup_s),
    )


def run(topology: Topology, jobs: Sequence[SimJob], **options: Any) -> SimResult:
    """Run :func:`simulation` with ``options`` (its keyword arguments) and return the result."""
    return simulation(topology, jobs, **options).run()
