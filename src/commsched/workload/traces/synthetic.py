"""A seeded synthetic trace calibrated to the Crux production trace (two weeks, 5,000+ jobs, 2,000+ GPUs).

Generation (all draws from ``numpy.random.default_rng(seed)``):

1. ``jobs`` arrival times uniform over ``days`` (a Poisson process conditioned on the count), sorted.
2. Sizes from :attr:`SyntheticParams.sizes` (GPUs, weight), sizes above ``cluster_gpus`` dropped. The
   default puts 12 % of the jobs on >= 128 GPUs (largest 512), 34 % on more than one 8-GPU host, and the
   rest on 1, 2, 4 or 8 GPUs; sizes >= 8 are multiples of 8 (whole hosts).
3. Durations lognormal (``sigma``), then all scaled by one factor so the offered load
   ``sum(gpus * duration) / (cluster_gpus * days)`` equals ``load``; clipped to [60 s, the span].
4. Models by size class (:attr:`SyntheticParams.big_models` for >= 128 GPUs, ``mid_models`` for 8–64,
   ``small_models`` below 8), uniformly within a class — the Crux §6.5 mix: GPT variants for big jobs,
   BERT, ResNet, NMT (gnmt), CTR (dlrm), transformer.

With the defaults (5,000 jobs, 14 days, 2,048 GPUs, seed 0) the trace meets the Crux statistics
(reference/crux-spec.md A19, checked by the tests with :func:`~commsched.workload.traces.stats.trace_stats`):
> 10 % of jobs on >= 128 GPUs, largest 512, peak > 30 concurrent jobs on > 1,000 GPUs, about a third of
the jobs at risk of contention (placement-free proxy).

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §2.2 (Figs. 4–6) and §6.5.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from commsched.errors import InputError
from commsched.workload.records import JobId
from commsched.workload.traces.records import Trace, TraceJob

DAY_S = 86_400.0
MIN_DURATION_S = 60.0

DEFAULT_SIZES: tuple[tuple[int, float], ...] = (
    (1, 0.20), (2, 0.10), (4, 0.14), (8, 0.20), (16, 0.09), (32, 0.08), (64, 0.07),
    (128, 0.06), (256, 0.04), (512, 0.02),
)  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class SyntheticParams:
    """Parameters of :func:`synthetic_trace` (defaults: the Crux production trace)."""

    jobs: int = 5000
    days: float = 14.0
    cluster_gpus: int = 2048
    seed: int = 0
    sizes: tuple[tuple[int, float], ...] = DEFAULT_SIZES
    load: float = 0.5
    sigma: float = 1.2
    big_models: tuple[str, ...] = ("gpt3-crux",)
    mid_models: tuple[str, ...] = ("gpt3-crux", "bert-large", "bert-base", "transformer", "gnmt", "resnet50")
    small_models: tuple[str, ...] = ("bert-base", "resnet50", "resnet18", "gnmt", "dlrm", "transformer")


def _check(p: SyntheticParams) -> list[tuple[int, float]]:
    bad = [
        (f"jobs = {p.jobs}", "jobs >= 1") if p.jobs < 1 else None,
        (f"days = {p.days}", "days > 0") if not p.days > 0 else None,
        (f"load = {p.load}", "0 < load") if not p.load > 0 else None,
        (f"sigma = {p.sigma}", "sigma >= 0") if not p.sigma >= 0 else None,
    ]
    for item in bad:
        if item:
            raise InputError(item[0], where="synthetic trace parameters", expected=item[1])
    sizes = [(g, w) for g, w in p.sizes if 1 <= g <= p.cluster_gpus and w > 0]
    if not sizes or not (p.big_models and p.mid_models and p.small_models):
        raise InputError(
            "no size fits the cluster, or an empty model list",
            where="synthetic trace parameters",
            expected=f"sizes with weight > 0 and 1 <= gpus <= cluster_gpus={p.cluster_gpus}; model lists",
        )
    return sizes


def _models(gpus: np.ndarray, p: SyntheticParams, rng: np.random.Generator) -> list[str]:
    u = rng.random(len(gpus))
    out = []
    for g, x in zip(gpus, u, strict=True):
        pool = p.big_models if g >= 128 else p.mid_models if g >= 8 else p.small_models
        out.append(pool[int(x * len(pool))])
    return out


def synthetic_trace(params: SyntheticParams | None = None) -> Trace:
    """A reproducible synthetic trace (module docstring: the generation rules).

    Examples
    --------
    >>> t = synthetic_trace(SyntheticParams(jobs=50, days=1.0, seed=3))
    >>> len(t), t == synthetic_trace(SyntheticParams(jobs=50, days=1.0, seed=3))
    (50, True)
    >>> all(j.gpus in (1, 2, 4) or j.gpus % 8 == 0 for j in t.jobs)
    True
    """
    p = params or SyntheticParams()
    sizes = _check(p)
    rng = np.random.default_rng(p.seed)
    span = p.days * DAY_S
    arrival = np.sort(rng.uniform(0.0, span, p.jobs))
    weights = np.array([w for _, w in sizes], dtype=float)
    gpus = np.array([g for g, _ in sizes], dtype=np.int64)[
        rng.choice(len(sizes), p.jobs, p=weights / weights.sum())
    ]
    raw = rng.lognormal(0.0, p.sigma, p.jobs)
    scale = p.load * p.cluster_gpus * span / float(np.sum(gpus * raw))
    duration = np.clip(raw * scale, MIN_DURATION_S, span)
    models = _models(gpus, p, rng)
    jobs = tuple(
        TraceJob(
            id=JobId(f"syn-{i:05d}"),
            arrival_s=round(float(arrival[i]), 3),
            duration_s=round(float(duration[i]), 3),
            gpus=int(gpus[i]),
            model=models[i],
            source="synthetic",
        )
        for i in range(p.jobs)
    )
    notes = (
        f"seed={p.seed} jobs={p.jobs} days={p.days:g} cluster_gpus={p.cluster_gpus} load={p.load:g} "
        f"sigma={p.sigma:g}",
        f"duration scale {scale:.1f} s (lognormal median), clipped to [{MIN_DURATION_S:g} s, {span:g} s]",
    )
    return Trace(
        name=f"synthetic-s{p.seed}", source="commsched synthetic (Crux-calibrated)", jobs=jobs, notes=notes
    )
