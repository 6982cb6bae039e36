"""Iterations of a job from its byte counters when contention splits its communication into bursts.

A data-parallel job moves the same bytes every iteration (its gradients), and between two iterations
it is silent for its compute. Under contention (two flows on one ECMP path, a peer queued behind
another job) one iteration's communication breaks into several bursts separated by stalls; a
detector that counts bursts then counts stalls as iterations. Here the iterations are told apart
from the stalls by three things, never by reading the program's log:

* **the bytes of a whole iteration**: at a boundary between iterations the cumulative byte counter
  (both directions) stands at a whole multiple of the bytes per iteration ``B`` (plus an offset),
  while a stall falls wherever the contention strikes. Every silent run of two bins or more is a
  candidate boundary; for every threshold on their lengths the runs at least that long cut the
  series into segments, and a threshold is *consistent* when every segment holds a whole number of
  ``B`` (within :data:`BYTE_TOL`, ``B`` refined as total bytes over total count). The lowest
  consistent threshold of each ``B`` is that ``B``'s split.
* **the regularity of the starts**: two consistent splits whose ``B`` are multiples of each other
  (``B`` and ``m B``: a stall that falls at the same point of every iteration, such as between the
  steps of a ring) are told apart by the time a unit of bytes takes at each phase of the coarser
  split: within true iterations every phase takes about as long (:data:`PHASE_RATIO`), within a
  split iteration the phase that holds the compute gap is much longer.
* **agreement across the job's hosts** (:func:`.agreement.job_split`): the ranks iterate together, so the
  period is the one the most hosts have among their consistent splits.

The mean iteration time is the span from the first boundary to the last over the iterations the
bytes count between them. :func:`.profilecheck.check_profile` holds a profile's period, bytes and
compute against the bytes counted over its window before it is posted.
"""

from __future__ import annotations

import math
import statistics
from dataclasses import dataclass
from typing import Any

import numpy as np

__all__ = [
    "BYTES_KNOWN",
    "BYTE_TOL",
    "PHASE_RATIO",
    "Split",
    "host_splits",
    "multiple_of",
    "quiet_runs",
    "silent_runs_s",
]

#: a segment holds a whole number of iterations' bytes when it is within this fraction of one
BYTE_TOL = 0.06

#: bytes per iteration within this fraction of the job's known ones are its iterations'
BYTES_KNOWN = 0.1

#: the phases of true iterations take at most this ratio of each other's time per byte
PHASE_RATIO = 1.6

#: boundaries of iterations lie within this fraction of an iteration's bytes of their phase
PHASE_TOL = 0.015

#: peaks of the byte-domain spectrum tried as bytes per iteration
MAX_PEAKS = 8

#: a spectrum peak ``b`` is tried as ``B = m b`` for ``m`` up to this
MAX_PARTS = 8

#: a split's boundaries exceed those chance would give by this many standard deviations, and two
#: (the spectrum tries thousands of ``B`` and phases: a few boundaries line up somewhere by chance)
SIGMAS = 4.0

#: a split's iterations hold at least this share of the window's bytes
MIN_SPAN = 0.5

#: splits whose boundaries show in fewer iterations than the best one's less this are dropped
COVER_MARGIN = 0.15

#: a split needs boundaries in this share of its iterations
COVER = 0.6


