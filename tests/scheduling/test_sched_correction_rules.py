"""The pairwise model's rules, each checked against an independent computation (Crux §4.2).

* idle compute: a GPU is busy only while it computes; waiting for its transfer (or for the link) is
  idle. Checked against a tick-by-tick simulation of the two jobs on one strict-priority link, written
  here from the model's statement, on jobs whose times are multiples of the tick (so the ticks are exact);
* the comparison window: the smallest multiple of every contended period that holds ``min_iterations``
  periods of the slowest (unless capped);
* the roles of ``compare_pair``: swapping the job and the reference swaps the gains and inverts ``k``.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from fractions import Fraction

from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.scheduling.correction import (
    CorrectionSettings,
    LinkJob,
    compare_pair,
    comparison_window,
    simulate_pair,
)
from commsched.scheduling.correction.link import rational_job
from commsched.scheduling.correction.pair import _low_period

TICK = Fraction(1, 8)

#: jobs whose compute, transfer and release times are multiples of TICK
tick_jobs = st.builds(
    LinkJob,
    compute_s=st.integers(0, 12).map(lambda v: v / 4),
    transfer_s=st.integers(1, 12).map(lambda v: v / 4),
    overlap=st.sampled_from([0.0, 0.5, 1.0]),
)


@dataclass
class _Job:
    compute: Fraction
    transfer: Fraction
    release_after: Fraction
    comp_left: Fraction = Fraction(0)
    xfer_left: Fraction = Fraction(0)
    release_at: Fraction = Fraction(0)
    released: bool = True
    busy: Fraction = Fraction(0)
    link: Fraction = Fraction(0)

    def done(self) -> bool:
        return self.comp_left == 0 and self.released and self.xfer_left == 0

    def start(self, t: Fraction) -> None:
        self.comp_left, self.xfer_left = self.compute, self.transfer
        self.release_at, self.released = t + self.release_after, False


def _ticked(high: LinkJob, low: LinkJob, end: Fraction) -> tuple[Fraction, Fraction, Fraction, Fraction]:
    """(high busy, low busy, high link, low link) in ``[0, end]``, tick by tick."""
    jobs = [
        _Job(
            compute=Fraction(j.compute_s),
            transfer=Fraction(j.transfer_s),
            release_after=Fraction(j.overlap) * Fraction(j.compute_s),
        )
        for j in (high, low)
    ]
    t = Fraction(0)
    while t < end:
        for j in jobs:
            if j.done():
                j.start(t)
            if not j.released and t >= j.release_at:
                j.released = True
            if j.comp_left > 0:  # busy only while computing
                j.busy += TICK
                j.comp_left -= TICK
        for j in jobs:  # strict priority: the first job with data pending takes the link
            if j.released and j.xfer_left > 0:
                j.link += TICK
                j.xfer_left -= TICK
                break
        t += TICK
    return jobs[0].busy, jobs[1].busy, jobs[0].link, jobs[1].link


@settings(max_examples=150, deadline=None)
@given(tick_jobs, tick_jobs, st.integers(1, 160))
def test_busy_and_idle_time_match_a_tick_by_tick_run(high: LinkJob, low: LinkJob, ticks: int) -> None:
    end = ticks * TICK
    out = simulate_pair(high, low, end_s=float(end))
    assert (out.high_busy_s, out.low_busy_s, out.high_link_s, out.low_link_s) == tuple(
        float(x) for x in _ticked(high, low, end)
    )


def test_a_job_waiting_for_its_transfer_idles() -> None:
    """Compute 1 s, transfer 3 s released at once: 1 s busy, 2 s idle per 3 s iteration, high or low."""
    job = LinkJob(compute_s=1.0, transfer_s=3.0, overlap=0.0)
    other = LinkJob(compute_s=6.0, transfer_s=0.0)  # never uses the link
    out = simulate_pair(job, other, end_s=12.0)
    assert (out.high_busy_s, out.high_link_s) == (4.0, 12.0)
    out = simulate_pair(other, job, end_s=12.0)
    assert (out.low_busy_s, out.low_link_s, out.high_busy_s) == (4.0, 12.0, 12.0)


periodic_jobs = st.builds(
    LinkJob,
    compute_s=st.integers(1, 8).map(lambda v: v / 2),
    transfer_s=st.integers(1, 8).map(lambda v: v / 2),
    overlap=st.sampled_from([0.0, 0.5, 1.0]),
)


@settings(max_examples=120, deadline=None)
@given(periodic_jobs, periodic_jobs)
def test_window_is_the_smallest_multiple_of_the_contended_periods(a: LinkJob, b: LinkJob) -> None:
    cfg = CorrectionSettings()
    window = Fraction(comparison_window(a, b, settings=cfg)).limit_denominator(cfg.max_denominator)
    ra, rb = rational_job(a, cfg), rational_job(b, cfg)
    # the contended periods: each job's standalone period (when first), its period when second
    periods = [ra.period, rb.period]
    periods += [p for p in (_low_period(ra, rb, cfg), _low_period(rb, ra, cfg)) if p is not None]
    at_least = cfg.min_iterations * max(periods)
    cap = max(cfg.max_iterations * min(periods), at_least)
    assert window >= at_least
    if window == cap and any(window % p for p in periods):
        return  # capped: an approximation by design (documented)
    for p in periods:
        assert window % p == 0, (window, p)
    # the smallest such multiple: one period of the lcm less would hold fewer than min_iterations
    lcm = periods[0]
    for p in periods[1:]:
        lcm = Fraction(math.lcm(lcm.numerator, p.numerator), math.gcd(lcm.denominator, p.denominator))
    assert window - lcm < at_least


def test_example1_window_counts_the_low_job_period() -> None:
    """Example 1: standalone periods 4 s and 2 s, but Job 1 second repeats every 6 s: L = 24, not 4."""
    job1, job2 = LinkJob(compute_s=2.0, transfer_s=2.0), LinkJob(compute_s=1.0, transfer_s=1.0)
    assert comparison_window(job2, job1) == comparison_window(job1, job2) == 24.0
    # Job 2 first gives Job 1 a 6 s period: 4 iterations of 2 s compute in 24 s
    assert simulate_pair(job2, job1, start_s=24.0, end_s=48.0).low_busy_s == 8.0


@settings(max_examples=80, deadline=None)
@given(periodic_jobs, periodic_jobs)
def test_swapping_job_and_reference_swaps_the_gains(a: LinkJob, b: LinkJob) -> None:
    ab, ba = compare_pair(a, b), compare_pair(b, a)
    assert ab.window_s == ba.window_s
    assert (ab.job_gain_s, ab.reference_gain_s) == (ba.reference_gain_s, ba.job_gain_s)
    assert ab.job_first == ba.reference_first and ab.reference_first == ba.job_first
    if ab.job_gain_s > 0 and ab.reference_gain_s > 0 and 1e-3 < ab.factor < 1e3:
        assert abs(ab.factor * ba.factor - 1) < 1e-12
    # the gains are what the outcomes say: link time first minus link time second
    assert ab.job_gain_s == ab.job_first.high_link_s - ab.reference_first.low_link_s
    assert ab.reference_gain_s == ab.reference_first.high_link_s - ab.job_first.low_link_s


def test_a_job_against_itself_is_indifferent() -> None:
    """Identical jobs gain the same from going first, so k = 1 (and the window is its own)."""
    job = LinkJob(compute_s=1.0, transfer_s=1.5, overlap=0.5)
    cmp = compare_pair(job, job)
    assert cmp.factor == 1.0
    assert cmp.job_gain_s == cmp.reference_gain_s > 0
    assert cmp.window_s == comparison_window(job, job) >= 4 * job.standalone_period_s
