"""Invariants of the rate allocation (strict priority + max-min within a class), over random instances."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from commsched.sim.rates import max_min_rates


@st.composite
def instances(draw: st.DrawFn) -> tuple[sparse.csr_matrix, np.ndarray, np.ndarray]:
    n_groups = draw(st.integers(1, 12))
    n_links = draw(st.integers(1, 8))
    rng = np.random.default_rng(draw(st.integers(0, 2**32 - 1)))
    dense = np.where(
        rng.random((n_groups, n_links)) < 0.4, rng.choice([1.0, 2.0, 0.5, 3.0], (n_groups, n_links)), 0.0
    )
    for g in range(n_groups):  # every group uses at least one link
        if not dense[g].any():
            dense[g, rng.integers(n_links)] = 1.0
    cap = rng.uniform(1.0, 100.0, n_links)
    classes = rng.integers(0, draw(st.integers(1, 3)), n_groups)
    return sparse.csr_matrix(dense), cap, classes


@settings(max_examples=200, deadline=None)
@given(instances())
def test_capacity_respected(inst: tuple[sparse.csr_matrix, np.ndarray, np.ndarray]) -> None:
    share, cap, classes = inst
    rates = max_min_rates(share, cap, classes)
    assert np.all(rates >= 0)
    load = share.T @ rates
    assert np.all(load <= cap * (1 + 1e-9) + 1e-9)


@settings(max_examples=200, deadline=None)
@given(instances())
def test_max_min_optimal_within_class(inst: tuple[sparse.csr_matrix, np.ndarray, np.ndarray]) -> None:
    # every group has a saturated link on which no group of its class gets a higher pace
    share, cap, classes = inst
    rates = max_min_rates(share, cap, classes)
    load = share.T @ rates
    dense = share.toarray()
    for g in range(dense.shape[0]):
        ok = False
        for e in np.flatnonzero(dense[g] > 0):
            saturated = load[e] >= cap[e] * (1 - 1e-7)
            same = (dense[:, e] > 0) & (classes == classes[g])
            if saturated and rates[g] >= rates[same].max() * (1 - 1e-7):
                ok = True
                break
        assert ok, f"group {g} has no bottleneck"


@settings(max_examples=200, deadline=None)
@given(instances())
def test_higher_class_never_slowed_by_lower(inst: tuple[sparse.csr_matrix, np.ndarray, np.ndarray]) -> None:
    share, cap, classes = inst
    rates = max_min_rates(share, cap, classes)
    top = classes == classes.min()
    alone = max_min_rates(share[np.flatnonzero(top)], cap, classes[top])
    np.testing.assert_allclose(rates[top], alone, rtol=1e-9, atol=1e-9)
