"""The contention DAG of priority compression: validation, validity, cut weight, BFS orders (Crux §4.3).

Shared helpers of the compression solvers (``compression.kcut``, ``compression.sincronia``,
``compression.varys``); the conventions of the DAG (jobs in rank order, ``sharing`` matrix,
``intensity`` weights, levels, cut weight) are those described in ``commsched.scheduling.compression``.

References
----------
.. [1] J. Cao et al., "Crux: GPU-Efficient Communication Scheduling for Deep Learning Training",
   SIGCOMM 2024, §4.3; crux-spec §4.3 and §4.7.
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass

import numpy as np
from numpy.typing import ArrayLike, NDArray

from commsched.errors import InputError

__all__ = [
    "Compression",
    "bfs_order",
    "bfs_topological_order",
    "blocks_to_levels",
    "check_contention",
    "check_levels",
    "check_order",
    "cut_weight",
    "in_degrees",
    "is_valid_compression",
    "rank_split",
    "successor_lists",
    "violating_edges",
]


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


def check_contention(
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


def check_levels(levels: int, where: str = "levels") -> None:
    if isinstance(levels, bool) or not isinstance(levels, int | np.integer) or levels < 1:
        raise InputError(f"{levels!r}", where=where, expected="an integer number of levels >= 1")


def check_order(order: ArrayLike, share: NDArray[np.bool_]) -> NDArray[np.int64]:
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
    share, inten = check_contention(sharing, intensity)
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
    return bfs_order(share, in_degrees(share), rng)


def in_degrees(share: NDArray[np.bool_]) -> NDArray[np.int64]:
    """Number of higher-ranked sharing partners of every job (its in-degree in the DAG)."""
    counts: NDArray[np.int64] = np.count_nonzero(np.tril(share, -1), axis=1).astype(np.int64)
    return counts


def successor_lists(share: NDArray[np.bool_]) -> list[list[int]]:
    """Every job's lower-ranked sharing partners (its successors in the DAG), ascending.

    >>> share = np.zeros((3, 3), dtype=bool)
    >>> share[0, 2] = share[2, 0] = True
    >>> successor_lists(share)
    [[2], [], []]
    """
    return [np.flatnonzero(row).tolist() for row in np.triu(share, 1)]


def bfs_order(
    share: NDArray[np.bool_],
    indegrees: NDArray[np.int64],
    rng: np.random.Generator,
    successors: list[list[int]] | None = None,
) -> tuple[int, ...]:
    """Kahn's algorithm with a FIFO queue: the sources shuffled, then each batch of successors freed by
    taking a job off the queue (``successors``: :func:`successor_lists` of ``share``, when the caller
    draws several orders of one DAG). A batch of one is not shuffled: shuffling it draws nothing."""
    n = share.shape[0]
    succ = successor_lists(share) if successors is None else successors
    indegree = indegrees.tolist()
    sources = np.flatnonzero(indegrees == 0)
    rng.shuffle(sources)
    queue: deque[int] = deque(sources.tolist())
    order: list[int] = []
    while queue:
        job = queue.popleft()
        order.append(job)
        freed = []
        for s in succ[job]:
            indegree[s] -= 1
            if indegree[s] == 0:
                freed.append(s)
        if len(freed) > 1:
            batch = np.array(freed, dtype=np.int64)
            rng.shuffle(batch)
            queue.extend(batch.tolist())
        elif freed:
            queue.append(freed[0])
    if len(order) != n:  # cannot happen: edges follow the rank order
        raise InputError("the contention graph has a cycle", where="sharing")
    return tuple(order)


def blocks_to_levels(order: NDArray[np.int64], bounds: list[int]) -> tuple[int, ...]:
    """Levels from block ends ``bounds`` (positions, ascending, last = n) of a sequence cut."""
    levels = np.empty(order.size, dtype=np.int64)
    start = 0
    for level, end in enumerate(bounds):
        levels[order[start:end]] = level
        start = end
    return tuple(int(v) for v in levels)


def rank_split(sharing: ArrayLike, intensity: ArrayLike, sizes: list[int]) -> Compression:
    """The rank order cut into contiguous groups of ``sizes`` jobs, group ``g`` on level ``g``."""
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