@dataclass(frozen=True, slots=True, kw_only=True)
class Split:
    """The iterations of one host's window, told apart by their bytes.

    ``starts``: times (s) at which the communication of an iteration begins (a boundary's end);
    ``counts``: the iterations between consecutive starts; ``bytes_per_iteration`` both directions;
    ``stalls``: silent runs inside iterations (not boundaries); ``byte_error``: the median distance
    of the boundaries from their phase, in iterations; ``spread``: the coefficient of variation
    of the iteration time between starts.
    """

    starts: tuple[float, ...]
    counts: tuple[int, ...]
    silences: tuple[float, ...]  # the silent time (bins) of the boundary at each start
    cover: float  # the share of its iterations whose boundary shows
    bytes_per_iteration: float
    gap_s: float
    stalls: int
    byte_error: float
    spread: float
    #: the host's silent runs over the window, (start, end) in seconds, and its bin: where every
    #: host of a job is silent at once the job computes (:func:`.agreement.job_split`)
    quiet: tuple[tuple[float, float], ...] = ()
    sample_s: float = 0.0

    @property
    def count(self) -> int:
        return sum(self.counts)

    @property
    def mean_s(self) -> float:
        return (self.starts[-1] - self.starts[0]) / self.count

    @property
    def period_s(self) -> float:
        """The median time from one start to the next, per iteration between them."""
        return statistics.median(
            (b - a) / k for a, b, k in zip(self.starts, self.starts[1:], self.counts, strict=False)
        )

    def to_json(self) -> dict[str, Any]:
        return {
            "mean_s": self.mean_s,
            "count": self.count,
            "bytes_per_iteration": self.bytes_per_iteration,
            "gap_s": self.gap_s,
            "stalls": self.stalls,
            "byte_error": self.byte_error,
            "spread": self.spread,
        }


def _silent_runs(active: np.ndarray[Any, Any]) -> list[tuple[int, int]]:
    """(first bin, length) of every run of inactive bins strictly inside the series, two bins or more."""
    edges = np.flatnonzero(np.diff(np.r_[1, active.astype(np.int8), 1]))
    runs = [(int(a), int(b - a)) for a, b in zip(edges[::2], edges[1::2], strict=True)]
    return [(i, n) for i, n in runs if i > 0 and i + n < active.size and n >= 2]


def _active(x: np.ndarray[Any, Any]) -> np.ndarray[Any, Any]:
    """Bins with traffic: above 2 % of the median non-empty bin (a stray small packet is none)."""
    peak = float(np.median(x[x > 0])) if np.any(x > 0) else 0.0
    out: np.ndarray[Any, Any] = x > 0.02 * peak
    return out


@dataclass(frozen=True, slots=True, kw_only=True)
class _Runs:
    """The silent runs of a window: the bin each ends at, its length (bins), the bytes counted there."""

    end: np.ndarray[Any, Any]
    length: np.ndarray[Any, Any]
    at: np.ndarray[Any, Any]
    total: float  # the window's bytes


def _candidates(runs: _Runs) -> list[float]:
    """Bytes per iteration worth trying.

    Two sources: per threshold on the runs' lengths, the bytes between consecutive runs at least that
    long that recur most often (three times or more); and the peaks of :func:`_spectrum_peaks` with
    their multiples up to :data:`MAX_PARTS` (the compute gaps stand at one phase of the true ``B``,
    and so at one phase of ``B / m`` too, where stalls add by chance).
    """
    out: list[float] = []

    def add(b: float) -> None:
        if not any(abs(b / o - 1) <= BYTE_TOL / 4 for o in out):
            out.append(b)

    for theta in sorted(set(runs.length.tolist())):
        seg = np.diff(runs.at[runs.length >= theta])
        seg = seg[seg > 0]
        if seg.size < 3:
            break
        near = np.abs(seg[None, :] / seg[:, None] - 1) <= BYTE_TOL
        group = seg[near[int(np.argmax(near.sum(axis=1)))]]
        if group.size >= 3:
            add(float(np.median(group)))
    total = float(runs.at[-1] - runs.at[0])
    for b in _spectrum_peaks(runs):  # a peak may be a part of B (B / m gathers B's boundaries too)
        for m in range(1, MAX_PARTS + 1):
            if m * b <= total / 3:
                add(m * b)
    return out


