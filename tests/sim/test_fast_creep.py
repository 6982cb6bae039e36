"""A starved job that creeps through one step is moved on through it by the fast mode, and checked.

Two class-0 jobs with unrelated iteration times share one link with a class-1 job (``lo``) that moves
its 60 GB only in the rare moments when both class-0 jobs compute at once: its one step lasts about
17,000 s, over 14,000 iterations of the others. ``lo`` completes no iteration for hours, so no window of
the fast mode sees it *agree*; before creep was measured, the component stayed in detail for as long as
``lo`` ran. Now its progress through the step is measured over two windows (the signatures' ``step``),
and the stretch moves it on at that rate, with the bytes it carries. Expected values come from exact
mode, run here.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import cache

import numpy as np

from commsched.sim.fast.steady import MeasuredRates, Signature, measured_rates
from commsched.sim.results.records import Mode, SimResult
from commsched.topology.builders import single_link

from .helpers import job, run, simulation

TOPO = single_link(capacity_bps=8e9)
JOBS = [
    job("a", compute_s=0.05, comm_bytes=0.6e9, gpus=8, priority=0, iterations=20000),
    job("b", compute_s=0.071, comm_bytes=0.77e9, gpus=8, priority=0, iterations=16000),
    job("lo", compute_s=0.05, comm_bytes=60e9, gpus=8, priority=1, iterations=1),
]


@cache
def _runs() -> tuple[SimResult, SimResult]:
    return run(TOPO, JOBS, horizon_s=1e6, mode=Mode.EXACT), run(TOPO, JOBS, horizon_s=1e6, mode=Mode.FAST)


def test_creeping_job_ends_where_exact_mode_ends_it() -> None:
    exact, fast = _runs()
    assert all(j.finished for j in exact.jobs) and all(j.finished for j in fast.jobs)
    for f, e in zip(fast.jobs, exact.jobs, strict=True):
        assert f.iterations == e.iterations
        assert abs(f.jct_s - e.jct_s) / e.jct_s < 0.005, (f.id, f.jct_s, e.jct_s)
    # the link carried the same bytes: the creep's bytes are credited once, neither lost nor doubled
    np.testing.assert_allclose(fast.link_bytes.sum(), exact.link_bytes.sum(), rtol=1e-6)
    assert abs(fast.gpu_utilization - exact.gpu_utilization) < 0.002


def test_creep_is_skipped_and_checked() -> None:
    """While ``lo`` creeps (its first 17,000 s), stretches are taken and checked by the detail after them."""
    exact, fast = _runs()
    lo = next(j for j in exact.jobs if j.id == "lo")
    assert lo.jct_s > 15_000  # the case is what it says: lo is starved for hours
    assert fast.fast_checks >= 5
    # without creep, lo's whole run stays in detail (a, b and lo over 17,000 s of 24,400 s: 0.22 of the
    # job-time extrapolated)
    assert fast.extrapolated_job_fraction > 0.4, fast.extrapolated_job_fraction


def _sig(t: float, step: float, done: float) -> Signature:
    z = np.zeros(2)
    return Signature(
        t=t,
        phase=z,
        step=np.array([step, -1.0]),
        done=np.array([0.0, done]),
        start=np.array([0.0, t]),
        busy=z,
        last_end=z,
        link_bytes=z,
        link_iw_bytes=z,
    )


def test_creep_must_agree_and_stay_in_one_step() -> None:
    """Job 0 creeps through step 2 while job 1 iterates at 1/s; signatures every 2 s over 20 s."""
    starved = np.array([5.0, 5.0])

    def rates(step_of: Callable[[float], float]) -> MeasuredRates | None:
        hist = [_sig(float(t), step_of(float(t)), float(t)) for t in range(0, 20, 2)]
        now = _sig(20.0, step_of(20.0), 20.0)
        return measured_rates(hist, now, min_iterations=1, tolerance=0.02, starved=starved)

    steady = rates(lambda t: 2.0 + 0.004 * t)
    assert steady is not None and steady.creeping.tolist() == [True, False]
    assert steady.window_s == 20.0 and abs(steady.creep[0] - 0.004) < 1e-12
    # twice as fast from t = 10 s: no pair of windows across the change agrees; the latest 10 s do
    faster = rates(lambda t: 2.0 + (0.004 * t if t <= 10 else 0.04 + 0.008 * (t - 10)))
    assert faster is not None and faster.window_s == 10.0 and abs(faster.creep[0] - 0.008) < 1e-12
    # it crosses into step 3 at t = 15 s: the windows that qualify lie after the crossing
    crossed = rates(lambda t: 2.7 + 0.02 * t)
    assert crossed is not None and crossed.window_s <= 20.0 - 15.0
    # not moving at all over windows of 10 s, twice its 5-s bound: stalled, rate 0
    still = rates(lambda t: 2.5)
    assert still is not None and still.creeping.tolist() == [True, False] and still.creep[0] == 0.0


def test_an_arrival_inside_a_creep_stretch_takes_back_what_is_not_due() -> None:
    """A class-0 job arrives at 5,000 s on the same link, inside a stretch that moves ``lo`` on: the
    component is caught up to the clock (``lo`` keeps the progress its creep gives it up to then), and
    every job still ends where exact mode ends it, the link carrying the same bytes."""
    late = job("late", compute_s=0.05, comm_bytes=0.5e9, gpus=8, priority=0, iterations=300, arrival_s=5000.0)
    jobs = [*JOBS, late]
    exact = run(TOPO, jobs, horizon_s=1e6, mode=Mode.EXACT)
    sim = simulation(TOPO, jobs, horizon_s=1e6, mode=Mode.FAST)
    fast = sim.run()
    assert sim.fast_catch_ups >= 1
    for f, e in zip(fast.jobs, exact.jobs, strict=True):
        assert f.iterations == e.iterations
        assert abs(f.jct_s - e.jct_s) / e.jct_s < 0.01, (f.id, f.jct_s, e.jct_s)
    np.testing.assert_allclose(fast.link_bytes.sum(), exact.link_bytes.sum(), rtol=1e-6)
