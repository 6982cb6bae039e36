"""Steady states of a group of contending jobs (the fast mode's detectors).

Between job arrivals and departures a set of contending jobs tends to a steady regime. At each
iteration start of the component's *anchor* job the engine takes a signature: for every job of the
component, where it is in its iteration. Two signatures whose phases agree within a tolerance delimit a
period; the counters' increments over it can be repeated ``m`` times (:func:`best_match`,
:func:`best_relative_match`). Groups of jobs with unrelated iteration times are quasi-periodic: their
phases never meet again. For them :func:`measured_rates` looks for two consecutive windows over which
every job completed enough iterations at rates that agree; the regime is then extrapolated at the
measured rates.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.sim.fast.searches import match, measured_opening, relative_match, thinned


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Signature:
    """The state of a component at an anchor iteration start, and its cumulative counters."""

    t: float
    phase: NDArray[np.float64]  # per job: time since its iteration start / its standalone iteration time
    step: NDArray[np.float64]  # per job: communication step index + progress (or -1 before release)
    done: NDArray[np.float64]  # per job: iterations completed
    start: NDArray[np.float64]  # per job: start of its current iteration (``done`` completed before it)
    busy: NDArray[np.float64]  # per job: busy GPU-seconds (completed iterations only)
    last_end: NDArray[np.float64]  # per job: end of its last completed iteration
    link_bytes: NDArray[np.float64]  # component links: cumulative bytes
    link_iw_bytes: NDArray[np.float64]


def distance(a: Signature, b: Signature) -> float:
    """Largest phase mismatch between two signatures (fractions of an iteration)."""
    if a.phase.shape != b.phase.shape:
        return float("inf")
    d_phase = float(np.max(np.abs(a.phase - b.phase))) if a.phase.size else 0.0
    d_step = float(np.max(np.abs(a.step - b.step))) if a.step.size else 0.0
    return max(d_phase, d_step)


#: the per-job fields the searches read, in the order of :class:`History`'s stacks
_STACKED = ("phase", "step", "done", "start")


@dataclass(frozen=True, slots=True)
class Candidates:
    """The earlier signatures a search may match against ``now``: their positions in the history and
    their fields stacked (one row a signature)."""

    idx: NDArray[np.int64]
    t: NDArray[np.float64]
    rows: NDArray[np.float64]  # (field of _STACKED, signature, job)

    @property
    def done(self) -> NDArray[np.float64]:
        done: NDArray[np.float64] = self.rows[2]
        return done


class History:
    """A component's signatures in time order, with their per-job fields kept stacked row by row.

    The fast mode searches the history at every anchor iteration start: appending writes one row and a
    deletion moves the rows after it, so that a search reads the stacks as they are instead of stacking
    every signature again. A history whose signatures are not all of one shape keeps no stacks (the
    searches then stack the candidates of ``now``'s shape, as a list of signatures is searched).

    >>> z = np.zeros(2)
    >>> h = History()
    >>> for t in range(3):
    ...     h.append(Signature(t=float(t), phase=z, step=z, done=np.full(2, t), start=z, busy=z,
    ...                        last_end=z, link_bytes=z, link_iw_bytes=z))
    >>> del h[1]
    >>> len(h), [s.t for s in h], h.candidates(h[-1]).done.tolist()
    (2, [0.0, 2.0], [[0.0, 0.0]])
    """

    __slots__ = ("_jobs", "_memo", "_now_memo", "_rows", "_sigs", "_t", "_ver")

    def __init__(self, sigs: Iterable[Signature] = ()) -> None:
        self._sigs: list[Signature] = []
        self._t = np.empty(0)
        self._rows = np.empty((len(_STACKED), 0, 0))  # (field, capacity, job)
        self._jobs = -1  # jobs per signature; -1: none yet, -2: of several shapes (no stacks)
        self._ver = 0  # bumped by every change: the searches of one ``now`` share its candidates
        self._memo: tuple[Signature, int, Candidates | None] | None = None
        self._now_memo: tuple[Signature, NDArray[np.float64]] | None = None
        for s in sigs:
            self.append(s)

    def __len__(self) -> int:
        return len(self._sigs)

    def __bool__(self) -> bool:
        return bool(self._sigs)

    def __getitem__(self, i: int) -> Signature:
        return self._sigs[i]

    def __iter__(self) -> Iterator[Signature]:
        return iter(self._sigs)

    def append(self, sig: Signature) -> None:
        """Add ``sig`` (the latest) at the end."""
        n, k = len(self._sigs), sig.done.size
        self._sigs.append(sig)
        self._ver += 1
        if self._jobs == -2:
            return
        if not all(getattr(sig, f).shape == (k,) for f in _STACKED) or (self._jobs >= 0 and k != self._jobs):
            self._jobs = -2  # a shape the stacks do not hold
            return
        if self._jobs < 0 or n == self._t.size:
            cap = max(8, 2 * n)
            rows, t = np.empty((len(_STACKED), cap, k)), np.empty(cap)
            if n:
                rows[:, :n], t[:n] = self._rows[:, :n], self._t[:n]
            self._rows, self._t, self._jobs = rows, t, k
        self._t[n] = sig.t
        memo = self._now_memo
        if memo is not None and memo[0] is sig:
            self._rows[:, n] = memo[1]
        else:
            for j, f in enumerate(_STACKED):
                self._rows[j, n] = getattr(sig, f)

    def __delitem__(self, i: int) -> None:
        n = len(self._sigs)
        i = i + n if i < 0 else i
        del self._sigs[i]
        self._ver += 1
        if self._jobs >= 0:
            self._t[i : n - 1] = self._t[i + 1 : n]
            self._rows[:, i : n - 1] = self._rows[:, i + 1 : n]

    def times(self) -> NDArray[np.float64]:
        """The signatures' times, in order (a copy)."""
        if self._jobs >= 0:
            return self._t[: len(self._sigs)].copy()
        return np.array([h.t for h in self._sigs])

    def candidates(self, now: Signature) -> Candidates | None:
        """The signatures before ``now`` of its shape, stacked; ``None`` when there is none (the same
        object for every search of one ``now`` while the history does not change)."""
        memo = self._memo
        if memo is not None and memo[0] is now and memo[1] == self._ver:
            return memo[2]
        c = self._candidates(now)
        self._memo = (now, self._ver, c)
        return c

    def now_rows(self, now: Signature) -> NDArray[np.float64]:
        """``now``'s fields in the order of the stacks, one row each (made once per ``now``)."""
        memo = self._now_memo
        if memo is not None and memo[0] is now:
            return memo[1]
        rows: NDArray[np.float64] = np.stack([getattr(now, f) for f in _STACKED]).astype(np.float64)
        self._now_memo = (now, rows)
        return rows

    def seed_now(self, now: Signature, rows: NDArray[np.float64]) -> None:
        """``now``'s fields in the order of the stacks, as its maker has them (float64, one row each)."""
        self._now_memo = (now, rows)

    def _candidates(self, now: Signature) -> Candidates | None:
        n = len(self._sigs)
        if self._jobs >= 0 and all(getattr(now, f).shape == (self._jobs,) for f in _STACKED):
            t = self._t[:n]
            before = t < now.t
            if before.all():
                rows = self._rows[:, :n]
                idx = np.arange(n)
            else:
                idx = np.flatnonzero(before)
                rows, t = self._rows[:, idx], t[idx]
            if not idx.size:
                return None
            return Candidates(idx, t, rows)
        shape = {f: getattr(now, f).shape for f in _STACKED}
        keep = [
            i
            for i, h in enumerate(self._sigs)
            if h.t < now.t and all(getattr(h, f).shape == shape[f] for f in _STACKED)
        ]
        if not keep:
            return None
        sigs = [self._sigs[i] for i in keep]
        rows = np.stack([np.stack([getattr(h, f) for h in sigs]) for f in _STACKED])
        return Candidates(np.array(keep), np.array([h.t for h in sigs]), rows)


def _history(history: History | Sequence[Signature]) -> History:
    return history if isinstance(history, History) else History(history)


def best_match(history: History | Sequence[Signature], now: Signature) -> tuple[int, float]:
    """Index and distance of the earlier signature closest to ``now`` (latest wins ties).

    Only earlier signatures of the same shape after which every job has advanced by at least one
    whole iteration are candidates; ``(-1, inf)`` when there is none.
    """
    h = _history(history)
    c = h.candidates(now)
    if c is None:
        return -1, float("inf")
    row, d = match(c.rows, h.now_rows(now))
    return (int(c.idx[row]), float(d)) if row >= 0 else (-1, float("inf"))


def best_relative_match(history: History | Sequence[Signature], now: Signature) -> tuple[int, float]:
    """Index and relative mismatch of the earlier signature that makes the best approximate period.

    The relative mismatch of a candidate is, over the jobs, the largest phase (or step) mismatch divided
    by the iterations the job completed since the candidate: extrapolating an approximate period
    misstates a job's throughput by about that fraction. Same candidates as :func:`best_match`;
    ``(-1, inf)`` when there is none.
    """
    h = _history(history)
    c = h.candidates(now)
    if c is None or not now.done.size:
        return -1, float("inf")
    row, rel = relative_match(c.rows, h.now_rows(now))
    return (int(c.idx[row]), float(rel)) if row >= 0 else (-1, float("inf"))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class MeasuredRates:
    """Each job's iteration rate over two consecutive windows that agree (see :func:`measured_rates`).

    ``rate`` is per job, in iterations per second, over both windows; ``spread`` the largest difference
    between the two windows' rates of a job that agrees, relative to its rate; ``since`` the index of
    the signature that opens the first window and ``window_s`` the length of both; ``precise`` whether
    every job agrees (else some jobs creep). ``creep`` is per job the fraction of its step in flight it
    moved per second over both windows (0 for a job that agrees), ``creeping`` which jobs creep.
    """

    since: int
    rate: NDArray[np.float64]
    spread: float
    window_s: float
    precise: bool
    creep: NDArray[np.float64]
    creeping: NDArray[np.bool_]


def measured_rates(
    history: History | Sequence[Signature],
    now: Signature,
    *,
    min_iterations: int,
    tolerance: float,
    starved: NDArray[np.float64] | None = None,
    min_window_s: float = 0.0,
) -> MeasuredRates | None:
    """The longest pair of consecutive windows ending ``now`` over which the jobs' rates agree.

    A job's rate over a window is measured between its iteration starts: the iterations it completed
    between its first and last iteration start in the window over the time between those starts, so
    no fraction of an iteration in progress enters it. The windows run from an earlier signature ``a``
    to the one nearest the middle, ``m``, and from ``m`` to ``now``. They qualify when every job either
    *agrees* (it completed at least ``min_iterations`` iterations in each and its two rates differ by
    no more than ``tolerance`` of its mean rate: a transient or a change of regime shows there) or
    *creeps* (starved: it completed none in either and stayed in one communication step throughout,
    moving through it at rates that agree within ``tolerance``, or not moving at all over windows of at
    least ``starved[k]`` seconds each, ten of its standalone iterations, say), and at least one job
    agrees. A creeping job's rate is 0 and its ``creep`` the fraction of the step it moved per second
    over both windows, measured from the signatures' ``step``; ``precise`` says that every job agrees.
    The earliest qualifying ``a`` wins (the longest windows: the most precise rates); only openings at
    least ``min_window_s`` before ``now`` are candidates (a regime that did not last is measured again
    over longer windows).
    ``None`` when no pair qualifies; without ``starved``, every job must agree.

    Examples
    --------
    Two jobs iterating every 1 s and 0.5 s, a signature every 2 s:

    >>> z = np.zeros(2)
    >>> def sig(t, slow=1.0):
    ...     return Signature(t=t, phase=z, step=z, done=np.array([slow * t, 2 * t]), start=np.array([t, t]),
    ...                      busy=z, last_end=z, link_bytes=z, link_iw_bytes=z)
    >>> hist = [sig(float(t)) for t in range(0, 20, 2)]
    >>> m = measured_rates(hist, sig(20.0), min_iterations=4, tolerance=0.01)
    >>> m.since, m.rate.tolist(), m.spread, m.window_s, m.precise
    (0, [1.0, 2.0], 0.0, 20.0, True)

    With 11 iterations required in each window, job 0 (10 in each) does not agree; were it starved (no
    iteration at all over windows of 10 s, at least ``starved``), the windows would qualify:

    >>> measured_rates(hist, sig(20.0), min_iterations=11, tolerance=0.01) is None
    True
    >>> hist = [sig(float(t), slow=0.0) for t in range(0, 20, 2)]
    >>> starved = np.array([9.0, 9.0])
    >>> m = measured_rates(hist, sig(20.0, slow=0.0), min_iterations=10, tolerance=0.01, starved=starved)
    >>> m.precise, m.rate.tolist(), m.creep.tolist()
    (False, [0.0, 2.0], [0.0, 0.0])

    Job 0 creeping through its step 3 at 1 % of it per second (its ``step`` 3.0 + 0.01 t):

    >>> def crept(t):
    ...     s = sig(t, slow=0.0)
    ...     fields = {f: getattr(s, f) for f in s.__slots__}
    ...     return Signature(**{**fields, "step": np.array([3 + 0.01 * t, 0.0])})
    >>> hist = [crept(float(t)) for t in range(0, 20, 2)]
    >>> m = measured_rates(hist, crept(20.0), min_iterations=10, tolerance=0.01, starved=starved)
    >>> m.rate.tolist(), m.creep.round(6).tolist(), m.creeping.tolist()
    ([0.0, 2.0], [0.01, 0.0], [True, False])

    Windows at least 25 s long in all: none within the 20 s of history.

    >>> measured_rates(hist, sig(20.0, slow=0.0), min_iterations=10, tolerance=0.01, starved=starved,
    ...                min_window_s=25.0) is None
    True
    """
    h = _history(history)
    c = h.candidates(now) if now.done.size else None
    if c is None or c.idx.size < 2:
        return None
    n = now.done.size
    rows = np.empty((len(_STACKED) + 1, n))
    rows[: len(_STACKED)] = h.now_rows(now)
    rows[len(_STACKED)] = np.inf if starved is None else starved
    params = np.array([now.t, min_iterations, tolerance, min_window_s], dtype=np.float64)
    out = np.zeros((6, n))
    a = measured_opening(c.t, c.rows, rows, params, out)
    if a < 0:
        return None
    agree, creeping = out[4] != 0, out[5] != 0
    return MeasuredRates(
        since=int(c.idx[a]),
        rate=out[0],
        spread=float(np.max(np.where(agree, out[1], 0.0))),
        window_s=now.t - float(c.t[a]),
        precise=bool(agree.all()),
        creep=np.where(creeping, out[2], 0.0),
        creeping=creeping,
    )


def remember(hist: History, sig: Signature, *, keep: int) -> None:
    """Append ``sig``; keep the latest ``keep`` signatures, and a thinned record of the older ones.

    The search per anchor iteration stays bounded (``2 * keep`` signatures), while the
    history still reaches back to the start of the regime: on overflow, the older signature whose
    neighbours lie closest together for their age goes, so that the older ones lie further apart the
    older they are (the windows of :func:`measured_rates` grow as long as the regime lasts).
    """
    hist.append(sig)
    if len(hist) > 2 * keep:
        cut = len(hist) - keep  # candidates 1 .. cut - 1: neither the first nor the latest ones
        del hist[thinned(hist.times(), cut, sig.t)]
