"""The fast mode's period matcher: the vectorised search equals the plain loop over the history."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.sim.steady import Signature, best_match, distance


def _sig(t: float, phase: list[float], step: list[float], done: list[float]) -> Signature:
    z = np.zeros(len(phase))
    return Signature(
        t=t,
        phase=np.array(phase),
        step=np.array(step),
        done=np.array(done),
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


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 4), st.integers(0, 12), st.integers(0, 2**31 - 1))
def test_best_match_equals_the_plain_loop(jobs: int, size: int, seed: int) -> None:
    rng = np.random.default_rng(seed)
    grid = np.array([0.0, 0.25, 0.5])  # coarse values: ties and exact matches happen
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
    assert best_match(history, now) == _reference(history, now)
