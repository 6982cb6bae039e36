"""A job measured from the outside: iterations and its profile from its byte counter alone.

The agent samples a job's cumulative bytes out (data packets of its cgroup's connections) every few
milliseconds. :func:`series` turns the samples into bytes per bin (the cumulative counter is
interpolated at regular times, so a late sample spreads its bytes instead of losing them). A
data-parallel job's traffic is a train of bursts, one per iteration, separated by its compute:

* :func:`iterations` finds the bursts. The period ``T`` comes from the existing profiler's Fourier
  method (:func:`commsched.runtime.profiling.profiler.iteration_period`); the gaps between bursts are the
  silent runs at least half as long as the ``n``-th longest one (``n`` = the window over ``T``,
  the number of compute gaps it must hold), and a burst starts where a gap ends. Two bursts can
  merge when a sample arrives late; each spacing between detected starts therefore counts
  ``round(spacing / T)`` iterations, and the mean iteration time is the span of the starts over
  their count.
* :func:`outside_profile` is what Crux's profiler reports (§5.4), as seen from the network: the
  period, the bytes per iteration, the busy (sending) time per iteration, and the compute per
  iteration as the median silent gap (the time the job sends nothing).
"""

from __future__ import annotations

import itertools
import math
import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.runtime.profiling.iterations import host_splits, quiet_runs
from commsched.runtime.profiling.profiler import iteration_period

__all__ = [
    "IterationStats",
    "OutsideProfile",
    "iterations",
    "outside_profile",
    "series",
    "steady",
    "window_iterations",
]


def series(
    t: Sequence[float], cum: Sequence[float], *, sample_s: float, start: float, end: float
) -> np.ndarray[Any, Any]:
    """Bytes per ``sample_s`` bin over ``[start, end)`` from cumulative counter samples ``(t, cum)``.

    Examples
    --------
    >>> series([0.0, 1.0, 2.0], [0.0, 10.0, 10.0], sample_s=0.5, start=0.0, end=2.0).tolist()
    [5.0, 5.0, 0.0, 0.0]
    """
    tt = np.asarray(t, dtype=float)
    cc = np.asarray(cum, dtype=float)
    n = int((end - start) / sample_s + 1e-9)
    if tt.size < 2 or n < 1:
        return np.zeros(max(n, 0))
    grid = start + sample_s * np.arange(n + 1)
    at = np.interp(grid, tt, cc)
    out: np.ndarray[Any, Any] = np.maximum(np.diff(at), 0.0)
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class IterationStats:
    """Iterations found in a window: mean time, count, burst starts, period and how it was found."""

    mean_s: float
    count: int
    starts: tuple[float, ...]
    period_s: float
    gap_s: float  # median silent gap between bursts (the job's compute, seen from outside)
    method: str  # "bursts" or "fft" (no silent gaps: communication hidden behind compute)

    def to_json(self) -> dict[str, Any]:
        out = asdict(self)
        out["starts"] = list(self.starts)
        return out


def steady(st: IterationStats, *, min_count: int = 3, spread: float = 1.5) -> bool:
    """Whether ``st`` shows a job in its steady training loop: ``min_count`` burst spacings or more,
    none longer than ``spread`` times their median (a start-up phase has irregular bursts).

    Examples
    --------
    >>> st = IterationStats(mean_s=1.0, count=3, starts=(0.0, 1.0, 2.1, 3.0), period_s=1.0, gap_s=0.2,
    ...                     method="bursts")
    >>> steady(st), steady(IterationStats(mean_s=1.0, count=3, starts=(0.0, 0.5, 3.0, 3.5),
    ...                                   period_s=1.0, gap_s=0.2, method="bursts"))
    (True, False)
    """
    if st.method not in ("bursts", "bytes") or st.count < min_count or len(st.starts) < 2:
        return False
    gaps = [b - a for a, b in itertools.pairwise(st.starts)]
    mid = statistics.median(gaps)
    return mid > 0 and max(gaps) <= spread * mid and min(gaps) >= mid / spread


def _runs(active: np.ndarray[Any, Any]) -> list[tuple[int, int]]:
    """(start bin, length) of every run of inactive bins."""
    out = []
    i, n = 0, active.size
    while i < n:
        if active[i]:
            i += 1
            continue
        j = i
        while j < n and not active[j]:
            j += 1
        out.append((i, j - i))
        i = j
    return out


def _merged(ratio: float) -> int:
    """How many iterations a spacing of ``ratio`` typical spacings holds: one unless it is at least
    1.75 (iterations vary by half a typical one; a missed gap makes about two).

    Examples
    --------
    >>> [_merged(r) for r in (0.4, 1.0, 1.6, 1.8, 2.9)]
    [1, 1, 1, 2, 3]
    """
    return max(1, math.floor(ratio + 0.25))


