"""The records of a policy comparison and the figures taken from one simulation's result.

A :class:`Comparison` holds, per policy: GPU utilisation over all cluster GPUs and over allocated GPUs,
average JCT / JRT / JWT, the worst per-job throughput loss and its distribution, and the full
:class:`~commsched.sim.results.records.SimResult`. The runs themselves are made by
:func:`commsched.api.compare` (which spreads them over local cores or a Ray cluster).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from commsched.sim.results import gputime
from commsched.sim.results.records import JobResult, SimResult


@dataclass(frozen=True, slots=True, kw_only=True)
class LossDistribution:
    """The distribution of per-job throughput loss over the jobs that ran (0 = no loss, 1 = stalled).

    ``over_half`` counts the jobs that lost more than half their standalone throughput.
    """

    jobs: int
    p50: float
    p95: float
    p99: float
    max: float
    over_half: int

    @staticmethod
    def of(losses: Sequence[float]) -> LossDistribution:
        """Percentiles (linear interpolation, numpy's default) of ``losses``; all zero when empty.

        Examples
        --------
        >>> d = LossDistribution.of([0.0, 0.1, 0.6, 0.9])
        >>> (d.max, d.over_half, round(d.p50, 2))
        (0.9, 2, 0.35)
        """
        if not losses:
            return LossDistribution(jobs=0, p50=0.0, p95=0.0, p99=0.0, max=0.0, over_half=0)
        a = np.asarray(losses, dtype=float)
        p50, p95, p99 = (float(v) for v in np.percentile(a, [50.0, 95.0, 99.0]))
        return LossDistribution(
            jobs=len(a), p50=p50, p95=p95, p99=p99, max=float(a.max()), over_half=int((a > 0.5).sum())
        )

    def as_json(self) -> dict[str, float | int]:
        """``{"jobs", "p50", "p95", "p99", "max", "over_50pct"}``."""
        return {
            "jobs": self.jobs,
            "p50": self.p50,
            "p95": self.p95,
            "p99": self.p99,
            "max": self.max,
            "over_50pct": self.over_half,
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicySummary:
    """The comparison figures of one policy.

    Examples
    --------
    >>> import commsched as cs
    >>> s = cs.compare("crux-fig19", ["crux-full"], mode="fast").summaries[0]
    >>> (s.policy, s.finished_jobs, s.jobs, 0 < s.gpu_utilization <= 1)  # the jobs train the whole horizon
    ('crux-full', 0, 4, True)
    """

    policy: str
    gpu_utilization: float
    allocated_gpu_utilization: float
    avg_jct_s: float
    avg_jrt_s: float
    avg_jwt_s: float
    worst_throughput_loss: float
    loss: LossDistribution
    finished_jobs: int
    jobs: int
    wall_time_s: float
    #: fast mode: share of the job-time extrapolated, and the worst disagreement its checks saw
    extrapolated_job_fraction: float = 0.0
    worst_check_disagreement: float = 0.0
    #: useful GPU-hours in the window, and GPU-hours lost to communication against the ideal
    #: (:mod:`commsched.sim.results.gputime`)
    gpu_hours: float = 0.0
    gpu_hours_lost: float = 0.0


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Comparison:
    """Summaries and full results of every policy, in the order asked.

    Examples
    --------
    >>> import commsched as cs
    >>> cmp = cs.compare("crux-fig19", ["ecmp-fair", "crux-full"], mode="fast")
    >>> (cmp.scenario, [r.policy for r in cmp.results])
    ('crux-fig19', ['ecmp-fair', 'crux-full'])

    GPU time against the baseline (the first policy), ties, and who pays:

    >>> cmp.baseline, cmp.ties, round(cmp.recovered_gpu_hours["crux-full"], 2)
    ('ecmp-fair', [], 0.38)
    >>> fastest = cmp.who_pays("crux-full")[-1]  # most slowed first
    >>> (fastest.id, fastest.gpus, round(fastest.ratio, 2))
    ('gpt', 32, 0.77)
    """

    scenario: str
    summaries: tuple[PolicySummary, ...]
    results: tuple[SimResult, ...]

    @property
    def baseline(self) -> str:
        """The policy the others are measured against: the first listed."""
        return self.summaries[0].policy

    @property
    def recovered_gpu_hours(self) -> dict[str, float]:
        """Policy -> useful GPU-hours over the baseline's (the baseline: 0)."""
        base = self.summaries[0].gpu_hours
        return {s.policy: s.gpu_hours - base for s in self.summaries}

    @property
    def ties(self) -> list[list[str]]:
        """Groups of policies tied in GPU utilisation (:func:`commsched.sim.results.gputime.ties`)."""
        return gputime.ties({s.policy: s.gpu_utilization for s in self.summaries})

    def recovered_by(self, policy: str, key: str) -> dict[str, float]:
        """GPU-hours ``policy`` recovers over the baseline per job size band (``key="size"``) or per
        class under the baseline (``key="class"``), :func:`commsched.sim.results.gputime.recovered_by`."""
        by_name = {r.policy: r for r in self.results}
        return gputime.recovered_by(self.results[0], by_name[policy], key)

    def who_pays(self, policy: str) -> list[gputime.JobShift]:
        """The jobs under ``policy`` against the baseline, most slowed first."""
        by_name = {r.policy: r for r in self.results}
        base = self.results[0]
        return gputime.who_pays(base, by_name[policy], {j.id: j.model for j in base.jobs})


def _mean(xs: Sequence[float]) -> float:
    vals = [x for x in xs if math.isfinite(x)]
    return float(np.mean(vals)) if vals else float("nan")


#: throughput losses below this are rounding (a mean iteration equal to its ideal, summed over many steps)
LOSS_RESOLUTION = 1e-9


def throughput_loss(result: SimResult) -> list[float]:
    """Per job: ``1 - ideal / contended`` iteration time (0 = no loss; started jobs only), against the
    ideal (:mod:`commsched.sim.results.ideal`) under every policy; a loss below :data:`LOSS_RESOLUTION` is the
    rounding of equal times and counts as none."""
    out = []
    for j in result.jobs:
        if j.start_s is None or not math.isfinite(j.mean_iteration_s) or j.mean_iteration_s <= 0:
            continue
        loss = 1.0 - j.reference_iteration_s / j.mean_iteration_s
        out.append(loss if loss >= LOSS_RESOLUTION else 0.0)
    return out


def summarise_policy(result: SimResult) -> PolicySummary:
    """The comparison figures of one simulation."""
    fin = [j for j in result.jobs if j.finished]
    losses = throughput_loss(result)
    return PolicySummary(
        policy=result.policy,
        gpu_utilization=result.gpu_utilization,
        allocated_gpu_utilization=result.allocated_gpu_utilization,
        avg_jct_s=_mean([j.jct_s for j in fin]),
        avg_jrt_s=_mean([j.run_s for j in fin]),
        avg_jwt_s=_mean([j.wait_s for j in result.jobs if j.start_s is not None]),
        worst_throughput_loss=max(losses) if losses else 0.0,
        loss=LossDistribution.of(losses),
        finished_jobs=len(fin),
        jobs=len(result.jobs),
        wall_time_s=result.wall_time_s,
        extrapolated_job_fraction=result.extrapolated_job_fraction,
        worst_check_disagreement=result.worst_check_disagreement,
        gpu_hours=gputime.gpu_hours(result),
        gpu_hours_lost=gputime.gpu_hours_lost(result),
    )


#: significant digits the comparison's figures are written with: the engine's sums over many events
#: carry relative noise near 1e-12 (a slowdown of 0.999999999997), far below what the model resolves
RESOLVED_DIGITS = 10


def resolved(obj: Any) -> Any:
    """A copy of a JSON-like object with every float rounded to :data:`RESOLVED_DIGITS` significant
    digits: what ``compare`` writes and prints (the Python API keeps full precision).

    Examples
    --------
    >>> resolved({"slowdown": 0.999999999997, "jct": [1488.7123456789], "n": 3, "x": None})
    {'slowdown': 1.0, 'jct': [1488.712346], 'n': 3, 'x': None}
    """
    if isinstance(obj, float):
        return float(f"{obj:.{RESOLVED_DIGITS}g}") if math.isfinite(obj) else obj
    if isinstance(obj, dict):
        return {k: resolved(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [resolved(v) for v in obj]
    return obj


def _num(x: float) -> float | None:
    return float(x) if math.isfinite(x) else None


def _job_json(j: JobResult) -> dict[str, Any]:
    return {
        "id": j.id,
        "gpus": j.gpus,
        "model": j.model,
        "priority_class": j.priority_class,
        "iterations": int(j.iterations) if float(j.iterations).is_integer() else j.iterations,
        "finished": j.finished,
        "mean_iteration_s": _num(j.mean_iteration_s),
        "ideal_iteration_s": _num(j.ideal_iteration_s),
        "standalone_iteration_s": _num(j.standalone_iteration_s),
        "slowdown": _num(j.slowdown),
        "gpu_hours": j.busy_gpu_s / 3600.0,
    }


def _policy_json(s: PolicySummary, r: SimResult) -> dict[str, Any]:
    num = _num
    by_size = {name: 0.0 for name, _, _ in gputime.SIZE_BANDS}
    for j in r.jobs:
        by_size[gputime.size_band(j.gpus)] += j.busy_gpu_s / 3600.0
    return {
        "gpu_utilization": num(s.gpu_utilization),
        "allocated_gpu_utilization": num(s.allocated_gpu_utilization),
        "avg_jct_s": num(s.avg_jct_s),
        "avg_jrt_s": num(s.avg_jrt_s),
        "avg_jwt_s": num(s.avg_jwt_s),
        "worst_throughput_loss": num(s.worst_throughput_loss),
        "throughput_loss": s.loss.as_json(),
        "finished_jobs": s.finished_jobs,
        "jobs": s.jobs,
        "wall_time_s": round(s.wall_time_s, 4),
        "extrapolated_job_fraction": num(s.extrapolated_job_fraction),
        "worst_check_disagreement": num(s.worst_check_disagreement),
        "gpu_hours": s.gpu_hours,
        "gpu_hours_lost": s.gpu_hours_lost,
        "gpu_hours_by_size": by_size,
        "job_results": [_job_json(j) for j in r.jobs],
    }


def _shift_json(x: gputime.JobShift) -> dict[str, Any]:
    return {
        "id": x.id,
        "gpus": x.gpus,
        "model": x.model,
        "class_baseline": x.class_baseline,
        "class_policy": x.class_policy,
        "iteration_ratio": x.ratio,
        "gpu_hours_gained": x.gpu_hours_gained,
    }


def comparison_json(cmp: Comparison) -> dict[str, Any]:
    """``{"scenario", "policies": {NAME: {...}}, "baseline", "recovered_gpu_hours", "ties", ...}`` with
    JSON-safe numbers (NaN -> null); see :mod:`commsched.sim.results.gputime` for the GPU-time figures."""
    base, base_s = cmp.results[0], cmp.summaries[0]
    classes = {j.id: j.priority_class for j in base.jobs}
    recovered = cmp.recovered_gpu_hours
    return {
        "scenario": cmp.scenario,
        "policies": {s.policy: _policy_json(s, r) for s, r in zip(cmp.summaries, cmp.results, strict=True)},
        "baseline": cmp.baseline,
        "recovered_gpu_hours": recovered,
        "recovered_pct": {
            p: (100.0 * v / base_s.gpu_hours if base_s.gpu_hours > 0 else None) for p, v in recovered.items()
        },
        "recovered_by_size": {r.policy: gputime.recovered_by(base, r, "size") for r in cmp.results[1:]},
        "recovered_by_class": {
            r.policy: gputime.recovered_by(base, r, "class", classes) for r in cmp.results[1:]
        },
        "ties": cmp.ties,
        "who_pays": {r.policy: [_shift_json(x) for x in cmp.who_pays(r.policy)] for r in cmp.results[1:]},
    }
