"""Trace scenarios of the vClos large-scale experiments: Helios-like jobs as macro-iterations.

The ``trace:`` section of a scenario (:func:`scenario_trace`, :data:`DEFAULT_TRACE`) becomes a
scenario of macro-iteration jobs whose iteration counts come from their contention-free speed
(:func:`trace_scenario`, :func:`with_iterations`); see :mod:`commsched.experiments.vclos_experiment`.

References
----------
vClos §9.2 (5,000 Helios tasks, Poisson arrivals, FIFO).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.io.scenario import Scenario, ScenarioJob
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import job_traffic
from commsched.scheduling.vclos.bundles import one_switch
from commsched.topology import Topology
from commsched.workload import JobSpec
from commsched.workload.traces.helios import macro_profile

__all__ = [
    "DEFAULT_TRACE",
    "offered_load",
    "parameter_groups",
    "scenario_trace",
    "standalone_iteration_s",
    "trace_scenario",
    "with_iterations",
]


#: the trace of a leaf-spine scenario that has no ``trace:`` section
DEFAULT_TRACE: Mapping[str, Any] = {
    "kind": "helios_like",
    "collective": "hierarchical_ring",
    "comm_scale": 8.0,
}


def standalone_iteration_s(topology: Topology, spec: JobSpec) -> float:
    """A job's iteration time alone on a non-blocking cluster (the engine's standalone formula).

    Used to turn a requested run time into an iteration count, so that a job's JRT grows when the
    network slows it down (a ``duration_s`` target would be measured against the job's own routed
    standalone time, which already includes its intra-job ECMP collisions).
    """
    topo = topology if topology.params.get("leaves") == 1 else one_switch(topology)
    gpus = tuple(g for h in topo.hosts for g in h.gpus)[: spec.gpus]
    traffic = job_traffic(topo, PlacedJob(spec=spec, gpus=gpus))
    cap_Bps = topo.capacity_bps / 8.0  # bits/s -> bytes/s
    comm = sum(
        s.repeat * (s.latency_s + s.max_flow_bytes / float(np.min(cap_Bps[s.links] / s.share)))
        for s in traffic.steps
    )
    p = spec.profile
    return max(p.compute_s, p.overlap * p.compute_s + comm)


def with_iterations(topology: Topology, jobs: Sequence[JobSpec]) -> tuple[JobSpec, ...]:
    """Jobs whose ``duration_s`` is turned into an iteration count at the contention-free speed."""
    memo: dict[tuple[str, int, float], float] = {}
    flat = one_switch(topology)
    out = []
    for j in jobs:
        key = (j.profile.name, j.gpus, j.profile.compute_s)
        if key not in memo:
            memo[key] = standalone_iteration_s(flat, j)
        its = max(1, round((j.duration_s or 0.0) / memo[key]))
        out.append(replace(j, iterations=its))
    return tuple(out)


def scenario_trace(spec: str) -> tuple[dict[str, Any], Path]:
    """The raw ``trace:`` section of a scenario (a shipped name or a file) and its folder.

    A scenario without one gets :data:`DEFAULT_TRACE`; a trace of another kind is refused (lambda
    and the task count are parameters of the ``helios_like`` generator).
    """
    from commsched.io.shipped import shipped_text
    from commsched.io.yamlio import load

    p = Path(spec)
    if p.exists() or p.suffix in (".yaml", ".yml") or "/" in spec:
        try:
            text = p.read_text(encoding="utf-8")
        except OSError as exc:
            raise InputError(str(exc), where=spec, expected="a readable scenario file") from exc
        base_dir = p.resolve().parent
    else:
        text = shipped_text(spec)
        base_dir = Path(".")
    data = load(text)
    section = data.get("trace") if isinstance(data, dict) else None
    if section is None:
        return dict(DEFAULT_TRACE), base_dir
    if not isinstance(section, dict) or section.get("kind") != "helios_like":
        raise InputError(
            f"trace kind {section.get('kind') if isinstance(section, dict) else section!r}",
            where=f"{spec}: trace.kind",
            expected="helios_like (or no trace section)",
        )
    return dict(section), base_dir


def trace_scenario(
    base: Scenario,
    trace: Mapping[str, Any],
    *,
    macro_iterations: int = 10,
    base_dir: Path = Path("."),
) -> Scenario:
    """The scenario's fabric and defaults with the jobs of a ``trace:`` section, as macro-iterations
    with iteration counts (see the module docstring)."""
    from commsched.io.traces import trace_jobs

    if macro_iterations < 1:
        raise InputError(f"{macro_iterations}", where="--macro-iterations", expected=">= 1")
    raw = trace_jobs(trace, base.topology, base_dir=base_dir).jobs
    macro = [
        replace(j, profile=macro_profile(j.profile, j.duration_s or 0.0, macro_iterations=macro_iterations))
        for j in raw
    ]
    jobs = with_iterations(base.topology, macro)
    return replace(
        base,
        name=f"{base.name}@lambda={float(trace.get('mean_gap_s', 120.0)):g}",
        jobs=tuple(ScenarioJob(spec=j, gpu_ids=()) for j in jobs),
    )


def offered_load(scenario: Scenario) -> float:
    """Standalone GPU-seconds requested per second of arrivals, over the cluster's GPUs."""
    jobs = [j.spec for j in scenario.jobs]
    if not jobs or scenario.topology.n_gpus == 0:
        return 0.0
    span = max(j.arrival_s for j in jobs)
    work = sum(j.gpus * (j.duration_s or 0.0) for j in jobs)
    return work / max(span, 1e-9) / scenario.topology.n_gpus


def parameter_groups(jobs: Sequence[ScenarioJob]) -> dict[str, str]:
    """Job id -> "GPUs/model/duration" (jobs with the same parameters, for Stability)."""
    return {j.spec.id: f"{j.spec.gpus}/{j.spec.model}/{j.spec.duration_s:g}" for j in jobs}
