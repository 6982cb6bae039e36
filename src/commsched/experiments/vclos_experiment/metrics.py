"""The metrics of the vClos evaluation from a :class:`~commsched.sim.results.records.SimResult`.

* JRT (run time, start -> end), JWT (wait, arrival -> start), JCT (completion, arrival -> end).
* Queue depth over time: jobs that arrived and have not started, a step function of the arrivals and
  starts.
* Stability: the standard deviation of JCT among finished jobs with the same parameters (same GPU
  count, model and requested duration), per group and averaged over groups with two or more jobs.
* Contention: the share of jobs spanning leaves and of GPU time lost to contention.
* Fragmentation events: refused placement attempts split by cause (GPU-caused, in total or in shape,
  vs network-caused; see :func:`commsched.scheduling.vclos.policy.classify_refusal`).

References
----------
vClos §3.4, §9.3 (JRT, JWT, JCT, Stability), Table 2 (fragmentation by cause), Fig. 12 (JWT CDF,
queue depth, stability).
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.vclos.policy import Refusal, RefusalCause
from commsched.sim.results.records import JobResult, SimResult
from commsched.topology import Topology
from commsched.workload import JobId


@dataclass(frozen=True, slots=True, kw_only=True)
class TimeAverages:
    """Average JRT, JWT and JCT (seconds) over finished jobs, and how many finished."""

    jrt_s: float
    jwt_s: float
    jct_s: float
    finished: int
    jobs: int


def _mean(xs: Iterable[float]) -> float:
    vals = [x for x in xs if math.isfinite(x)]
    return float(np.mean(vals)) if vals else float("nan")


def average_times(result: SimResult) -> TimeAverages:
    """JRT/JWT/JCT averages over the finished jobs of a run.

    Examples
    --------
    >>> from commsched.experiments.vclos_experiment.metrics import average_times
    >>> average_times(_demo()).jct_s
    15.0
    """
    fin = [j for j in result.jobs if j.finished]
    return TimeAverages(
        jrt_s=_mean(j.run_s for j in fin),
        jwt_s=_mean(j.wait_s for j in fin),
        jct_s=_mean(j.jct_s for j in fin),
        finished=len(fin),
        jobs=len(result.jobs),
    )


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class QueueDepth:
    """Waiting jobs over time: ``depth[i]`` holds from ``t_s[i]`` until ``t_s[i + 1]``."""

    t_s: NDArray[np.float64]
    depth: NDArray[np.int64]

    def time_average(self) -> float:
        """Time-weighted mean depth between the first and the last change."""
        if self.t_s.size < 2:
            return 0.0
        dt = np.diff(self.t_s)
        span = float(self.t_s[-1] - self.t_s[0])
        return float((self.depth[:-1] * dt).sum() / span) if span > 0 else 0.0


def queue_depth(jobs: Iterable[JobResult]) -> QueueDepth:
    """The queue-depth step function from arrivals (+1) and starts (-1); ties: starts first.

    Examples
    --------
    >>> q = queue_depth(_demo().jobs)
    >>> q.t_s.tolist(), q.depth.tolist()
    ([0.0, 2.0], [1, 0])
    """
    ev: list[tuple[float, int]] = []
    for j in jobs:
        ev.append((j.arrival_s, 1))
        if j.start_s is not None:
            ev.append((j.start_s, -1))
    ev.sort(key=lambda e: (e[0], e[1]))
    if not ev:
        return QueueDepth(t_s=np.zeros(0), depth=np.zeros(0, dtype=np.int64))
    t = np.array([e[0] for e in ev])
    d = np.cumsum([e[1] for e in ev]).astype(np.int64)
    last = np.r_[t[1:] != t[:-1], True]  # keep the final value at each time
    return QueueDepth(t_s=t[last], depth=d[last])


@dataclass(frozen=True, slots=True, kw_only=True)
class Stability:
    """JCT standard deviation (s) per parameter group, and its mean over groups with >= 2 jobs."""

    per_group: Mapping[str, float]
    sizes: Mapping[str, int]
    mean_s: float


def stability(result: SimResult, groups: Mapping[str, str]) -> Stability:
    """Stability of JCT among jobs with the same parameters (``groups``: job id -> group label).

    Examples
    --------
    >>> s = stability(_demo(), {"a": "g", "b": "g"})
    >>> s.per_group["g"], s.mean_s
    (5.0, 5.0)

    References
    ----------
    vClos §9.3 ("the average standard deviation of JCT of DML with same parameter"), Fig. 12d.
    """
    by: defaultdict[str, list[float]] = defaultdict(list)
    for j in result.jobs:
        if j.finished and j.id in groups:
            by[groups[j.id]].append(j.jct_s)
    per = {g: float(np.std(v)) for g, v in sorted(by.items()) if len(v) >= 2}
    return Stability(
        per_group=per,
        sizes={g: len(v) for g, v in sorted(by.items())},
        mean_s=float(np.mean(list(per.values()))) if per else float("nan"),
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Fragmentation:
    """Refused placement attempts by cause (vClos Table 2): GPU (total, shape) and network."""

    gpu_total: int
    gpu_shape: int
    network: int

    @property
    def gpu(self) -> int:
        return self.gpu_total + self.gpu_shape


def fragmentation(refusals: Iterable[Refusal]) -> Fragmentation:
    """Count refusals by cause.

    Examples
    --------
    >>> r = [Refusal(job="a", time_s=0.0, cause=RefusalCause.NETWORK)]
    >>> fragmentation(r).network
    1
    """
    n = {c: 0 for c in RefusalCause}
    for r in refusals:
        n[r.cause] += 1
    return Fragmentation(
        gpu_total=n[RefusalCause.GPU_TOTAL],
        gpu_shape=n[RefusalCause.GPU_SHAPE],
        network=n[RefusalCause.NETWORK],
    )


def jwt_cdf(result: SimResult) -> tuple[NDArray[np.float64], NDArray[np.float64]]:
    """Empirical CDF of JWT over the jobs that started: sorted waits and cumulative fractions."""
    w = np.sort([j.wait_s for j in result.jobs if j.start_s is not None])
    return w.astype(float), (np.arange(1, w.size + 1) / max(w.size, 1)).astype(float)


def _demo() -> SimResult:
    """A hand-built two-job result for the doctests (a: waits 2 s, runs 18; b: runs 10)."""
    from commsched.sim.results.records import Mode, TimeSeries

    def job(i: str, arr: float, start: float, end: float) -> JobResult:
        return JobResult(
            id=JobId(i), gpus=8, arrival_s=arr, start_s=start, end_s=end, iterations=1.0,
            target_iterations=1.0,
            standalone_iteration_s=1.0, mean_iteration_s=1.0, busy_gpu_s=1.0, finished=True,
            priority_class=0, intensity=0.0,
        )  # fmt: skip

    empty = np.zeros(0)
    series = TimeSeries(
        t=empty, gpu_utilization=empty, allocated_gpu_utilization=empty, link_ids=np.zeros(0, dtype=np.int64),
        link_utilization=np.zeros((0, 0)), link_intensity=np.zeros((0, 0)),
    )  # fmt: skip
    return SimResult(
        policy="demo", mode=Mode.EXACT, seed=0, cluster_gpus=16, sim_time_s=20.0, window_s=(0.0, 20.0),
        gpu_utilization=0.0, allocated_gpu_utilization=0.0,
        jobs=(job("a", 0.0, 2.0, 20.0), job("b", 0.0, 0.0, 10.0)), series=series, busy_gpu_s=0.0,
        events=0, link_bytes=empty, link_intensity_bytes=empty,
    )  # fmt: skip


@dataclass(frozen=True, slots=True, kw_only=True)
class ContentionShare:
    """How much a run could contend: the share of started jobs spanning more than one leaf, and the
    share of their GPU time lost to contention, ``sum g n (T - T0) / sum g n T`` over started jobs
    (``g`` GPUs, ``n`` iterations, ``T`` mean and ``T0`` standalone iteration time)."""

    multi_leaf: float
    gpu_time_lost: float


def contention_share(result: SimResult, topology: Topology) -> ContentionShare:
    """:class:`ContentionShare` of a run; a GPU the topology does not know counts as its own leaf."""
    started = [j for j in result.jobs if j.start_s is not None and j.placement]
    if not started:
        return ContentionShare(multi_leaf=math.nan, gpu_time_lost=math.nan)
    known = set(topology.gpus)

    def leaves(j: JobResult) -> int:
        return len({topology.host_of(g).tors if g in known else (g,) for g in j.placement})

    multi = sum(leaves(j) > 1 for j in started) / len(started)
    lost = total = 0.0
    for j in started:
        if not (math.isfinite(j.mean_iteration_s) and j.mean_iteration_s > 0):
            continue
        gpu_iters = j.gpus * j.iterations
        total += gpu_iters * j.mean_iteration_s
        lost += gpu_iters * max(0.0, j.mean_iteration_s - j.standalone_iteration_s)
    return ContentionShare(multi_leaf=multi, gpu_time_lost=lost / total if total > 0 else math.nan)
