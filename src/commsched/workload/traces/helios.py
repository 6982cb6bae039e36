"""A Helios-like job trace (vClos §9.2): sizes, run times, models and Poisson arrivals, seeded.

The Helios job logs are not in the data snapshot (``data/helios/README.md``: only per-cluster
summaries), so the trace is synthetic, matched to the summary of Venus (the Helios cluster closest to
CLUSTER512 in size, 1,022 GPUs): median GPU request 1, mean 6.74 GPUs. GPU counts are drawn from

=====  ====  ====  ====  ====  ====  =====  =====  =====  =====
GPUs   1     2     4     8     16    32     64     96     128
p      .52   .10   .10   .16   .06   .035   .013   .005   .007
=====  ====  ====  ====  ====  ====  =====  =====  =====  =====

(median 1, mean 6.69), powers of two as in Helios (nearly all requests are) plus 96 (the paper's
Fig. 12d names 96- and 160-GPU jobs). Requested run times (standalone seconds) are log-normal with
median ``median_duration_s`` and shape ``sigma``, times ``gpus ** size_exponent`` (0 by default: run
time independent of size; Helios' larger jobs run longer), rounded to a geometric grid of 16 values
per decade so that jobs share parameters (needed for Stability), then capped at ``max_duration_s``.
Models are drawn uniformly from the zoo profiles of the paper's testbed mix (§8.1, Table 3: VGG16,
ResNet50/101, BERT) plus GNMT as a communication-heavy stand-in for the recommendation/MoE jobs.
Arrivals are Poisson with mean gap ``mean_gap_s`` (the paper's lambda).

The draws are made in a fixed order (sizes, gaps, durations, models) from
``numpy.random.default_rng(seed)``, so changing a duration knob keeps sizes and arrivals.

References
----------
vClos §9.2 (5,000 Helios tasks, Poisson arrivals with lambda = 120 s, FIFO); Helios (SC'21) Venus.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.workload.records import JobId, ModelProfile
from commsched.workload.traces.records import Trace, TraceJob

HELIOS_SIZES: tuple[int, ...] = (1, 2, 4, 8, 16, 32, 64, 96, 128)
HELIOS_PROBS: tuple[float, ...] = (0.52, 0.10, 0.10, 0.16, 0.06, 0.035, 0.013, 0.005, 0.007)
TRACE_MODELS: tuple[str, ...] = ("vgg16", "resnet50", "resnet101", "bert-base", "bert-large", "gnmt")


@dataclass(frozen=True, slots=True, kw_only=True)
class HeliosParams:
    """Parameters of :func:`helios_like_trace` (see the module docstring for the derivation).

    ``max_gpus`` drops sizes above it from the distribution (renormalised), so a trace for a small
    cluster keeps its task count.
    """

    tasks: int = 5000
    mean_gap_s: float = 120.0
    seed: int = 0
    median_duration_s: float = 3000.0
    sigma: float = 1.0
    max_duration_s: float = 36000.0
    size_exponent: float = 0.0
    sizes: tuple[int, ...] = HELIOS_SIZES
    probs: tuple[float, ...] = HELIOS_PROBS
    models: tuple[str, ...] = TRACE_MODELS
    max_gpus: int | None = None

    def __post_init__(self) -> None:
        if self.tasks < 1 or not self.mean_gap_s > 0 or not self.median_duration_s > 0:
            raise InputError(
                "tasks, mean_gap_s and median_duration_s must be positive",
                where="trace",
                expected="tasks >= 1, mean_gap_s > 0, median_duration_s > 0",
            )
        if not self.sigma >= 0 or not self.max_duration_s > 0:
            raise InputError("sigma < 0 or max_duration_s <= 0", where="trace.sigma", expected="sigma >= 0")
        if len(self.sizes) != len(self.probs) or not math.isclose(sum(self.probs), 1.0, abs_tol=1e-9):
            raise InputError(
                "sizes and probs must have equal lengths and probs sum to 1", where="trace.probs"
            )
        if any(s < 1 for s in self.sizes) or any(p < 0 for p in self.probs):
            raise InputError("a size < 1 or a negative probability", where="trace.sizes")
        if not self.models:
            raise InputError("no models", where="trace.models", expected="zoo model names")
        if self.max_gpus is not None and not any(
            s <= self.max_gpus and p > 0 for s, p in zip(self.sizes, self.probs, strict=True)
        ):
            raise InputError(f"no size fits max_gpus = {self.max_gpus}", where="trace.max_gpus")


def helios_params(**params: Any) -> HeliosParams:
    """:class:`HeliosParams` from scenario-file values (lists become tuples).

    Examples
    --------
    >>> helios_params(tasks=3, sizes=[1, 8], probs=[0.5, 0.5]).sizes
    (1, 8)
    """
    conv: dict[str, Any] = {}
    for k, v in params.items():
        if k in ("sizes", "models"):
            conv[k] = tuple(v)
        elif k == "probs":
            conv[k] = tuple(float(x) for x in v)
        else:
            conv[k] = v
    try:
        return HeliosParams(**conv)
    except TypeError as exc:
        raise InputError(str(exc), where="trace", expected="HeliosParams fields") from exc


def _grid(x: float) -> float:
    """Round to a geometric grid of 16 values per decade."""
    return float(10 ** (round(math.log10(x) * 16) / 16))


def helios_like_trace(params: HeliosParams) -> Trace:
    """A Helios-like trace: sizes, standalone run times, models and Poisson arrivals (seeded).

    Examples
    --------
    >>> t = helios_like_trace(HeliosParams(tasks=3, seed=1))
    >>> [j.id for j in t.jobs], all(j.duration_s > 0 for j in t.jobs)
    (['t0', 't1', 't2'], True)
    """
    rng = np.random.default_rng(params.seed)
    n = params.tasks
    sizes = np.array(params.sizes)
    probs = np.array(params.probs, dtype=float)
    if params.max_gpus is not None:
        probs = np.where(sizes <= params.max_gpus, probs, 0.0)
        probs = probs / probs.sum()
    gpus = rng.choice(sizes, size=n, p=probs)
    arrivals = np.cumsum(rng.exponential(params.mean_gap_s, size=n))
    dur = rng.lognormal(math.log(params.median_duration_s), params.sigma, size=n)
    models = rng.integers(len(params.models), size=n)
    jobs = []
    for i in range(n):
        d = float(dur[i]) * float(gpus[i]) ** params.size_exponent
        jobs.append(
            TraceJob(
                id=JobId(f"t{i}"),
                arrival_s=float(arrivals[i]),
                duration_s=min(_grid(d), params.max_duration_s),
                gpus=int(gpus[i]),
                model=params.models[int(models[i])],
                source="helios-like",
            )
        )
    load = sum(j.gpus * j.duration_s for j in jobs) / max(float(arrivals[-1]), 1e-9)
    return Trace(
        name=f"helios-like(lambda={params.mean_gap_s:g}s, seed={params.seed})",
        source="commsched.workload.traces.helios (synthetic, Helios Venus summary)",
        jobs=tuple(jobs),
        notes=(f"offered load {load:.1f} GPUs busy on average (standalone run times)",),
    )


def macro_profile(profile: ModelProfile, duration_s: float, *, macro_iterations: int) -> ModelProfile:
    """The profile of one *macro-iteration*: ``k`` real iterations with compute and bytes times ``k``,
    ``k`` chosen so that a job of ``duration_s`` standalone seconds runs about ``macro_iterations``.

    The simulator is fluid: under a contention pattern that holds for a macro-iteration, the job's
    slow-down is the one of its real iterations; the saving is the per-iteration events.

    Examples
    --------
    >>> from commsched.workload import get_model
    >>> p = get_model("resnet50")
    >>> m = macro_profile(p, 100 * p.compute_s, macro_iterations=10)
    >>> round(m.compute_s / p.compute_s), round(m.sync_bytes / p.sync_bytes)
    (10, 10)
    """
    k = max(1.0, duration_s / (macro_iterations * profile.compute_s))
    return replace(
        profile,
        name=f"{profile.name}-x{k:.0f}",
        compute_s=profile.compute_s * k,
        sync_bytes=profile.sync_bytes * k,
        layers=(),
        source=f"{profile.name} x {k:.4g} iterations (macro-iteration)",
    )
