"""Statistics of a trace, as the Crux paper reports them for its production trace (Figs. 4–6).

Concurrency uses the standalone durations (a job runs from ``arrival_s`` to ``arrival_s + duration_s``,
no queueing): a sweep over the sorted start/end times, ends before starts at equal times.

"At risk of contention" needs a placement; without one, :func:`trace_stats` uses a placement-free
proxy: a job is *at risk* if it spans more than one host (``gpus > gpus_per_host``, so it uses the
network) and overlaps in time with at least one other such job. Crux measured 36.3 % of jobs / 51 % of
GPUs at risk on the real placements (a job sharing an intra- or inter-host link with another job).

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §2.2, Figs. 4–6; reference/crux-spec.md A19.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.workload.traces.records import Trace


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceStats:
    """What :func:`trace_stats` measures; shares are fractions in [0, 1], times in seconds."""

    jobs: int
    span_s: float
    share_ge128: float
    max_gpus: int
    peak_jobs: int
    peak_gpus: int
    gpus_at_peak_jobs: int
    share_multi_host: float
    share_at_risk: float
    gpu_share_at_risk: float
    offered_gpu_s: float


def _peaks(
    start: NDArray[np.float64], end: NDArray[np.float64], gpus: NDArray[np.int64]
) -> tuple[int, int, int]:
    """(peak concurrent jobs, peak concurrent GPUs, GPUs in use when the job count peaks)."""
    times = np.concatenate([start, end])
    kind = np.concatenate([np.ones(len(start)), np.zeros(len(end))])  # ends (0) sort before starts (1)
    order = np.lexsort((kind, times))
    dj = np.where(kind[order] == 1, 1, -1)
    dg = np.concatenate([gpus, -gpus])[order]
    jobs, used = np.cumsum(dj), np.cumsum(dg)
    k = int(np.argmax(jobs))
    return int(jobs[k]), int(used.max()), int(used[k])


def _at_risk(
    start: NDArray[np.float64], end: NDArray[np.float64], multi: NDArray[np.bool_]
) -> NDArray[np.bool_]:
    """Multi-host jobs overlapping (open intervals) with another multi-host job."""
    s, e = np.sort(start[multi]), np.sort(end[multi])
    others = np.searchsorted(s, end, side="left") - np.searchsorted(e, start, side="right") - 1
    return multi & (others > 0)


def trace_stats(trace: Trace, *, gpus_per_host: int = 8) -> TraceStats:
    """Size, concurrency and contention-risk statistics of ``trace`` (module docstring: definitions).

    Examples
    --------
    >>> from commsched.workload.traces.records import TraceJob
    >>> jobs = tuple(TraceJob(id=str(i), arrival_s=float(i), duration_s=10.0, gpus=g, model="bert")
    ...              for i, g in enumerate((128, 16, 1)))
    >>> s = trace_stats(Trace(name="t", source="doc", jobs=jobs))
    >>> s.peak_jobs, s.peak_gpus, s.max_gpus, round(s.share_ge128, 3), round(s.share_at_risk, 3)
    (3, 145, 128, 0.333, 0.667)
    """
    if not trace.jobs:
        return TraceStats(
            jobs=0, span_s=0.0, share_ge128=0.0, max_gpus=0, peak_jobs=0, peak_gpus=0,
            gpus_at_peak_jobs=0, share_multi_host=0.0, share_at_risk=0.0, gpu_share_at_risk=0.0,
            offered_gpu_s=0.0,
        )  # fmt: skip
    start = np.array([j.arrival_s for j in trace.jobs], dtype=float)
    end = start + np.array([j.duration_s for j in trace.jobs], dtype=float)
    gpus = np.array([j.gpus for j in trace.jobs], dtype=np.int64)
    peak_jobs, peak_gpus, at_peak = _peaks(start, end, gpus)
    multi = gpus > gpus_per_host
    risk = _at_risk(start, end, multi)
    return TraceStats(
        jobs=len(gpus),
        span_s=float(end.max() - start.min()),
        share_ge128=float(np.mean(gpus >= 128)),
        max_gpus=int(gpus.max()),
        peak_jobs=peak_jobs,
        peak_gpus=peak_gpus,
        gpus_at_peak_jobs=at_peak,
        share_multi_host=float(np.mean(multi)),
        share_at_risk=float(np.mean(risk)),
        gpu_share_at_risk=float(gpus[risk].sum() / gpus.sum()),
        offered_gpu_s=float(np.sum(gpus * (end - start))),
    )
