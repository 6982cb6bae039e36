"""Crowded, oversubscribed, multi-class components: the hardest cases of the fast mode, and its check.

:func:`crowded_case` draws one case from a seed: 10-30 jobs packed on a few hosts of a small two-layer
Clos whose ToR uplinks are oversubscribed 2:1 to 8:1, with 2-4 priority classes and compute times from
0.02 s to 1 s (current GPUs, see ``shared/data/h200-profiles``), so that the jobs really contend: their
rings cross the same NICs and uplinks, and most of them are communication-bound. :func:`agreement` runs
a case in fast and in exact mode and measures how far the fast mode is from the exact one; the bounds
the fast mode is held to (``docs/simulator.md``, "Two modes") are :data:`UTIL_BOUND`,
:data:`ITER_P90_BOUND` and :data:`ITER_MAX_BOUND`.

The suite checks seeds 0-4 (``tests/sim/test_fast_crowded.py``); ``benchmarks/fast_vs_exact_crowded.py``
checks seeds 0-199 and prints the worst case.

Examples
--------
>>> case = crowded_case(3)
>>> 10 <= len(case.jobs) <= 30, 2 <= case.priority_levels <= 4, 2.0 <= case.oversubscription <= 8.0
(True, True, True)
>>> crowded_case(3).jobs == case.jobs  # the same seed gives the same case
True
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace

import numpy as np

from commsched.scheduling.interfaces import PolicyFn
from commsched.scheduling.placement import pack
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import JobResult, Mode, SimConfig, SimResult
from commsched.topology import NodeId, Topology
from commsched.topology.builders import two_layer_clos
from commsched.workload import JobId, JobSpec, ModelProfile

__all__ = [
    "ITER_MAX_BOUND",
    "ITER_NOISE",
    "ITER_P90_BOUND",
    "UTIL_BOUND",
    "Agreement",
    "CrowdedCase",
    "agreement",
    "compare",
    "crowded_case",
    "crowded_topology",
    "jittered",
    "run_case",
]

#: fast against exact, per case: cluster GPU utilisation within this (absolute, fraction of the GPUs)
UTIL_BOUND = 0.01
#: per-job mean iteration time within this (relative) at the 90th percentile of a case's jobs
ITER_P90_BOUND = 0.04
#: and within this for every job
ITER_MAX_BOUND = 0.10
#: jobs whose exact result moves by more than this under a 1 ms jitter of the arrivals are chaotic
ITER_NOISE = 0.01

#: model-like profiles (gradient bytes and overlap of the zoo's BERT, GPT, VGG and ResNet); the compute
#: time is drawn per job
_MODELS = (
    ("bert", 440_419_560.0, 1.0 / 3.0),
    ("gpt", 1_423_679_488.0, 1.0 / 3.0),
    ("vgg", 553_430_176.0, 0.348),
    ("resnet", 102_228_128.0, 0.412),
)
#: the fabric: 4 ToRs x 4 hosts of 8 GPUs and 4 NICs (100 Gb/s), 4 uplinks per ToR to 2 Aggs
_TORS, _HOSTS_PER_TOR, _UPLINKS, _HOST_BPS = 4, 4, 4, 100e9


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class CrowdedCase:
    """One drawn case: the fabric, the jobs (each with explicit GPUs), the classes and the horizon."""

    seed: int
    topology: Topology
    jobs: tuple[SimJob, ...]
    priority_levels: int
    oversubscription: float
    horizon_s: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Agreement:
    """How far the fast mode is from the exact mode on one case.

    ``util_diff`` is fast minus exact utilisation of the GPUs allocated to the case's jobs (the
    cluster's other GPUs stay idle, so this is the stricter of the two), ``cluster_util_diff`` the same
    over all the cluster's GPUs. ``iter_errors`` are the per-job relative errors of the mean iteration
    time, ``iter_noise`` the exact mode's own: how far its result moves when every arrival is delayed
    by up to 1 ms (:func:`jittered`, two draws), and ``iter_slowdown`` the jobs' slowdowns in exact
    mode (the time they ran over their iterations, against their standalone iteration time). Every job
    that completes at least one iteration in the exact run is compared, slowed and starved ones included;
    one that completes none in fast mode has an error of 1.0. A job whose own result moves by more than
    :data:`ITER_NOISE` under the jitter (or that completes no iteration in a jittered run) is *chaotic*:
    its mean over the horizon is not reproducible, and the per-job bounds hold over the other jobs.
    """

    seed: int
    policy: str
    util_diff: float
    cluster_util_diff: float
    iter_errors: tuple[float, ...]
    iter_noise: tuple[float, ...]
    iter_slowdown: tuple[float, ...]
    fast_events: int
    exact_events: int

    @property
    def steady_errors(self) -> tuple[float, ...]:
        """The errors of the jobs that are not chaotic (slowed and starved jobs included)."""
        return tuple(e for e, n in zip(self.iter_errors, self.iter_noise, strict=True) if n <= ITER_NOISE)

    @property
    def chaotic_max(self) -> float:
        """The largest error of a chaotic job (reported, not bounded)."""
        return max(
            (e for e, n in zip(self.iter_errors, self.iter_noise, strict=True) if n > ITER_NOISE), default=0.0
        )

    @property
    def chaotic(self) -> int:
        return len(self.iter_errors) - len(self.steady_errors)

    @property
    def iter_p90(self) -> float:
        errs = self.steady_errors
        return float(np.quantile(errs, 0.9)) if errs else 0.0

    @property
    def iter_max(self) -> float:
        return max(self.steady_errors, default=0.0)

    @property
    def holds(self) -> bool:
        """Whether the case is within every bound."""
        return (
            abs(self.util_diff) <= UTIL_BOUND
            and self.iter_p90 <= ITER_P90_BOUND
            and self.iter_max <= ITER_MAX_BOUND
        )


def crowded_topology(oversubscription: float, *, tors: int = _TORS) -> Topology:
    """The small two-layer Clos of the cases, its ToR uplinks oversubscribed ``oversubscription``:1.

    ``tors`` ToRs of 4 hosts each (4 by default; the sized cases of :func:`crowded_case` scale it).

    Examples
    --------
    >>> from commsched.topology.summary import oversubscription
    >>> round(oversubscription(crowded_topology(4.0)), 6)
    4.0
    """
    down_bps = _HOSTS_PER_TOR * 4 * _HOST_BPS  # 4 NICs per host
    return two_layer_clos(
        tors=tors,
        aggs=2,
        hosts_per_tor=_HOSTS_PER_TOR,
        host_template="a100_8gpu_4nic",
        uplinks_per_tor=_UPLINKS,
        host_link_bps=_HOST_BPS,
        uplink_bps=down_bps / (_UPLINKS * oversubscription),
    )


def crowded_case(seed: int, *, horizon_s: float = 120.0, jobs: int | None = None) -> CrowdedCase:
    """Draw one crowded case from ``seed`` (see the module notes); deterministic.

    ``jobs`` asks for that many jobs (default: 10-30, drawn) on a fabric scaled to hold them: 4 ToRs per
    started 30 jobs, the hosts in use kept as crowded as in the default cases. ``crowded_case(seed)`` is
    the same case whatever the sized cases do.

    Examples
    --------
    >>> big = crowded_case(0, jobs=50)
    >>> len(big.jobs), len(big.topology.hosts)
    (50, 32)
    """
    rng = np.random.default_rng(seed)
    ratio = float(rng.uniform(2.0, 8.0))
    tors = _TORS if jobs is None else _TORS * max(1, math.ceil(jobs / 30))
    topo = crowded_topology(ratio, tors=tors)
    levels = int(rng.integers(2, 5))
    n_jobs = int(rng.integers(10, 31))
    if jobs is not None:
        n_jobs = jobs
    sizes = [int(rng.choice([2, 3, 4, 4, 6, 8])) for _ in range(n_jobs)]
    while sum(sizes) > 7 * _HOSTS_PER_TOR * tors:  # the jobs fit on 14 of every 16 hosts
        k = int(np.argmax(sizes))
        sizes[k] = max(2, sizes[k] // 2)
    pool = _host_pool(rng, sum(sizes), tors)
    free = {h: list(range(8)) for h in pool}
    drawn: list[SimJob] = []
    for k, g in enumerate(sizes):
        gpus = _place(rng, free, g)
        if len(gpus) < 2:
            continue
        name, nbytes, overlap = _MODELS[int(rng.integers(len(_MODELS)))]
        compute_s = float(math.exp(rng.uniform(math.log(0.02), math.log(1.0))))
        # most run past the horizon (at their standalone speed from 0.3 to 3 horizons), some leave early
        guess_s = compute_s + nbytes / 4e9
        iterations = max(5, int(rng.uniform(0.3, 3.0) * horizon_s / guess_s))
        prof = ModelProfile(
            name=f"{name}-like",
            gpu="test",
            compute_s=compute_s,
            sync_bytes=nbytes,
            overlap=overlap,
            source="test",
        )
        spec = JobSpec(
            id=JobId(f"c{k}"),
            profile=prof,
            gpus=len(gpus),
            priority=int(rng.integers(0, levels)),
            iterations=iterations,
            arrival_s=float(rng.uniform(0.0, 0.1 * horizon_s)),
        )
        drawn.append(SimJob(spec=spec, gpus=tuple(NodeId(x) for x in gpus)))
    return CrowdedCase(
        seed=seed,
        topology=topo,
        jobs=tuple(drawn),
        priority_levels=levels,
        oversubscription=ratio,
        horizon_s=horizon_s,
    )


def _host_pool(rng: np.random.Generator, gpus: int, n_fabric_tors: int) -> list[int]:
    """A few hosts under 2-4 ToRs (more when the jobs need them), with a little more room than the
    jobs need (ToRs interleaved)."""
    need = min(n_fabric_tors * _HOSTS_PER_TOR, math.ceil(gpus / 7))
    n_tors = max(int(rng.integers(2, 4)), math.ceil(need / _HOSTS_PER_TOR))
    tors = np.sort(rng.choice(n_fabric_tors, size=min(n_tors, n_fabric_tors), replace=False))
    hosts = [int(t) * _HOSTS_PER_TOR + h for h in range(_HOSTS_PER_TOR) for t in tors]
    return hosts[: max(need, len(tors))]


def _place(rng: np.random.Generator, free: dict[int, list[int]], gpus: int) -> list[str]:
    """``gpus`` GPUs on 2-3 hosts of the pool with the most free GPUs (ties at random)."""
    k = min(int(rng.integers(2, 4)), gpus)
    order = sorted(free, key=lambda h: (-len(free[h]), float(rng.uniform())))
    hosts = [h for h in order if free[h]][:k]
    out: list[str] = []
    for i in range(gpus):
        h = hosts[i % len(hosts)] if hosts else None
        if h is None or not free[h]:
            break
        out.append(f"h{h}/gpu{free[h].pop(0)}")
    return out


def run_case(
    case: CrowdedCase, policy: PolicyFn, mode: Mode, *, fluid_min_jobs: int | None = None
) -> tuple[SimResult, Simulation]:
    """Simulate a case under ``policy`` in ``mode`` (``fluid_min_jobs`` overrides the default)."""
    config = SimConfig(horizon_s=case.horizon_s, mode=mode, seed=case.seed)
    if fluid_min_jobs is not None:
        config = replace(config, fluid_min_jobs=fluid_min_jobs)
    sim = Simulation(
        topology=case.topology,
        jobs=list(case.jobs),
        policy=policy,
        placement=pack,
        config=config,
        priority_levels=case.priority_levels,
    )
    return sim.run(), sim


def jittered(case: CrowdedCase, draw: int = 1) -> CrowdedCase:
    """The same case with every arrival delayed by up to 1 ms (``draw`` picks the delays).

    Examples
    --------
    >>> case = crowded_case(3)
    >>> delays = [b.spec.arrival_s - a.spec.arrival_s for a, b in zip(case.jobs, jittered(case).jobs)]
    >>> all(0.0 <= d <= 1e-3 for d in delays), jittered(case, 2).jobs != jittered(case, 1).jobs
    (True, True)
    """
    rng = np.random.default_rng([case.seed, draw])
    jobs = tuple(
        replace(j, spec=replace(j.spec, arrival_s=j.spec.arrival_s + float(rng.uniform(0.0, 1e-3))))
        for j in case.jobs
    )
    return replace(case, jobs=jobs)


def agreement(
    case: CrowdedCase, policy: PolicyFn, *, policy_name: str = "", fluid_min_jobs: int | None = None
) -> Agreement:
    """Run ``case`` fast and exact (and exact twice more, jittered) under ``policy``; compare them."""
    exact, _ = run_case(case, policy, Mode.EXACT)
    twins = tuple(run_case(jittered(case, k), policy, Mode.EXACT)[0] for k in (1, 2))
    fast, _ = run_case(case, policy, Mode.FAST, fluid_min_jobs=fluid_min_jobs)
    return compare(case, fast=fast, exact=exact, twins=twins, policy_name=policy_name)


def compare(
    case: CrowdedCase,
    *,
    fast: SimResult,
    exact: SimResult,
    twins: tuple[SimResult, ...],
    policy_name: str = "",
) -> Agreement:
    """The agreement of a fast run with the exact one; ``twins`` are exact runs of :func:`jittered` cases.

    Every job with at least one iteration in ``exact`` is compared. Its error is the relative difference
    of its mean iteration time between ``fast`` and ``exact`` (1.0 when it completes no iteration in
    ``fast``), its noise the largest such difference between a twin and ``exact``.

    Examples
    --------
    >>> from commsched.scheduling.basic import static_policy
    >>> case = crowded_case(3, horizon_s=5.0)
    >>> a = agreement(case, static_policy, policy_name="static")
    >>> a.holds, a.fast_events <= a.exact_events
    (True, True)
    """
    errors, noise, slowdown = [], [], []
    for k, (f, e) in enumerate(zip(fast.jobs, exact.jobs, strict=True)):
        if e.iterations < 1:
            continue  # no exact iteration: nothing to compare against
        errors.append(_relative(f, e))
        noise.append(max((_relative(t.jobs[k], e) for t in twins), default=0.0))
        # over its whole run (a job starved after a few quick iterations has a short mean)
        slowdown.append(e.run_s / e.iterations / e.standalone_iteration_s)
    return Agreement(
        seed=case.seed,
        policy=policy_name,
        util_diff=fast.allocated_gpu_utilization - exact.allocated_gpu_utilization,
        cluster_util_diff=fast.gpu_utilization - exact.gpu_utilization,
        iter_errors=tuple(errors),
        iter_noise=tuple(noise),
        iter_slowdown=tuple(slowdown),
        fast_events=fast.events,
        exact_events=exact.events,
    )


def _relative(other: JobResult, exact: JobResult) -> float:
    """How far ``other``'s mean iteration time is from ``exact``'s, relative (1.0 without an iteration).

    Examples
    --------
    >>> from dataclasses import replace
    >>> e = JobResult(id=JobId("a"), gpus=2, arrival_s=0.0, start_s=0.0, end_s=5.0, iterations=10.0,
    ...               target_iterations=None, standalone_iteration_s=0.4, mean_iteration_s=0.5,
    ...               busy_gpu_s=8.0, finished=False, priority_class=0, intensity=1.0)
    >>> round(_relative(replace(e, mean_iteration_s=0.55), e), 9), _relative(replace(e, iterations=0.0), e)
    (0.1, 1.0)
    """
    if other.iterations < 1 or not math.isfinite(other.mean_iteration_s):
        return 1.0
    return abs(other.mean_iteration_s - exact.mean_iteration_s) / exact.mean_iteration_s
