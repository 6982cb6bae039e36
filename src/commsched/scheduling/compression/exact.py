"""The exact Max K-Cut of a small contention DAG, by enumeration: the reference the compressions are held to.

The DAG conventions are those of ``commsched.scheduling.compression``.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.3-§4.4; crux-spec §4.3, A12.
"""

from __future__ import annotations

import itertools

import numpy as np
from numpy.typing import ArrayLike

from commsched.errors import InputError
from commsched.scheduling.compression.dag import Compression, check_contention, check_levels

__all__ = ["BRUTE_FORCE_MAX_ASSIGNMENTS", "brute_force_compression"]


BRUTE_FORCE_MAX_ASSIGNMENTS = 2_000_000
"""Largest number of level assignments ``K**n`` that ``brute_force_compression`` enumerates."""


def brute_force_compression(sharing: ArrayLike, intensity: ArrayLike, levels: int) -> Compression:
    """The exact Max K-Cut of the contention DAG by enumerating every valid level assignment.

    Enumerates ``min(levels, n) ** n`` assignments (at most ``BRUTE_FORCE_MAX_ASSIGNMENTS``); meant
    for tests and small cases (the paper's microbenchmark: 5 jobs, 3 levels). Ties keep the
    lexicographically smallest assignment.

    Examples
    --------
    >>> share = np.zeros((4, 4), dtype=bool)
    >>> share[0, 1] = share[1, 0] = share[2, 3] = share[3, 2] = True
    >>> result = brute_force_compression(share, [5.0, 4.0, 3.0, 2.0], 2)
    >>> result.levels, result.cut_weight, result.order
    ((0, 1, 0, 1), 8.0, (0, 2, 1, 3))

    References
    ----------
    Crux §4.3 (problem statement), §4.4 (enumeration as the optimum); crux-spec §4.3, A12.
    """
    share, inten = check_contention(sharing, intensity)
    check_levels(levels)
    n = share.shape[0]
    if n == 0:
        return Compression(levels=(), cut_weight=0.0, order=())
    k = min(int(levels), n)
    if k**n > BRUTE_FORCE_MAX_ASSIGNMENTS:
        raise InputError(
            f"{k}**{n} assignments",
            where="brute_force_compression",
            expected=f"at most {BRUTE_FORCE_MAX_ASSIGNMENTS} (a smaller DAG)",
        )
    assign = np.array(list(itertools.product(range(k), repeat=n)), dtype=np.int64).reshape(-1, n)
    src, dst = np.nonzero(np.triu(share, 1))
    valid = np.all(assign[:, src] <= assign[:, dst], axis=1)
    cuts = ((assign[:, src] < assign[:, dst]) * inten[src]).sum(axis=1)
    cuts = np.where(valid, cuts, -np.inf)
    winner = assign[int(np.argmax(cuts))]
    order = np.lexsort((np.arange(n), winner))
    return Compression(
        levels=tuple(int(v) for v in winner),
        cut_weight=float(cuts.max()),
        order=tuple(int(v) for v in order),
    )