#: a jump this large between the sorted silent runs separates pauses from compute gaps
GAP_RATIO = 3.0

#: weight of the few-spacings penalty: a split with few spacings looks regular by chance
FEW = 0.5


def _cut(runs: list[tuple[int, int]]) -> int:
    """The shortest silent run that separates iterations, among the runs ``(start bin, length)``.

    The compute gaps between iterations are long; the pauses inside a burst (between buckets,
    between the steps of a collective, a stall) are mostly shorter. Where the sorted lengths jump by
    :data:`GAP_RATIO` or more (the pauses all shorter than the compute gaps), the split is there.
    Where the two overlap, every threshold is scored by how far the spacings of the bursts it
    starts are from whole multiples of their median (a threshold that merges two iterations gives
    a spacing of two; one that lets a pause split an iteration gives fractions), plus :data:`FEW`
    over the square root of the number of spacings (a high threshold that keeps only a few long
    stalls looks regular by chance, as the spread of a small sample is small); the lowest score
    wins.
    """
    lengths = sorted(n for _, n in runs)
    jumps = [
        (b / a, b)
        for a, b in itertools.pairwise(lengths)
        if lengths.count(b) + sum(x > b for x in lengths) >= 3
    ]
    if jumps and max(jumps)[0] >= GAP_RATIO:  # pauses and compute gaps far apart: split between them
        return max(jumps)[1]
    scored: list[tuple[float, int, int]] = []  # (score, number of gaps, threshold)
    for theta in sorted({n for _, n in runs}):
        ends = [i + n for i, n in runs if n >= theta]
        if len(ends) < 3:
            break
        spacing = [b - a for a, b in itertools.pairwise(ends)]
        typical = statistics.median(spacing)
        dev = [d / typical - _merged(d / typical) for d in spacing]
        rms = math.sqrt(statistics.fmean(x * x for x in dev))
        scored.append((rms + FEW / math.sqrt(len(spacing)), -len(ends), theta))
    if not scored:
        return max(n for _, n in runs)
    return min(scored)[2]


