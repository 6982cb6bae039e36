"""The fast mode's self-checks: every stretch extrapolated at measured rates is bounded and confirmed.

A component whose jobs' rates agree over two consecutive windows (``window_s`` of detail in all) is
extrapolated at those rates for a bounded stretch: at most ``window_s`` the first time, never past the
point from which the detail that must follow it would cross the horizon. The detail that follows the
stretch is then compared with what the stretch credited (:func:`confirm`): over at least half of
``window_s``, and until every job has completed enough iterations in it (or twice ``window_s`` has
passed), each job's rate is measured again between its iteration starts.

* When every job's rate agrees with its credited rate within the tolerance, the regime held: the next
  stretch, at the rates measured over all the detail seen so far, may be twice as long.
* Otherwise the regime did not last (a slow beat of quasi-periodic jobs can make two short windows agree
  by chance): the stretch is re-credited at the rates of all the detail around it, before and after
  (:attr:`Verdict.rates`), the component stays in detail, and its next measurement needs windows twice
  as long.

:class:`CheckLog` keeps what the result reports: how much of the jobs' time was extrapolated, how many
checks ran and failed, and the worst disagreement they saw.

Examples
--------
A stretch credited at 2 iterations/s to one job and at 1/s to another; the detail after it (10 s)
shows 2/s and 0.9/s, so the second job's regime did not hold:

>>> import numpy as np
>>> p = Pending(t_end=30.0, shift=20.0, rates=np.array([2.0, 1.0]), credited=np.array([40.0, 20.0]),
...             seen_done=np.array([40.0, 20.0]), seen_span=np.array([20.0, 20.0]), window_s=20.0)
>>> def sig(t, done, start):
...     z = np.zeros(2)
...     return Signature(t=t, phase=z, step=z, done=np.array(done), start=np.array(start), busy=z,
...                      last_end=z, link_bytes=z, link_iw_bytes=z)
>>> v = confirm(p, sig(30.0, [100.0, 50.0], [30.0, 30.0]), sig(40.0, [120.0, 59.0], [40.0, 40.0]),
...             min_iterations=3)
>>> round(v.disagreement, 6), v.rates.round(4).tolist()
(0.1, [2.0, 0.9667])
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.sim.fast.steady import Signature


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Pending:
    """A stretch extrapolated at measured rates, waiting for the detail after it to confirm it.

    ``rates`` and ``credited`` are per job (iterations per second, iterations); ``seen_done`` and
    ``seen_span`` the iterations and the time (between iteration starts) of the detail the rates were
    measured over, ``window_s`` that detail's length. ``creep`` is, per job that crept through one
    step (``None``: none did), the fraction of the step per second it was moved on at.
    """

    t_end: float
    shift: float
    rates: NDArray[np.float64]
    credited: NDArray[np.float64]
    seen_done: NDArray[np.float64]
    seen_span: NDArray[np.float64]
    window_s: float
    creep: NDArray[np.float64] | None = None


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Verdict:
    """A check's outcome: the worst relative disagreement of a job's rate after the stretch with the
    rate it was credited, and the rates, iterations and spans of all the detail seen (before and after)."""

    disagreement: float
    rates: NDArray[np.float64]
    done: NDArray[np.float64]
    span: NDArray[np.float64]
    confirm_s: float


def confirm(p: Pending, first: Signature, now: Signature, *, min_iterations: int) -> Verdict | None:
    """Compare the detail from ``first`` (the first signature after the stretch) to ``now`` with ``p``.

    ``None`` while that detail is too short: less than half of ``p.window_s``, or a job has completed
    fewer than ``min_iterations`` iterations in it and less than twice ``p.window_s`` has passed (a job
    that is still short then is measured over the whole detail: what it did, against what it was credited).
    """
    if now.done.shape != p.rates.shape or now.done.shape != first.done.shape:
        return None
    t = now.t - first.t
    if t < 0.5 * p.window_s:
        return None
    d = now.done - first.done
    span = now.start - first.start
    enough = (d >= min_iterations) & (span > 0)
    if not enough.all() and t < 2.0 * p.window_s:
        return None
    span = np.where(enough, span, t)
    rate = d / np.maximum(span, 1e-300)
    dis = np.abs(rate - p.rates) / np.maximum(p.rates, 1e-300)
    if p.creep is not None:
        dis = np.where(np.isnan(p.creep), dis, _creep_gap(p.creep, first, now))
    done, seen = p.seen_done + d, p.seen_span + span
    return Verdict(
        disagreement=float(dis.max()) if dis.size else 0.0,
        rates=done / np.maximum(seen, 1e-300),
        done=done,
        span=seen,
        confirm_s=t,
    )


def _creep_gap(creep: NDArray[np.float64], first: Signature, now: Signature) -> NDArray[np.float64]:
    """Per job, how far its progress through its step after a stretch disagrees with the ``creep`` it was
    moved on at (relative): measured while it stays in the step; a job that has left it moved at least
    the rest of the step over the detail, and disagrees if that is faster than its creep."""
    t = max(now.t - first.t, 1e-300)
    k = np.floor(first.step)
    stayed = (np.floor(now.step) == k) & (first.done == now.done)
    seen = np.where(stayed, (now.step - first.step) / t, (k + 1.0 - first.step) / t)
    gap = np.abs(seen - creep) / np.maximum(np.maximum(seen, creep), 1e-300)
    return np.where(stayed, gap, np.where(seen > creep, gap, 0.0))


class CheckLog:
    """What the fast mode extrapolated and what its checks saw (reported with the result).

    Attributes
    ----------
    extrapolated_job_s
        Job-seconds extrapolated (a stretch of ``s`` seconds over ``n`` jobs counts ``n * s``), periodic
        repetitions included, less what catch-ups took back.
    checks, failed
        Checks of measured stretches run, and those that found the regime had not held.
    worst
        The largest disagreement a check saw (relative, per job).
    unchecked_job_s
        Job-seconds of measured stretches that a decision ended before their check could run.
    """

    def __init__(self) -> None:
        self.extrapolated_job_s = 0.0
        self.checks = 0
        self.failed = 0
        self.worst = 0.0
        self.unchecked_job_s = 0.0

    def saw(self, v: Verdict, *, tolerance: float) -> bool:
        """Record a check; whether the regime held."""
        self.checks += 1
        self.worst = max(self.worst, v.disagreement)
        held = v.disagreement <= tolerance
        self.failed += not held
        return held
