"""The large-scale experiments of vClos (Table 5, Figs. 12-13): Helios-like traces replayed per policy.

Trace (``helios_like_trace``)
-----------------------------
The Helios job logs are not in the data snapshot (``data/helios/README.md``: only per-cluster
summaries), so the trace is synthetic, matched to the summary of Venus (the Helios cluster closest to
CLUSTER512 in size, 1,022 GPUs): median GPU request 1, mean 6.74 GPUs. GPU counts are drawn from

=====  ====  ====  ====  ====  ====  =====  =====  =====  =====
GPUs   1     2     4     8     16    32     64     96     128
p      .52   .10   .10   .16   .06   .035   .013   .005   .007
=====  ====  ====  ====  ====  ====  =====  =====  =====  =====

(median 1, mean 6.69), powers of two as in Helios (nearly all requests are) plus 96 (the paper's
Fig. 12d names 96- and 160-GPU jobs; 160 cannot be built on CLUSTER512 with T = 8 and 32-port
leaves, so it is left out). Requested run times (standalone seconds) are log-normal with median
``median_duration_s`` and shape ``sigma``, rounded to a geometric grid of 16 values per decade so that
jobs share parameters (needed for Stability), then capped. Models are drawn uniformly from the zoo
profiles of the paper's testbed mix (§8.1, Table 3: VGG16, ResNet50/101, BERT) plus GNMT as a
communication-heavy stand-in for the recommendation/MoE jobs (DLRM and MoE profiles of the zoo are
toy-scale or PP-only). Arrivals are Poisson with mean gap ``mean_gap_s`` (the paper's lambda).

References
----------
vClos §9.2 (5,000 Helios tasks, Poisson arrivals, FIFO), §9.4-9.6 (Figs. 12-13, Table 5).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.experiments.vclos_metrics import (
    Fragmentation,
    QueueDepth,
    TimeAverages,
    average_times,
    fragmentation,
    queue_depth,
    stability,
)
from commsched.io.scenario import Scenario, ScenarioJob
from commsched.scheduling.interfaces import PolicyBundle
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import job_traffic
from commsched.scheduling.vclos.bundles import one_switch, vclos_bundles, vclos_queue_orders
from commsched.scheduling.vclos.policy import FabricPlacement
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.records import Mode, SimConfig, SimResult
from commsched.topology import Topology
from commsched.workload import JobId, JobSpec, ModelProfile, get_model

HELIOS_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 96, 128)
HELIOS_PROBS: tuple[float, ...] = (0.52, 0.10, 0.10, 0.16, 0.06, 0.035, 0.013, 0.005, 0.007)
TRACE_MODELS: tuple[str, ...] = ("vgg16", "resnet50", "resnet101", "bert-base", "bert-large", "gnmt")
TABLE5_LAMBDAS: tuple[float, ...] = (100.0, 110.0, 120.0, 130.0, 140.0)
TABLE5_POLICIES: tuple[str, ...] = ("best", "ocs-vclos", "vclos", "sr", "balanced-ecmp", "ecmp")


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceParams:
    """Parameters of a Helios-like trace (see the module docstring for the derivation)."""

    tasks: int = 5000
    mean_gap_s: float = 120.0
    seed: int = 0
    median_duration_s: float = 3000.0
    sigma: float = 1.0
    max_duration_s: float = 36000.0
    sizes: tuple[int, ...] = HELIOS_SIZES
    probs: tuple[float, ...] = HELIOS_PROBS
    models: tuple[str, ...] = TRACE_MODELS
    collective: str = "hierarchical_ring"
    comm_scale: float = 8.0
    macro_iterations: int = 10

    def __post_init__(self) -> None:
        if self.tasks < 1 or self.mean_gap_s <= 0 or self.median_duration_s <= 0:
            raise InputError("tasks, mean gap and duration must be positive", where="TraceParams")
        if len(self.sizes) != len(self.probs) or not math.isclose(sum(self.probs), 1.0, abs_tol=1e-9):
            raise InputError("sizes and probabilities must match and sum to 1", where="TraceParams.probs")


def _grid(x: float) -> float:
    """Round to a geometric grid of 16 values per decade."""
    return float(10 ** (round(math.log10(x) * 16) / 16))


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


def helios_like_trace(params: TraceParams, *, max_gpus: int | None = None) -> tuple[JobSpec, ...]:
    """Jobs of a Helios-like trace: sizes, durations, models and Poisson arrivals (deterministic in seed).

    Examples
    --------
    >>> jobs = helios_like_trace(TraceParams(tasks=3, seed=1))
    >>> [j.id for j in jobs], all(j.duration_s is not None for j in jobs)
    (['t0', 't1', 't2'], True)
    """
    rng = np.random.default_rng(params.seed)
    n = params.tasks
    sizes = np.array(params.sizes)
    probs = np.array(params.probs)
    if max_gpus is not None:
        probs = np.where(sizes <= max_gpus, probs, 0.0)
        probs = probs / probs.sum()
    gpus = rng.choice(sizes, size=n, p=probs)
    arrivals = np.cumsum(rng.exponential(params.mean_gap_s, size=n))
    dur = rng.lognormal(math.log(params.median_duration_s), params.sigma, size=n)
    models = rng.integers(len(params.models), size=n)
    out = []
    for i in range(n):
        name = params.models[int(models[i])]
        d = min(_grid(float(dur[i])), params.max_duration_s)
        out.append(
            JobSpec(
                id=JobId(f"t{i}"),
                profile=macro_profile(get_model(name), params, d),
                model=name,
                gpus=int(gpus[i]),
                arrival_s=float(arrivals[i]),
                duration_s=d,
                collective=params.collective,
            )
        )
    return tuple(out)


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


def macro_profile(profile: ModelProfile, params: TraceParams, duration_s: float) -> ModelProfile:
    """The profile of one *macro-iteration*: ``k`` real iterations with compute and bytes times ``k``
    (bytes also times ``comm_scale``), ``k`` chosen so the job runs about ``macro_iterations`` of them.

    The simulator is fluid: under a contention pattern that holds for a macro-iteration, the job's
    slow-down is the one of its real iterations; the saving is the per-iteration events.
    """
    k = max(1.0, duration_s / (params.macro_iterations * profile.compute_s))
    return replace(
        profile,
        name=f"{profile.name}-x{k:.0f}",
        compute_s=profile.compute_s * k,
        sync_bytes=profile.sync_bytes * k * params.comm_scale,
        layers=(),
        source=f"{profile.name} x {k:.4g} iterations, gradient bytes x {params.comm_scale:g} (vclos_exp)",
    )


def trace_scenario(base: Scenario, params: TraceParams) -> Scenario:
    """The scenario's fabric and defaults with a generated trace as its jobs."""
    jobs = with_iterations(base.topology, helios_like_trace(params, max_gpus=base.topology.n_gpus))
    return replace(
        base,
        name=f"{base.name}@lambda={params.mean_gap_s:g}",
        jobs=tuple(ScenarioJob(spec=j, gpu_ids=()) for j in jobs),
    )


