"""NCCL's double binary tree all-reduce schedule and its trees.

Conventions and per-rank byte counts are those of :mod:`commsched.workload.collectives`.

References
----------
.. [1] NVIDIA NCCL, ``src/graph/trees.cc`` (double binary tree); P. Sanders, J. Speck and J. L. Träff,
   "Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel Computing 35(12), 2009.
"""

from __future__ import annotations

from commsched.workload.collectives.common import check_positive_int, check_size, compact_steps
from commsched.workload.records import CollectiveSchedule, Step, Transfer

__all__ = ["btree_parent", "double_binary_tree_allreduce", "double_binary_tree_parents"]


def btree_parent(rank: int, n: int) -> int | None:
    """Parent of ``rank`` in NCCL's first binary tree over ``n`` ranks (root 0), ``None`` for the root.

    Examples
    --------
    >>> [btree_parent(r, 12) for r in range(12)]
    [None, 2, 4, 2, 8, 6, 4, 6, 0, 10, 8, 10]

    References
    ----------
    NCCL ``ncclGetBtree`` (``src/graph/trees.cc``).
    """
    if rank == 0:
        return None
    bit = rank & -rank
    up = (rank ^ bit) | (bit << 1)
    if up >= n:
        up = rank ^ bit
    return up


def double_binary_tree_parents(n: int) -> tuple[tuple[int | None, ...], tuple[int | None, ...]]:
    """Parents of every rank in NCCL's two complementary trees.

    The second tree mirrors the first (``r -> n-1-r``) when ``n`` is even and shifts it by one rank when
    ``n`` is odd, so that most ranks are interior in one tree and a leaf in the other.

    Examples
    --------
    >>> t0, t1 = double_binary_tree_parents(4)
    >>> t0, t1
    ((None, 2, 0, 2), (1, 3, 1, None))
    """
    n = check_positive_int(n, "ranks")
    t0 = tuple(btree_parent(r, n) for r in range(n))
    if n % 2 == 0:
        mirrored = [t0[n - 1 - r] for r in range(n)]
        t1 = tuple(None if q is None else n - 1 - q for q in mirrored)
    else:
        shifted = [t0[(r - 1) % n] for r in range(n)]
        t1 = tuple(None if q is None else (q + 1) % n for q in shifted)
    return t0, t1


def _tree_levels(parents: tuple[int | None, ...]) -> tuple[list[int], list[int]]:
    """Height above the deepest leaf below (leaves 0) and depth below the root, for each rank."""
    n = len(parents)
    depth = [0] * n
    for r in range(n):
        d, q = 0, parents[r]
        while q is not None:
            d, q = d + 1, parents[q]
        depth[r] = d
    height = [0] * n
    for r in sorted(range(n), key=lambda x: -depth[x]):
        q = parents[r]
        if q is not None:
            height[q] = max(height[q], height[r] + 1)
    return height, depth


def double_binary_tree_allreduce(*, ranks: int, size_bytes: float, chunks: int = 1) -> CollectiveSchedule:
    """NCCL-style double binary tree all-reduce: two trees each reduce then broadcast half the data.

    Each tree carries ``M/2`` split into ``chunks`` pieces. Reduce phase: a rank of height ``l`` (leaves 0)
    sends chunk ``c`` to its parent in step ``l + c``; broadcast phase (after the reduce phase of both trees
    ends): a rank at depth ``d`` sends chunk ``c`` to each child in step ``d + c``. Both trees run in the
    same steps. ``chunks = 1`` is the unpipelined algorithm; larger ``chunks`` pipelines each phase
    (NCCL additionally overlaps the two phases, which this schedule does not). Per tree, a rank sends
    ``M/2`` to its parent (unless root) and ``M/2`` to each child, and receives the same amounts.

    Examples
    --------
    >>> s = double_binary_tree_allreduce(ranks=4, size_bytes=400.0)
    >>> s.sent_bytes(), s.received_bytes()
    ((400.0, 800.0, 800.0, 400.0), (400.0, 800.0, 800.0, 400.0))

    References
    ----------
    NCCL ``src/graph/trees.cc``; Sanders, Speck and Träff, Parallel Computing 2009.
    """
    n, m = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    c = check_positive_int(chunks, "chunks")
    piece = m / 2 / c
    trees = [(p, *_tree_levels(p)) for p in double_binary_tree_parents(n)]
    reduce_steps = [max(h) + c for _, h, _ in trees]
    bcast_steps = [
        max((d[r] for r in range(n) if any(q == r for q in p)), default=-1) + c for p, _, d in trees
    ]
    steps: list[Step] = []
    for s in range(max(reduce_steps) if n > 1 else 0):
        tr = [
            Transfer(src=r, dst=q, size_bytes=piece)
            for p, h, _ in trees
            for r, q in enumerate(p)
            if q is not None and 0 <= s - h[r] < c
        ]
        steps.append(Step(transfers=tuple(tr), label="reduce"))
    for s in range(max(bcast_steps) if n > 1 else 0):
        tr = [
            Transfer(src=q, dst=r, size_bytes=piece)
            for p, _, d in trees
            for r, q in enumerate(p)
            if q is not None and 0 <= s - d[q] < c
        ]
        steps.append(Step(transfers=tuple(tr), label="broadcast"))
    return CollectiveSchedule(
        algorithm="double_binary_tree", ranks=n, size_bytes=m, steps=compact_steps(steps)
    )
