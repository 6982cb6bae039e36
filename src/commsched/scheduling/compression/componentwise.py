"""Crux's compression run per connected component of the contention DAG (Crux §4.3, crux-spec §4.8).

The cut weight and the validity of a compression are sums / conjunctions over the DAG's connected
components, so the Max K-Cut of the whole DAG is the union of its components'
(:func:`componentwise_compression`).
Each component draws its BFS orders from a generator seeded by the run's seed and its own jobs only
(:func:`component_seed`), so a decision that leaves a component as it was may reuse its levels.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.3 (Algorithm 1); crux-spec §4.3, §4.8.
"""

from __future__ import annotations

import zlib
from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from commsched.scheduling.compression.dag import Compression, cut_weight
from commsched.scheduling.compression.kcut import crux_compression
from commsched.scheduling.memo import Memo, maybe

__all__ = ["component_seed", "componentwise_compression"]


def component_seed(seed: int, ids: Sequence[str]) -> list[int]:
    """The seed of one component's random draws: the run's seed and the component's own jobs.

    It depends on nothing else (not on other components, not on how many decisions came before), so a
    component that a decision leaves as it was draws the same orders again, and reusing its classes
    cannot change a result.

    Examples
    --------
    >>> component_seed(7, ["b", "a"]) == component_seed(7, ["a", "b"])
    True
    """
    return [seed & 0xFFFFFFFF, zlib.crc32("\n".join(sorted(ids)).encode())]


def componentwise_compression(
    sharing: NDArray[np.bool_],
    intensity: NDArray[np.float64],
    levels: int,
    *,
    seed: int,
    ids: Sequence[str],
    orders: int = 10,
    memo: Memo | None = None,
) -> Compression:
    """Crux's compression run per connected component of the contention DAG.

    The cut weight and the validity of a compression are sums / conjunctions over components, so
    the Max K-Cut of the whole DAG is the union of the components' (each solved with ``orders``
    sampled BFS orders, in rank order, from a generator seeded by :func:`component_seed` of its own
    jobs' ``ids``); this keeps the DP at ``O(m K n_c^2)`` per component instead of ``O(m K n^2)``.
    Jobs without contention edges are placed by rank position (``level = floor(position * K / n)``),
    which keeps the ranking's order among them (it matters only for intra-host sharing, which the DAG
    ignores). With a ``memo``, a component whose jobs, order, edges and intensities are those of an
    earlier decision gets that decision's levels back without solving again (the same levels: its
    draws depend on nothing else).

    Examples
    --------
    Two components (jobs 0-1 and 2-3) with two levels: each splits its pair.

    >>> share = np.zeros((4, 4), dtype=bool)
    >>> share[0, 1] = share[1, 0] = share[2, 3] = share[3, 2] = True
    >>> c = componentwise_compression(share, np.ones(4), 2, seed=0, ids=["a", "b", "c", "d"])
    >>> c.levels, c.cut_weight
    ((0, 1, 0, 1), 2.0)

    References
    ----------
    Crux §4.3 (Algorithm 1); crux-spec §4.3, §4.8.
    """
    n = sharing.shape[0]
    k = max(1, min(levels, n))
    out = [min(k - 1, (i * k) // max(1, n)) for i in range(n)]
    if n:
        count, labels = connected_components(sparse.csr_matrix(sharing), directed=False)
        for c in range(count):
            idx = np.flatnonzero(labels == c)
            if idx.size < 2:
                continue
            members = [ids[i] for i in idx.tolist()]
            sub_share, sub_int = sharing[np.ix_(idx, idx)], intensity[idx]

            def solve(
                share: NDArray[np.bool_] = sub_share,
                inten: NDArray[np.float64] = sub_int,
                names: list[str] = members,
            ) -> tuple[int, ...]:
                rng = np.random.default_rng(component_seed(seed, names))
                return crux_compression(share, inten, levels, rng=rng, orders=orders).levels

            key = ("k-cut", tuple(members), sub_share.tobytes(), sub_int.tobytes(), levels, orders, seed)
            for i, level in zip(idx.tolist(), maybe(memo, key, solve), strict=True):
                out[i] = level
    levels_t = tuple(int(v) for v in out)
    return Compression(
        levels=levels_t, cut_weight=cut_weight(sharing, intensity, levels_t), order=tuple(range(n))
    )
