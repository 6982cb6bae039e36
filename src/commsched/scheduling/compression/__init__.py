"""Priority compression: map a unique job ranking onto K hardware priority levels (Crux §4.3).

Input of every function here is the *contention DAG* in compact form:

* the jobs are ``0 .. n-1`` **in rank order** (job 0 is the most important, as ranked by the unique
  priority ``P_j`` of Crux §4.2);
* ``sharing`` is a symmetric ``n x n`` boolean matrix, ``sharing[a, b]`` true when jobs ``a`` and ``b``
  share a network link (the diagonal is ignored);
* ``intensity`` holds the GPU intensities ``I_j`` (non-negative, finite).

The DAG has an edge ``a -> b`` for every sharing pair with ``a < b`` (``a`` ranked above ``b``), of
weight ``I_a`` (the intensity of the higher-ranked job, **not** its priority; crux-spec §4.3).
A compression gives every job a *level*, 0 being the highest class. It is *valid* when no edge points
from a lower level to a higher one (``level[a] <= level[b]`` for every edge ``a -> b``); its *cut
weight* is the total weight of edges whose ends are on different levels, which Crux maximises
(Max K-Cut on a DAG).

Crux's solver (``crux_compression``, in ``compression.kcut``) samples ``m`` random breadth-first
topological orders and, for each, solves the sequence K-cut exactly by dynamic programming
(``max_k_cut_table``), keeping the best.
Baselines: ``sincronia_compression`` and ``varys_compression`` (crux-spec §8.1, in
``compression.sincronia`` and ``compression.varys``); an exact ``brute_force_compression`` for small
DAGs (``compression.exact``) serves the tests. Crux runs its solver per connected component of the
DAG (``componentwise_compression``, in ``compression.componentwise``: the cut weight and the validity
are sums over components, and each component's draws are seeded by its own jobs). The shared DAG
helpers (validity, cut weight, BFS orders) live in ``compression.dag``; this module re-exports every
name and lists the family (:func:`compressions`).

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.3 (Algorithm 1, Theorems 2 and 3); crux-spec §4.3-§4.8 and §8.1.
.. [2] F. F. Yao, "Efficient dynamic programming using quadrangle inequalities", STOC 1980.
"""

from __future__ import annotations

from collections.abc import Callable

from numpy.typing import ArrayLike

from commsched.scheduling.compression.componentwise import component_seed, componentwise_compression
from commsched.scheduling.compression.dag import (
    Compression,
    bfs_topological_order,
    cut_weight,
    is_valid_compression,
    violating_edges,
)
from commsched.scheduling.compression.exact import BRUTE_FORCE_MAX_ASSIGNMENTS, brute_force_compression
from commsched.scheduling.compression.kcut import (
    KCutTable,
    crux_compression,
    max_k_cut_table,
    sequence_compression,
)
from commsched.scheduling.compression.sincronia import sincronia_compression
from commsched.scheduling.compression.varys import varys_compression

__all__ = [
    "BRUTE_FORCE_MAX_ASSIGNMENTS",
    "Compression",
    "CompressionFn",
    "KCutTable",
    "bfs_topological_order",
    "brute_force_compression",
    "component_seed",
    "componentwise_compression",
    "compressions",
    "crux_compression",
    "cut_weight",
    "is_valid_compression",
    "max_k_cut_table",
    "sequence_compression",
    "sincronia_compression",
    "varys_compression",
    "violating_edges",
]

#: A priority compression: ``(sharing, intensity, levels) -> Compression`` (jobs in rank order).
CompressionFn = Callable[[ArrayLike, ArrayLike, int], Compression]


def compressions() -> dict[str, CompressionFn]:
    """The family's members by name: Crux's Max K-Cut and the two baselines (defaults of each).

    ``brute_force_compression`` is not a member: it is the exact reference the tests hold them to.

    Examples
    --------
    >>> import numpy as np
    >>> share = np.zeros((3, 3), dtype=bool)
    >>> share[0, 1] = share[1, 0] = share[1, 2] = share[2, 1] = True
    >>> {name: fn(share, [3.0, 2.0, 1.0], 2).levels for name, fn in compressions().items()}
    {'crux': (0, 1, 1), 'sincronia': (0, 1, 1), 'varys': (0, 0, 1)}
    """
    return {"crux": crux_compression, "sincronia": sincronia_compression, "varys": varys_compression}
