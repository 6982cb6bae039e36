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

Crux's solver (``crux_compression``) samples ``m`` random breadth-first topological orders and, for
each, solves the sequence K-cut exactly by dynamic programming (``max_k_cut_table``), keeping the best.
Baselines: ``sincronia_compression`` and ``varys_compression`` (crux-spec §8.1); an exact
``brute_force_compression`` for small DAGs serves the tests.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.3 (Algorithm 1, Theorems 2 and 3); crux-spec §4.3-§4.8 and §8.1.
.. [2] F. F. Yao, "Efficient dynamic programming using quadrangle inequalities", STOC 1980.
"""

from __future__ import annotations

import itertools
from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from commsched.errors import InputError

__all__ = [
    "BRUTE_FORCE_MAX_ASSIGNMENTS",
    "Compression",
    "KCutTable",
    "bfs_topological_order",
    "brute_force_compression",
    "crux_compression",
    "cut_weight",
    "is_valid_compression",
    "max_k_cut_table",
    "sequence_compression",
    "sincronia_compression",
    "varys_compression",
    "violating_edges",
]

BRUTE_FORCE_MAX_ASSIGNMENTS = 2_000_000
"""Largest number of level assignments ``K**n`` that ``brute_force_compression`` enumerates."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Compression:
    """A compression of the ranked jobs onto priority levels.

    Attributes
    ----------
    levels
        ``levels[j]`` is the level of job ``j`` (jobs in rank order); 0 is the highest class.
    cut_weight
        Total weight of the contention-DAG edges whose two jobs are on different levels.
    order
        A topological order of the DAG of which ``levels`` is a sequence cut (consecutive blocks get
        levels 0, 1, ...): the sampled order that won for Crux, the rank order for the baselines, and
        the level-sorted order for the brute force (Theorem 3 of the paper).
    """

    levels: tuple[int, ...]
    cut_weight: float
    order: tuple[int, ...]


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


def _check_contention(
    sharing: ArrayLike, intensity: ArrayLike
) -> tuple[NDArray[np.bool_], NDArray[np.float64]]:
    share = np.asarray(sharing)
    inten = np.asarray(intensity, dtype=np.float64)
    if share.ndim != 2 or share.shape[0] != share.shape[1]:
        raise InputError(f"shape {share.shape}", where="sharing", expected="a square n x n matrix")
    if share.dtype != np.bool_:
        raise InputError(f"dtype {share.dtype}", where="sharing", expected="a boolean matrix")
    if not np.array_equal(share, share.T):
        raise InputError(
            "matrix is not symmetric", where="sharing", expected="sharing[a, b] == sharing[b, a]"
        )
    if inten.shape != (share.shape[0],):
        raise InputError(
            f"shape {inten.shape}",
            where="intensity",
            expected=f"one value per job, shape ({share.shape[0]},)",
        )
    if not np.all(np.isfinite(inten)) or np.any(inten < 0):
        raise InputError("negative or non-finite value", where="intensity", expected="finite values >= 0")
    return share, inten


def _check_levels(levels: int, where: str = "levels") -> None:
    if isinstance(levels, bool) or not isinstance(levels, int | np.integer) or levels < 1:
        raise InputError(f"{levels!r}", where=where, expected="an integer number of levels >= 1")


def _check_order(order: ArrayLike, share: NDArray[np.bool_]) -> NDArray[np.int64]:
    ords = np.asarray(order, dtype=np.int64)
    n = share.shape[0]
    if ords.shape != (n,) or not np.array_equal(np.sort(ords), np.arange(n)):
        raise InputError(
            "not a permutation of the jobs", where="order", expected=f"a permutation of 0..{n - 1}"
        )
    position = np.empty(n, dtype=np.int64)
    position[ords] = np.arange(n)
    src, dst = np.nonzero(np.triu(share, 1))
    if np.any(position[src] > position[dst]):
        raise InputError("an edge points backwards", where="order", expected="a topological order of the DAG")
    return ords


def _as_levels(job_levels: ArrayLike, n: int) -> NDArray[np.int64]:
    lev = np.asarray(job_levels)
    if lev.shape != (n,) or (lev.size and not np.issubdtype(lev.dtype, np.integer)):
        raise InputError(
            f"shape {lev.shape}, dtype {lev.dtype}", where="levels", expected=f"{n} integer levels"
        )
    return lev.astype(np.int64, copy=False)


def violating_edges(sharing: ArrayLike, job_levels: ArrayLike) -> NDArray[np.int64]:
    """The DAG edges that a compression orients the wrong way.

    Parameters
    ----------
    sharing
        Symmetric boolean ``n x n`` link-sharing matrix of the jobs in rank order.
    job_levels
        Level per job (0 = highest class).

    Returns
    -------
    numpy.ndarray
        Shape ``(m, 2)``: the edges ``(a, b)``, ``a`` ranked above ``b``, with ``level[a] > level[b]``
        (the higher-ranked job put on a lower-priority level). Empty for a valid compression.

    Examples
    --------
    >>> share = np.array([[False, True], [True, False]])
    >>> violating_edges(share, [1, 0]).tolist()
    [[0, 1]]

    References
    ----------
    Crux §4.3 (valid compression); crux-spec §4.3, A14.
    """
    share = np.asarray(sharing, dtype=np.bool_)
    lev = _as_levels(job_levels, share.shape[0])
    src, dst = np.nonzero(np.triu(share, 1))
    bad = lev[src] > lev[dst]
    return np.stack([src[bad], dst[bad]], axis=1).astype(np.int64)