def _spectrum_peaks(runs: _Runs) -> list[float]:
    """Peaks of the runs' silent time gathered at one phase of the byte counter, over the number of
    iterations ``N`` the window may hold (3 to one per run, in steps of 1/32: the phase drifts by at
    most 1/32 of an iteration over the window); the phase is binned in sixteenths, two neighbouring
    bins together. Returns ``B = bytes / N`` of the peaks holding half the largest share or more."""
    rel = runs.at - runs.at[0]
    total = float(rel[-1])
    if total <= 0 or rel.size < 4:
        return []
    counts = np.arange(3.0, rel.size + 1e-9, 1.0 / 32)
    w = runs.length / runs.length.sum()
    power = np.empty(counts.size)
    for lo in range(0, counts.size, 2048):  # in blocks: (rows x runs) stays small
        n = counts[lo : lo + 2048]
        idx = (np.outer(n, rel / total) * 16).astype(np.int64) % 16
        rows = np.repeat(np.arange(n.size) * 16, rel.size)
        hist = np.bincount(rows + idx.ravel(), weights=np.tile(w, n.size), minlength=n.size * 16)
        hist = hist.reshape(n.size, 16)
        power[lo : lo + n.size] = (hist + np.roll(hist, 1, axis=1)).max(axis=1)
    peak = np.flatnonzero(
        (power[1:-1] >= power[:-2]) & (power[1:-1] >= power[2:]) & (power[1:-1] >= 0.5 * power.max())
    )
    best = peak[np.argsort(-power[1:-1][peak])][:MAX_PEAKS] + 1
    return [total / float(counts[i]) for i in best]


def _phase_members(runs: _Runs, b: float, tol: float, span: float) -> np.ndarray[Any, Any]:
    """The runs (within ``span`` units of ``b`` of the first) at the phase modulo ``b`` that holds
    the most silent time, as a boolean mask."""
    u = (runs.at - runs.at[0]) / b
    ph = u % 1.0
    d = np.abs(ph[:, None] - ph[None, :])
    d = np.minimum(d, 1.0 - d)
    near = (d <= tol) & (u[None, :] <= span)
    centre = int(np.argmax((near * runs.length[None, :]).sum(axis=1) * (u <= span)))
    out: np.ndarray[Any, Any] = d[centre] <= tol
    return out


def _fit(runs: _Runs, b0: float) -> tuple[float, np.ndarray[Any, Any], np.ndarray[Any, Any]] | None:
    """``(B, members, k)``: ``b0`` refined on the runs at its boundary phase, those runs, their
    iteration numbers. The phase is found on the first few iterations (where an error in ``b0``
    moves it little), then ``B`` is the slope of the bytes over the iteration numbers."""
    b = b0
    for tol, span in ((2 * PHASE_TOL, 8.0), (PHASE_TOL, math.inf), (PHASE_TOL, math.inf)):
        member = _phase_members(runs, b, tol, span)
        at = runs.at[member]
        k = np.round((at - at[0]) / b)
        if np.unique(k).size < 2:
            return None
        b = float(np.polyfit(k, at, 1)[0])
    return b, member, k.astype(int)


