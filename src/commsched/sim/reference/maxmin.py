"""Rate allocation: strict priority between classes, max-min fair within a class, coupled steps.

The unit of allocation is a *step group*: the transfers of one synchronous collective step of one job.
A group's transfers progress in lockstep (a ring's flows move at the pace of its slowest edge), so the
group has one pace ``r`` (bytes/s of its largest transfer) and puts ``r * share[g, e]`` bytes/s on link
``e``, where ``share[g, e]`` is the group's bytes per repetition on ``e`` divided by its largest transfer
("flow equivalents": a ring crossing a link twice has share 2 there).

Allocation rule (documented in ``docs/simulator.md`` and tested):

1. Classes are served in order 0, 1, ...; a class only sees the capacity the higher classes left.
2. Within a class, progressive filling (water-filling) on the paces: all unfrozen groups' paces rise
   together; when a link saturates, every group using it is frozen. This is max-min fairness per
   flow-equivalent: two single-flow groups on one link get half each; a group with share 2 there gets
   two flows' worth.

The solver is vectorised with SciPy sparse matrices; it runs once per change of the active set of a
connected component of contending groups.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import NDArray
from scipy import sparse

#: relative tolerance under which a link counts as saturated
_SAT_RTOL = 1e-9


def max_min_rates(
    share: sparse.csr_matrix,
    capacity: NDArray[np.float64],
    classes: NDArray[np.int64],
    *,
    dense: bool | None = None,
) -> NDArray[np.float64]:
    """Paces of ``G`` step groups over ``L`` links.

    Parameters
    ----------
    share
        ``G x L`` sparse matrix of flow-equivalent shares (non-negative).
    capacity
        ``L`` link capacities in the same byte unit as the paces (bytes/s).
    classes
        ``G`` priority classes (0 = highest).
    dense
        Solve on a dense array (``True``) or a sparse matrix (``False``); ``None`` chooses by size
        (dense up to ``DENSE_LIMIT`` group x link entries). Both give the same paces.

    Returns
    -------
    numpy.ndarray
        ``G`` paces (bytes/s of each group's largest transfer). A group whose links are all taken by
        higher classes gets 0.

    Examples
    --------
    Two single-flow groups on one 10-byte/s link, same class, then strict priority:

    >>> from scipy import sparse
    >>> import numpy as np
    >>> a = sparse.csr_matrix(np.array([[1.0], [1.0]]))
    >>> max_min_rates(a, np.array([10.0]), np.array([0, 0])).tolist()
    [5.0, 5.0]
    >>> max_min_rates(a, np.array([10.0]), np.array([0, 1])).tolist()
    [10.0, 0.0]

    A ring crossing the link twice (share 2) gets two flows' worth, on either branch:

    >>> b = sparse.csr_matrix(np.array([[2.0], [1.0]]))
    >>> max_min_rates(b, np.array([9.0]), np.array([0, 0]), dense=False).tolist()
    [3.0, 3.0]
    """
    coo = share.tocoo()
    return max_min_rates_coo(
        rows=coo.row.astype(np.int64),
        cols=coo.col.astype(np.int64),
        vals=coo.data.astype(float),
        n_groups=share.shape[0],
        capacity=capacity,
        classes=classes,
        dense=dense,
    )


def max_min_rates_coo(
    *,
    rows: NDArray[np.int64],
    cols: NDArray[np.int64],
    vals: NDArray[np.float64],
    n_groups: int,
    capacity: NDArray[np.float64],
    classes: NDArray[np.int64],
    dense: bool | None = None,
) -> NDArray[np.float64]:
    """:func:`max_min_rates` on a share matrix given as coordinates (group, link, share).

    Only the links in use are kept; small problems run on a dense array, large ones on a sparse one
    (``dense`` forces either).
    """
    rates = np.zeros(n_groups)
    if n_groups == 0 or rows.size == 0:
        return rates
    used, local = np.unique(cols, return_inverse=True)
    residual = capacity[used].astype(float)
    cap = residual.copy()
    if dense is None:
        dense = n_groups * used.size <= DENSE_LIMIT
    if dense:
        full = np.zeros((n_groups, used.size))
        np.add.at(full, (rows, local), vals)
    else:
        full_sp = sparse.csr_matrix((vals, (rows, local)), shape=(n_groups, used.size))
    for cls in np.unique(classes):
        members = np.flatnonzero(classes == cls)
        mat: NDArray[np.float64] | sparse.csr_matrix = full[members] if dense else full_sp[members]
        rates[members] = _fill(mat, residual, cap)
    return rates


#: up to this many matrix entries (groups x links in use) the filling runs on a dense array (faster for
#: small components); above, on a sparse matrix
DENSE_LIMIT = 200_000


def _fill(
    mat: NDArray[np.float64] | sparse.csr_matrix,
    residual: NDArray[np.float64],
    capacity: NDArray[np.float64],
) -> NDArray[np.float64]:
    """Progressive filling of one class; updates ``residual`` in place and returns the paces."""
    mat_t = mat.T if isinstance(mat, np.ndarray) else mat.T.tocsr()
    n = mat.shape[0]
    level = np.zeros(n)
    nnz = (mat > 0).sum(axis=1) if isinstance(mat, np.ndarray) else mat.getnnz(axis=1)
    if mat.shape[0] == 1:  # one group: its pace is set by its tightest link
        row = np.asarray(mat.todense() if not isinstance(mat, np.ndarray) else mat).ravel()
        on = row > 0
        if not on.any():
            return level
        head = residual[on] / row[on]
        pace = max(float(head.min()), 0.0)
        residual[on] -= pace * row[on]
        residual[on] = np.where(residual[on] <= _SAT_RTOL * capacity[on], 0.0, residual[on])
        level[0] = pace
        return level
    unfrozen = np.asarray(nnz).ravel() > 0  # a group with no link carries nothing
    water = 0.0
    demand = np.asarray(mat_t @ unfrozen.astype(float)).ravel()
    links = np.flatnonzero(demand > 0)
    while links.size and unfrozen.any():
        head = residual[links] / demand[links]
        k = int(np.argmin(head))
        delta = max(float(head[k]), 0.0)
        water += delta
        residual[links] -= delta * demand[links]
        sat = links[residual[links] <= _SAT_RTOL * capacity[links]]
        if sat.size == 0:  # rounding: the tightest link is the one that set delta
            sat = links[k : k + 1]
        residual[sat] = 0.0
        sat_mask = np.zeros(residual.size)
        sat_mask[sat] = 1.0
        newly = unfrozen & (np.asarray(mat @ sat_mask).ravel() > 0)
        level[newly] = water
        unfrozen &= ~newly
        # the demand only loses the rows just frozen
        demand -= np.asarray(mat_t @ newly.astype(float)).ravel()
        demand[sat] = 0.0
        links = links[demand[links] > 1e-12]
    return level