def _active(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Bins with traffic: above 2 % of the median non-empty bin (a stray ACK-sized packet is none)."""
    peak = float(np.percentile(x[x > 0], 50)) if np.any(x > 0) else 0.0
    out: np.ndarray[Any, Any] = x > 0.02 * peak
    return out


def iterations(
    x: np.ndarray[Any, Any],
    *,
    sample_s: float,
    start: float = 0.0,
    also: np.ndarray[Any, Any] | None = None,
) -> IterationStats:
    """The iterations in the bytes-per-bin series ``x`` (first bin at ``start``).

    ``also``: a second series of the same bins (the bytes the host sends): a bin is silent only
    when both are; inside a collective one direction often goes on while the other pauses, while
    between iterations both are silent. Silent runs of two bins or more inside the series are
    told apart into pauses and compute gaps
    (:func:`_cut`); a burst starts where a compute gap ends. Each spacing between starts counts
    the iterations :func:`_merged` finds in it (two bursts merged by a late sample count two).
    Without two such gaps (communication hidden behind compute) the period is the spectrum's
    (:func:`commsched.runtime.profiling.profiler.iteration_period`), method ``"fft"``. Before either,
    iterations told apart by the bytes of a whole iteration
    (:func:`commsched.runtime.profiling.iterations.host_splits`) win, method ``"bytes"``. Raises
    :class:`~commsched.errors.InputError` when the series shows no period at all.

    Examples
    --------
    >>> x = np.tile(np.r_[np.full(30, 1e5), np.zeros(70)], 40)     # 30 ms burst every 100 ms, 1 ms bins
    >>> st = iterations(x, sample_s=1e-3)
    >>> round(st.mean_s, 4), st.count, round(st.gap_s, 3), st.method
    (0.1, 38, 0.07, 'bytes')
    """
    if splits := host_splits(x, sample_s=sample_s, start=start, also=also):  # by whole iterations' bytes
        s = splits[0]
        return IterationStats(
            mean_s=s.mean_s,
            count=s.count,
            starts=s.starts,
            period_s=s.period_s,
            gap_s=s.gap_s,
            method="bytes",
        )
    active = _active(x) if also is None else _active(x) | _active(also)
    runs = [(i, n) for i, n in _runs(active) if i > 0 and i + n < x.size and n >= 2]
    gaps = [(i, n) for i, n in runs if n >= _cut(runs)] if len(runs) >= 3 else []
    starts = [start + (i + n) * sample_s for i, n in gaps]
    if len(starts) < 3:
        period = iteration_period(x, sample_s=sample_s)
        if not (math.isfinite(period) and period > 2 * sample_s):
            raise InputError(f"no iteration period in the traffic (got {period:g} s)", where="traffic")
        return IterationStats(
            mean_s=period, count=0, starts=tuple(starts), period_s=period, gap_s=0.0, method="fft"
        )
    spacing = [b - a for a, b in itertools.pairwise(starts)]
    typical = statistics.median(spacing)
    count = sum(_merged(d / typical) for d in spacing)
    return IterationStats(
        mean_s=(starts[-1] - starts[0]) / count,
        count=count,
        starts=tuple(starts),
        period_s=typical,
        gap_s=statistics.median(n for _, n in gaps) * sample_s,
        method="bursts",
    )


def window_iterations(
    t: Sequence[float],
    received: Sequence[float],
    sent: Sequence[float],
    *,
    sample_s: float,
    start: float,
    end: float,
) -> IterationStats:
    """:func:`iterations` of one host's cumulative counters over ``[start, end)``: the timing of the
    bytes it received, a bin silent only when nothing was sent either."""
    x = series(t, received, sample_s=sample_s, start=start, end=end)
    y = series(t, sent, sample_s=sample_s, start=start, end=end)
    return iterations(x, sample_s=sample_s, start=start, also=y)


@dataclass(frozen=True, slots=True, kw_only=True)
class OutsideProfile:
    """A job's profile from its traffic: what the agent posts to the daemon (``PUT .../profile``)."""

    period_s: float
    bytes_per_iteration: float  # bytes out of this host per iteration
    busy_s: float  # time with data arriving per iteration
    compute_s: float  # the rest of the iteration: compute, and the pauses inside the communication
    overlap: float  # 1: the communication follows the compute; 0: hidden behind it (no silent gap)
    gap_s: float  # the median silent gap between iterations (the compute alone)
    iterations: float
    window_s: float
    method: str
    #: the median silence of the received bytes alone at the iterations' starts (0: not measured)
    rx_gap_s: float = 0.0

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


def outside_profile(
    t: Sequence[float],
    cum: Sequence[float],
    sent: Sequence[float] | None = None,
    *,
    sample_s: float,
    start: float,
    end: float,
) -> OutsideProfile:
    """The profile of the window ``[start, end)`` of the counter samples ``(t, cum)``.

    ``cum``: the bytes whose timing shows the iterations (the data a host receives arrives at the
    pace of the wire; what it sends may wait in queues first); ``sent``: the bytes counted per
    iteration (default ``cum``). The compute per iteration is the time no data arrives: the gap
    between iterations and the pauses inside the communication (between buckets, between the steps
    of a collective), which are the program's time too, not the network's. A job whose traffic never
    pauses has its communication behind its compute: compute = period, ``overlap`` 0.
    """
    x = series(t, cum, sample_s=sample_s, start=start, end=end)
    y = x if sent is None else series(t, sent, sample_s=sample_s, start=start, end=end)
    if not np.any(x > 0):
        raise InputError("no traffic in the profiling window", where="profile", expected="a job that sends")
    st = iterations(x, sample_s=sample_s, start=start, also=None if sent is None else y)
    window = x.size * sample_s
    if st.method not in ("bursts", "bytes"):
        n = window / st.period_s
        return OutsideProfile(
            period_s=st.period_s,
            bytes_per_iteration=float(y.sum()) / n,
            busy_s=st.period_s,
            compute_s=st.period_s,
            overlap=0.0,
            gap_s=0.0,
            iterations=n,
            window_s=window,
            method=st.method,
        )
    # whole iterations only: from the first burst's start to the last one's
    a, b = (round((s0 - start) / sample_s) for s0 in (st.starts[0], st.starts[-1]))
    busy = float(np.count_nonzero(_active(x)[a:b])) * sample_s / st.count
    return OutsideProfile(
        period_s=st.mean_s,
        bytes_per_iteration=float(y[a:b].sum()) / st.count,
        busy_s=busy,
        compute_s=max(st.mean_s - busy, sample_s),
        overlap=1.0,
        gap_s=st.gap_s,
        iterations=window / st.mean_s,
        window_s=window,
        method=st.method,
        rx_gap_s=_silence_before(st.starts, quiet_runs(x, sample_s=sample_s, start=start), sample_s),
    )


def _silence_before(starts: Sequence[float], quiet: Sequence[tuple[float, float]], sample_s: float) -> float:
    """The median time each of ``starts`` (an iteration's first bin) follows the beginning of a silent
    run of ``quiet`` that holds the bin before it; 0 where none does.

    Examples
    --------
    >>> round(_silence_before([0.4, 0.8], [(0.1, 0.5), (0.6, 0.8)], 0.1), 9)
    0.25
    """
    found = [s0 - a for s0 in starts for a, b in quiet if a <= s0 - sample_s < b]
    return float(np.median(found)) if found else 0.0
