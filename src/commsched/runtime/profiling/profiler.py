"""Job profiling as Crux does it: ``W_j``, ``t_j`` and the iteration period, measured inside the job.

During a profiling window (30 s by default) the job library records every chunk it sends
(:meth:`Profiler.record_transfer`, wired as a group's ``observer``) and the job reports the compute of
each iteration (:meth:`Profiler.report_compute`). At the end of the window:

* the iteration period ``T`` is read off the communication time series by a Fourier transform
  (:func:`iteration_period`): bytes sent are binned at ``sample_s`` (1 ms), the mean is removed, a Hann
  window applied, and the strongest spectral line in ``[f_min, f_max]`` taken; because a burst train
  has lines at every multiple of ``1/T``, the lowest sub-multiple of that line whose lag the series'
  autocorrelation (also by FFT, on the series smoothed over a tenth of the period so that iteration
  jitter does not decide) confirms as a period is taken as the fundamental, and the estimate is
  refined from its highest strong harmonic (``f_h / h``), which has
``h`` times the relative resolution of the fundamental;
* the number of iterations in the window is ``window / T``;
* ``W_j`` = reported compute in the window / iterations (the unit is the job's: GPU-seconds, or FLOPs);
* ``t_j`` = bytes sent in the window / iterations, and also the time spent sending per iteration (the
  union of the chunks' send intervals / iterations), the paper's "sum of the durations of data
  transfers".

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
    start: float | None = None,
    bins: int | None = None,
) -> np.ndarray[Any, Any]:
    """Bytes per ``sample_s`` bin from event times (seconds) and sizes.

    Bins start at ``start`` (default: the first event); ``bins`` fixes the length (events past it are
    dropped), by default up to the last event.
    """
    t = np.asarray(times, dtype=float)
    w = np.asarray(nbytes, dtype=float)
    if t.size == 0:
        return np.zeros(bins or 0)
    origin = float(t.min()) if start is None else start
    idx = np.floor((t - origin) / sample_s).astype(np.int64)
    keep = (idx >= 0) & (idx < bins) if bins is not None else idx >= 0
    return np.bincount(idx[keep], weights=w[keep], minlength=bins or 0)


def _interpolated_peak(power: np.ndarray[Any, Any], k: int) -> float:
    """Fractional bin of the peak at ``k`` by a parabola through the log powers of its neighbours."""
    if k <= 0 or k >= power.size - 1:
        return float(k)
    a, b, c = np.log(power[k - 1 : k + 2] + 1e-300)
    den = a - 2 * b + c
    return float(k) if den >= 0 else float(k + 0.5 * (a - c) / den)


def _autocorrelation(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Unbiased, normalised autocorrelation of ``x`` (mean removed) at every lag, by FFT."""
    n = x.size
    y = x - x.mean()
    full = np.fft.irfft(np.abs(np.fft.rfft(y, 2 * n)) ** 2, 2 * n)[:n]
    full /= np.arange(n, 0, -1)
    return np.asarray(full / full[0]) if full[0] > 0 else full


