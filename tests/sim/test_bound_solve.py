"""A solve that reads only what can bind gives the reference solver's paces bit for bit.

Each problem is a random component (slots whose steps load random links with random shares, in random
classes, on tie-heavy capacities: a few values, equal capacity-per-share ratios everywhere, and near-ties
one part in 1e12 or 1e7 apart). Its rows are bound the way the engine binds them
(:class:`commsched.sim.rates.binding.Binding`: shared links plus the tightest private entries), the compiled
water-filling runs over the active slots, and every pace must equal
:func:`commsched.sim.reference.maxmin.max_min_rates_coo` computed over the full rows (every entry), bit for
bit.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from commsched.scheduling.traffic import JobTraffic, StepLoad
from commsched.sim.rates import flowfill
from commsched.sim.rates import flowlayout as fl
from commsched.sim.rates.binding import Binding
from commsched.sim.rates.trafficpool import TrafficPool
from commsched.sim.reference.maxmin import max_min_rates_coo

PROBLEMS = 10_000
_CAPS = np.array([1.0, 2.0, 4.0, 10.0]) * 1e6
_SHARES = np.array([0.5, 1.0, 2.0, 4.0])
_ODD_SHARES = np.array([0.3, 0.7, 1.1, 1.7, 2.9])


def _problem(
    rng: np.random.Generator,
    members: tuple[int, int] = (1, 13),
    links: tuple[int, int] = (2, 41),
    shares: np.ndarray = _SHARES,
) -> tuple[list[JobTraffic], np.ndarray, np.ndarray, np.ndarray]:
    n_links = int(rng.integers(*links))
    caps = rng.choice(_CAPS, size=n_links)
    near = rng.random(n_links) < 0.15  # near-ties, either side of the saturation tolerance
    caps[near] *= 1.0 + rng.choice([1e-12, -1e-12, 1e-7, -1e-7], size=int(near.sum()))
    n = int(rng.integers(*members))
    traffics = []
    for _ in range(n):
        k = int(rng.integers(1, min(n_links, 8) + 1))
        links = np.sort(rng.choice(n_links, size=k, replace=False)).astype(np.int64)
        share = rng.choice(shares, size=k)
        if rng.random() < 0.1:
            share[rng.integers(0, k)] = 0.0  # an entry of no share
        step = StepLoad(
            links=links, bytes_per_rep=share * 1e6, max_flow_bytes=1e6, repeat=1, latency_s=0.0, share=share
        )
        traffics.append(JobTraffic(steps=(step,), link_ids=links, link_bytes=np.zeros(k)))
    classes = rng.integers(0, int(rng.integers(1, 4 if n < flowfill.LISTED_FROM else 2)), size=n)
    active = rng.random(n) < 0.85
    return traffics, caps, classes, active


def _reference(
    traffics: list[JobTraffic], caps: np.ndarray, classes: np.ndarray, active: np.ndarray
) -> np.ndarray:
    idx = np.flatnonzero(active)
    sizes = [traffics[i].steps[0].links.size for i in idx]
    rows = np.concatenate([np.full(n, j) for j, n in enumerate(sizes)]).astype(np.int64)
    cols = np.concatenate([traffics[i].steps[0].links for i in idx])
    vals = np.concatenate([traffics[i].steps[0].share for i in idx])
    keep = vals > 0.0
    return max_min_rates_coo(
        rows=rows[keep],
        cols=cols[keep],
        vals=vals[keep],
        n_groups=idx.size,
        capacity=caps,
        classes=classes[idx],
    )


def _bound_solve(
    traffics: list[JobTraffic], caps: np.ndarray, classes: np.ndarray, active: np.ndarray
) -> tuple[np.ndarray, int, int]:
    """Paces of the active slots from the bound rows; also the entries read and the entries in all."""
    pool = TrafficPool()
    rows = [pool.row(t, 0, dict) for t in traffics]
    lf = np.zeros((caps.size, fl.LINK_ROWS))
    lf[:, fl.CAP] = caps
    Binding(n_links=caps.size).bind(pool, lf, [(t, None, 1) for t in traffics])
    sf = np.zeros((len(traffics), fl.SLOT_FIELDS))
    sf[:, fl.END] = math.inf
    sf[:, fl.CLS] = classes
    sf[:, fl.ROW] = rows
    sf[:, fl.ACTIVE] = active.astype(float)
    members = np.arange(len(traffics), dtype=np.int64)
    flowfill.solve(sf, pool.pf, pool.bf, lf, members)
    read = sum(int(pool.bf[r, fl.BHI] - pool.pf[r, fl.LO]) for r in rows)
    whole = sum(int(pool.pf[r, fl.HI] - pool.pf[r, fl.LO]) for r in rows)
    return sf[active, fl.NEWPACE], read, whole


def test_bound_solve_is_the_reference_bit_for_bit_on_random_tie_heavy_problems() -> None:
    rng = np.random.default_rng(20261201)
    left_out = 0
    for k in range(PROBLEMS):
        traffics, caps, classes, active = _problem(rng)
        if not active.any():
            continue
        got, read, whole = _bound_solve(traffics, caps, classes, active)
        want = _reference(traffics, caps, classes, active)
        assert got.tolist() == want.tolist(), f"problem {k}: {got.tolist()} != {want.tolist()}"
        left_out += whole - read
    assert left_out > PROBLEMS  # the bound rows do leave entries out (else nothing was tested)


@pytest.mark.parametrize("seed", range(3))
def test_a_private_link_left_out_is_never_the_tightest(seed: int) -> None:
    """The entries a bound row keeps, counted from outside: every shared entry, and of the private ones
    exactly those within 1e-6 of the tightest capacity per share."""
    rng = np.random.default_rng(seed)
    for _ in range(200):
        traffics, caps, _, _ = _problem(rng)
        pool = TrafficPool()
        rows = [pool.row(t, 0, dict) for t in traffics]
        lf = np.zeros((caps.size, fl.LINK_ROWS))
        lf[:, fl.CAP] = caps
        Binding(n_links=caps.size).bind(pool, lf, [(t, None, 1) for t in traffics])
        users = np.zeros(caps.size, dtype=int)
        for t in traffics:
            users[t.link_ids] += 1
        for t, r in zip(traffics, rows, strict=True):
            s = t.steps[0]
            on = s.share > 0
            private = on & (users[s.links] == 1)
            ratio = caps[s.links] / np.where(on, s.share, 1.0)
            tight = ratio[private].min() if private.any() else math.inf
            want = s.links[on & ((users[s.links] >= 2) | (private & (ratio <= tight * (1 + 1e-6))))]
            lo, hi = int(pool.pf[r, fl.LO]), int(pool.bf[r, fl.BHI])
            assert pool.bf[lo:hi, fl.BLINK].astype(np.int64).tolist() == want.tolist()


def _solve(traffics: list[JobTraffic], caps: np.ndarray, classes: np.ndarray, listed_from: int) -> np.ndarray:
    pool = TrafficPool()
    rows = [pool.row(t, 0, dict) for t in traffics]
    lf = np.zeros((caps.size, fl.LINK_ROWS))
    lf[:, fl.CAP] = caps
    Binding(n_links=caps.size).bind(pool, lf, [(t, None, 1) for t in traffics])
    sf = np.zeros((len(traffics), fl.SLOT_FIELDS))
    sf[:, fl.END] = math.inf
    sf[:, fl.CLS] = classes
    sf[:, fl.ROW] = rows
    sf[:, fl.ACTIVE] = 1.0
    flowfill.solve(sf, pool.pf, pool.bf, lf, np.arange(len(traffics), dtype=np.int64), listed_from)
    return sf[:, fl.NEWPACE].copy()


def test_large_classes_listed_by_link_are_the_reference_bit_for_bit() -> None:
    """Classes of :data:`flowfill.LISTED_FROM` members or more freeze through per-link member lists
    (one or two classes of 24-80 members over 20-120 links): the reference's paces bit for bit."""
    rng = np.random.default_rng(20261202)
    listed = 0
    for k in range(400):
        traffics, caps, classes, active = _problem(
            rng, members=(flowfill.LISTED_FROM + 1, 81), links=(20, 121)
        )
        got, _, _ = _bound_solve(traffics, caps, classes, active)
        want = _reference(traffics, caps, classes, active)
        assert got.tolist() == want.tolist(), f"problem {k}: {got.tolist()} != {want.tolist()}"
        listed += int(max(np.bincount(classes[active])) >= flowfill.LISTED_FROM)
    assert listed > 250  # most problems had a class long enough to be listed


@pytest.mark.parametrize("seed", range(2))
def test_listed_freezing_is_the_scan_bit_for_bit_in_any_order_of_sums(seed: int) -> None:
    """Shares that are not powers of two make every sum's order show: freezing through the member lists
    (every class listed) sums the frozen shares exactly as the scan (none listed) does."""
    rng = np.random.default_rng(seed)
    for k in range(300):
        traffics, caps, classes, _ = _problem(rng, members=(2, 61), links=(5, 81), shares=_ODD_SHARES)
        scan, lists = _solve(traffics, caps, classes, 10**9), _solve(traffics, caps, classes, 2)
        assert lists.tolist() == scan.tolist(), f"problem {k}"
