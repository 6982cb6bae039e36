"""Profiler: iteration period by FFT on synthetic and real traffic; W_j and t_j per iteration."""

from __future__ import annotations

import time

import numpy as np
import pytest

from commsched.errors import InputError
from commsched.runtime import Communicator, Profiler, iteration_period
from commsched.runtime.profiling.profiler import traffic_series

from .helpers import run_ranks


def _bursts(period: float, duty: float, seconds: float, *, seed: int, jitter: float = 0.0) -> np.ndarray:
    """1 ms series: a burst of ``duty * period`` every iteration, start times jittered."""
    rng = np.random.default_rng(seed)
    x = np.zeros(int(seconds / 1e-3))
    t = rng.uniform(0, period)
    while t < seconds:
        a = int(t / 1e-3)
        x[a : a + max(int(duty * period / 1e-3), 1)] += rng.uniform(0.8, 1.2)
        t += period * (1 + rng.uniform(-jitter, jitter))
    return x


@pytest.mark.parametrize("period", [0.081, 0.25, 0.6, 1.37, 3.1])
@pytest.mark.parametrize("duty", [0.05, 0.3, 0.7])
def test_period_of_synthetic_burst_trains(period: float, duty: float) -> None:
    x = _bursts(period, duty, 30.0, seed=int(period * 1000), jitter=0.02)
    assert iteration_period(x) == pytest.approx(period, rel=0.01)


def test_two_unequal_bursts_per_iteration_give_the_iteration_not_half() -> None:
    # forward-pass parameter pulls (small) and backward gradient pushes (large) in every iteration
    t = np.arange(30_000) * 1e-3
    phase = t % 0.5
    x = ((phase < 0.05) * 0.6 + ((phase > 0.25) & (phase < 0.3)) * 1.0).astype(float)
    assert iteration_period(x) == pytest.approx(0.5, rel=0.005)


def test_noise_and_background_traffic_do_not_hide_the_period() -> None:
    rng = np.random.default_rng(7)
    x = _bursts(0.42, 0.2, 30.0, seed=3) * 5 + rng.exponential(1.0, 30_000)
    assert iteration_period(x) == pytest.approx(0.42, rel=0.01)


def test_too_short_or_silent_series_is_an_input_error() -> None:
    with pytest.raises(InputError, match="cannot show a period"):
        iteration_period(np.ones(5))
    with pytest.raises(InputError, match="cannot show a period"):
        iteration_period(np.zeros(10_000))


def test_profile_from_recorded_events() -> None:
    clock = [0.0]
    prof = Profiler(job="j1", window_s=20.0, clock=lambda: clock[0])
    period, t = 0.3, 0.0
    while t < 25.0:
        prof.report_compute(2.5, t=t + 0.2)  # 2.5 units of work per iteration
        for k in range(8):  # 8 chunks of 1 MB, 5 ms apart, after 0.2 s of compute
            prof.record_transfer(t + 0.2 + 0.005 * k, t + 0.205 + 0.005 * k, 1_000_000)
        t += period
    clock[0] = 25.0
    assert prof.ready()
    p = prof.profile()
    assert p.period_s == pytest.approx(period, rel=0.005)
    assert p.window_s == pytest.approx(20.0, abs=0.01)
    assert p.iterations == pytest.approx(20.0 / period, rel=0.01)
    assert p.work_per_iteration == pytest.approx(2.5, rel=0.02)
    assert p.bytes_per_iteration == pytest.approx(8e6, rel=0.02)
    assert p.transfer_s_per_iteration == pytest.approx(0.040, rel=0.05)
    assert set(p.to_json()) >= {"job", "period_s", "work_per_iteration", "bytes_per_iteration"}


def test_traffic_series_bins_bytes() -> None:
    np.testing.assert_array_equal(
        traffic_series([10.0, 10.0005, 10.0031], [1, 2, 4], sample_s=1e-3), [3, 0, 0, 4]
    )


def test_profile_of_real_all_reduce_traffic() -> None:
    """Two ranks train for 4 s (sleep as compute, a real ring all-reduce per iteration).

    On a loaded machine a few iterations straggle; the spectral peak follows the typical iteration,
    so the period is compared with the median iteration time.
    """
    compute_s, run_s = 0.12, 4.0

    def body(c: Communicator) -> tuple[float, object]:
        prof = Profiler(job="csx-prof", window_s=run_s)
        c.group.observer = prof.record_transfer
        grads = np.ones(64 << 10)  # 512 KiB
        c.all_reduce(grads)
        t0 = last = time.monotonic()
        durations = []
        while last - t0 < run_s:
            time.sleep(compute_s)
            prof.report_compute(compute_s)
            c.all_reduce(grads)
            now = time.monotonic()
            durations.append(now - last)
            last = now
        return float(np.median(durations)), prof.profile()

    for median, p in run_ranks(2, body):
        assert p.period_s == pytest.approx(median, rel=0.1)
        assert p.work_per_iteration == pytest.approx(compute_s, rel=0.15)
        # each rank sends 2(n-1)/n of the buffer per iteration: 512 KiB on 2 ranks
        assert p.bytes_per_iteration == pytest.approx(512 << 10, rel=0.15)
