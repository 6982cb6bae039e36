"""Invariants of the rate allocation (strict priority + max-min within a class), over random instances.

Every invariant runs on both branches of the solver: the dense array (small components) and the sparse
matrix (above ``DENSE_LIMIT`` entries, i.e. paper-scale runs), with non-unit shares (a ring crossing a
link twice has share 2 there).
"""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from commsched.sim.reference.maxmin import DENSE_LIMIT, max_min_rates, max_min_rates_coo

BRANCHES = pytest.mark.parametrize("dense", [True, False], ids=["dense", "sparse"])


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


@BRANCHES
@settings(max_examples=200, deadline=None)
@given(inst=instances())
def test_capacity_respected(inst: tuple[sparse.csr_matrix, np.ndarray, np.ndarray], dense: bool) -> None:
    share, cap, classes = inst
    rates = max_min_rates(share, cap, classes, dense=dense)
    assert np.all(rates >= 0)
    load = share.T @ rates
    assert np.all(load <= cap * (1 + 1e-9) + 1e-9)


@BRANCHES
@settings(max_examples=200, deadline=None)
@given(inst=instances())
def test_max_min_optimal_within_class(
    inst: tuple[sparse.csr_matrix, np.ndarray, np.ndarray], dense: bool
) -> None:
    # every group has a saturated link on which no group of its class gets a higher pace
    share, cap, classes = inst
    rates = max_min_rates(share, cap, classes, dense=dense)
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


@BRANCHES
@settings(max_examples=200, deadline=None)
@given(inst=instances())
def test_higher_class_never_slowed_by_lower(
    inst: tuple[sparse.csr_matrix, np.ndarray, np.ndarray], dense: bool
) -> None:
    share, cap, classes = inst
    rates = max_min_rates(share, cap, classes, dense=dense)
    top = classes == classes.min()
    alone = max_min_rates(share[np.flatnonzero(top)], cap, classes[top], dense=dense)
    np.testing.assert_allclose(rates[top], alone, rtol=1e-9, atol=1e-9)


@settings(max_examples=200, deadline=None)
@given(inst=instances())
def test_branches_agree(inst: tuple[sparse.csr_matrix, np.ndarray, np.ndarray]) -> None:
    share, cap, classes = inst
    np.testing.assert_allclose(
        max_min_rates(share, cap, classes, dense=False),
        max_min_rates(share, cap, classes, dense=True),
        rtol=1e-9,
        atol=1e-9,
    )


@BRANCHES
def test_shares_set_the_split(dense: bool) -> None:
    """One 12 B/s link: shares 3, 1 and 0.5 in one class get one water level, 12 / 4.5 each."""
    share = sparse.csr_matrix(np.array([[3.0], [1.0], [0.5]]))
    rates = max_min_rates(share, np.array([12.0]), np.array([0, 0, 0]), dense=dense)
    np.testing.assert_allclose(rates, [12 / 4.5] * 3)
    # the higher class takes what its share needs at its bottleneck, the rest goes down
    two = sparse.csr_matrix(np.array([[2.0, 0.0], [1.0, 1.0]]))
    rates = max_min_rates(two, np.array([10.0, 3.0]), np.array([0, 1]), dense=dense)
    np.testing.assert_allclose(rates, [5.0, 0.0], atol=1e-12)
    rates = max_min_rates(two, np.array([12.0, 3.0]), np.array([0, 1]), dense=dense)
    np.testing.assert_allclose(rates, [6.0, 0.0], atol=1e-12)
    rates = max_min_rates(two, np.array([12.0, 3.0]), np.array([1, 0]), dense=dense)
    np.testing.assert_allclose(rates, [4.5, 3.0])


def test_large_instances_take_the_sparse_branch_and_respect_shares() -> None:
    """Above DENSE_LIMIT entries the default is the sparse branch; its paces honour the shares."""
    n = 460  # n groups x n links in use > DENSE_LIMIT
    assert n * n > DENSE_LIMIT
    g = np.arange(n, dtype=np.int64)
    rows = np.concatenate([g, g])
    cols = np.concatenate([g, (g + 1) % n])
    vals = np.concatenate([np.full(n, 2.0), np.full(n, 0.5)])
    cap = np.full(n, 10.0)
    classes = np.zeros(n, dtype=np.int64)
    auto = max_min_rates_coo(rows=rows, cols=cols, vals=vals, n_groups=n, capacity=cap, classes=classes)
    forced = max_min_rates_coo(
        rows=rows, cols=cols, vals=vals, n_groups=n, capacity=cap, classes=classes, dense=True
    )
    # every link carries share 2 of one group and 0.5 of another: 10 / 2.5 = 4 each
    np.testing.assert_allclose(auto, 4.0)
    np.testing.assert_allclose(auto, forced)
