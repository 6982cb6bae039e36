"""Job profiling as Crux does it: ``W_j``, ``t_j`` and the iteration period, measured inside the job.

During a profiling window (30 s by default) the job library records every chunk it sends
(:meth:`Profiler.record_bytes`, wired as a group's ``observer``) and the job reports the compute of
each iteration (:meth:`Profiler.report_compute`). At the end of the window:

* the iteration period ``T`` is read off the communication time series by a Fourier transform
  (:func:`iteration_period`): bytes sent are binned at ``sample_s`` (1 ms), the mean is removed, a Hann
  window applied, and the strongest spectral line in ``[f_min, f_max]`` taken; because a burst train
  has lines at every multiple of ``1/T``, the lowest strong sub-multiple of that line is taken as the
  fundamental, and the estimate is refined from its highest strong harmonic (``f_h / h``), which has
  ``h`` times the relative resolution of the fundamental;
* the number of iterations in the window is ``window / T``;
* ``W_j`` = reported compute in the window / iterations (the unit is the job's: GPU-seconds, or FLOPs);
* ``t_j`` = bytes sent in the window / iterations, and also the busy transfer time per iteration (time
  bins with traffic / iterations), which is the paper's "sum of the durations of data transfers".

References
----------
Crux (SIGCOMM'24) §5, "Job profiling"; ``reference/crux-spec.md`` §5.4 (the proposed defaults used here).
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from commsched.errors import InputError

DEFAULT_WINDOW_S = 30.0
DEFAULT_SAMPLE_S = 1e-3


@dataclass(frozen=True, slots=True, kw_only=True)
class Profile:
    """What one rank measured about its job over a profiling window.

    Attributes
    ----------
    job
        The job id.
    window_s
        Length of the measured window (from the first recorded event).
    period_s
        Iteration period recovered by the Fourier transform.
    iterations
        ``window_s / period_s``.
    work_per_iteration
        ``W_j``: reported compute in the window / ``iterations``.
    bytes_per_iteration
        ``t_j`` in bytes: bytes this rank sent in the window / ``iterations``.
    transfer_s_per_iteration
        ``t_j`` as time: duration of the sample bins with traffic / ``iterations``.
    compute_reports
        How many compute reports the job made in the window (a cross-check of ``iterations``).
    """

    job: str
    window_s: float
    period_s: float
    iterations: float
    work_per_iteration: float
    bytes_per_iteration: float
    transfer_s_per_iteration: float
    compute_reports: int

    def to_json(self) -> dict[str, Any]:
        """The profile as a JSON-ready dict (the keys are the attribute names)."""
        return asdict(self)


def traffic_series(
    times: Sequence[float] | np.ndarray[Any, Any],
    nbytes: Sequence[float] | np.ndarray[Any, Any],
    *,
    sample_s: float,
) -> np.ndarray[Any, Any]:
    """Bytes per ``sample_s`` bin from event times (seconds, any origin) and sizes."""
    t = np.asarray(times, dtype=float)
    if t.size == 0:
        return np.zeros(0)
    idx = np.floor((t - t.min()) / sample_s).astype(np.int64)
    return np.bincount(idx, weights=np.asarray(nbytes, dtype=float))


def _interpolated_peak(power: np.ndarray[Any, Any], k: int) -> float:
    """Fractional bin of the peak at ``k`` by a parabola through the log powers of its neighbours."""
    if k <= 0 or k >= power.size - 1:
        return float(k)
    a, b, c = np.log(power[k - 1 : k + 2] + 1e-300)
    den = a - 2 * b + c
    return float(k) if den >= 0 else float(k + 0.5 * (a - c) / den)


def iteration_period(
    series: np.ndarray[Any, Any],
    *,
    sample_s: float = DEFAULT_SAMPLE_S,
    f_min: float = 0.05,
    f_max: float = 20.0,
    max_harmonic: int = 8,
) -> float:
    """The period (seconds) of a periodic traffic time series ``series`` (one value per ``sample_s``).

    Raises :class:`~commsched.errors.InputError` if the series is too short to hold two periods of
    ``1/f_max`` or has no traffic.

    Examples
    --------
    >>> t = np.arange(20_000) * 1e-3                      # 20 s at 1 ms
    >>> bursts = ((t % 0.4) < 0.1).astype(float)          # 100 ms of traffic every 400 ms
    >>> round(iteration_period(bursts), 3)
    0.4
    """
    x = np.asarray(series, dtype=float)
    n = x.size
    duration = n * sample_s
    lo = max(f_min, 2.0 / duration) if n else f_min
    hi = min(f_max, 0.5 / sample_s)
    if n < 8 or lo >= hi or not np.any(x):
        raise InputError(
            f"traffic series of {duration:.3f} s cannot show a period in [{f_min}, {f_max}] Hz",
            where="profiler",
            expected="a window of at least two iterations with traffic",
        )
    spec = np.fft.rfft((x - x.mean()) * np.hanning(n))
    power = np.abs(spec) ** 2
    df = 1.0 / duration
    band = np.arange(int(np.ceil(lo / df)), int(np.floor(hi / df)) + 1)
    band = band[band < power.size]
    k = int(band[np.argmax(power[band])])
    # The strongest line may be a harmonic of the fundamental: take its lowest strong sub-multiple.
    for d in range(max_harmonic, 1, -1):
        c = round(k / d)
        if c * df < lo or c < 1:
            continue
        near = range(max(c - 1, 1), min(c + 2, power.size))
        best = max(near, key=lambda i: power[i])
        if power[best] >= 0.3 * power[k]:
            k = best
            break
    f0 = _interpolated_peak(power, k) * df
    # Refine from the highest strong harmonic: f_h / h has h times the relative resolution.
    for h in range(max_harmonic, 1, -1):
        c = round(h * f0 / df)
        if c + 1 >= power.size or c * df > hi:
            continue
        near = range(c - 1, c + 2)
        best = max(near, key=lambda i: power[i])
        if power[best] >= 0.1 * power[k]:
            return 1.0 / (_interpolated_peak(power, best) * df / h)
    return 1.0 / f0


class Profiler:
    """Collects a job's traffic and compute reports and turns them into a :class:`Profile`.

    Thread-safe: :meth:`record_bytes` is called from the transport's send thread.

    Parameters
    ----------
    job
        Job id.
    window_s
        Profiling window (Crux: 30 s).
    sample_s
        Bin width of the traffic time series.
    clock
        Monotonic clock (injectable for tests).
    """

    def __init__(
        self,
        *,
        job: str,
        window_s: float = DEFAULT_WINDOW_S,
        sample_s: float = DEFAULT_SAMPLE_S,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        if window_s <= 0 or sample_s <= 0:
            raise InputError("window_s and sample_s must be positive", where="Profiler")
        self.job, self.window_s, self.sample_s, self.clock = job, window_s, sample_s, clock
        self._lock = threading.Lock()
        self._start: float | None = None
        self._times: list[float] = []
        self._bytes: list[int] = []
        self._compute: list[tuple[float, float]] = []

    def _begin(self, t: float) -> None:
        if self._start is None:
            self._start = t

    def record_bytes(self, t: float, nbytes: int) -> None:
        """One chunk of ``nbytes`` sent at monotonic time ``t`` (the group observer signature)."""
        with self._lock:
            self._begin(t)
            self._times.append(t)
            self._bytes.append(nbytes)

    def report_compute(self, work: float, *, t: float | None = None) -> None:
        """The job finished ``work`` of compute (one iteration's GPU-seconds or FLOPs) at ``t`` (now)."""
        now = self.clock() if t is None else t
        with self._lock:
            self._begin(now)
            self._compute.append((now, float(work)))

    def ready(self) -> bool:
        """Whether a full window has passed since the first recorded event."""
        return self._start is not None and self.clock() - self._start >= self.window_s

    def profile(self) -> Profile:
        """The profile of the window recorded so far (the whole window once :meth:`ready`)."""
        with self._lock:
            start = self._start if self._start is not None else 0.0
            end = start + self.window_s
            times = np.asarray(self._times)
            sizes = np.asarray(self._bytes, dtype=float)
            compute = [(t, w) for t, w in self._compute if t <= end]
        keep = times <= end
        times, sizes = times[keep], sizes[keep]
        series = traffic_series(times, sizes, sample_s=self.sample_s)
        period = iteration_period(series, sample_s=self.sample_s)
        window = min(self.window_s, series.size * self.sample_s)
        iters = window / period
        return Profile(
            job=self.job,
            window_s=window,
            period_s=period,
            iterations=iters,
            work_per_iteration=sum(w for _, w in compute) / iters,
            bytes_per_iteration=float(sizes.sum()) / iters,
            transfer_s_per_iteration=float(np.count_nonzero(series)) * self.sample_s / iters,
            compute_reports=len(compute),
        )
