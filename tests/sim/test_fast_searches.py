"""The fast mode's compiled searches (sim/fast/searches.py) give what the vectorised NumPy forms they
replaced give, bit for bit, on random histories: periods, approximate periods and measured rates with
agreeing, starved and creeping jobs, ties in time and windows too short."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.sim.fast.searches import thinned
from commsched.sim.fast.steady import History, MeasuredRates, Signature, measured_rates, remember


def _vectorised(  # the NumPy form the compiled search replaced (over a plain list of signatures)
    history: list[Signature],
    now: Signature,
    *,
    min_iterations: int,
    tolerance: float,
    starved: np.ndarray | None = None,
    min_window_s: float = 0.0,
) -> MeasuredRates | None:
    cands = [i for i, h in enumerate(history) if h.t < now.t and now.done.size]
    if len(cands) < 2:
        return None
    times = np.array([history[i].t for i in cands])
    done = np.stack([history[i].done for i in cands])
    start = np.stack([history[i].start for i in cands])
    step = np.stack([history[i].step for i in cands])
    later = np.arange(len(cands))[None, :] > np.arange(len(cands) - 1)[:, None]
    gap = np.abs(times[None, :] - (times[:-1, None] + now.t) / 2.0)
    mid = np.argmin(np.where(later, gap, np.inf), axis=1)
    d1, t1 = done[mid] - done[:-1], start[mid] - start[:-1]
    d2, t2 = now.done - done[mid], now.start - start[mid]
    counted = (d1 >= min_iterations) & (d2 >= min_iterations) & (t1 > 0) & (t2 > 0)
    with np.errstate(divide="ignore", invalid="ignore"):
        d, span = now.done - done[:-1], now.start - start[:-1]
        rate = np.where(counted, d / span, 0.0)
        gaps = np.where(counted, np.abs(d1 / t1 - d2 / t2) / rate, np.inf)
        agree = counted & (gaps <= tolerance)
        half = np.minimum(times[mid] - times[:-1], now.t - times[mid])
        limit = np.full(now.done.size, np.inf) if starved is None else starved
        s_a, s_m = step[:-1], step[mid]
        k = np.floor(s_a)
        same = (d1 == 0) & (d2 == 0) & (s_a >= 0) & (np.floor(s_m) == k) & (np.floor(now.step)[None, :] == k)
        u1, u2 = (times[mid] - times[:-1])[:, None], (now.t - times[mid])[:, None]
        c1, c2 = (s_m - s_a) / u1, (now.step - s_m) / u2
        creep = np.where(same, (now.step - s_a) / (u1 + u2), 0.0)
        close = np.abs(c1 - c2) <= tolerance * creep
    creeping = same & (c1 >= 0) & (c2 >= 0) & (close | (creep == 0))
    creeping &= (creep > 0) | (half[:, None] >= limit[None, :])
    ok = np.all(agree | creeping, axis=1) & agree.any(axis=1) & (now.t - times[:-1] >= min_window_s)
    good = np.flatnonzero(ok)
    if not good.size:
        return None
    a = int(good[0])
    return MeasuredRates(
        since=cands[a],
        rate=rate[a],
        spread=float(np.max(np.where(agree[a], gaps[a], 0.0))),
        window_s=now.t - float(times[a]),
        precise=bool(agree[a].all()),
        creep=np.where(creeping[a], creep[a], 0.0),
        creeping=creeping[a],
    )


def _history(seed: int, jobs: int, size: int) -> tuple[list[Signature], Signature]:
    """Jobs at steady rates with jitter (some agree, some drift), some idle and creeping through one step
    (or standing still), times with ties."""
    rng = np.random.default_rng(seed)
    rate = rng.choice([0.0, 0.5, 1.0, 2.0, 3.0], jobs)
    drift = rng.choice([0.0, 0.0, 0.01, 0.2], jobs)
    creep = rng.choice([0.0, 0.01, 0.02], jobs)
    out = []
    t = 0.0
    for k in range(size + 1):
        t += float(rng.choice([0.0, 0.5, 1.0, 2.0])) if k else 0.0
        done = np.floor(rate * t * (1 + drift * np.sin(t)) + rng.random(jobs) * 0.3)
        start = t - rng.random(jobs) * 0.1 * (rate > 0)
        step = np.where(rate == 0, 3.0 + creep * t, rng.choice([0.0, 1.5, -1.0], jobs))
        z = np.zeros(jobs)
        sig = Signature(t=t, phase=z, step=step, done=done, start=start, busy=z, last_end=z,
                        link_bytes=z, link_iw_bytes=z)  # fmt: skip
        out.append(sig)
    return out[:-1], out[-1]


def _same(a: MeasuredRates | None, b: MeasuredRates | None) -> bool:
    if a is None or b is None:
        return a is b
    return (
        (a.since, a.spread, a.window_s, a.precise) == (b.since, b.spread, b.window_s, b.precise)
        and np.array_equal(a.rate, b.rate)
        and np.array_equal(a.creep, b.creep)
        and np.array_equal(a.creeping, b.creeping)
    )


@settings(max_examples=400, deadline=None)
@given(
    st.integers(0, 2**31 - 1),
    st.integers(1, 5),
    st.integers(1, 30),
    st.sampled_from([1, 2, 4]),
    st.sampled_from([0.01, 0.05, 0.5]),
    st.booleans(),
    st.sampled_from([0.0, 3.0, 20.0]),
)
def test_measured_rates_are_the_vectorised_ones(
    seed: int, jobs: int, size: int, need: int, tol: float, starve: bool, min_window: float
) -> None:
    hist, now = _history(seed, jobs, size)
    starved = np.full(jobs, 2.0) if starve else None
    kw = {"min_iterations": need, "tolerance": tol, "starved": starved, "min_window_s": min_window}
    ref = _vectorised(hist, now, **kw)  # type: ignore[arg-type]
    assert _same(measured_rates(History(hist), now, **kw), ref)  # type: ignore[arg-type]


def test_the_random_histories_reach_every_outcome() -> None:
    """The draws above are not all ``None``: regimes are found, with creeping jobs among them."""
    found = creeping = 0
    for seed in range(300):
        hist, now = _history(seed, 3, 20)
        m = _vectorised(hist, now, min_iterations=1, tolerance=0.5, starved=np.full(3, 2.0))
        found += m is not None
        creeping += m is not None and bool(m.creeping.any())
    assert found >= 30 and creeping >= 5, (found, creeping)


def _thinned_vectorised(t: np.ndarray, cut: int, now_t: float) -> int:  # the NumPy form of remember's pick
    merged = (t[2 : cut + 1] - t[: cut - 1]) / np.maximum(now_t - t[1:cut], 1e-300)
    return 1 + int(np.argmin(merged))


@settings(max_examples=300, deadline=None)
@given(
    gaps=st.lists(
        st.sampled_from([0.0, 0.25, 0.5, 1.0, 1e-9, 3.0, 7.5]) | st.floats(0.0, 100.0),
        min_size=5,
        max_size=60,
    ),
    keep=st.integers(1, 24),
    tail=st.sampled_from([0.0, 1e-12, 0.5, 2.0]),
)
def test_thinned_is_the_vectorised_pick(gaps: list[float], keep: int, tail: float) -> None:
    """The signature ``remember`` drops is the one the NumPy form picked (ties in time, equal ratios and
    a latest signature at the time of ``now`` included)."""
    t = np.cumsum(np.array(gaps))
    cut = t.size - keep
    if cut < 2:
        return
    now_t = float(t[-1]) + tail
    assert thinned(t, cut, now_t) == _thinned_vectorised(t, cut, now_t)


def test_remember_keeps_the_same_history_as_the_vectorised_pick() -> None:
    """Appending 200 signatures at irregular times to a history of at most ``2 * keep``: the same
    signatures are kept as with the NumPy pick."""
    rng = np.random.default_rng(3)
    z = np.zeros(2)
    hist, kept = History(), []
    for t in np.cumsum(rng.choice([0.5, 1.0, 1.0, 2.0, 4.0], size=200)).tolist():
        sig = Signature(t=t, phase=z, step=z, done=np.full(2, t), start=z, busy=z, last_end=z,
                        link_bytes=z, link_iw_bytes=z)  # fmt: skip
        remember(hist, sig, keep=6)
        kept.append(t)
        if len(kept) > 12:
            del kept[_thinned_vectorised(np.array(kept), len(kept) - 6, t)]
        assert [h.t for h in hist] == kept
