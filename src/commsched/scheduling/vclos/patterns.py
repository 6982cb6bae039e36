"""Per-step traffic patterns of common collectives, over ranks, and the vClos rank layout.

A rank pattern is a tuple of ``(src rank, dst rank)`` pairs that run at once; a collective is a tuple
of such steps. :func:`aligned_layout` lays ranks out as the paper does (§5.3): rank ``i`` on leaf
``i // n`` at the leaf's ``i % n``-th chosen port, so that with source routing rank ``i`` always
leaves through plane ``i % n``.
"""

from __future__ import annotations

from collections.abc import Sequence

from commsched.errors import InputError
from commsched.scheduling.vclos.fabric import Flow, GpuAddr

RankPattern = tuple[tuple[int, int], ...]


def _check(n: int) -> None:
    if n < 1:
        raise InputError(f"a collective needs at least 1 rank, got {n}", where="ranks", expected=">= 1")


def ring(n: int) -> tuple[RankPattern, ...]:
    """Ring all-reduce: every one of its 2(n-1) steps sends rank i -> i+1 (mod n).

    Examples
    --------
    >>> ring(3)
    (((0, 1), (1, 2), (2, 0)),)

    References
    ----------
    vClos §5.3, Ring-AllReduce.
    """
    _check(n)
    if n == 1:
        return ((),)
    return (tuple((i, (i + 1) % n) for i in range(n)),)


def halving_doubling(n: int) -> tuple[RankPattern, ...]:
    """Recursive halving-doubling: exchange with ``i XOR 2^t``; non-powers of two fold first.

    With ``P = 2^floor(log2 n)``, ranks ``P..n-1`` first send to ``i - P`` (fold), the ``P`` ranks run
    reduce-scatter (distances 1, 2, ..., P/2) and all-gather (P/2, ..., 1), then ranks ``i < n - P``
    send the result back to ``i + P`` (unfold).

    Examples
    --------
    >>> halving_doubling(2)
    (((0, 1), (1, 0)), ((0, 1), (1, 0)))
    >>> halving_doubling(3)[0]
    ((2, 0),)

    References
    ----------
    vClos §5.3, Recursive Half-Doubling (and its non-power-of-two case).
    """
    _check(n)
    p = 1 << (n.bit_length() - 1)
    dists = [1 << t for t in range(p.bit_length() - 1)]
    core = [tuple((i, i ^ d) for i in range(p)) for d in [*dists, *reversed(dists)]]
    if p == n:
        return tuple(core)
    fold = tuple((i + p, i) for i in range(n - p))
    unfold = tuple((i, i + p) for i in range(n - p))
    return (fold, *core, unfold)


def pairwise_all_to_all(n: int) -> tuple[RankPattern, ...]:
    """Pairwise-exchange all-to-all: in step t (0..n-2) rank i sends to (i + t + 1) mod n.

    Examples
    --------
    >>> pairwise_all_to_all(3)
    (((0, 1), (1, 2), (2, 0)), ((0, 2), (1, 0), (2, 1)))

    References
    ----------
    vClos §5.3, Expert parallelism.
    """
    _check(n)
    return tuple(tuple((i, (i + t + 1) % n) for i in range(n)) for t in range(n - 1))


def pipeline(n: int) -> tuple[RankPattern, ...]:
    """Pipeline send/receive: forward i -> i+1, then backward i+1 -> i.

    Examples
    --------
    >>> pipeline(3)
    (((0, 1), (1, 2)), ((1, 0), (2, 1)))

    References
    ----------
    vClos §5.3, Pipeline parallelism.
    """
    _check(n)
    return (tuple((i, i + 1) for i in range(n - 1)), tuple((i + 1, i) for i in range(n - 1)))


COLLECTIVES = {
    "ring": ring,
    "halving-doubling": halving_doubling,
    "pairwise-all-to-all": pairwise_all_to_all,
    "pipeline": pipeline,
}


def aligned_layout(leaves: Sequence[int], ports: Sequence[Sequence[int]]) -> tuple[GpuAddr, ...]:
    """The paper's rank layout: rank ``i`` on ``leaves[i // n]`` at port ``ports[i // n][i % n]``.

    ``ports`` gives, per leaf, the ``n`` ports the job uses there (the same count on every leaf).

    Examples
    --------
    >>> [(g.leaf, g.port) for g in aligned_layout([3, 1], [[0, 1], [2, 3]])]
    [(3, 0), (3, 1), (1, 2), (1, 3)]

    References
    ----------
    vClos §5.3 (G_i on leaf floor(i/n), sending through the (i mod n)-th spine).
    """
    if len(leaves) != len(ports) or len({len(p) for p in ports}) > 1:
        raise InputError("one equal-sized port list per leaf is needed", where="ports")
    return tuple(GpuAddr(leaf=n, port=p) for n, ps in zip(leaves, ports, strict=True) for p in ps)


def place_pattern(pattern: RankPattern, gpus: Sequence[GpuAddr]) -> tuple[Flow, ...]:
    """Map a rank pattern onto GPUs (rank i runs on ``gpus[i]``)."""
    try:
        return tuple(Flow(src=gpus[s], dst=gpus[d]) for s, d in pattern)
    except IndexError:
        raise InputError(
            f"pattern names a rank beyond the {len(gpus)} placed GPUs", where="pattern"
        ) from None
