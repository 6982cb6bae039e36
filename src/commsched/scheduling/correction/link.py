"""The exact single-link model behind Crux's correction factors (Crux §4.2, crux-spec §3.4 item 2).

Two jobs (``LinkJob``) share one link under preemptive strict priority; ``simulate_pair`` computes,
event by event and with ``fractions.Fraction``, the link and GPU time each gets in a window. The model
and its assumptions are described in ``commsched.scheduling.correction``.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.2 (Figs. 11 and 12); crux-spec §3.4 and A1-A9.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from dataclasses import dataclass
from fractions import Fraction

from commsched.errors import InputError

__all__ = [
    "CorrectionSettings",
    "LinkJob",
    "PairOutcome",
    "RationalJob",
    "check_nonneg",
    "exact_outcome",
    "low_iterations",
    "public_outcome",
    "rational_job",
    "simulate_pair",
]


def check_nonneg(value: float, where: str) -> None:
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
        check_nonneg(self.compute_s, "LinkJob.compute_s")
        check_nonneg(self.transfer_s, "LinkJob.transfer_s")
        check_nonneg(self.overlap, "LinkJob.overlap")
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


@dataclass(frozen=True, slots=True)
class RationalJob:
    compute: Fraction
    transfer: Fraction
    release: Fraction

    @property
    def period(self) -> Fraction:
        return max(self.compute, self.release + self.transfer)


def rational_job(job: LinkJob, settings: CorrectionSettings) -> RationalJob:
    tick = Fraction(1, settings.max_denominator)

    def conv(x: float) -> Fraction:
        # a positive time never rounds to 0 (a zero period would make the comparison undefined)
        f = Fraction(x).limit_denominator(settings.max_denominator)
        return max(f, tick) if x > 0 else f

    compute = conv(job.compute_s)
    release = (Fraction(job.overlap).limit_denominator(settings.max_denominator)) * compute
    return RationalJob(compute=compute, transfer=conv(job.transfer_s), release=release)


def _busy_before(job: RationalJob, x: Fraction) -> Fraction:
    """Link time the (undisturbed, high-priority) job uses in ``[0, x]``."""
    period = job.period
    n = math.floor(x / period)
    y = x - n * period
    return n * job.transfer + min(max(y - job.release, Fraction(0)), job.transfer)


def _compute_before(job: RationalJob, x: Fraction) -> Fraction:
    """Compute time of the (undisturbed, high-priority) job in ``[0, x]``."""
    period = job.period
    n = math.floor(x / period)
    return n * job.compute + min(x - n * period, job.compute)


def _idle_inverse(high: RationalJob, v: Fraction) -> Fraction | None:
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


def low_iterations(high: RationalJob, low: RationalJob) -> Iterator[_LowIteration]:
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


def exact_outcome(high: RationalJob, low: RationalJob, start: Fraction, end: Fraction) -> _Exact:
    low_link = Fraction(0)
    low_busy = Fraction(0)
    for it in low_iterations(high, low):
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


def public_outcome(exact: _Exact, start: Fraction, end: Fraction) -> PairOutcome:
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
    check_nonneg(start_s, "start_s")
    check_nonneg(end_s, "end_s")
    if end_s < start_s:
        raise InputError(f"[{start_s}, {end_s}]", where="window", expected="start_s <= end_s")
    start = Fraction(start_s).limit_denominator(cfg.max_denominator)
    end = Fraction(end_s).limit_denominator(cfg.max_denominator)
    return public_outcome(
        exact_outcome(rational_job(high, cfg), rational_job(low, cfg), start, end), start, end
    )
