"""Iterations and profiles of a job from its byte counters alone (``commsched.runtime.profiling.traffic``)."""

from __future__ import annotations

import numpy as np
import pytest

from commsched.errors import InputError
from commsched.runtime.enforce.loops import profile_body
from commsched.runtime.profiling.traffic import iterations, outside_profile, series, steady, window_iterations


def _job(period_s: float, burst_s: float, n: int, *, dt: float, jitter: float = 0.0, seed: int = 0) -> tuple:
    """Cumulative counters of a job: a burst of data every iteration, with pauses inside it.

    Each burst moves 1 MB in ``burst_s`` with two 20 ms pauses (between buckets); the sent bytes
    keep flowing during the received data's pauses (one direction goes on while the other waits).
    """
    rng = np.random.default_rng(seed)
    t, rx, tx = [0.0], [0.0], [0.0]
    now, got, sent = 0.0, 0.0, 0.0
    for _ in range(n):
        gap = period_s - burst_s + rng.uniform(-jitter, jitter)
        steps = round(gap / dt)
        for _ in range(steps):
            now += dt
            t.append(now), rx.append(got), tx.append(sent)
        k = round(burst_s / dt)
        pause = {k // 3, k // 3 + 1, 2 * k // 3, 2 * k // 3 + 1}
        for i in range(k):
            now += dt
            if i not in pause:
                got += 1e6 / k
            sent += 1e6 / k
            t.append(now), rx.append(got), tx.append(sent)
    return np.array(t), np.array(rx), np.array(tx)


@pytest.mark.parametrize(
    ("period", "burst", "jitter"), [(0.5, 0.1, 0.0), (0.98, 0.7, 0.02), (0.37, 0.07, 0.03)]
)
def test_mean_iteration_from_bursts(period: float, burst: float, jitter: float) -> None:
    dt = 0.01
    t, rx, tx = _job(period, burst, 60, dt=dt, jitter=jitter)
    st = window_iterations(t, rx, tx, sample_s=dt, start=1.0, end=float(t[-1]) - 1.0)
    assert st.method == "bytes"  # every iteration moves the same bytes
    assert st.mean_s == pytest.approx(period, rel=0.02)
    assert steady(st)


def test_merged_bursts_still_count_their_iterations() -> None:
    """A late sample that fills a compute gap merges two bursts; they count two iterations."""
    dt = 0.01
    t, rx, _tx = _job(0.5, 0.1, 40, dt=dt)
    x = series(t, rx, sample_s=dt, start=0.0, end=float(t[-1]))
    a, b = int(10.42 / dt), int(10.92 / dt)  # a compute gap and the burst after it
    x[a:b] = x[a:b].sum() / (b - a)  # one gap filled: the burst's bytes spread over it, none added
    st = iterations(x, sample_s=dt)
    assert st.mean_s == pytest.approx(0.5, rel=0.02)


def test_profile_takes_silent_time_as_compute_and_whole_iterations_bytes() -> None:
    dt = 0.01
    t, rx, tx = _job(0.8, 0.3, 30, dt=dt)
    prof = outside_profile(t, rx, tx, sample_s=dt, start=2.0, end=14.0)
    assert prof.period_s == pytest.approx(0.8, rel=0.02)
    assert prof.bytes_per_iteration == pytest.approx(1e6, rel=0.03)
    # compute: the gap (0.5 s) and the pauses inside the burst (4 bins of 10 ms)
    assert prof.compute_s == pytest.approx(0.54, abs=0.02)
    assert prof.overlap == 1.0
    body = profile_body(prof.to_json(), {"connections": [{"job": "j", "share": 2.0}]}, "j")
    assert body["comm_bytes"] == pytest.approx(prof.bytes_per_iteration / 2)


def test_no_traffic_is_an_error_and_no_gaps_is_the_spectrum() -> None:
    with pytest.raises(InputError):
        outside_profile([0.0, 1.0, 2.0], [0.0, 0.0, 0.0], sample_s=0.01, start=0.0, end=2.0)
    t = np.arange(0, 20, 0.01)
    rate = 1.0 + 0.5 * (np.sin(2 * np.pi * t / 0.5) > 0)  # never silent, periodic
    prof = outside_profile(t, np.cumsum(rate), sample_s=0.01, start=1.0, end=19.0)
    assert prof.method == "fft" and prof.overlap == 0.0
    assert prof.period_s == pytest.approx(0.5, rel=0.02)
