"""Crux's priority compression: Max K-Cut of the contention DAG by sampled orders + DP (Crux §4.3).

Crux's solver (``crux_compression``) samples ``m`` random breadth-first topological orders and, for
each, solves the sequence K-cut exactly by dynamic programming (``max_k_cut_table``), keeping the best.
The exact optimum for small DAGs is ``compression.exact``. The DAG conventions are those of
``commsched.scheduling.compression``.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.3 (Algorithm 1, Theorems 2 and 3); crux-spec §4.3-§4.7.
.. [2] F. F. Yao, "Efficient dynamic programming using quadrangle inequalities", STOC 1980.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from typing import cast

import numpy as np
from numpy.typing import ArrayLike, NDArray

from commsched.errors import InputError
from commsched.scheduling.compression.dag import (
    Compression,
    bfs_order,
    blocks_to_levels,
    check_contention,
    check_levels,
    check_order,
    in_degrees,
    successor_lists,
)

#: DAGs of this many jobs or more solve their layers compiled (the simulator's large domains)
COMPILED_FROM = 16

__all__ = [
    "COMPILED_FROM",
    "KCutTable",
    "crux_compression",
    "max_k_cut_table",
    "sequence_compression",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class KCutTable:
    """The dynamic-programming tables of the sequence K-cut of one order (Algorithm 1).

    Attributes
    ----------
    best
        ``best[k, i]`` = ``f(i, k)``: the largest cut weight of splitting the first ``i`` jobs of the
        order into ``k`` non-empty consecutive blocks (``-inf`` where ``i < k``); shape ``(K+1, n+1)``.
    split
        ``split[k, i]`` = ``g(i, k)``: the largest argmax ``j`` (the last block is positions
        ``j+1 .. i``); ``-1`` where undefined.
    """

    best: NDArray[np.float64]
    split: NDArray[np.int64]


def _layer_step(
    best: NDArray[np.float64], gain: NDArray[np.float64], k: int, lo: int, i: int
) -> tuple[float, int]:
    """Max and largest argmax over ``j in [lo, i)`` of ``f(j, k-1) + C[j][i]`` (NumPy-vectorised)."""
    values = best[k - 1, lo:i] + gain[lo:i]
    last = values.size - 1 - int(np.argmax(values[::-1]))
    return float(values[last]), lo + last


def max_k_cut_table(
    sharing: ArrayLike, intensity: ArrayLike, order: ArrayLike, levels: int, *, monotone: bool = True
) -> KCutTable:
    """Solve the sequence K-cut of one topological order by dynamic programming (Algorithm 1).

    With the order ``a_1 .. a_n``, ``S[j][i]`` is the weight of edges from ``a_1..a_j`` to ``a_1..a_i``
    and ``C[j][i] = S[j][i] - S[j][j]`` the weight from ``a_1..a_j`` into ``a_{j+1}..a_i``. Then
    ``f(i, 1) = 0`` and ``f(i, k) = max_{k-1 <= j < i} f(j, k-1) + C[j][i]``; ``g(i, k)`` is the largest
    argmax. The column ``S[:, i]`` is built incrementally (the prefix-sum loop runs over all ``n``
    positions; the paper's ``1..K`` bound is an erratum, crux-spec §4.5), so memory is ``O(K n)``.

    Parameters
    ----------
    sharing, intensity
        The contention DAG (jobs in rank order, see the module docstring).
    order
        A topological order of the DAG.
    levels
        Number of blocks ``K`` (the table covers ``k = 1 .. K``).
    monotone
        Restrict ``j >= g(i-1, k)`` (monotone argmax, valid because ``C`` satisfies the quadrangle
        inequality; crux-spec §4.6). ``False`` scans the full range (reference implementation).

    Returns
    -------
    KCutTable
        ``best`` = ``f`` and ``split`` = ``g``, shape ``(K+1, n+1)``.

    Examples
    --------
    >>> share = np.zeros((4, 4), dtype=bool)
    >>> share[0, 1] = share[1, 0] = share[2, 3] = share[3, 2] = True
    >>> table = max_k_cut_table(share, [5.0, 4.0, 3.0, 2.0], [0, 2, 1, 3], 2)
    >>> float(table.best[2, 4]), int(table.split[2, 4])
    (8.0, 2)

    References
    ----------
    Crux §4.3, Algorithm 1; crux-spec §4.5 (with errata) and §4.6; Yao (1980).
    """
    share, inten = check_contention(sharing, intensity)
    check_levels(levels)
    return _table(share, inten, check_order(order, share), int(levels), monotone)


def _table(
    share: NDArray[np.bool_], inten: NDArray[np.float64], ords: NDArray[np.int64], big_k: int, monotone: bool
) -> KCutTable:
    """Algorithm 1's tables, layer by layer over the whole ``C`` matrix (the same floating-point sums as
    the column-by-column scan :func:`_table_scan`, and the same tables: tested): compiled from
    :data:`COMPILED_FROM` jobs, vectorised below (a daemon deciding for a few jobs never loads numba)."""
    n = share.shape[0]
    if n < 2 or big_k < 2:
        return _table_scan(share, inten, ords, big_k, monotone)
    if n >= COMPILED_FROM:
        layers = _compiled_layers()
        best, split = layers(np.ascontiguousarray(share[np.ix_(ords, ords)]), inten[ords], big_k, monotone)
        return KCutTable(best=best, split=split)
    weight_in_order = inten[ords]
    # w[p, i]: weight of the edge a_p -> a_i (p < i); every sharing predecessor in a topological order
    # is a tail. S[j][i] = sum_{i' <= i} sum_{p < j} w[p, i'], accumulated in the scan's own order
    w = np.where(np.triu(share[np.ix_(ords, ords)], 1), weight_in_order[:, None], 0.0)
    s_full = np.zeros((n + 1, n + 1))
    s_full[1:, 1:] = np.cumsum(np.cumsum(w, axis=0), axis=1)
    s_full[np.arange(1, n + 1), np.arange(1, n + 1)] = s_full[np.arange(0, n), np.arange(1, n + 1)]
    gain = s_full - np.diagonal(s_full)[:, None]  # gain[j, i] = C[j][i] = S[j][i] - S[j][j]
    best = np.full((big_k + 1, n + 1), -np.inf)
    split = np.full((big_k + 1, n + 1), -1, dtype=np.int64)
    best[1, 1:] = 0.0
    split[1, 1:] = 0
    rows = np.arange(n + 1)
    below = rows[:, None] < rows[None, :]  # j < i
    for k in range(2, big_k + 1):
        values = np.where(below & (rows[:, None] >= k - 1), best[k - 1][:, None] + gain, -np.inf)
        last = (n - np.argmax(values[::-1, :], axis=0)).tolist()  # the largest argmax of every column
        _fill_layer(best[k], split[k], values, last, k, monotone=monotone)
    return KCutTable(best=best, split=split)


def _fill_layer(
    best_k: NDArray[np.float64],
    split_k: NDArray[np.int64],
    values: NDArray[np.float64],
    last: list[int],
    k: int,
    *,
    monotone: bool,
) -> None:
    """Layer ``k`` from the full-range maxima: under the monotone rule a column whose largest argmax
    lies below the previous column's is scanned again over the allowed range only (as the scan does)."""
    prev = -1
    for i in range(k, len(last)):
        lo = max(k - 1, prev) if monotone else k - 1
        j = last[i]
        if j < lo:  # the restricted range misses the full-range argmax: its own largest argmax
            seg = values[lo:i, i]
            j = lo + seg.size - 1 - int(np.argmax(seg[::-1]))
        best_k[i] = values[j, i]
        split_k[i] = j
        prev = j