def _union_length(spans: list[tuple[float, float]], lo: float, hi: float) -> float:
    """Total length of the union of the intervals ``spans`` clipped to ``[lo, hi]``."""
    total, reach = 0.0, lo
    for start, end in sorted(spans):
        a, b = max(start, reach), min(end, hi)
        if b > a:
            total += b - a
            reach = b
    return total


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
    # The strongest line may be a harmonic of the fundamental (two unequal bursts per iteration put
    # most power at 2/T): among the sub-multiples f_k / d, take the lowest d whose lag repeats the
    # series nearly as well as the best one (autocorrelation, computed through the same FFT route).
    # The series is smoothed over a tenth of the candidate period first, and every lag is searched
    # within the same +-tenth, so that iteration jitter costs every candidate alike.
    f_peak = _interpolated_peak(power, k) * df
    w = max(int(0.1 / f_peak / sample_s), 1)
    acf = _autocorrelation(np.convolve(x, np.ones(w) / w, mode="same"))
    scores = []
    for d in range(1, max_harmonic + 1):
        lag = round(d / f_peak / sample_s)
        if d > 1 and (f_peak / d < lo or lag > n / 2):
            break
        near = acf[max(lag - w, 1) : min(lag + w + 1, n // 2 + 1)]
        scores.append(float(near.max()) if near.size else 0.0)
    best = max(scores)  # may be negative (a window of barely two iterations): then the best lag
    d = 1 + next((i for i, v in enumerate(scores) if v >= 0.9 * best), scores.index(best))
    if d > 1:
        c = round(k / d)
        k = max(range(max(c - 1, 1), min(c + 2, power.size)), key=lambda i: power[i])
    f0 = _interpolated_peak(power, k) * df
    # Refine from the highest strong harmonic: f_h / h has h times the relative resolution.
    for h in range(max_harmonic, 1, -1):
        c = round(h * f0 / df)
        if c + 1 >= power.size or c * df > hi:
            continue
        best = max(range(c - 1, c + 2), key=lambda i: power[i])
        if power[best] >= 0.1 * power[k]:
            return 1.0 / (_interpolated_peak(power, best) * df / h)
    return 1.0 / f0


def fundamental(period_s: float, ends: Sequence[float]) -> tuple[float, float]:
    """The FFT's period, or the multiple or part of it that is the job's own iteration.

    Another job's traffic on a shared link can make the series periodic at a common multiple of
    both jobs' periods (GPT's 3 iterations beside BERT's 1), and a job whose bursts within an
    iteration are regular can show its strongest line at a harmonic; the job knows when its
    iterations end (``ends``, one per iteration), so a period within 10 % of ``k`` times or a
    ``k``-th of their mean spacing (``k >= 2``) is divided or multiplied by ``k``. Returns the
    period and the factor applied (1: kept).

    Examples
    --------
    >>> fundamental(3.0, [0.0, 1.0, 2.0, 3.0, 4.0])
    (1.0, 0.3333333333333333)
    >>> fundamental(0.25, [0.0, 1.0, 2.0])
    (1.0, 4.0)
    >>> fundamental(1.0, [0.0, 1.0, 2.0])
    (1.0, 1.0)
    """
    if len(ends) < 2 or period_s <= 0:
        return period_s, 1.0
    spacing = (ends[-1] - ends[0]) / (len(ends) - 1)
    if spacing <= 0:
        return period_s, 1.0
    k = round(period_s / spacing) if period_s >= spacing else round(spacing / period_s)
    factor = 1.0 / k if period_s >= spacing else float(k)
    if k >= 2 and abs(period_s * factor - spacing) <= 0.1 * spacing:
        return period_s * factor, factor
    return period_s, 1.0


@dataclass(frozen=True, slots=True, kw_only=True)
class PeriodEstimate:
    """A job's iteration period and how it was found: ``method`` ``fft`` (the spectrum's, corrected by
    ``factor``) or ``iterations`` (the mean spacing of the job's iteration ends)."""

    period_s: float
    method: str
    factor: float = 1.0


def job_period(fft_period_s: float | None, ends: Sequence[float]) -> PeriodEstimate:
    """The job's iteration period: the one place where the spectrum's period is corrected.

    The FFT's period (``None`` where the series showed none) is reduced to the job's own iteration by
    :func:`fundamental`; where it then differs from the mean spacing of the iteration ends by more than
    10 %, or there is none, the spacing is taken.

    Examples
    --------
    >>> job_period(3.0, [0.0, 1.0, 2.0, 3.0])
    PeriodEstimate(period_s=1.0, method='fft', factor=0.3333333333333333)
    >>> job_period(None, [0.0, 1.0, 2.0])
    PeriodEstimate(period_s=1.0, method='iterations', factor=1.0)
    >>> job_period(1.7, [0.0, 1.0, 2.0])
    PeriodEstimate(period_s=1.0, method='iterations', factor=1.0)
    """
    if len(ends) < 2:
        raise InputError("fewer than two iteration ends", where="job_period", expected="two or more")
    spacing = (ends[-1] - ends[0]) / (len(ends) - 1)
    if fft_period_s is None:
        return PeriodEstimate(period_s=spacing, method="iterations")
    period, factor = fundamental(fft_period_s, ends)
    if abs(period - spacing) <= 0.1 * spacing:
        return PeriodEstimate(period_s=period, method="fft", factor=factor)
    return PeriodEstimate(period_s=spacing, method="iterations", factor=factor)


class Profiler:
    """Collects a job's traffic and compute reports and turns them into a :class:`Profile`.

    Thread-safe: :meth:`record_transfer` is called from the transport's send thread.

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
        self._spans: list[tuple[float, float]] = []
        self._compute: list[tuple[float, float]] = []

    def _begin(self, t: float) -> None:
        if self._start is None:
            self._start = t

    def record_transfer(self, start: float, end: float, nbytes: int) -> None:
        """One chunk of ``nbytes`` sent from monotonic ``start`` to ``end`` (the group observer signature)."""
        with self._lock:
            self._begin(start)
            self._times.append(end)
            self._spans.append((start, end))
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
            start = self._start if self._start is not None else self.clock()
            window = min(self.window_s, self.clock() - start)
            times = np.asarray(self._times)
            sizes = np.asarray(self._bytes, dtype=float)
            compute = [(t, w) for t, w in self._compute if t < start + window]
            busy = _union_length(self._spans, start, start + window)
        bins = int(window / self.sample_s)
        series = traffic_series(times, sizes, sample_s=self.sample_s, start=start, bins=bins)
        period = iteration_period(series, sample_s=self.sample_s)
        window = bins * self.sample_s
        iters = window / period
        return Profile(
            job=self.job,
            window_s=window,
            period_s=period,
            iterations=iters,
            work_per_iteration=sum(w for _, w in compute) / iters,
            bytes_per_iteration=float(series.sum()) / iters,
            transfer_s_per_iteration=busy / iters,
            compute_reports=len(compute),
        )
