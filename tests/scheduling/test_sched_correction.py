"""Correction factor and priority assignment (Crux §4.2; crux-spec §3, acceptance facts A1-A9)."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import InputError
from commsched.scheduling.correction import (
    CorrectionSettings,
    LinkJob,
    compare_pair,
    comparison_window,
    correction_factor,
    correction_factors,
    rank_jobs,
    reference_job,
    simulate_pair,
)

# Example 1 (Fig. 11): no overlap, GPUs 10 and 10
EX1_JOB1 = LinkJob(compute_s=2.0, transfer_s=2.0, overlap=1.0)
EX1_JOB2 = LinkJob(compute_s=1.0, transfer_s=1.0, overlap=1.0)
# Example 2 (Fig. 12): o = 0.5, GPUs 2 and 12
EX2_JOB1 = LinkJob(compute_s=4.0, transfer_s=1.0, overlap=0.5)
EX2_JOB2 = LinkJob(compute_s=2.0, transfer_s=3.0, overlap=0.5)


def utilisation(high_busy: float, low_busy: float, g_high: int, g_low: int, window: float) -> float:
    return (g_high * high_busy + g_low * low_busy) / ((g_high + g_low) * window)


# ---- A1, A2, A4 ------------------------------------------------------------------------------------


@pytest.mark.parametrize("start", [120.0, 240.0, 1200.0])
def test_a1_example1_steady_state_utilisation(start: float) -> None:
    one_first = simulate_pair(EX1_JOB1, EX1_JOB2, start_s=start, end_s=start + 12)
    two_first = simulate_pair(EX1_JOB2, EX1_JOB1, start_s=start, end_s=start + 12)
    assert (one_first.high_busy_s, one_first.low_busy_s) == (6.0, 3.0)
    assert (two_first.low_busy_s, two_first.high_busy_s) == (4.0, 6.0)
    assert utilisation(one_first.high_busy_s, one_first.low_busy_s, 10, 10, 12) == 0.375
    assert utilisation(two_first.high_busy_s, two_first.low_busy_s, 10, 10, 12) == pytest.approx(5 / 12)


def test_a1_cold_start_trap() -> None:
    one_first = simulate_pair(EX1_JOB1, EX1_JOB2, end_s=12)
    two_first = simulate_pair(EX1_JOB2, EX1_JOB1, end_s=12)
    assert utilisation(one_first.high_busy_s, one_first.low_busy_s, 10, 10, 12) == pytest.approx(5 / 12)
    assert utilisation(two_first.high_busy_s, two_first.low_busy_s, 10, 10, 12) == pytest.approx(11 / 24)


@pytest.mark.parametrize("start", [0.0, 120.0])
def test_a2_example1_link_time(start: float) -> None:
    one_first = simulate_pair(EX1_JOB1, EX1_JOB2, start_s=start, end_s=start + 12)
    two_first = simulate_pair(EX1_JOB2, EX1_JOB1, start_s=start, end_s=start + 12)
    assert (one_first.high_link_s, one_first.low_link_s) == (6.0, 3.0)  # (S_1, S_2)
    assert (two_first.low_link_s, two_first.high_link_s) == (4.0, 6.0)


def test_a4_theorem1_on_example1() -> None:
    # F_T = sum I_j S_j equals U_T = sum W_j N'_j in the steady window (I = 5 Gflop/s, W = 10, 5 Gflop)
    one_first = simulate_pair(EX1_JOB1, EX1_JOB2, start_s=120, end_s=132)
    assert 5 * one_first.high_link_s + 5 * one_first.low_link_s == 45.0
    assert 10 * one_first.high_busy_s / 2 + 5 * one_first.low_busy_s / 1 == 45.0


# ---- A3, A7 ---------------------------------------------------------------------------------------


def test_a3_example1_correction_factor_and_ranking() -> None:
    cmp = compare_pair(EX1_JOB2, EX1_JOB1)
    assert cmp.window_s % 12 == 0
    assert cmp.job_gain_s / cmp.reference_gain_s == 1.5
    assert correction_factor(EX1_JOB2, EX1_JOB1) == 1.5
    k = correction_factors({1: EX1_JOB1, 2: EX1_JOB2}, reference=1)
    assert k == {1: 1.0, 2: 1.5}
    intensity = {1: 5.0, 2: 5.0}
    assert {j: k[j] * intensity[j] for j in k} == {1: 5.0, 2: 7.5}
    assert rank_jobs(intensity, k) == (2, 1)


def test_a3_gains_in_a_12s_window() -> None:
    cmp = compare_pair(EX1_JOB2, EX1_JOB1, window_s=12)
    assert (cmp.job_gain_s, cmp.reference_gain_s) == (3.0, 2.0)


@pytest.mark.parametrize(
    ("window", "ratio"),
    [(4, 1.0), (8, 1.0), (12, 1.5), (16, 4 / 3), (24, 1.5), (48, 1.5), (120, 1.5)],
)
def test_a7_window_sensitivity(window: float, ratio: float) -> None:
    cmp = compare_pair(EX1_JOB2, EX1_JOB1, window_s=window)
    assert cmp.job_gain_s / cmp.reference_gain_s == pytest.approx(ratio)


# ---- A5, A6, A8, A9 -----------------------------------------------------------------------------


def test_a5_example2_inputs() -> None:
    assert EX2_JOB1.standalone_period_s == EX2_JOB2.standalone_period_s == 4.0
    alone = simulate_pair(EX2_JOB2, LinkJob(compute_s=1.0, transfer_s=0.0), end_s=4)
    assert 4 - alone.high_busy_s == 2.0  # standalone Job 2 idles 2 s per iteration


@pytest.mark.parametrize("window", [8.0, 12.0, 16.0, 40.0, 400.0])
def test_a8_example2_gains_and_factors(window: float) -> None:
    cmp = compare_pair(EX2_JOB2, EX2_JOB1, window_s=window)
    assert (cmp.reference_gain_s, cmp.job_gain_s) == (1.0, 2.0)  # dS_1 = 1, dS_2 = 2
    assert cmp.factor == 2.0
    assert compare_pair(EX2_JOB1, EX2_JOB2, window_s=window).factor == 0.5


def test_a8_example2_rankings_agree_for_both_references() -> None:
    intensity = {1: 10.0, 2: 10.0}
    jobs = {1: EX2_JOB1, 2: EX2_JOB2}
    with_ref1 = correction_factors(jobs, 1)
    with_ref2 = correction_factors(jobs, 2)
    assert with_ref1 == {1: 1.0, 2: 2.0} and with_ref2 == {1: 0.5, 2: 1.0}
    assert rank_jobs(intensity, with_ref1) == rank_jobs(intensity, with_ref2) == (2, 1)


def test_a9_example2_long_run_is_indifferent() -> None:
    one_first = simulate_pair(EX2_JOB1, EX2_JOB2, start_s=400, end_s=800)
    two_first = simulate_pair(EX2_JOB2, EX2_JOB1, start_s=400, end_s=800)
    u1 = utilisation(one_first.high_busy_s, one_first.low_busy_s, 2, 12, 400)
    u2 = utilisation(two_first.high_busy_s, two_first.low_busy_s, 12, 2, 400)
    assert u1 == u2 == pytest.approx(8 / 14)


def test_a6_example2_direction() -> None:
    for start in (0.0, 4.0, 8.0, 12.0):
        one_first = simulate_pair(EX2_JOB1, EX2_JOB2, start_s=start, end_s=start + 12)
        two_first = simulate_pair(EX2_JOB2, EX2_JOB1, start_s=start, end_s=start + 12)
        assert two_first.high_busy_s >= one_first.low_busy_s  # Job 2 first never worse for Job 2
    settled = simulate_pair(EX2_JOB2, EX2_JOB1, start_s=40, end_s=80)
    assert settled.low_busy_s == 40.0  # Job 1 loses nothing once phases settle
    first_three = simulate_pair(EX2_JOB2, EX2_JOB1, end_s=12)
    assert 12 - first_three.high_busy_s == 6.0  # Job 2 first: Job 2 idles 6 s


# ---- properties and degenerate cases ----------------------------------------------------------------

jobs = st.builds(
    LinkJob,
    compute_s=st.integers(0, 8).map(lambda v: v / 2),
    transfer_s=st.integers(1, 8).map(lambda v: v / 2),
    overlap=st.sampled_from([0.0, 0.25, 0.5, 1.0]),
)


@settings(max_examples=60, deadline=None)
@given(jobs, jobs)
def test_pair_invariants(a: LinkJob, b: LinkJob) -> None:
    cmp = compare_pair(a, b)
    window = cmp.window_s
    assert window >= 4 * max(a.standalone_period_s, b.standalone_period_s) - 1e-9
    for out in (cmp.job_first, cmp.reference_first):
        assert out.high_link_s + out.low_link_s <= window + 1e-9  # one link, one job at a time
        assert 0 <= out.low_busy_s <= window and 0 <= out.high_busy_s <= window
    # being first never hurts a job
    assert cmp.job_gain_s >= 0 and cmp.reference_gain_s >= 0
    assert 1e-3 <= cmp.factor <= 1e3


def test_starved_low_job_and_clamps() -> None:
    hog = LinkJob(compute_s=1.0, transfer_s=2.0, overlap=0.0)  # transmits all the time
    small = LinkJob(compute_s=1.0, transfer_s=1.0)
    starved = simulate_pair(hog, small, end_s=10)
    assert starved.low_link_s == 0.0 and starved.high_link_s == 10.0
    cmp = compare_pair(small, hog)
    assert cmp.reference_first.low_link_s == 0.0  # the small job starves behind the hog
    assert cmp.job_gain_s == cmp.job_first.high_link_s > 0
    assert 1e-3 <= cmp.factor <= 1e3


def test_no_transfer_means_factor_one() -> None:
    silent = LinkJob(compute_s=1.0, transfer_s=0.0)
    assert correction_factor(silent, silent) == 1.0
    assert correction_factor(silent, EX1_JOB1) == 1.0  # nobody gains anything: k = 1


# a delay-insensitive job (transfer released at once, hidden behind 4 s of compute) against a
# delay-sensitive reference: being first gains the job nothing, the reference loses 4 s of link time
PATIENT = LinkJob(compute_s=4.0, transfer_s=1.0, overlap=0.0)
EAGER = LinkJob(compute_s=0.5, transfer_s=1.0, overlap=1.0)


def test_degenerate_gains_are_clamped() -> None:
    cmp = compare_pair(PATIENT, EAGER)
    assert (cmp.job_gain_s, cmp.reference_gain_s) == (0.0, 4.0)
    assert cmp.factor == 1e-3
    assert correction_factor(EAGER, PATIENT) == 1e3


def test_clamp_settings_apply() -> None:
    cfg = CorrectionSettings(clamp_low=0.1, clamp_high=10.0)
    assert correction_factor(PATIENT, EAGER, settings=cfg) == 0.1
    assert correction_factor(EAGER, PATIENT, settings=cfg) == 10.0


def test_non_commensurate_periods_use_a_capped_window() -> None:
    a = LinkJob(compute_s=1.0, transfer_s=0.7071067811865476)
    b = LinkJob(compute_s=1.7320508075688772, transfer_s=0.5)
    cfg = CorrectionSettings(max_iterations=64)
    window = comparison_window(a, b, settings=cfg)
    assert 4 * 2.2320508075688772 <= window <= 64 * 1.7071067811865476 + 1e-9
    assert 1e-3 <= correction_factor(a, b, settings=cfg) <= 1e3


def test_reference_job_and_ranking_ties() -> None:
    assert reference_job({3: 2.0, 1: 2.0, 2: 1.0}) == 1
    assert reference_job({"b": 5.0, "a": 1.0}) == "b"
    # equal P: higher I first, then the id
    assert rank_jobs({1: 2.0, 2: 4.0, 3: 4.0}, {1: 2.0, 2: 1.0, 3: 1.0}) == (2, 3, 1)


def test_bad_inputs() -> None:
    with pytest.raises(InputError, match="overlap"):
        LinkJob(compute_s=1.0, transfer_s=1.0, overlap=1.5)
    with pytest.raises(InputError, match="compute_s"):
        LinkJob(compute_s=-1.0, transfer_s=1.0)
    with pytest.raises(InputError, match="positive iteration"):
        LinkJob(compute_s=0.0, transfer_s=0.0)
    with pytest.raises(InputError, match="no jobs"):
        reference_job({})
    with pytest.raises(InputError, match="reference"):
        correction_factors({1: EX1_JOB1}, 2)
    with pytest.raises(InputError, match="one factor per job"):
        rank_jobs({1: 1.0}, {2: 1.0})
    with pytest.raises(InputError, match="start_s <= end_s"):
        simulate_pair(EX1_JOB1, EX1_JOB2, start_s=5, end_s=1)
    with pytest.raises(InputError, match="min_iterations"):
        CorrectionSettings(min_iterations=10, max_iterations=5)
