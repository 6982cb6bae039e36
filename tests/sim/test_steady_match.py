"""The fast mode's period matchers: the vectorised searches equal plain loops over the history."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.sim.fast.steady import Signature, best_match, best_relative_match, distance


def _sig(t: float, phase: list[float], step: list[float], done: list[float]) -> Signature:
    z = np.zeros(len(phase))
    return Signature(
        t=t,
        phase=np.array(phase),
        step=np.array(step),
        done=np.array(done),
        start=z,
        busy=z,
        last_end=z,
        link_bytes=np.zeros(0),
        link_iw_bytes=np.zeros(0),
    )


def _reference(history: list[Signature], now: Signature) -> tuple[int, float]:
    best, best_d = -1, float("inf")
    for i, h in enumerate(history):
        if h.t >= now.t or not np.all(now.done - h.done >= 1):
            continue
        d = distance(h, now)
        if d <= best_d:
            best, best_d = i, d
    return best, best_d


def _random_case(jobs: int, size: int, seed: int) -> tuple[list[Signature], Signature]:
    """A random history and a current signature on a coarse grid (ties and exact matches happen)."""
    rng = np.random.default_rng(seed)
    grid = np.array([0.0, 0.25, 0.5])
    history = [
        _sig(
            float(k),
            rng.choice(grid, jobs).tolist(),
            rng.choice(grid, jobs).tolist(),
            rng.integers(0, 3 + k, jobs).astype(float).tolist(),
        )
        for k in range(size)
    ]
    now = _sig(
        float(rng.integers(0, size + 2)),
        rng.choice(grid, jobs).tolist(),
        rng.choice(grid, jobs).tolist(),
        rng.integers(1, size + 4, jobs).astype(float).tolist(),
    )
    return history, now


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(0, 12), st.integers(0, 2**31 - 1))
def test_best_match_equals_the_plain_loop(jobs: int, size: int, seed: int) -> None:
    history, now = _random_case(jobs, size, seed)
    assert best_match(history, now) == _reference(history, now)


def _reference_relative(history: list[Signature], now: Signature) -> tuple[int, float]:
    best, best_r = -1, float("inf")
    for i, h in enumerate(history):
        adv = now.done - h.done
        if h.t >= now.t or not np.all(adv >= 1):
            continue
        mis = np.maximum(np.abs(h.phase - now.phase), np.abs(h.step - now.step))
        r = float(np.max(mis / adv))
        if r <= best_r:
            best, best_r = i, r
    return best, best_r


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(0, 12), st.integers(0, 2**31 - 1))
def test_best_relative_match_equals_the_plain_loop(jobs: int, size: int, seed: int) -> None:
    history, now = _random_case(jobs, size, seed)
    idx, rel = best_relative_match(history, now)
    ref_idx, ref_rel = _reference_relative(history, now)
    assert idx == ref_idx
    assert rel == ref_rel or (np.isinf(rel) and np.isinf(ref_rel))


def test_relative_mismatch_prefers_the_longer_period() -> None:
    """The same 0.1 phase mismatch over 10 iterations misstates the throughput by 1 %, over 1 by 10 %."""
    history = [_sig(0.0, [0.0], [0.0], [0.0]), _sig(9.0, [0.0], [0.0], [9.0])]
    now = _sig(10.0, [0.1], [0.0], [10.0])
    assert best_relative_match(history, now) == (0, 0.1 / 10)
    assert best_match(history, now)[0] == 1  # the absolute distance ties, and the latest wins
