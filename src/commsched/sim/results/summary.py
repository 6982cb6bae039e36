"""Turn the state of a finished run into a ``SimResult`` (averages over the measurement window).

This module reads the jobs' run state and the samples of the counters; it knows nothing of the engine
that produced them.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from commsched.sim.jobs.runs import JobRun
from commsched.sim.results.accounting import Sample, Sampler
from commsched.sim.results.records import JobResult, SimConfig, SimResult, TimeSeries


def summarise(
    *,
    runs: Sequence[JobRun],
    sampler: Sampler,
    config: SimConfig,
    cluster_gpus: int,
    capacity_bytes_per_s: NDArray[np.float64],
    policy_name: str,
    events: int,
    end: float,
) -> SimResult:
    """Averages over ``[warmup_s, end]``; per-job results; time series.

    ``capacity_bytes_per_s`` are the link capacities in bytes/s (the unit of the byte counters).
    """
    samples = sampler.samples
    w0 = min(config.warmup_s, end)
    first = samples[0]
    for s in samples:
        if s.t <= w0 + 1e-12:
            first = s
        else:
            break
    last = samples[-1]
    span = last.t - first.t
    busy = last.busy_gpu_s - first.busy_gpu_s
    alloc = last.alloc_gpu_s - first.alloc_gpu_s
    util = busy / (cluster_gpus * span) if span > 0 and cluster_gpus > 0 else 0.0
    a_util = busy / alloc if alloc > 0 else 0.0
    return SimResult(
        policy=policy_name,
        mode=config.mode,
        seed=config.seed,
        cluster_gpus=cluster_gpus,
        sim_time_s=end,
        window_s=(first.t, last.t),
        gpu_utilization=util,
        allocated_gpu_utilization=a_util,
        jobs=job_results(runs, end),
        series=series(samples, cluster_gpus, capacity_bytes_per_s),
        busy_gpu_s=last.busy_gpu_s,
        events=events,
        link_bytes=sampler.link_bytes,
        link_intensity_bytes=sampler.link_iw_bytes,
    )


def job_results(runs: Sequence[JobRun], end: float) -> tuple[JobResult, ...]:
    """Per-job results at ``end`` (jobs still running end there)."""
    out = []
    for r in runs:
        start = r.start_s
        stop = r.end_s if r.finished else (end if start is not None else None)
        mean_it = (
            (r.last_end_s - start) / r.iterations_done
            if (start is not None and r.iterations_done > 0)
            else float("nan")
        )
        out.append(
            JobResult(
                id=r.spec.id,
                gpus=r.gpu_count,
                arrival_s=r.spec.arrival_s,
                start_s=start,
                end_s=stop,
                iterations=r.iterations_done,
                target_iterations=r.target_iterations,
                standalone_iteration_s=r.standalone_s,
                mean_iteration_s=mean_it,
                busy_gpu_s=r.busy_gpu_s,
                finished=r.finished,
                priority_class=r.priority_class,
                intensity=r.intensity,
                shared_links=r.shared_links,
                placement=tuple(str(g) for g in r.placed.gpus) if r.placed is not None else (),
                fabric_bytes_per_iteration=_fabric_bytes(r),
                ideal_iteration_s=r.ideal_s,
                model=r.spec.model or r.spec.profile.name,
            )
        )
    return tuple(out)


def _fabric_bytes(r: JobRun) -> tuple[tuple[str, float], ...]:
    """The job's fabric bytes per iteration by group kind, from its traffic (NaN once released: the
    caller, who has the topology, fills them in from the placement)."""
    traffic = r.traffic or r.routed
    if traffic is None:
        return tuple((k, float("nan")) for k in ("tp", "pp", "dp", "ep"))
    return tuple(traffic.fabric_bytes.items())


def series(
    samples: Sequence[Sample], cluster_gpus: int, capacity_bytes_per_s: NDArray[np.float64]
) -> TimeSeries:
    """Per sampling interval: GPU utilisation, and per link that carried traffic its utilisation and
    traffic intensity (links that never carried a byte have no column)."""
    s = samples
    t = np.array([x.t for x in s])
    dt = np.diff(t)
    busy = np.diff([x.busy_gpu_s for x in s])
    alloc = np.diff([x.alloc_gpu_s for x in s])
    ok = dt > 0
    util = np.where(ok, busy / np.where(ok, dt * max(cluster_gpus, 1), 1.0), np.nan)
    a_util = np.where(alloc > 0, busy / np.where(alloc > 0, alloc, 1.0), np.nan)
    links = np.unique(np.concatenate([x.links for x in s])) if s else np.zeros(0, np.int64)
    l_util, l_int = _link_series(s, links, capacity_bytes_per_s[links], np.where(ok, dt, 1.0))
    return TimeSeries(
        t=t[1:],
        gpu_utilization=util,
        allocated_gpu_utilization=a_util,
        link_ids=links.astype(np.int64),
        link_utilization=l_util,
        link_intensity=l_int,
    )


def _link_series(
    samples: Sequence[Sample],
    links: NDArray[np.int64],
    capacity: NDArray[np.float64],
    dt: NDArray[np.float64],
) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Per interval and link of ``links`` (sorted): utilisation and traffic intensity, built row by row
    from the sparse samples (only the two results are ever held in full)."""
    n = max(len(samples) - 1, 0)
    util = np.empty((n, links.size))
    inten = np.empty((n, links.size))
    cum_b = np.zeros(links.size)
    cum_w = np.zeros(links.size)
    for k, x in enumerate(samples):
        pos = np.searchsorted(links, x.links)
        if k == 0:
            cum_b[pos] = x.link_bytes
            cum_w[pos] = x.link_iw_bytes
            continue
        lb = np.zeros(links.size)
        liw = np.zeros(links.size)
        lb[pos] = x.link_bytes - cum_b[pos]
        liw[pos] = x.link_iw_bytes - cum_w[pos]
        cum_b[pos] = x.link_bytes
        cum_w[pos] = x.link_iw_bytes
        util[k - 1] = lb / (capacity * dt[k - 1])
        with np.errstate(invalid="ignore", divide="ignore"):
            inten[k - 1] = np.where(lb > 0, liw / np.where(lb > 0, lb, 1.0), np.nan)
    return util, inten
