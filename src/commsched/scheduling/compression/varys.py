"""Varys-style priority compression: the ranking split blindly into ``K`` near-equal groups (Crux §4.3).

A baseline (crux-spec §8.1): it cuts the rank order into ``K`` contiguous groups without looking at the
contention DAG; the DAG conventions are those of ``commsched.scheduling.compression``.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.3, Fig. 13; crux-spec §4.2 and §8.1.
"""

from __future__ import annotations

import numpy as np
from numpy.typing import ArrayLike

from commsched.scheduling.compression.dag import Compression, check_levels, rank_split

__all__ = ["varys_compression"]


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
    return rank_split(sharing, intensity, sizes)
