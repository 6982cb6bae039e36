"""The fast mode's searches of a component's history, compiled: one call a search instead of some forty
array operations.

:func:`commsched.sim.fast.steady.best_match`, :func:`~commsched.sim.fast.steady.best_relative_match` and
:func:`~commsched.sim.fast.steady.measured_rates` run at every anchor iteration start without a period,
on a history of a few dozen signatures: their cost is the calls, not the arithmetic. These loops do the
same arithmetic element by element (the same operations in the same order on the same operands, so the
same results bit for bit; IEEE semantics for a division by zero, as NumPy's), and stop at the first
opening that qualifies where the vectorised form computed them all. The candidates are stacked by
:class:`commsched.sim.fast.steady.History` (one row a signature).
"""

from __future__ import annotations

import importlib.util
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

_F = TypeVar("_F", bound=Callable[..., Any])
F64 = NDArray[np.float64]


def _jit(fn: _F) -> _F:
    """Compile ``fn`` with numba (cached on disk, NumPy's semantics for a division by zero) when it is
    installed, else leave it as it is."""
    if importlib.util.find_spec("numba") is None:  # pragma: no cover - numba is a dependency
        return fn
    from numba import njit

    return cast(_F, njit(cache=True, nogil=True, error_model="numpy")(fn))


#: rows of the stacked fields (``History``'s order) and of ``now``'s array
PHASE, STEP, DONE, START, LIMIT = range(5)
#: rows of ``measured_opening``'s output, per job
RATE, GAP, CREEP, HALF, AGREES, CREEPS = range(6)


@_jit
def _advanced(done: F64, now: F64, i: int) -> bool:
    """Whether every job completed a whole iteration since candidate ``i`` (element by element: no
    array made per candidate)."""
    for j in range(done.shape[1]):  # noqa: SIM110 -- a generator numba does not compile
        if not now[DONE, j] - done[i, j] >= 1:
            return False
    return True


@_jit
def match(rows: F64, now: F64) -> tuple[int, float]:
    """Row and distance of the candidate closest to ``now`` after which every job advanced a whole
    iteration (the latest of equal ones); ``(-1, inf)`` when none did. ``rows``: the candidates' fields
    (field, candidate, job); ``now``: the current signature's (field, job)."""
    done, phase, step = rows[DONE], rows[PHASE], rows[STEP]
    best, best_d = -1, np.inf
    for i in range(done.shape[0]):
        if not _advanced(done, now, i):
            continue
        d = 0.0
        for j in range(done.shape[1]):
            d = max(d, abs(phase[i, j] - now[PHASE, j]))
        e = 0.0
        for j in range(done.shape[1]):
            e = max(e, abs(step[i, j] - now[STEP, j]))
        d = max(d, e)
        if d <= best_d:
            best, best_d = i, d
    return best, best_d


@_jit
def relative_match(rows: F64, now: F64) -> tuple[int, float]:
    """Row and relative mismatch of the candidate making the best approximate period (the latest of
    equal ones): per job its phase (or step) mismatch over the iterations it completed since."""
    done, phase, step = rows[DONE], rows[PHASE], rows[STEP]
    best, best_r = -1, np.inf
    for i in range(done.shape[0]):
        if not _advanced(done, now, i):
            continue
        r = -np.inf
        for j in range(done.shape[1]):
            mis = max(abs(phase[i, j] - now[PHASE, j]), abs(step[i, j] - now[STEP, j]))
            r = max(r, mis / (now[DONE, j] - done[i, j]))
        if r <= best_r:
            best, best_r = i, r
    return best, best_r


@_jit
def _creeps(
    s_a: float, s_m: float, s_now: float, spans: tuple[float, float], tolerance: float
) -> tuple[bool, float]:
    """Whether an idle job creeps (stayed in one step, moving through it at rates that agree over both
    windows, or not at all) and its rate through the step over both (0 if it left the step)."""
    t1, t2 = spans
    k = np.floor(s_a)
    if not (s_a >= 0 and np.floor(s_m) == k and np.floor(s_now) == k):
        return False, 0.0
    c1, c2 = (s_m - s_a) / t1, (s_now - s_m) / t2
    creep = (s_now - s_a) / (t1 + t2)
    close = abs(c1 - c2) <= tolerance * creep
    return c1 >= 0 and c2 >= 0 and (close or creep == 0), creep


@_jit
def measured_opening(times: F64, rows: F64, now: F64, params: F64, out: F64) -> int:
    """The earliest opening row ``a`` whose two windows (``a`` to the middle row, the middle to ``now``)
    qualify, as :func:`commsched.sim.fast.steady.measured_rates` states; -1 when none does.

    ``now`` holds the current signature's fields and each job's ``LIMIT`` (the windows over which a job
    that does not move at all counts as starved); ``params`` the current time, the iterations each window
    needs, the tolerance and the shortest span from the opening. For the row found, ``out`` holds per job
    its ``RATE``, the ``GAP`` between its windows' rates, its ``CREEP``, the opening's shorter window
    (``HALF``), and whether it ``AGREES`` / ``CREEPS`` (1 or 0).
    """
    now_t, min_iterations, tolerance, min_window_s = params[0], params[1], params[2], params[3]
    done, start, step = rows[DONE], rows[START], rows[STEP]
    n_c, n_j = times.shape[0], now.shape[1]
    for a in range(n_c - 1):
        if not now_t - times[a] >= min_window_s:
            continue
        centre = (times[a] + now_t) / 2.0
        mid, best = a + 1, np.inf
        for m in range(a + 1, n_c):
            g = abs(times[m] - centre)
            if g < best:
                mid, best = m, g
        half = min(times[mid] - times[a], now_t - times[mid])
        spans = (times[mid] - times[a], now_t - times[mid])
        good, any_agree = True, False
        for j in range(n_j):
            d1, t1 = done[mid, j] - done[a, j], start[mid, j] - start[a, j]
            d2, t2 = now[DONE, j] - done[mid, j], now[START, j] - start[mid, j]
            rate, gap, agree = 0.0, np.inf, False
            if d1 >= min_iterations and d2 >= min_iterations and t1 > 0 and t2 > 0:
                rate = (now[DONE, j] - done[a, j]) / (now[START, j] - start[a, j])
                gap = abs(d1 / t1 - d2 / t2) / rate
                agree = gap <= tolerance
            creeping, creep = False, 0.0
            if d1 == 0 and d2 == 0:
                creeping, creep = _creeps(step[a, j], step[mid, j], now[STEP, j], spans, tolerance)
                creeping = creeping and (creep > 0 or half >= now[LIMIT, j])
            if not (agree or creeping):
                good = False
                break
            any_agree = any_agree or agree
            out[RATE, j], out[GAP, j], out[CREEP, j], out[HALF, j] = rate, gap, creep, half
            out[AGREES, j], out[CREEPS, j] = 1.0 if agree else 0.0, 1.0 if creeping else 0.0
        if good and any_agree:
            return a
    return -1


@_jit
def thinned(times: F64, cut: int, now_t: float) -> int:
    """The signature :func:`commsched.sim.fast.steady.remember` drops, among rows ``1 .. cut - 1``: the one
    whose neighbours lie closest together for its age, ``(times[k + 1] - times[k - 1]) / (now_t -
    times[k])`` least (the first of equal ones, a NaN first, as ``np.argmin``)."""
    best, best_v = 1, np.inf
    for k in range(1, cut):
        v = (times[k + 1] - times[k - 1]) / max(now_t - times[k], 1e-300)
        if np.isnan(v):
            return k
        if v < best_v or k == 1:
            best, best_v = k, v
    return best
