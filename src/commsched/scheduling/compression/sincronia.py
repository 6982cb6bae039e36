"""Sincronia-style priority compression: the ranking split blindly, a level per job but the last (Crux §4.3).

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

__all__ = ["sincronia_compression"]


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
    return rank_split(sharing, intensity, sizes)
