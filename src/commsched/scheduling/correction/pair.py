"""Pairwise comparison window and correction factors ``k_j`` of Crux's priority assignment (Crux §4.2).

``comparison_window`` picks the window ``L`` from the exact contended periods, ``compare_pair`` runs
both priority orders of a job and the reference over it (single-link model of ``correction.link``),
and ``correction_factor(s)`` turn the gains into ``k_j = dS_j / dS_r``. Definitions are in
``commsched.scheduling.correction``.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.2 (Eq. 3, Figs. 11 and 12); crux-spec §3.4 items 3-5 and A1-A9.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from commsched.errors import InputError
from commsched.scheduling.correction.link import (
    CorrectionSettings,
    LinkJob,
    PairOutcome,
    RationalJob,
    check_nonneg,
    exact_outcome,
    low_iterations,
    public_outcome,
    rational_job,
)

__all__ = [
    "PairComparison",
    "compare_pair",
    "comparison_window",
    "correction_factor",
    "correction_factors",
]

JobKey = TypeVar("JobKey", int, str)


@dataclass(frozen=True, slots=True, kw_only=True)
class PairComparison:
    """Job ``j`` against reference ``r`` on one link, each order in turn, over one window.

    Attributes
    ----------
    window_s
        The window ``L`` (from time 0, aligned start).
    job_first, reference_first
        The outcomes with ``j`` resp. ``r`` prioritised.
    job_gain_s, reference_gain_s
        ``dS_j = S_j^(j) - S_j^(r)`` and ``dS_r = S_r^(r) - S_r^(j)``.
    factor
        ``k_j`` (clamped, 1 when both gains are zero).
    """

    window_s: float
    job_first: PairOutcome
    reference_first: PairOutcome
    job_gain_s: float
    reference_gain_s: float
    factor: float


def _low_period(high: RationalJob, low: RationalJob, settings: CorrectionSettings) -> Fraction | None:
    """Steady-state iteration period of the low-priority job (``None``: it starves)."""
    seen: dict[Fraction, tuple[int, Fraction]] = {}
    starts: list[Fraction] = []
    for k, it in enumerate(low_iterations(high, low)):
        if it.finish is None:
            return None
        phase = it.start % high.period
        if phase in seen:
            k0, s0 = seen[phase]
            return (it.start - s0) / (k - k0)
        seen[phase] = (k, it.start)
        starts.append(it.start)
        if k >= settings.max_iterations:
            break
    half = len(starts) // 2
    mean = (starts[-1] - starts[half]) / (len(starts) - 1 - half)
    return mean.limit_denominator(settings.max_denominator)


def _lcm(a: Fraction, b: Fraction) -> Fraction:
    return Fraction(math.lcm(a.numerator, b.numerator), math.gcd(a.denominator, b.denominator))


def _window(job: RationalJob, ref: RationalJob, settings: CorrectionSettings) -> Fraction:
    periods = [job.period, ref.period]
    periods += [
        p for p in (_low_period(job, ref, settings), _low_period(ref, job, settings)) if p is not None
    ]
    base = periods[0]
    for p in periods[1:]:
        base = _lcm(base, p)
    at_least = settings.min_iterations * max(periods)
    cap = max(settings.max_iterations * min(periods), at_least)
    window = base * math.ceil(at_least / base)
    return window if window <= cap else cap


def comparison_window(
    job: LinkJob, reference: LinkJob, *, settings: CorrectionSettings | None = None
) -> float:
    """The window ``L`` of the pairwise comparison (see the module docstring).

    Examples
    --------
    >>> comparison_window(LinkJob(compute_s=1, transfer_s=1), LinkJob(compute_s=2, transfer_s=2))
    24.0

    References
    ----------
    crux-spec §3.4 item 3 and A7.
    """
    cfg = settings or CorrectionSettings()
    return float(_window(rational_job(job, cfg), rational_job(reference, cfg), cfg))


def _factor(gain_job: Fraction, gain_ref: Fraction, settings: CorrectionSettings) -> float:
    if gain_job <= 0 and gain_ref <= 0:
        return 1.0
    if gain_ref <= 0:
        return settings.clamp_high
    if gain_job <= 0:
        return settings.clamp_low
    return min(max(float(gain_job / gain_ref), settings.clamp_low), settings.clamp_high)


def compare_pair(
    job: LinkJob,
    reference: LinkJob,
    *,
    window_s: float | None = None,
    settings: CorrectionSettings | None = None,
) -> PairComparison:
    """Run both priority orders of ``job`` and ``reference`` over ``[0, L]`` and derive ``k_j``.

    Parameters
    ----------
    job, reference
        The two jobs.
    window_s
        The window ``L``; default ``comparison_window(job, reference)``.
    settings
        Knobs (window rule, rationalisation, clamps).

    Examples
    --------
    Crux Example 1 (crux-spec A3): Job 2 against reference Job 1.

    >>> cmp = compare_pair(LinkJob(compute_s=1, transfer_s=1), LinkJob(compute_s=2, transfer_s=2))
    >>> cmp.window_s, cmp.job_gain_s, cmp.reference_gain_s, cmp.factor
    (24.0, 6.0, 4.0, 1.5)

    References
    ----------
    Crux §4.2 (Eq. 3 and the derivation below Fig. 12); crux-spec §3.3, §3.4, A3, A7, A8.
    """
    cfg = settings or CorrectionSettings()
    rj, rr = rational_job(job, cfg), rational_job(reference, cfg)
    if window_s is None:
        window = _window(rj, rr, cfg)
    else:
        check_nonneg(window_s, "window_s")
        window = Fraction(window_s).limit_denominator(cfg.max_denominator)
    zero = Fraction(0)
    job_first = exact_outcome(rj, rr, zero, window)
    ref_first = exact_outcome(rr, rj, zero, window)
    gain_job = job_first.high_link - ref_first.low_link
    gain_ref = ref_first.high_link - job_first.low_link
    return PairComparison(
        window_s=float(window),
        job_first=public_outcome(job_first, zero, window),
        reference_first=public_outcome(ref_first, zero, window),
        job_gain_s=float(gain_job),
        reference_gain_s=float(gain_ref),
        factor=_factor(gain_job, gain_ref, cfg),
    )


def correction_factor(
    job: LinkJob, reference: LinkJob, *, settings: CorrectionSettings | None = None
) -> float:
    """The correction factor ``k_j = dS_j / dS_r`` of ``job`` against ``reference``.

    Clamped to ``[1e-3, 1e3]`` (settings); 1 when neither order gains anything.

    Examples
    --------
    Crux Example 2 (crux-spec A8):

    >>> job1 = LinkJob(compute_s=4, transfer_s=1, overlap=0.5)
    >>> job2 = LinkJob(compute_s=2, transfer_s=3, overlap=0.5)
    >>> correction_factor(job2, job1), correction_factor(job1, job2)
    (2.0, 0.5)

    References
    ----------
    Crux §4.2 (Eq. 3); crux-spec §3.3 and §3.4 item 4.
    """
    return compare_pair(job, reference, settings=settings).factor


def correction_factors(
    jobs: Mapping[JobKey, LinkJob], reference: JobKey, *, settings: CorrectionSettings | None = None
) -> dict[JobKey, float]:
    """``k_j`` for every job against one reference job (``k_r = 1``).

    Examples
    --------
    >>> jobs = {1: LinkJob(compute_s=2, transfer_s=2), 2: LinkJob(compute_s=1, transfer_s=1)}
    >>> correction_factors(jobs, 1)
    {1: 1.0, 2: 1.5}

    References
    ----------
    Crux §4.2; crux-spec §3.3, §3.4 item 7 (every job is compared with the reference alone).
    """
    if reference not in jobs:
        raise InputError(f"reference job {reference!r} is not among the jobs", where="reference")
    ref = jobs[reference]
    return {
        key: 1.0 if key == reference else correction_factor(job, ref, settings=settings)
        for key, job in jobs.items()
    }