_Layers = Callable[
    [NDArray[np.bool_], NDArray[np.float64], int, bool], tuple[NDArray[np.float64], NDArray[np.int64]]
]


@functools.cache
def _compiled_layers() -> _Layers:
    """:func:`_layers` compiled by numba (cached on disk), loaded on first use."""
    from numba import njit

    return cast(_Layers, njit(cache=True, nogil=True)(_layers))


def _layers(
    share_ord: NDArray[np.bool_], weight_in_order: NDArray[np.float64], big_k: int, monotone: bool
) -> tuple[NDArray[np.float64], NDArray[np.int64]]:  # pragma: no cover - run compiled (_compiled_layers)
    """``best`` and ``split`` of Algorithm 1 for the DAG in order (``share_ord``: its sharing matrix with
    rows and columns in the order). ``S[j][i]`` is accumulated as NumPy's two running sums would (over
    the tails first, then over the heads), and each entry of layer ``k`` is the largest argmax over the
    allowed range ``[lo, i)`` (``lo``: ``k - 1``, or the previous column's argmax under the monotone rule)."""
    n = share_ord.shape[0]
    s_full = np.zeros((n + 1, n + 1))
    col = np.zeros(n)  # running sum over the tails p <= j of w[p, i], for the current head i
    for i in range(n):
        acc = 0.0
        for p in range(n):
            if p < i and share_ord[p, i]:
                acc += weight_in_order[p]
            col[p] = acc
        for p in range(n):
            s_full[p + 1, i + 1] = s_full[p + 1, i] + col[p] if i > 0 else col[p]
    for d in range(1, n + 1):
        s_full[d, d] = s_full[d - 1, d]
    best = np.full((big_k + 1, n + 1), -np.inf)
    split = np.full((big_k + 1, n + 1), -1, dtype=np.int64)
    best[1, 1:] = 0.0
    split[1, 1:] = 0
    for k in range(2, big_k + 1):
        prev = -1
        for i in range(k, n + 1):
            lo = max(k - 1, prev) if monotone else k - 1
            j_best = -1
            v_best = -np.inf
            for j in range(lo, i):
                v = best[k - 1, j] + (s_full[j, i] - s_full[j, j])
                if j_best < 0 or v >= v_best:
                    j_best, v_best = j, v
            best[k, i] = v_best
            split[k, i] = j_best
            prev = j_best
    return best, split


