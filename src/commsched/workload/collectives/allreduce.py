"""Ring-based and halving/doubling all-reduce schedules (ring, Rabenseifner, hierarchical ring).

Conventions and per-rank byte counts are those of :mod:`commsched.workload.collectives`.

References
----------
.. [1] P. Patarasuk and X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
   JPDC 69(2), 2009 (ring all-reduce).
.. [2] R. Thakur, R. Rabenseifner and W. Gropp, "Optimization of collective communication operations in
   MPICH", IJHPCA 19(1), 2005, §4.4 (recursive halving/doubling, non-power-of-two pre/post step).
"""

from __future__ import annotations

import math

from commsched.errors import InputError
from commsched.workload.collectives.common import check_positive_int, check_size, compact_steps
from commsched.workload.records import CollectiveSchedule, Step, Transfer

__all__ = ["halving_doubling_allreduce", "hierarchical_ring_allreduce", "ring_allreduce"]


def ring_allreduce(*, ranks: int, size_bytes: float) -> CollectiveSchedule:
    """Ring all-reduce: reduce-scatter then all-gather around the ring ``i -> i+1 mod n``.

    One step of ``n`` transfers of ``M/n`` bytes, repeated ``2(n-1)`` times.

    Examples
    --------
    >>> s = ring_allreduce(ranks=4, size_bytes=400.0)
    >>> len(s.steps), s.steps[0].repeat, s.sent_bytes()
    (1, 6, (600.0, 600.0, 600.0, 600.0))

    References
    ----------
    Patarasuk and Yuan, JPDC 2009.
    """
    n, m = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    step = Step(
        transfers=tuple(Transfer(src=i, dst=(i + 1) % n, size_bytes=m / n) for i in range(n)),
        repeat=2 * (n - 1),
        label="ring",
    )
    return CollectiveSchedule(algorithm="ring", ranks=n, size_bytes=m, steps=compact_steps([step]))


def halving_doubling_allreduce(*, ranks: int, size_bytes: float) -> CollectiveSchedule:
    """Rabenseifner all-reduce: recursive-halving reduce-scatter + recursive-doubling all-gather.

    For ``n`` not a power of two, with ``p`` the largest power of two ``<= n`` and ``r = n - p``: in a
    pre-step each even rank ``2i < 2r`` sends its whole vector (``M``) to ``2i+1`` and drops out; the ``p``
    remaining ranks (odd ranks ``< 2r`` and all ranks ``>= 2r``) run the power-of-two algorithm
    (exchanges of ``M/2, M/4, ..., M/p``, then ``M/p, ..., M/2`` with partners ``newrank XOR 2^k``); in a
    post-step each odd rank ``2i+1 < 2r`` sends the full result (``M``) back to ``2i``, as in MPICH.

    Examples
    --------
    >>> s = halving_doubling_allreduce(ranks=4, size_bytes=400.0)
    >>> [st.transfers[0].size_bytes for st in s.steps], s.sent_bytes()[0]
    ([200.0, 100.0, 100.0, 200.0], 600.0)
    >>> halving_doubling_allreduce(ranks=3, size_bytes=100.0).sent_bytes()
    (100.0, 200.0, 100.0)

    References
    ----------
    Thakur, Rabenseifner and Gropp, IJHPCA 2005, §4.4; MPICH ``allreduce_intra_reduce_scatter_allgather``.
    """
    n, m = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    p = 1 << (n.bit_length() - 1)
    r = n - p

    def real(newrank: int) -> int:
        return 2 * newrank + 1 if newrank < r else newrank + r

    steps: list[Step] = []
    if r:
        pre = tuple(Transfer(src=2 * i, dst=2 * i + 1, size_bytes=m) for i in range(r))
        steps.append(Step(transfers=pre, label="pre"))
    masks = [1 << k for k in range(p.bit_length() - 1)]
    for k, mask in enumerate(masks):
        size = m / (2 ** (k + 1))
        tr = tuple(Transfer(src=real(v), dst=real(v ^ mask), size_bytes=size) for v in range(p))
        steps.append(Step(transfers=tr, label="reduce_scatter"))
    for k, mask in reversed(list(enumerate(masks))):
        size = m / (2 ** (k + 1))
        tr = tuple(Transfer(src=real(v), dst=real(v ^ mask), size_bytes=size) for v in range(p))
        steps.append(Step(transfers=tr, label="allgather"))
    if r:
        post = tuple(Transfer(src=2 * i + 1, dst=2 * i, size_bytes=m) for i in range(r))
        steps.append(Step(transfers=post, label="post"))
    return CollectiveSchedule(algorithm="halving_doubling", ranks=n, size_bytes=m, steps=compact_steps(steps))


def hierarchical_ring_allreduce(
    *, ranks: int, size_bytes: float, ranks_per_host: int | None = None
) -> CollectiveSchedule:
    """Hierarchical (2D, rail-wise) ring all-reduce.

    Ranks ``j*g .. j*g+g-1`` share host ``j``, with ``g = ranks_per_host`` (must divide ``ranks``;
    default ``gcd(ranks, 8)``, i.e. 8-GPU hosts) and ``h = ranks / g`` hosts. Three phases:
    (1) intra-host ring reduce-scatter, one step of ``n`` transfers of ``M/g`` repeated ``g-1`` times;
    (2) inter-host ring all-reduce of each rank's ``M/g`` shard among the ranks with the same local index
    (one ring per rail), ``n`` transfers of ``M/(g h)`` repeated ``2(h-1)`` times; (3) intra-host ring
    all-gather, as (1). Each rank sends ``2(g-1)M/g + 2(h-1)M/(g h)`` bytes.

    Examples
    --------
    >>> s = hierarchical_ring_allreduce(ranks=8, size_bytes=800.0, ranks_per_host=4)
    >>> [(st.label, st.repeat, st.transfers[0].size_bytes) for st in s.steps]
    [('intra_reduce_scatter', 3, 200.0), ('inter_allreduce', 2, 100.0), ('intra_allgather', 3, 200.0)]

    References
    ----------
    Jia et al., "Highly scalable deep learning training system with mixed-precision", 2018 (hierarchical
    all-reduce); NCCL rail-optimised rings.
    """
    n, m = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    g = math.gcd(n, 8) if ranks_per_host is None else check_positive_int(ranks_per_host, "ranks_per_host")
    if n % g:
        raise InputError(
            f"ranks_per_host={g} does not divide ranks={n}",
            where="ranks_per_host",
            expected=f"a divisor of {n}",
        )
    h = n // g
    intra = tuple(Transfer(src=i, dst=(i // g) * g + (i % g + 1) % g, size_bytes=m / g) for i in range(n))
    inter = tuple(Transfer(src=i, dst=(i + g) % n, size_bytes=m / (g * h)) for i in range(n))
    steps = []
    if g > 1:
        steps.append(Step(transfers=intra, repeat=g - 1, label="intra_reduce_scatter"))
    if h > 1:
        steps.append(Step(transfers=inter, repeat=2 * (h - 1), label="inter_allreduce"))
    if g > 1:
        steps.append(Step(transfers=intra, repeat=g - 1, label="intra_allgather"))
    return CollectiveSchedule(
        algorithm="hierarchical_ring", ranks=n, size_bytes=m, steps=compact_steps(steps)
    )
