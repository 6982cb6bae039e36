"""Run a scenario through the simulator with named policies (the edge between names and callables)."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import replace

from commsched.catalog import placement_registry, policy_registry, queue_registry
from commsched.io.scenario import Scenario
from commsched.scheduling.interfaces import PlacementFn, PolicyBundle
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.ideal import with_ideals
from commsched.sim.results.records import Loop, Mode, SimConfig, SimResult
from commsched.topology import Topology
from commsched.workload import JobSpec


def simulate_scenario(
    scenario: Scenario,
    *,
    policy: str | None = None,
    placement: str | None = None,
    mode: str | None = None,
    seed: int | None = None,
    progress: Callable[[float], None] | None = None,
    loop: str = "interpreted",
) -> SimResult:
    """Simulate a validated scenario; options override the scenario's own choices (``loop``: the event
    loop, :class:`commsched.sim.results.records.Loop`)."""
    name = policy or scenario.policy
    bundle = policy_registry().get(name, where="--policy")
    job_scheduler = placement_registry().get(placement or scenario.placement, where="placement")
    return run_bundle(
        scenario,
        bundle,
        placement=bundle.placement or job_scheduler,
        job_scheduler=job_scheduler,
        mode=Mode(mode or scenario.mode),
        seed=scenario.seed if seed is None else seed,
        progress=progress,
        loop=Loop(loop),
    )


def run_bundle(
    scenario: Scenario,
    bundle: PolicyBundle,
    *,
    placement: PlacementFn,
    mode: Mode,
    seed: int,
    progress: Callable[[float], None] | None = None,
    job_scheduler: PlacementFn | None = None,
    loop: Loop = Loop.INTERPRETED,
) -> SimResult:
    """Simulate a scenario under a resolved policy bundle and placement (the one place that builds a run).

    Each job's ideal iteration (:mod:`commsched.sim.results.ideal`) is taken on the scenario's own cluster
    under ``job_scheduler`` (default: ``placement``), never under a bundle's own placement or cluster change,
    so that it is the same reference under every policy.
    """
    topology = bundle.topology(scenario.topology) if bundle.topology is not None else scenario.topology
    queue_order = bundle.queue_order or queue_registry().get(scenario.queue, where="queue")
    config = SimConfig(
        horizon_s=scenario.horizon_s, mode=mode, seed=seed, warmup_s=scenario.warmup_s, loop=loop
    )
    if scenario.fluid_min_jobs is not None:
        config = replace(config, fluid_min_jobs=scenario.fluid_min_jobs)
    jobs = [
        SimJob(spec=j.spec, gpus=j.gpu_ids, iteration_model=_iteration_model(j.spec)) for j in scenario.jobs
    ]
    sim = Simulation(
        topology=topology,
        jobs=with_ideals(scenario.topology, jobs, job_scheduler or placement),
        policy=bundle.communication,
        placement=placement,
        config=config,
        policy_name=bundle.name,
        priority_levels=scenario.priority_levels,
        progress=progress,
        queue_order=queue_order,
        backfill=scenario.backfill,
    )
    t0 = time.perf_counter()
    result = sim.run()
    result = replace(result, wall_time_s=time.perf_counter() - t0)
    return _known_fabric_bytes(result, topology, {j.spec.id: j.spec for j in scenario.jobs})


def _known_fabric_bytes(result: SimResult, topology: Topology, specs: Mapping[str, JobSpec]) -> SimResult:
    """Fill in the fabric bytes of the jobs whose traffic the engine released (finished jobs): they
    follow from the job and its placement alone."""
    import math

    from commsched.scheduling.state import PlacedJob
    from commsched.scheduling.traffic import fabric_bytes_by_kind
    from commsched.topology import NodeId

    jobs = []
    for j in result.jobs:
        known = all(math.isfinite(v) for _, v in j.fabric_bytes_per_iteration)
        spec = specs.get(j.id)
        if not known and j.placement and spec is not None:
            placed = PlacedJob(spec=spec, gpus=tuple(NodeId(g) for g in j.placement))
            jobs.append(
                replace(j, fabric_bytes_per_iteration=tuple(fabric_bytes_by_kind(topology, placed).items()))
            )
        else:
            jobs.append(j)
    return replace(result, jobs=tuple(jobs))


def _iteration_model(spec: JobSpec) -> Callable[[float], float] | None:
    """The layer-wise iteration model of a job that names an intra-job policy (else ``None``)."""
    if spec.intrajob is None:
        return None
    from commsched.intrajob.sweep import policy_registry as intrajob_policies
    from commsched.intrajob.tiein import iteration_model

    return iteration_model(
        spec.profile, intrajob_policies().get(spec.intrajob, where=f"jobs.{spec.id}.intrajob")
    )