def _table_scan(
    share: NDArray[np.bool_], inten: NDArray[np.float64], ords: NDArray[np.int64], big_k: int, monotone: bool
) -> KCutTable:
    n = share.shape[0]
    best = np.full((big_k + 1, n + 1), -np.inf)
    split = np.full((big_k + 1, n + 1), -1, dtype=np.int64)
    best[1, 1:] = 0.0
    split[1, 1:] = 0
    column = np.zeros(n + 1)  # S[j][i] for j = 0..n, current i
    diagonal = np.zeros(n + 1)  # S[j][j]
    weight_in_order = inten[ords]
    for i in range(1, n + 1):
        head = ords[i - 1]
        # weights of edges a_p -> a_i (p < i): every sharing predecessor in a topological order is a tail
        incoming = np.where(share[head, ords[: i - 1]], weight_in_order[: i - 1], 0.0)
        column[1:i] += np.cumsum(incoming)
        column[i] = column[i - 1]  # S[i][i] = S[i-1][i]: entries j > i are never read
        diagonal[i] = column[i]
        gain = column[:i] - diagonal[:i]  # C[j][i] for j < i
        for k in range(2, min(big_k, i) + 1):
            lo = k - 1
            if monotone and split[k, i - 1] >= 0:
                lo = max(lo, int(split[k, i - 1]))
            best[k, i], split[k, i] = _layer_step(best, gain, k, lo, i)
    return KCutTable(best=best, split=split)