def parameter_groups(jobs: Sequence[ScenarioJob]) -> dict[str, str]:
    """Job id -> "GPUs/model/duration" (jobs with the same parameters, for Stability)."""
    return {j.spec.id: f"{j.spec.gpus}/{j.spec.model}/{j.spec.duration_s:g}" for j in jobs}


# ---------------------------------------------------------------------------------------------- runs


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
    for g in sorted({j.spec.gpus for j in scenario.jobs}):
        sub = {k: v for k, v in groups.items() if v.startswith(f"{g}/")}
        by_gpus[g] = stability(result, sub).mean_s
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
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ExperimentSpec:
    """What to run: lambdas x policies on a base scenario's fabric, trace size and seed, queue order."""

    lambdas: tuple[float, ...] = (120.0,)
    policies: tuple[str, ...] = TABLE5_POLICIES
    tasks: int = 5000
    seed: int = 0
    queue: str = "fifo"


def _one(base: Scenario, spec: ExperimentSpec, lam: float, policy: str) -> PolicyRun:
    sc = trace_scenario(base, TraceParams(tasks=spec.tasks, mean_gap_s=lam, seed=spec.seed))
    return run_policy(sc, policy, lam, queue=spec.queue)


def run_experiment(
    base: Scenario,
    spec: ExperimentSpec,
    *,
    workers: int = 1,
    progress: Callable[[PolicyRun], None] | None = None,
) -> tuple[PolicyRun, ...]:
    """Every (lambda, policy) run, in parallel over ``workers`` processes (joblib)."""
    for p in spec.policies:
        bundle(p)
    cells = [(lam, p) for lam in spec.lambdas for p in spec.policies]
    if workers > 1 and len(cells) > 1:
        from joblib import Parallel, delayed

        runs = Parallel(n_jobs=min(workers, len(cells)))(
            delayed(_one)(base, spec, lam, p) for lam, p in cells
        )
        return tuple(runs)
    out = []
    for lam, p in cells:
        out.append(_one(base, spec, lam, p))
        if progress is not None:
            progress(out[-1])
    return tuple(out)


