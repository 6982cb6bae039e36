"""GPU time: what an operator asks of a comparison ("how much GPU time do I get back, and who pays?").

Per policy, over the measurement window:

* **useful GPU-hours** ``gpu_hours``: busy (computing) GPU-seconds in the window / 3600, i.e.
  ``gpu_utilization x GPUs x window``;
* **GPU-hours lost** ``gpu_hours_lost``: per job, the useful GPU-hours it would have added at its
  ideal pace (:mod:`commsched.sim.results.ideal`) in the time it ran, ``busy_j (mean_j / ideal_j - 1)``,
  summed (a job at or above its ideal pace loses nothing), scaled to the window by the share of the run's
  busy time that falls in it.

Against the *baseline* (the first policy listed): GPU-hours **recovered** (a policy's useful GPU-hours
minus the baseline's), in total, in %, per job size band and per class under the baseline (per job: its
busy GPU-hours minus the baseline's, over the run); and **who pays**: per job its iteration-time ratio to
the baseline and the GPU-hours its iterations took less (+) or more (-) than at the baseline's pace.

Policies are **tied** when, sorted by GPU utilisation, each lies within :data:`TIE_UTILIZATION` (absolute)
of its group's best.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from commsched.sim.results.records import JobResult, SimResult
from commsched.workload import JobId

__all__ = [
    "SIZE_BANDS",
    "TIE_UTILIZATION",
    "JobShift",
    "gpu_hours",
    "gpu_hours_lost",
    "recovered_by",
    "size_band",
    "ties",
    "who_pays",
]

#: policies whose GPU utilisations lie within this (absolute) of their group's best are tied
TIE_UTILIZATION = 0.0005
#: job size bands (GPUs, inclusive bounds; the last open)
SIZE_BANDS: tuple[tuple[str, int, int], ...] = (
    ("1-8", 1, 8),
    ("9-64", 9, 64),
    ("65-512", 65, 512),
    (">512", 513, 1 << 62),
)


def size_band(gpus: int) -> str:
    """The size band of a job of ``gpus`` GPUs.

    Examples
    --------
    >>> [size_band(g) for g in (1, 8, 9, 64, 65, 512, 513)]
    ['1-8', '1-8', '9-64', '9-64', '65-512', '65-512', '>512']
    """
    for name, lo, hi in SIZE_BANDS:
        if lo <= gpus <= hi:
            return name
    return SIZE_BANDS[0][0]


def gpu_hours(result: SimResult) -> float:
    """Useful GPU-hours in the window: ``gpu_utilization x GPUs x window / 3600``."""
    span = result.window_s[1] - result.window_s[0]
    return result.gpu_utilization * result.cluster_gpus * span / 3600.0


def _lost_s(j: JobResult) -> float:
    ref, mean = j.reference_iteration_s, j.mean_iteration_s
    if not (math.isfinite(mean) and math.isfinite(ref)) or ref <= 0 or mean <= ref:
        return 0.0
    return j.busy_gpu_s * (mean / ref - 1.0)


def gpu_hours_lost(result: SimResult) -> float:
    """GPU-hours lost to communication against the ideal, in the window (see the module notes)."""
    total_busy = sum(j.busy_gpu_s for j in result.jobs)
    if total_busy <= 0:
        return 0.0
    share = gpu_hours(result) * 3600.0 / total_busy  # the window's share of the run's busy time
    return sum(_lost_s(j) for j in result.jobs) * min(1.0, share) / 3600.0


def ties(utilization: Mapping[str, float], within: float = TIE_UTILIZATION) -> list[list[str]]:
    """Groups of tied policies (two or more each), best first: sorted by utilisation, each policy within
    ``within`` of its group's best.

    Examples
    --------
    >>> ties({"a": 0.405, "b": 0.4762, "c": 0.4760, "d": 0.4758, "e": 0.45})
    [['b', 'c', 'd']]
    >>> ties({"a": 0.461, "b": 0.461})
    [['a', 'b']]
    >>> ties({"a": 0.5, "b": 0.4})
    []
    """
    order = sorted(utilization, key=lambda p: -utilization[p])
    groups: list[list[str]] = []
    for p in order:
        if groups and utilization[groups[-1][0]] - utilization[p] <= within + 1e-12:
            groups[-1].append(p)
        else:
            groups.append([p])
    return [g for g in groups if len(g) > 1]


def recovered_by(
    base: SimResult, other: SimResult, key: str, base_classes: Mapping[JobId, int] | None = None
) -> dict[str, float]:
    """GPU-hours ``other`` recovers over ``base`` per job size band (``key="size"``) or per class under
    the baseline (``key="class"``): the jobs' busy GPU-hours over the run, minus the baseline's."""
    classes = base_classes if base_classes is not None else {j.id: j.priority_class for j in base.jobs}
    before = {j.id: j.busy_gpu_s for j in base.jobs}
    out: dict[str, float] = {}
    if key == "size":
        out = {name: 0.0 for name, _, _ in SIZE_BANDS}
    for j in other.jobs:
        k = size_band(j.gpus) if key == "size" else str(classes.get(j.id, j.priority_class))
        out[k] = out.get(k, 0.0) + (j.busy_gpu_s - before.get(j.id, 0.0)) / 3600.0
    return dict(sorted(out.items())) if key == "class" else out


@dataclass(frozen=True, slots=True, kw_only=True)
class JobShift:
    """One job under a policy against the baseline.

    ``ratio`` is its mean iteration time over the baseline's (above 1: slower, it pays);
    ``gpu_hours_gained`` the GPU-hours its iterations took less (+) or more (-) than at the baseline's
    pace, ``gpus x iterations x (mean_base - mean) / 3600``.
    """

    id: str
    gpus: int
    model: str
    class_baseline: int
    class_policy: int
    ratio: float
    gpu_hours_gained: float


def who_pays(base: SimResult, other: SimResult, models: Mapping[str, str]) -> list[JobShift]:
    """Every job that iterated under both, most slowed first (ties by id)."""
    before = {j.id: j for j in base.jobs}
    out: list[JobShift] = []
    for j in other.jobs:
        b = before.get(j.id)
        if b is None or not (math.isfinite(j.mean_iteration_s) and math.isfinite(b.mean_iteration_s)):
            continue
        if b.mean_iteration_s <= 0:
            continue
        out.append(
            JobShift(
                id=j.id,
                gpus=j.gpus,
                model=models.get(j.id, ""),
                class_baseline=b.priority_class,
                class_policy=j.priority_class,
                ratio=j.mean_iteration_s / b.mean_iteration_s,
                gpu_hours_gained=j.gpus * j.iterations * (b.mean_iteration_s - j.mean_iteration_s) / 3600.0,
            )
        )
    out.sort(key=lambda s: (-s.ratio, s.id))
    return out


def utilizations(results: Sequence[SimResult]) -> dict[str, float]:
    """Policy -> GPU utilisation."""
    return {r.policy: r.gpu_utilization for r in results}
