"""Baseline priority compressions that split the job ranking blindly (Crux §4.3, Fig. 13).

``sincronia_compression`` and ``varys_compression`` (crux-spec §8.1) cut the rank order into ``K``
contiguous groups without looking at the contention DAG; the DAG conventions are those of
``commsched.scheduling.compression``.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.3, Fig. 13; crux-spec §4.2 and §8.1.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from commsched.scheduling.compression.dag import (
    Compression,
    blocks_to_levels,
    check_contention,
    check_levels,
    cut_weight,
)

__all__ = ["sincronia_compression", "varys_compression"]


def _rank_split(sharing: ArrayLike, intensity: ArrayLike, sizes: list[int]) -> Compression:
    share, inten = check_contention(sharing, intensity)
    n = share.shape[0]
    ords = np.arange(n, dtype=np.int64)
    bounds = list(np.cumsum(sizes, dtype=np.int64)) if n else []
    job_levels = blocks_to_levels(ords, [int(b) for b in bounds])
    return Compression(
        levels=job_levels,
        cut_weight=cut_weight(share, inten, job_levels),
        order=tuple(int(v) for v in ords),
    )


def sincronia_compression(sharing: ArrayLike, intensity: ArrayLike, levels: int) -> Compression:
    """Sincronia-style compression: ranks ``0 .. K-2`` get levels ``0 .. K-2``, the rest share ``K-1``.

    Examples
    --------
    >>> share = np.zeros((4, 4), dtype=bool)
    >>> share[0, 1] = share[1, 0] = share[2, 3] = share[3, 2] = True
    >>> result = sincronia_compression(share, [5.0, 4.0, 3.0, 2.0], 2)
    >>> result.levels, result.cut_weight
    ((0, 1, 1, 1), 5.0)

    References
    ----------
    Crux §4.3, Fig. 13; crux-spec §4.2 and §8.1 (generalisation to K levels).
    """
    check_levels(levels)
    n = np.asarray(sharing).shape[0] if np.asarray(sharing).ndim == 2 else 0
    k = min(int(levels), n)
    sizes = [1] * (k - 1) + [n - (k - 1)] if n else []
    return _rank_split(sharing, intensity, sizes)


def varys_compression(sharing: ArrayLike, intensity: ArrayLike, levels: int) -> Compression:
    """Varys-style compression: ``K`` contiguous groups of the ranking, sizes differing by at most one.

    Larger groups come first (higher levels), as in ``numpy.array_split``.

    Examples
    --------
    >>> share = np.zeros((5, 5), dtype=bool)
    >>> varys_compression(share, np.ones(5), 2).levels
    (0, 0, 0, 1, 1)

    References
    ----------
    Crux §4.3, Fig. 13; crux-spec §4.2 and §8.1 (generalisation to K levels).
    """
    check_levels(levels)
    n = np.asarray(sharing).shape[0] if np.asarray(sharing).ndim == 2 else 0
    k = min(int(levels), n)
    sizes = [n // k + (1 if g < n % k else 0) for g in range(k)] if n else []
    return _rank_split(sharing, intensity, sizes)
