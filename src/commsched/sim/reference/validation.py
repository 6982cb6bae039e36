"""Chunk-by-chunk reference simulation of a ring all-reduce, to validate the lockstep coupling rule.

The flow-level engine runs a ring step's transfers in lockstep at the pace of the slowest edge. Here
each rank's send of step ``s`` is simulated separately: it can start once the rank finished its send of
step ``s - 1`` and received its neighbour's chunk of step ``s - 1`` (the data dependency of a ring), it
waits ``alpha`` and then takes ``chunk / bandwidth`` on its own edge. With ``slices > 1`` each chunk is
cut into slices that pipeline through the ring (as NCCL does).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np


def ring_chunk_duration(
    edge_bytes_per_s: Sequence[float], size_bytes: float, alpha_s: float, slices: int = 1
) -> float:
    """Duration of a ring all-reduce of ``size_bytes`` over ``n = len(edge_bytes_per_s)`` ranks.

    ``edge_bytes_per_s[i]`` is the bandwidth of the edge ``i -> i+1``.

    Examples
    --------
    >>> round(ring_chunk_duration([1.0, 1.0], 2.0, 0.0), 9)  # 2(n-1) steps of M/n
    2.0
    """
    bw = np.asarray(edge_bytes_per_s, dtype=float)
    n = bw.size
    steps = 2 * (n - 1)
    piece = size_bytes / n / slices
    send_end = np.zeros(n)  # end of each rank's previous send
    for _ in range(steps * slices):
        recv_ready = np.roll(send_end, 1)  # rank i receives from i-1
        start = np.maximum(send_end, recv_ready)
        send_end = start + alpha_s / slices + piece / bw
    return float(send_end.max())


def ring_lockstep_duration(edge_bytes_per_s: Sequence[float], size_bytes: float, alpha_s: float) -> float:
    """The engine's rule: ``2(n-1) * (alpha + (M/n) / min bandwidth)``."""
    bw = np.asarray(edge_bytes_per_s, dtype=float)
    n = bw.size
    return float(2 * (n - 1) * (alpha_s + size_bytes / n / bw.min()))