def _split(runs: _Runs, b0: float, *, sample_s: float, start: float, parts: int = 1) -> Split | None:
    """The iterations of ``runs`` at ``b0`` bytes each; ``None`` where too few boundaries show.

    ``parts``: ``b0`` is a ``parts``-th of a split already found, whose boundaries' scatter in bytes
    it may have (a few bytes sent again, once, move every later boundary off the slope by the same
    bytes: ``parts`` times more of an iteration of ``b0``)."""
    fit = _fit(runs, b0)
    if fit is None:
        return None
    b, member, k = fit
    ends = runs.end[member]
    ks = np.unique(k)
    span = int(ks[-1] - ks[0] + 1)
    if ks.size < COVER * span or (ks[-1] - ks[0]) * b < MIN_SPAN * runs.total:
        return None
    # boundaries that chance alone would give: a run within the phase's tolerance at an iteration
    rate = np.count_nonzero((runs.end >= ends.min()) & (runs.end <= ends.max())) / span
    p0 = 1.0 - math.exp(-2 * PHASE_TOL * rate)
    if ks.size < max(4.0, span * p0 + SIGMAS * math.sqrt(span * p0 * (1 - p0)) + 2):
        return None
    starts = tuple(start + float(ends[k == q].max()) * sample_s for q in ks)
    silences = tuple(float(runs.length[member][k == q].sum()) for q in ks)
    counts = tuple(int(c) for c in np.diff(ks))
    at = runs.at[member]
    err = float(np.median(np.abs((at - at[0]) / b - k - np.median((at - at[0]) / b - k))))
    if err > parts * PHASE_TOL / 4:
        return None  # true boundaries stand at their phase to a few bytes; these scatter over it
    per = [(t1 - t0) / c for t0, t1, c in zip(starts, starts[1:], counts, strict=False)]
    mid = statistics.fmean(per)
    return Split(
        starts=starts,
        counts=counts,
        silences=silences,
        cover=ks.size / float(ks[-1] - ks[0] + 1),
        bytes_per_iteration=b,
        gap_s=float(np.median(runs.length[member])) * sample_s,
        stalls=int(np.count_nonzero(~member)),
        byte_error=err,
        spread=statistics.pstdev(per) / mid if mid > 0 else math.inf,
        quiet=tuple(
            (start + float(e - n) * sample_s, start + float(e) * sample_s)
            for e, n in zip(runs.end, runs.length, strict=True)
        ),
        sample_s=sample_s,
    )


def _sub_split(fine: Split, coarse: Split) -> bool:
    """Whether ``fine`` splits ``coarse``'s iterations into parts: its boundaries show in fewer of its
    iterations (by :data:`COVER_MARGIN`), or the boundaries of ``fine`` that ``coarse`` keeps (its
    phase holds the most silent time) are silent :data:`PHASE_RATIO` times longer than those it
    leaves out (the compute gaps against the stalls between parts). Between a true split and its
    multiple the two sets are alike: compute gaps both."""
    if fine.cover < coarse.cover - COVER_MARGIN:
        return True  # the boundaries ``fine`` adds are missing in many iterations: stalls
    kept = np.isin(np.round(fine.starts, 6), np.round(coarse.starts, 6))
    quiet = np.asarray(fine.silences)
    if np.count_nonzero(kept) < 2 or np.all(kept):
        return False
    return float(np.median(quiet[kept])) > PHASE_RATIO * float(np.median(quiet[~kept]))