def sequence_compression(
    sharing: ArrayLike, intensity: ArrayLike, order: ArrayLike, levels: int, *, monotone: bool = True
) -> Compression:
    """The best compression that cuts one topological order into at most ``levels`` blocks.

    Uses ``K' = min(levels, n)`` blocks (using every level never hurts, crux-spec §4.5); block 1 gets
    level 0 (highest). Reconstruction follows ``Cut(i, k) = Cut(g(i, k), k-1) + {a_{g+1} .. a_i}``.

    Examples
    --------
    >>> share = np.zeros((4, 4), dtype=bool)
    >>> share[0, 1] = share[1, 0] = share[2, 3] = share[3, 2] = True
    >>> sequence_compression(share, [5.0, 4.0, 3.0, 2.0], [0, 1, 2, 3], 2).levels
    (0, 1, 1, 1)
    >>> sequence_compression(share, [5.0, 4.0, 3.0, 2.0], [0, 2, 1, 3], 2).levels
    (0, 1, 0, 1)

    References
    ----------
    Crux §4.3, Algorithm 1 and Theorem 2; crux-spec §4.5 (erratum iv: the last block is
    ``a_{i_{K-1}+1} .. a_n``).
    """
    share, inten = check_contention(sharing, intensity)
    check_levels(levels)
    return _sequence(share, inten, check_order(order, share), int(levels), monotone)


def _sequence(
    share: NDArray[np.bool_], inten: NDArray[np.float64], ords: NDArray[np.int64], levels: int, monotone: bool
) -> Compression:
    table = _table(share, inten, ords, levels, monotone)
    n = ords.size
    if n == 0:
        return Compression(levels=(), cut_weight=0.0, order=())
    k = min(int(levels), n)
    bounds = [n]
    i = n
    for kk in range(k, 1, -1):
        i = int(table.split[kk, i])
        bounds.append(i)
    bounds.reverse()
    return Compression(
        levels=blocks_to_levels(ords, bounds),
        cut_weight=float(table.best[k, n]),
        order=tuple(int(v) for v in ords),
    )


def crux_compression(
    sharing: ArrayLike,
    intensity: ArrayLike,
    levels: int,
    *,
    rng: np.random.Generator | int = 0,
    orders: int = 10,
) -> Compression:
    """Crux's priority compression: the best sequence K-cut over ``orders`` random BFS orders.

    Parameters
    ----------
    sharing, intensity
        The contention DAG (jobs in rank order, see the module docstring).
    levels
        Number of usable priority levels ``K`` (e.g. 8 in the trace simulation, 3 in the
        microbenchmark; crux-spec A15).
    rng
        A ``numpy.random.Generator`` or an integer seed for one.
    orders
        Number ``m`` of sampled topological orders (the paper uses 10). Ties keep the first best
        (strict ``>``).

    Returns
    -------
    Compression
        Levels per job (0 = highest), their cut weight and the order they cut.

    Examples
    --------
    Fig. 13 of the paper: jobs 0 and 1 share a link, so do jobs 2 and 3; two levels.

    >>> share = np.zeros((4, 4), dtype=bool)
    >>> share[0, 1] = share[1, 0] = share[2, 3] = share[3, 2] = True
    >>> result = crux_compression(share, [5.0, 4.0, 3.0, 2.0], 2, rng=1)
    >>> result.levels, result.cut_weight
    ((0, 1, 0, 1), 8.0)

    References
    ----------
    Crux §4.3 (Algorithm 1, Theorems 2 and 3); crux-spec §4.4-§4.7, A10, A15.
    """
    share, inten = check_contention(sharing, intensity)
    check_levels(levels)
    if isinstance(orders, bool) or not isinstance(orders, int) or orders < 1:
        raise InputError(f"{orders!r}", where="orders", expected="an integer >= 1")
    gen = np.random.default_rng(rng)
    indegrees, successors = in_degrees(share), successor_lists(share)

    def sample() -> Compression:
        order = np.asarray(bfs_order(share, indegrees, gen, successors), dtype=np.int64)
        return _sequence(share, inten, order, int(levels), True)

    best = sample()
    for _ in range(orders - 1):
        candidate = sample()
        if candidate.cut_weight > best.cut_weight:
            best = candidate
    return best