# ---------------------------------------------------------------------------------------------- outputs


def _num(x: float) -> float | None:
    return round(float(x), 3) if math.isfinite(x) else None


def table5(runs: Sequence[PolicyRun]) -> dict[str, dict[str, float | None]]:
    """Table 5: average JCT (s) by lambda (rows) and policy (columns)."""
    out: dict[str, dict[str, float | None]] = {}
    for r in runs:
        out.setdefault(f"{r.mean_gap_s:g}", {})[r.policy] = _num(r.times.jct_s)
    return out


def experiment_json(scenario: str, runs: Sequence[PolicyRun]) -> dict[str, Any]:
    """Everything the figures need: Table 5, per-run averages (Fig. 13), stability and fragmentation
    (Fig. 12d, Table 2), JWT quantiles (Fig. 12a) and the time-averaged queue depth (Fig. 12c)."""
    qs = (0.5, 0.9, 0.99, 1.0)
    return {
        "scenario": scenario,
        "table5_avg_jct_s": table5(runs),
        "runs": [
            {
                "policy": r.policy,
                "lambda_s": r.mean_gap_s,
                "avg_jrt_s": _num(r.times.jrt_s),
                "avg_jwt_s": _num(r.times.jwt_s),
                "avg_jct_s": _num(r.times.jct_s),
                "finished": r.times.finished,
                "jobs": r.times.jobs,
                "stability_s": _num(r.stability_s),
                "stability_by_gpus_s": {str(k): _num(v) for k, v in r.stability_by_gpus.items()},
                "fragmentation": {
                    "gpu_total": r.fragmentation.gpu_total,
                    "gpu_shape": r.fragmentation.gpu_shape,
                    "network": r.fragmentation.network,
                },
                "jwt_quantiles_s": {
                    f"p{int(q * 100)}": _num(float(np.quantile(r.waits_s, q))) if r.waits_s else None
                    for q in qs
                },
                "avg_queue_depth": _num(r.queue.time_average()),
                "max_queue_depth": int(r.queue.depth.max()) if r.queue.depth.size else 0,
                "wall_s": round(r.wall_s, 2),
            }
            for r in runs
        ],
    }


def plot_experiment(runs: Sequence[PolicyRun], out_dir: str) -> list[str]:
    """Fig. 12a (JWT CDF), Fig. 12c (queue depth), Fig. 12d (stability by GPUs) and Fig. 13 (averages)
    for the first lambda, as PNG files in ``out_dir`` (matplotlib imported here, lazily)."""
    import os

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    os.makedirs(out_dir, exist_ok=True)
    lam = runs[0].mean_gap_s
    sel = [r for r in runs if r.mean_gap_s == lam]
    files = []
    fig, ax = plt.subplots(2, 2, figsize=(11, 8))
    for r in sel:
        w = np.array(r.waits_s)
        ax[0, 0].plot(w, np.arange(1, w.size + 1) / max(w.size, 1), label=r.policy)
        ax[0, 1].step(r.queue.t_s, r.queue.depth, where="post", label=r.policy)
        ks = sorted(r.stability_by_gpus)
        ax[1, 0].plot([str(k) for k in ks], [r.stability_by_gpus[k] for k in ks], marker="o", label=r.policy)
    ax[0, 0].set(xscale="symlog", xlabel="JWT (s)", ylabel="CDF", title="(a) JWT")
    ax[0, 1].set(xlabel="time (s)", ylabel="waiting jobs", title="(c) queue depth")
    ax[1, 0].set(xlabel="GPUs", ylabel="JCT std (s)", title="(d) stability")
    names = [r.policy for r in sel]
    x = np.arange(len(names))
    for i, (lbl, vals) in enumerate(
        (
            ("JRT", [r.times.jrt_s for r in sel]),
            ("JWT", [r.times.jwt_s for r in sel]),
            ("JCT", [r.times.jct_s for r in sel]),
        )
    ):
        ax[1, 1].bar(x + (i - 1) * 0.27, vals, width=0.27, label=lbl)
    ax[1, 1].set_xticks(x, names, rotation=30)
    ax[1, 1].set(ylabel="seconds", title="Fig. 13: averages")
    for a in ax.ravel():
        a.legend(fontsize=7)
    fig.suptitle(f"vClos Figs. 12-13, lambda = {lam:g} s")
    fig.tight_layout()
    path = os.path.join(out_dir, f"vclos_fig12_13_lambda{lam:g}.png")
    fig.savefig(path, dpi=120)
    plt.close(fig)
    files.append(path)
    return files
