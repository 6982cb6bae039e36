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

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.2 (Eq. 3, Figs. 11 and 12) and §7.1; crux-spec §3.2-§3.5 and A1-A9.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from fractions import Fraction
from typing import TypeVar

from commsched.errors import InputError

__all__ = [
    "CorrectionSettings",
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

JobKey = TypeVar("JobKey", int, str)


def _check_nonneg(value: float, where: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value < 0:
        raise InputError(f"{value!r}", where=where, expected="a finite number >= 0")


@dataclass(frozen=True, slots=True, kw_only=True)
class LinkJob:
    """A job as the single-link model sees it.

    Attributes
    ----------
    compute_s
        Compute time per iteration ``c``.
    transfer_s
        Transfer time per iteration at the full link rate ``t`` (bottleneck-link time).
    overlap
        Fraction ``o`` of the compute after which the transfer is released (1: no overlap).

    Examples
    --------
    >>> LinkJob(compute_s=2.0, transfer_s=2.0).standalone_period_s
    4.0
    >>> LinkJob(compute_s=4.0, transfer_s=1.0, overlap=0.5).standalone_period_s
    4.0
    """

    compute_s: float
    transfer_s: float
    overlap: float = 1.0

    def __post_init__(self) -> None:
        _check_nonneg(self.compute_s, "LinkJob.compute_s")
        _check_nonneg(self.transfer_s, "LinkJob.transfer_s")
        _check_nonneg(self.overlap, "LinkJob.overlap")
        if self.overlap > 1:
            raise InputError(f"{self.overlap!r}", where="LinkJob.overlap", expected="a fraction in [0, 1]")
        if self.compute_s + self.transfer_s <= 0:
            raise InputError(
                "zero compute and zero transfer", where="LinkJob", expected="a positive iteration"
            )

    @property
    def standalone_period_s(self) -> float:
        """Iteration time alone on the link: ``max(c, o c + t)``."""
        return max(self.compute_s, self.overlap * self.compute_s + self.transfer_s)


@dataclass(frozen=True, slots=True, kw_only=True)
class CorrectionSettings:
    """Knobs of the pairwise comparison (defaults as proposed in crux-spec §3.4).

    Attributes
    ----------
    min_iterations
        The window holds at least this many contended periods of the slower job.
    max_iterations
        Cap on the window in periods of the faster job, and on the iterations simulated to find a
        low-priority job's exact cycle.
    max_denominator
        Times in seconds are rationalised to fractions with at most this denominator.
    clamp_low, clamp_high
        ``k`` is clamped to ``[clamp_low, clamp_high]``.
    """

    min_iterations: int = 4
    max_iterations: int = 256
    max_denominator: int = 1_000_000
    clamp_low: float = 1e-3
    clamp_high: float = 1e3

    def __post_init__(self) -> None:
        if not 1 <= self.min_iterations <= self.max_iterations:
            raise InputError(
                f"min_iterations={self.min_iterations}, max_iterations={self.max_iterations}",
                where="CorrectionSettings",
                expected="1 <= min_iterations <= max_iterations",
            )
        if self.max_denominator < 1:
            raise InputError(
                f"{self.max_denominator}",
                where="CorrectionSettings.max_denominator",
                expected="an integer >= 1",
            )
        if not 0 < self.clamp_low <= 1 <= self.clamp_high:
            raise InputError(
                f"[{self.clamp_low}, {self.clamp_high}]",
                where="CorrectionSettings.clamp",
                expected="0 < clamp_low <= 1 <= clamp_high",
            )


@dataclass(frozen=True, slots=True, kw_only=True)
class PairOutcome:
    """What each of two jobs gets on the shared link in a window ``[start_s, end_s]``.

    ``high`` is the prioritised job, ``low`` the other; ``*_link_s`` is the time the link carries the
    job's data (``S``), ``*_busy_s`` its GPUs' compute time, both inside the window.
    """

    start_s: float
    end_s: float
    high_link_s: float
    low_link_s: float
    high_busy_s: float
    low_busy_s: float


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


@dataclass(frozen=True, slots=True)
class _Rational:
    compute: Fraction
    transfer: Fraction
    release: Fraction

    @property
    def period(self) -> Fraction:
        return max(self.compute, self.release + self.transfer)


def _rational(job: LinkJob, settings: CorrectionSettings) -> _Rational:
    tick = Fraction(1, settings.max_denominator)

    def conv(x: float) -> Fraction:
        # a positive time never rounds to 0 (a zero period would make the comparison undefined)
        f = Fraction(x).limit_denominator(settings.max_denominator)
        return max(f, tick) if x > 0 else f

    compute = conv(job.compute_s)
    release = (Fraction(job.overlap).limit_denominator(settings.max_denominator)) * compute
    return _Rational(compute=compute, transfer=conv(job.transfer_s), release=release)


def _busy_before(job: _Rational, x: Fraction) -> Fraction:
    """Link time the (undisturbed, high-priority) job uses in ``[0, x]``."""
    period = job.period
    n = math.floor(x / period)
    y = x - n * period
    return n * job.transfer + min(max(y - job.release, Fraction(0)), job.transfer)


def _compute_before(job: _Rational, x: Fraction) -> Fraction:
    """Compute time of the (undisturbed, high-priority) job in ``[0, x]``."""
    period = job.period
    n = math.floor(x / period)
    return n * job.compute + min(x - n * period, job.compute)


def _idle_inverse(high: _Rational, v: Fraction) -> Fraction | None:
    """Smallest ``x`` with ``x - busy_before(x) >= v``; ``None`` if the link is never idle."""
    if v <= 0:
        return Fraction(0)
    gap = high.period - high.transfer
    if gap <= 0:
        return None
    n = math.ceil(v / gap) - 1
    rest = v - n * gap
    if rest <= high.release:
        return n * high.period + rest
    return n * high.period + high.transfer + rest


@dataclass(frozen=True, slots=True)
class _LowIteration:
    start: Fraction
    release: Fraction
    finish: Fraction | None  # transfer end; None = never (the high job saturates the link)


def _low_iterations(high: _Rational, low: _Rational) -> Iterator[_LowIteration]:
    """The low-priority job's iterations from the aligned start, in order (infinite generator)."""
    start = Fraction(0)
    while True:
        release = start + low.release
        if low.transfer == 0:
            finish: Fraction | None = release
        else:
            finish = _idle_inverse(high, release - _busy_before(high, release) + low.transfer)
        yield _LowIteration(start=start, release=release, finish=finish)
        if finish is None:
            return
        start = max(start + low.compute, finish)


def _overlap(a: Fraction, b: Fraction, start: Fraction, end: Fraction) -> Fraction:
    return max(Fraction(0), min(b, end) - max(a, start))


@dataclass(frozen=True, slots=True)
class _Exact:
    high_link: Fraction
    low_link: Fraction
    high_busy: Fraction
    low_busy: Fraction


def _exact_outcome(high: _Rational, low: _Rational, start: Fraction, end: Fraction) -> _Exact:
    low_link = Fraction(0)
    low_busy = Fraction(0)
    for it in _low_iterations(high, low):
        if it.start >= end:
            break
        low_busy += _overlap(it.start, it.start + low.compute, start, end)
        a = max(it.release, start)
        b = end if it.finish is None else min(it.finish, end)
        if b > a:  # the low job sends whenever the link is idle in [release, finish]
            low_link += (b - _busy_before(high, b)) - (a - _busy_before(high, a))
    return _Exact(
        high_link=_busy_before(high, end) - _busy_before(high, start),
        low_link=low_link,
        high_busy=_compute_before(high, end) - _compute_before(high, start),
        low_busy=low_busy,
    )


def _public(exact: _Exact, start: Fraction, end: Fraction) -> PairOutcome:
    return PairOutcome(
        start_s=float(start),
        end_s=float(end),
        high_link_s=float(exact.high_link),
        low_link_s=float(exact.low_link),
        high_busy_s=float(exact.high_busy),
        low_busy_s=float(exact.low_busy),
    )


def simulate_pair(
    high: LinkJob,
    low: LinkJob,
    *,
    end_s: float,
    start_s: float = 0.0,
    settings: CorrectionSettings | None = None,
) -> PairOutcome:
    """Link and GPU time of two jobs on one strict-priority link in ``[start_s, end_s]``.

    Both jobs start at time 0; ``high`` has priority. Exact (event by event, rational arithmetic).

    Examples
    --------
    Crux Example 1 with Job 1 first, a 12 s steady-state window (crux-spec A1, A2):

    >>> job1, job2 = LinkJob(compute_s=2, transfer_s=2), LinkJob(compute_s=1, transfer_s=1)
    >>> out = simulate_pair(job1, job2, start_s=120, end_s=132)
    >>> out.high_link_s, out.low_link_s, out.high_busy_s, out.low_busy_s
    (6.0, 3.0, 6.0, 3.0)

    References
    ----------
    Crux §4.2, Figs. 11 and 12; crux-spec §3.4 item 2 and §7 (A1, A2, A6).
    """
    cfg = settings or CorrectionSettings()
    _check_nonneg(start_s, "start_s")
    _check_nonneg(end_s, "end_s")
    if end_s < start_s:
        raise InputError(f"[{start_s}, {end_s}]", where="window", expected="start_s <= end_s")
    start = Fraction(start_s).limit_denominator(cfg.max_denominator)
    end = Fraction(end_s).limit_denominator(cfg.max_denominator)
    return _public(_exact_outcome(_rational(high, cfg), _rational(low, cfg), start, end), start, end)


def _low_period(high: _Rational, low: _Rational, settings: CorrectionSettings) -> Fraction | None:
    """Steady-state iteration period of the low-priority job (``None``: it starves)."""
    seen: dict[Fraction, tuple[int, Fraction]] = {}
    starts: list[Fraction] = []
    for k, it in enumerate(_low_iterations(high, low)):
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


def _window(job: _Rational, ref: _Rational, settings: CorrectionSettings) -> Fraction:
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
    return float(_window(_rational(job, cfg), _rational(reference, cfg), cfg))


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
    rj, rr = _rational(job, cfg), _rational(reference, cfg)
    if window_s is None:
        window = _window(rj, rr, cfg)
    else:
        _check_nonneg(window_s, "window_s")
        window = Fraction(window_s).limit_denominator(cfg.max_denominator)
    zero = Fraction(0)
    job_first = _exact_outcome(rj, rr, zero, window)
    ref_first = _exact_outcome(rr, rj, zero, window)
    gain_job = job_first.high_link - ref_first.low_link
    gain_ref = ref_first.high_link - job_first.low_link
    return PairComparison(
        window_s=float(window),
        job_first=_public(job_first, zero, window),
        reference_first=_public(ref_first, zero, window),
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
        _check_nonneg(rate, f"injected_rate_bytes_per_s[{key!r}]")
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
        _check_nonneg(intensity[key], f"intensity[{key!r}]")
        _check_nonneg(factor[key], f"factor[{key!r}]")
    return tuple(sorted(intensity, key=lambda key: (-factor[key] * intensity[key], -intensity[key], key)))
