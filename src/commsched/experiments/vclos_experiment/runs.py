"""Runs of the vClos large-scale experiments: one policy at one lambda, and the (lambda, policy) grid.

:func:`run_policy` simulates a trace scenario under a fresh vClos-family bundle and measures it
(:class:`PolicyRun`); :func:`run_experiment` spreads an :class:`ExperimentSpec` over processes or a
Ray cluster. See :mod:`commsched.experiments.vclos_experiment`.

References
----------
vClos §9.2, §9.4-9.6 (Figs. 12-13, Table 5).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.experiments.spread import spread
from commsched.experiments.vclos_experiment.metrics import (
    ContentionShare,
    Fragmentation,
    QueueDepth,
    TimeAverages,
    average_times,
    contention_share,
    fragmentation,
    queue_depth,
    stability,
)
from commsched.experiments.vclos_experiment.trace import (
    DEFAULT_TRACE,
    offered_load,
    parameter_groups,
    trace_scenario,
)
from commsched.io.scenario import Scenario
from commsched.scheduling.interfaces import PolicyBundle
from commsched.scheduling.vclos.bundles import vclos_bundles, vclos_queue_orders
from commsched.scheduling.vclos.policy import FabricPlacement
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import Mode, SimConfig, SimResult

__all__ = [
    "TABLE5_LAMBDAS",
    "TABLE5_POLICIES",
    "ExperimentSpec",
    "PolicyRun",
    "bundle",
    "run_experiment",
    "run_policy",
    "simulate_policy",
]


TABLE5_LAMBDAS: tuple[float, ...] = (100.0, 110.0, 120.0, 130.0, 140.0)


TABLE5_POLICIES: tuple[str, ...] = ("best", "ocs-vclos", "vclos", "sr", "balanced-ecmp", "ecmp")


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class PolicyRun:
    """One simulation of one policy at one lambda, with its vClos metrics."""

    policy: str
    mean_gap_s: float
    times: TimeAverages
    stability_s: float
    stability_by_gpus: Mapping[int, float]
    fragmentation: Fragmentation
    queue: QueueDepth
    waits_s: tuple[float, ...]
    wall_s: float
    jrt_by_gpus: Mapping[int, float] = field(default_factory=dict)
    jwt_by_gpus: Mapping[int, float] = field(default_factory=dict)
    offered_load: float = math.nan
    contention: ContentionShare = field(
        default_factory=lambda: ContentionShare(multi_leaf=math.nan, gpu_time_lost=math.nan)
    )
    result: SimResult | None = field(default=None, repr=False)


def bundle(name: str) -> PolicyBundle:
    """A fresh bundle of the vClos evaluation by name."""
    found = {b.name: b for b in vclos_bundles()}
    if name not in found:
        raise InputError(f"unknown policy {name!r}", where="--policies", expected=", ".join(found))
    return found[name]


def simulate_policy(
    scenario: Scenario, policy: str, *, queue: str = "fifo"
) -> tuple[SimResult, Fragmentation]:
    """Simulate a trace scenario under one vClos-family policy (fresh bundle, so refusals are its own)."""
    b = bundle(policy)
    orders = vclos_queue_orders()
    if queue != "fifo" and queue not in orders:
        raise InputError(f"unknown queue {queue!r}", where="--queue", expected="fifo, " + ", ".join(orders))
    topo = b.topology(scenario.topology) if b.topology is not None else scenario.topology
    if b.placement is None:
        raise InputError(f"policy {policy!r} has no placement", where="--policies")
    sim = Simulation(
        topology=topo,
        jobs=[SimJob(spec=j.spec) for j in scenario.jobs],
        policy=b.communication,
        placement=b.placement,
        config=SimConfig(horizon_s=scenario.horizon_s, mode=Mode(scenario.mode), seed=scenario.seed),
        policy_name=policy,
        queue_order=orders.get(queue),
        backfill=scenario.backfill,
    )
    result = sim.run()
    refusals = b.placement.refusals if isinstance(b.placement, FabricPlacement) else []
    return result, fragmentation(refusals)


def run_policy(scenario: Scenario, policy: str, mean_gap_s: float, *, queue: str = "fifo") -> PolicyRun:
    """Simulate and measure one policy on a trace scenario."""
    import time

    t0 = time.perf_counter()
    result, frag = simulate_policy(scenario, policy, queue=queue)
    wall = time.perf_counter() - t0
    groups = parameter_groups(scenario.jobs)
    by_gpus: dict[int, float] = {}
    jrt: dict[int, float] = {}
    jwt: dict[int, float] = {}
    for g in sorted({j.spec.gpus for j in scenario.jobs}):
        sub = {k: v for k, v in groups.items() if v.startswith(f"{g}/")}
        by_gpus[g] = stability(result, sub).mean_s
        done = [r for r in result.jobs if r.gpus == g and r.finished]
        jrt[g] = float(np.mean([r.run_s for r in done])) if done else math.nan
        jwt[g] = float(np.mean([r.wait_s for r in done])) if done else math.nan
    return PolicyRun(
        policy=policy,
        mean_gap_s=mean_gap_s,
        times=average_times(result),
        stability_s=stability(result, groups).mean_s,
        stability_by_gpus=by_gpus,
        fragmentation=frag,
        queue=queue_depth(result.jobs),
        waits_s=tuple(sorted(j.wait_s for j in result.jobs if j.start_s is not None)),
        wall_s=wall,
        jrt_by_gpus=jrt,
        jwt_by_gpus=jwt,
        offered_load=offered_load(scenario),
        contention=contention_share(result, scenario.topology),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentSpec:
    """What to run: lambdas x policies on a base scenario's fabric and ``trace:`` section.

    ``trace`` is the scenario's ``helios_like`` section; ``overrides`` replace its parameters (task
    count, seed, calibration knobs) and each lambda replaces its ``mean_gap_s``.
    """

    lambdas: tuple[float, ...] = (120.0,)
    policies: tuple[str, ...] = TABLE5_POLICIES
    trace: Mapping[str, Any] = field(default_factory=lambda: dict(DEFAULT_TRACE))
    overrides: Mapping[str, Any] = field(default_factory=dict)
    queue: str = "fifo"
    macro_iterations: int = 10
    base_dir: Path = Path(".")

    def section(self, lam: float) -> dict[str, Any]:
        """The trace section of one lambda."""
        return {**self.trace, **self.overrides, "mean_gap_s": lam}


def _one(base: Scenario, spec: ExperimentSpec, lam: float, policy: str) -> PolicyRun:
    sc = trace_scenario(
        base, spec.section(lam), macro_iterations=spec.macro_iterations, base_dir=spec.base_dir
    )
    return run_policy(sc, policy, lam, queue=spec.queue)


def run_experiment(
    base: Scenario,
    spec: ExperimentSpec,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    progress: Callable[[PolicyRun], None] | None = None,
) -> tuple[PolicyRun, ...]:
    """Every (lambda, policy) run, over ``workers`` processes (joblib) or a Ray cluster (``ray_address``,
    ``"local"`` starts one); runs in (lambda, policy) order, ``progress`` called as each finishes."""
    for p in spec.policies:
        bundle(p)
    cells = [(base, spec, lam, p) for lam in spec.lambdas for p in spec.policies]
    runs = spread(
        _one,
        cells,
        workers=workers,
        ray_address=ray_address,
        progress=None if progress is None else _each(progress),
    )
    return tuple(runs)


def _each(progress: Callable[[PolicyRun], None]) -> Callable[[int, PolicyRun], None]:
    def done(_i: int, run: PolicyRun) -> None:
        progress(run)

    return done
