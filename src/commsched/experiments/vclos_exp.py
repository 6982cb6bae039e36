"""The large-scale experiments of vClos (Table 5, Figs. 12-13): Helios-like traces replayed per policy.

Trace
-----
The jobs come from the scenario's ``trace:`` section, of kind ``helios_like``
(:mod:`commsched.workload.traces.helios`: sizes from the Helios Venus summary, log-normal run times,
Poisson arrivals with mean gap lambda); the experiment overrides its ``mean_gap_s`` (``--lambda``),
``tasks``, ``seed`` and any calibration knob. Each job's profile is turned into a *macro-iteration*
profile (:func:`~commsched.workload.traces.helios.macro_profile`, about ``macro_iterations`` per job)
and its requested run time into an iteration count at the contention-free speed
(:func:`with_iterations`), so that network contention lengthens a job's run time.

Calibration and the Table-5 order
---------------------------------
The shipped calibration (median 3,000 s, sigma 1, offered load about 0.55 of the 512 GPUs at
lambda = 120 s) reproduces the paper's Best regime (average JCT about 4,900 s with about 260 s of
waiting, paper: 5,053 s). It does not reproduce vClos < SR < balanced ECMP: with locality packing
only the 64-128-GPU jobs (about 3% of the tasks) cross leaves, their hierarchical rings are
leaf-wise permutations, and each leaf has one uplink per GPU, so source routing collides rarely and
``balanced-ecmp`` (a global least-loaded *path* choice, stronger than the paper's per-port choice)
almost never; vClos pays for isolation with shape waits (equal servers per leaf, reserved links).
``--set`` changes the knobs (``median_duration_s``, ``sigma``, ``size_exponent``, ``comm_scale``,
``collective``, ...) to explore other regimes.

References
----------
vClos §9.2 (5,000 Helios tasks, Poisson arrivals, FIFO), §9.4-9.6 (Figs. 12-13, Table 5).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.experiments.spread import spread
from commsched.experiments.vclos_metrics import (
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
from commsched.io.scenario import Scenario, ScenarioJob
from commsched.scheduling.interfaces import PolicyBundle
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import job_traffic
from commsched.scheduling.vclos.bundles import one_switch, vclos_bundles, vclos_queue_orders
from commsched.scheduling.vclos.policy import FabricPlacement
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.records import Mode, SimConfig, SimResult
from commsched.topology import Topology
from commsched.workload import JobSpec
from commsched.workload.traces.helios import macro_profile

TABLE5_LAMBDAS: tuple[float, ...] = (100.0, 110.0, 120.0, 130.0, 140.0)
TABLE5_POLICIES: tuple[str, ...] = ("best", "ocs-vclos", "vclos", "sr", "balanced-ecmp", "ecmp")
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


# ---------------------------------------------------------------------------------------------- outputs


def _num(x: float) -> float | None:
    return round(float(x), 3) if math.isfinite(x) else None


def _share(x: float) -> float | None:
    return round(float(x), 5) if math.isfinite(x) else None


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
                "avg_jrt_by_gpus_s": {str(k): _num(v) for k, v in r.jrt_by_gpus.items()},
                "avg_jwt_by_gpus_s": {str(k): _num(v) for k, v in r.jwt_by_gpus.items()},
                "offered_load": _num(r.offered_load),
                "multi_leaf_share": _share(r.contention.multi_leaf),
                "gpu_time_lost_to_contention": _share(r.contention.gpu_time_lost),
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
