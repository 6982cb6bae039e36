"""The fast mode's period matchers: the vectorised searches equal plain loops over the history."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.sim.fast.steady import (
    History,
    Signature,
    best_match,
    best_relative_match,
    distance,
    measured_rates,
    remember,
)


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


def _thinned(hist: list[Signature], sig: Signature, keep: int) -> None:
    """The history's thinning as a plain loop over a list: the older signature whose neighbours lie
    closest together for their age goes (neither the first nor one of the latest ``keep``)."""
    hist.append(sig)
    if len(hist) <= 2 * keep:
        return
    cut = len(hist) - keep
    worst, worst_r = -1, float("inf")
    for i in range(1, cut):
        r = (hist[i + 1].t - hist[i - 1].t) / max(sig.t - hist[i].t, 1e-300)
        if r < worst_r:
            worst, worst_r = i, r
    del hist[worst]


@settings(max_examples=150, deadline=None)
@given(st.integers(1, 4), st.integers(1, 40), st.integers(1, 6), st.integers(0, 2**31 - 1))
def test_a_history_kept_stacked_searches_as_its_list(jobs: int, size: int, keep: int, seed: int) -> None:
    """Signatures appended and thinned out of a :class:`History` (its stacks moved row by row) and out of
    a plain list: the same signatures remain, and every search finds the same answer in both."""
    rng = np.random.default_rng(seed)
    hist, plain = History(), []
    done = np.zeros(jobs)
    for k in range(size):
        done = done + rng.integers(0, 3, jobs)
        grid = np.array([0.0, 0.25, 0.5])
        sig = _sig(float(k) + float(rng.random()) * 0.5, rng.choice(grid, jobs).tolist(),
                   rng.choice(grid, jobs).tolist(), done.tolist())  # fmt: skip
        if k:
            assert best_match(hist, sig) == best_match(plain, sig) == _reference(plain, sig)
            assert best_relative_match(hist, sig)[0] == _reference_relative(plain, sig)[0]
            for need in (1, 2):
                a = measured_rates(hist, sig, min_iterations=need, tolerance=0.5)
                b = measured_rates(list(plain), sig, min_iterations=need, tolerance=0.5)
                assert (a is None) == (b is None)
                if a is not None and b is not None:
                    assert (a.since, a.window_s, a.spread) == (b.since, b.window_s, b.spread)
                    assert np.array_equal(a.rate, b.rate)
        remember(hist, sig, keep=keep)
        _thinned(plain, sig, keep)
        assert [h.t for h in hist] == [h.t for h in plain]


def test_a_history_of_several_shapes_searches_the_candidates_of_now_s_shape() -> None:
    """A history whose signatures are not all of one shape keeps no stacks: a search stacks those of the
    current signature's shape, and finds what a list of them alone gives."""
    one = [_sig(0.0, [0.0], [0.0], [0.0]), _sig(2.0, [0.0], [0.0], [2.0])]
    two = [_sig(1.0, [0.0, 0.1], [0.0, 0.0], [0.0, 0.0])]
    hist = History([one[0], two[0], one[1]])
    now = _sig(3.0, [0.0], [0.0], [3.0])
    assert best_match(hist, now) == (2, 0.0)
    assert best_match(one, now) == (1, 0.0)
    now2 = _sig(3.0, [0.0, 0.1], [0.0, 0.0], [2.0, 2.0])
    assert best_match(hist, now2) == (1, 0.0)