def is_valid_compression(sharing: ArrayLike, job_levels: ArrayLike) -> bool:
    """Whether no two link-sharing jobs have the higher-ranked one on a lower-priority level.

    Examples
    --------
    >>> share = np.array([[False, True], [True, False]])
    >>> is_valid_compression(share, [0, 1]), is_valid_compression(share, [0, 0])
    (True, True)
    >>> is_valid_compression(share, [1, 0])
    False

    References
    ----------
    Crux §4.3; crux-spec §4.3, A14.
    """
    return len(violating_edges(sharing, job_levels)) == 0


def cut_weight(sharing: ArrayLike, intensity: ArrayLike, job_levels: ArrayLike) -> float:
    """Total weight ``I_a`` of the edges ``a -> b`` cut by a compression (``level[a] < level[b]``).

    Examples
    --------
    >>> share = np.zeros((4, 4), dtype=bool)
    >>> share[0, 1] = share[1, 0] = share[2, 3] = share[3, 2] = True
    >>> cut_weight(share, [5.0, 4.0, 3.0, 2.0], [0, 1, 0, 1])
    8.0

    References
    ----------
    Crux §4.3 (objective of the Max K-Cut); crux-spec §4.3.
    """
    share, inten = _check_contention(sharing, intensity)
    lev = _as_levels(job_levels, share.shape[0])
    src, dst = np.nonzero(np.triu(share, 1))
    return float(inten[src][lev[src] < lev[dst]].sum())


def bfs_topological_order(sharing: ArrayLike, rng: np.random.Generator) -> tuple[int, ...]:
    """A random breadth-first topological order of the contention DAG (Kahn with a FIFO queue).

    The sources are shuffled, and so is each batch of successors freed by taking a job off the queue.

    Parameters
    ----------
    sharing
        Symmetric boolean ``n x n`` link-sharing matrix of the jobs in rank order.
    rng
        The random generator (the only source of randomness).

    Returns
    -------
    tuple of int
        The jobs in a topological order of the DAG.

    Examples
    --------
    >>> share = np.zeros((4, 4), dtype=bool)
    >>> share[0, 1] = share[1, 0] = share[2, 3] = share[3, 2] = True
    >>> order = bfs_topological_order(share, np.random.default_rng(0))
    >>> sorted(order[:2]), sorted(order[2:])
    ([0, 2], [1, 3])

    References
    ----------
    Crux §4.3 ("random topological orders by BFS"); crux-spec §4.7 (proposed default).
    """
    share = np.asarray(sharing, dtype=np.bool_)
    return _bfs(share, _indegrees(share), rng)


def _indegrees(share: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Number of higher-ranked sharing partners of every job (its in-degree in the DAG)."""
    counts: NDArray[np.int64] = np.count_nonzero(np.tril(share, -1), axis=1).astype(np.int64)
    return counts


def _bfs(share: NDArray[np.bool_], indegrees: NDArray[np.int64], rng: np.random.Generator) -> tuple[int, ...]:
    n = share.shape[0]
    indegree = indegrees.copy()
    sources = np.flatnonzero(indegree == 0)
    rng.shuffle(sources)
    queue: deque[int] = deque(int(s) for s in sources)
    order: list[int] = []
    while queue:
        job = queue.popleft()
        order.append(job)
        successors = job + 1 + np.flatnonzero(share[job, job + 1 :])
        indegree[successors] -= 1
        freed = successors[indegree[successors] == 0]
        rng.shuffle(freed)
        queue.extend(int(s) for s in freed)
    if len(order) != n:  # cannot happen: edges follow the rank order
        raise InputError("the contention graph has a cycle", where="sharing")
    return tuple(order)


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
    share, inten = _check_contention(sharing, intensity)
    _check_levels(levels)
    return _table(share, inten, _check_order(order, share), int(levels), monotone)


def _table(
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


def _blocks_to_levels(order: NDArray[np.int64], bounds: list[int]) -> tuple[int, ...]:
    """Levels from block ends ``bounds`` (positions, ascending, last = n) of a sequence cut."""
    levels = np.empty(order.size, dtype=np.int64)
    start = 0
    for level, end in enumerate(bounds):
        levels[order[start:end]] = level
        start = end
    return tuple(int(v) for v in levels)


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
    share, inten = _check_contention(sharing, intensity)
    _check_levels(levels)
    return _sequence(share, inten, _check_order(order, share), int(levels), monotone)


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
        levels=_blocks_to_levels(ords, bounds),
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
    share, inten = _check_contention(sharing, intensity)
    _check_levels(levels)
    if isinstance(orders, bool) or not isinstance(orders, int) or orders < 1:
        raise InputError(f"{orders!r}", where="orders", expected="an integer >= 1")
    gen = np.random.default_rng(rng)
    indegrees = _indegrees(share)

    def sample() -> Compression:
        order = np.asarray(_bfs(share, indegrees, gen), dtype=np.int64)
        return _sequence(share, inten, order, int(levels), True)

    best = sample()
    for _ in range(orders - 1):
        candidate = sample()
        if candidate.cut_weight > best.cut_weight:
            best = candidate
    return best


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
    share, inten = _check_contention(sharing, intensity)
    _check_levels(levels)
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


def _rank_split(sharing: ArrayLike, intensity: ArrayLike, sizes: list[int]) -> Compression:
    share, inten = _check_contention(sharing, intensity)
    n = share.shape[0]
    ords = np.arange(n, dtype=np.int64)
    bounds = list(np.cumsum(sizes, dtype=np.int64)) if n else []
    job_levels = _blocks_to_levels(ords, [int(b) for b in bounds])
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
    _check_levels(levels)
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
    _check_levels(levels)
    n = np.asarray(sharing).shape[0] if np.asarray(sharing).ndim == 2 else 0
    k = min(int(levels), n)
    sizes = [n // k + (1 if g < n % k else 0) for g in range(k)] if n else []
    return _rank_split(sharing, intensity, sizes)
