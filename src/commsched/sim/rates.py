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
    """
    n_groups = share.shape[0]
    rates = np.zeros(n_groups)
    if n_groups == 0:
        return rates
    residual = capacity.astype(float).copy()
    for cls in np.unique(classes):
        members = np.flatnonzero(classes == cls)
        _fill(share[members], residual, rates, members)
    return rates


def _fill(
    sub: sparse.csr_matrix,
    residual: NDArray[np.float64],
    rates: NDArray[np.float64],
    members: NDArray[np.int64],
) -> None:
    """Progressive filling of one class; updates ``residual`` and ``rates`` in place."""
    sub_t = sub.T.tocsr()
    unfrozen = np.ones(sub.shape[0], dtype=bool)
    scale = np.maximum(residual, 1.0)
    # groups with no link at all are unconstrained; give them nothing (they carry no bytes)
    has_links = np.asarray(sub.getnnz(axis=1) > 0)
    unfrozen &= has_links
    level = np.zeros(sub.shape[0])
    while unfrozen.any():
        demand = np.asarray(sub_t @ unfrozen.astype(float)).ravel()
        used = demand > 0
        if not used.any():
            break
        head = residual[used] / demand[used]
        delta = max(float(head.min()), 0.0)
        level[unfrozen] += delta
        residual[used] -= delta * demand[used]
        saturated = np.zeros(residual.shape[0], dtype=bool)
        saturated[used] = residual[used] <= _SAT_RTOL * scale[used]
        residual[saturated] = np.maximum(residual[saturated], 0.0)
        hit = np.asarray(sub @ saturated.astype(float)).ravel() > 0
        newly = unfrozen & hit
        if not newly.any():  # numerical safety: freeze the tightest group
            newly = unfrozen.copy()
        unfrozen &= ~newly
    rates[members] = level