def host_splits(
    x: np.ndarray[Any, Any],
    *,
    sample_s: float,
    start: float = 0.0,
    also: np.ndarray[Any, Any] | None = None,
    known_bytes: float | None = None,
) -> list[Split]:
    """Every split of one host's bytes-per-bin series ``x`` (and ``also``) into iterations, best first.

    ``x``, ``also``: bytes received and sent per bin of ``sample_s`` seconds, the first bin at
    ``start``; a bin is silent when both are. Candidate bytes per iteration ``B`` come from the
    bytes between long silent runs (:func:`_candidates`); for each, the boundaries are the runs at
    the phase of the byte counter modulo ``B`` that holds the most silent time (the compute gaps),
    and ``B`` is refined on them (:func:`_fit`). A split is kept when its boundaries show in
    :data:`COVER` of its iterations at least (four or more), and not when a coarser split shows it
    to cut iterations into parts (:func:`_sub_split`) or when it is a multiple of a kept one; of the
    rest, those whose boundaries show in nearly as many iterations as the best one's
    (:data:`COVER_MARGIN`), the longest silent boundaries first (the compute gap is the regular
    silence of an iteration; a split that takes stalls for boundaries has shorter ones). Empty when
    no ``B`` fits. ``known_bytes``: the job's bytes per iteration where known from elsewhere (its
    profiling window): ``B`` is tried at them, and a split carrying them (:data:`BYTES_KNOWN`) is kept
    whatever its cover (a starved job's compute gaps and stalls alike may merge its iterations).

    Examples
    --------
    >>> one = np.r_[np.zeros(40), np.full(10, 1e4), np.zeros(5), np.full(10, 1e4)]  # 65 ms iterations
    >>> s = host_splits(np.tile(one, 12), sample_s=1e-3)[0]
    >>> round(s.mean_s, 3), round(s.bytes_per_iteration), s.stalls
    (0.065, 200000, 12)
    """
    y = x if also is None else x + also
    active = _active(x) if also is None else _active(x) | _active(also)
    found = _silent_runs(active)
    if len(found) < 4:
        return []
    cum = np.cumsum(y)
    runs = _Runs(
        end=np.array([i + n for i, n in found]),
        length=np.array([n for _, n in found], dtype=float),
        at=np.array([float(cum[i + n - 1]) for i, n in found]),
        total=float(cum[-1]),
    )
    splits: list[Split] = []

    def add(s: Split | None) -> None:
        if s is not None and not any(
            abs(o.bytes_per_iteration / s.bytes_per_iteration - 1) <= BYTE_TOL for o in splits
        ):
            splits.append(s)

    for b0 in _candidates(runs) + ([known_bytes] if known_bytes is not None and known_bytes > 0 else []):
        add(_split(runs, b0, sample_s=sample_s, start=start))
    for coarse in list(splits):  # its parts, held to its own scatter in bytes
        for m in range(2, MAX_PARTS + 1):
            add(_split(runs, coarse.bytes_per_iteration / m, sample_s=sample_s, start=start, parts=m))
    splits.sort(key=lambda s: s.bytes_per_iteration)

    def known(s: Split) -> bool:
        return bool(known_bytes) and abs(s.bytes_per_iteration / (known_bytes or 1.0) - 1) <= BYTES_KNOWN

    kept = [
        s
        for i, s in enumerate(splits)
        if known(s) or not any(_sub_split(s, c) for c in splits[i + 1 :] if multiple_of(c, s))
    ]
    kept = [s for s in kept if known(s) or not any(multiple_of(s, f) for f in kept if f is not s)]
    best = max((s.cover for s in kept), default=0.0)
    close = (s for s in kept if known(s) or s.cover >= best - COVER_MARGIN)
    return sorted(close, key=lambda s: (-float(np.median(s.silences)), s.bytes_per_iteration))


def multiple_of(coarse: Split, fine: Split) -> bool:
    """Whether ``coarse``'s bytes per iteration are a whole multiple (two or more) of ``fine``'s."""
    r = coarse.bytes_per_iteration / fine.bytes_per_iteration
    return round(r) >= 2 and abs(r / round(r) - 1) <= BYTE_TOL


def quiet_runs(
    x: np.ndarray[Any, Any], *, sample_s: float, start: float = 0.0, also: np.ndarray[Any, Any] | None = None
) -> tuple[tuple[float, float], ...]:
    """The silent runs (two bins or more, inside the series) of one host's window as (start, end)
    times, as :func:`.agreement.job_split` takes them.

    Examples
    --------
    >>> quiet_runs(np.r_[1.0, 0, 0, 0, 1, 0, 1], sample_s=0.5, start=10.0)
    ((10.5, 12.0),)
    """
    active = _active(x) if also is None else _active(x) | _active(also)
    return tuple((start + i * sample_s, start + (i + n) * sample_s) for i, n in _silent_runs(active))


def silent_runs_s(x: np.ndarray[Any, Any], also: np.ndarray[Any, Any], *, sample_s: float) -> list[float]:
    """Lengths (s) of the runs of two or more bins inside the series in which neither ``x`` nor
    ``also`` carries traffic."""
    return [n * sample_s for _, n in _silent_runs(_active(x) | _active(also))]
