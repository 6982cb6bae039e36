"""Correction factors and unique priorities of Crux's priority assignment (Crux §4.2).

Crux ranks jobs by ``P_j = k_j I_j``: the GPU intensity ``I_j`` corrected by a factor ``k_j`` that
captures iteration length and compute/communication overlap. ``k_j`` compares job ``j`` with a
reference job ``r`` (``k_r = 1``) alone on one link, once with each job prioritised:

``S_x^(y)``
    link time job ``x`` gets in the comparison window when job ``y`` has priority;
``dS_j = S_j^(j) - S_j^(r)`` and ``dS_r = S_r^(r) - S_r^(j)``
    what each job gains by being first;
``k_j = dS_j / dS_r``
    so that ``P_j > P_r`` exactly when serving ``j`` first yields more GPU work.

Single-link model (crux-spec §3.4 item 2, the model of acceptance facts A1-A9)
--------------------------------------------------------------------------------
* One link; fluid; preemptive strict priority: the low-priority job transmits only while the
  high-priority job has nothing to send and resumes a partly sent transfer.
* A job (``LinkJob``) computes ``compute_s`` per iteration; its transfer of ``transfer_s`` (at full
  link rate) is released ``overlap * compute_s`` after the iteration starts; the next iteration starts
  when both the compute and the transfer are done. GPU busy time is compute time.
* Both jobs start an iteration at time 0 (aligned start).
* The high-priority job is never delayed, so its link use is periodic with its standalone period
  ``max(c, o c + t)``; the low-priority job is computed iteration by iteration by inverting the
  cumulative idle time of the link. Everything is computed exactly with ``fractions.Fraction`` (inputs
  are rationalised with ``max_denominator``), event by event, never time-stepped.

Comparison window (crux-spec §3.4 item 3)
-----------------------------------------
The *contended period* of a job in one priority order is its exact steady-state iteration period in
that order: the standalone period for the high-priority job; for the low-priority job, the mean period
over the first exact cycle of its iteration-start phase relative to the high job's period (or, if no
cycle appears within ``max_iterations``, the mean period of the second half of those iterations,
rationalised). The window ``L`` is the smallest multiple of the lcm of the (up to four) contended
periods that holds ``min_iterations`` periods of the slowest; if that exceeds both ``max_iterations``
periods of the fastest and the minimum, ``L`` falls back to the larger of the two (an approximation
that bounds the simulation cost). For Crux's Example 1 the contended periods are 4 s, 2 s (high) and
4 s, 6 s (low), so ``L = 24 s`` (a multiple of 12 s) and ``k_2 = 1.5``.

The single-link model lives in ``correction.link``, the comparison window and the factors in
``correction.pair``; this module holds the ranking and re-exports every name.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.2 (Eq. 3, Figs. 11 and 12) and §7.1; crux-spec §3.2-§3.5 and A1-A9.
"""

from __future__ import annotations

from collections.abc import Mapping

from commsched.errors import InputError
from commsched.scheduling.correction.link import (
    CorrectionSettings,
    LinkJob,
    PairOutcome,
    check_nonneg,
    simulate_pair,
)
from commsched.scheduling.correction.pair import (
    JobKey,
    PairComparison,
    compare_pair,
    comparison_window,
    correction_factor,
    correction_factors,
)

__all__ = [
    "CorrectionSettings",
    "JobKey",
    "LinkJob",
    "PairComparison",
    "PairOutcome",
    "compare_pair",
    "comparison_window",
    "correction_factor",
    "correction_factors",
    "rank_jobs",
    "reference_job",
    "simulate_pair",
]


def reference_job(injected_rate_bytes_per_s: Mapping[JobKey, float]) -> JobKey:
    """The job that generates the most network traffic: highest average injected rate; ties by id.

    The rate is ``sum_e M_{j,e} / T_iter,j`` (bytes per second, crux-spec §3.4 item 1 default).

    Examples
    --------
    >>> reference_job({"a": 1e9, "b": 3e9, "c": 3e9})
    'b'

    References
    ----------
    Crux §4.2 ("the job that generates the most network traffic"); crux-spec §3.4 item 1.
    """
    if not injected_rate_bytes_per_s:
        raise InputError("no jobs", where="injected_rate_bytes_per_s", expected="at least one job")
    for key, rate in injected_rate_bytes_per_s.items():
        check_nonneg(rate, f"injected_rate_bytes_per_s[{key!r}]")
    return min(injected_rate_bytes_per_s, key=lambda key: (-injected_rate_bytes_per_s[key], key))


def rank_jobs(intensity: Mapping[JobKey, float], factor: Mapping[JobKey, float]) -> tuple[JobKey, ...]:
    """The unique ranking by ``P_j = k_j I_j`` (descending); ties by higher ``I_j``, then id.

    Examples
    --------
    Crux Example 1: ``I_1 = I_2 = 5``, ``k_2 = 1.5`` so ``P_2 = 7.5 > P_1 = 5``.

    >>> rank_jobs({1: 5.0, 2: 5.0}, {1: 1.0, 2: 1.5})
    (2, 1)

    References
    ----------
    Crux §4.2 (Eq. 3) and §4.3 (unique ranking orients the DAG); crux-spec §3.4 item 6, §3.5.
    """
    if set(intensity) != set(factor):
        raise InputError(
            "jobs differ between intensity and factor",
            where="factor",
            expected="one factor per job of intensity",
        )
    for key in intensity:
        check_nonneg(intensity[key], f"intensity[{key!r}]")
        check_nonneg(factor[key], f"factor[{key!r}]")
    return tuple(sorted(intensity, key=lambda key: (-factor[key] * intensity[key], -intensity[key], key)))
