"""Collective algorithms expanded into exact per-step transfer schedules.

Every builder returns a :class:`~commsched.workload.records.CollectiveSchedule`: a sequence of synchronous
steps, each a set of concurrent point-to-point transfers, with ``repeat`` for identical consecutive steps
(a ring all-reduce is one step of ``n`` transfers repeated ``2(n-1)`` times). Consecutive identical steps
are always merged, so schedules stay compact. No transfer goes from a rank to itself.

Per-rank bytes (``M`` = ``size_bytes``, ``n`` = ranks):

=====================  ===================================================================================
algorithm              bytes sent by each rank
=====================  ===================================================================================
ring                   ``2(n-1) M / n``
halving_doubling       ``p = 2^floor(log2 n)``, ``r = n - p``: ranks ``>= 2r`` send ``2(p-1) M / p``; even
                       ranks ``< 2r`` send ``M`` (pre-step); odd ranks ``< 2r`` send ``2(p-1) M / p + M``
hierarchical_ring      ``g`` ranks per host, ``h = n / g`` hosts: ``2(g-1) M / g + 2(h-1) M / (g h)``
double_binary_tree     ``M/2`` per tree per incident tree edge (to the parent, and to each child)
alltoall               ``(n-1) M / n``
pipeline               stage ``s``: ``m A`` forward if ``s < n-1`` plus ``m A`` backward if ``s > 0``
ps                     workers send ``M`` and receive ``M``; each server receives and sends ``n M / k``
=====================  ===================================================================================

References
----------
.. [1] P. Patarasuk and X. Yuan, "Bandwidth optimal all-reduce algorithms for clusters of workstations",
   JPDC 69(2), 2009 (ring all-reduce).
.. [2] R. Thakur, R. Rabenseifner and W. Gropp, "Optimization of collective communication operations in
   MPICH", IJHPCA 19(1), 2005, §4.4 (recursive halving/doubling, non-power-of-two pre/post step).
.. [3] NVIDIA NCCL, ``src/graph/trees.cc`` (double binary tree); P. Sanders, J. Speck and J. L. Träff,
   "Two-tree algorithms for full bandwidth broadcast, reduction and scan", Parallel Computing 35(12), 2009.
.. [4] Y. Huang et al., "GPipe", NeurIPS 2019 (fill-drain pipeline schedule).
.. [5] M. Li et al., "Scaling distributed machine learning with the parameter server", OSDI 2014.
"""

from __future__ import annotations

import inspect
import math
from collections.abc import Callable, Iterable
from typing import Any

from commsched.errors import InputError
from commsched.registry import Registry
from commsched.workload.records import CollectiveSchedule, Step, Transfer

CollectiveBuilder = Callable[..., CollectiveSchedule]


def _compact(steps: Iterable[Step]) -> tuple[Step, ...]:
    """Merge consecutive steps with identical transfers and label (adding their repeats); drop empty."""
    out: list[Step] = []
    for s in steps:
        if not s.transfers or s.repeat <= 0:
            continue
        if out and out[-1].transfers == s.transfers and out[-1].label == s.label:
            prev = out.pop()
            out.append(Step(transfers=s.transfers, repeat=prev.repeat + s.repeat, label=s.label))
        else:
            out.append(s)
    return tuple(out)


def _check_positive_int(value: object, name: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise InputError(f"{name} must be a positive integer, got {value!r}", where=name, expected="int >= 1")
    return value


def _check_size(size_bytes: object) -> float:
    if isinstance(size_bytes, bool) or not isinstance(size_bytes, int | float):
        raise InputError(
            f"size_bytes must be a number, got {size_bytes!r}", where="size_bytes", expected="float >= 0"
        )
    if not math.isfinite(size_bytes) or size_bytes < 0:
        raise InputError(
            f"size_bytes must be finite and >= 0, got {size_bytes!r}",
            where="size_bytes",
            expected="float >= 0",
        )
    return float(size_bytes)


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
    n, m = _check_positive_int(ranks, "ranks"), _check_size(size_bytes)
    step = Step(
        transfers=tuple(Transfer(src=i, dst=(i + 1) % n, size_bytes=m / n) for i in range(n)),
        repeat=2 * (n - 1),
        label="ring",
    )
    return CollectiveSchedule(algorithm="ring", ranks=n, size_bytes=m, steps=_compact([step]))


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
    n, m = _check_positive_int(ranks, "ranks"), _check_size(size_bytes)
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
    return CollectiveSchedule(algorithm="halving_doubling", ranks=n, size_bytes=m, steps=_compact(steps))


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
    n, m = _check_positive_int(ranks, "ranks"), _check_size(size_bytes)
    g = math.gcd(n, 8) if ranks_per_host is None else _check_positive_int(ranks_per_host, "ranks_per_host")
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
    return CollectiveSchedule(algorithm="hierarchical_ring", ranks=n, size_bytes=m, steps=_compact(steps))


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
    n = _check_positive_int(n, "ranks")
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
    n, m = _check_positive_int(ranks, "ranks"), _check_size(size_bytes)
    c = _check_positive_int(chunks, "chunks")
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
    return CollectiveSchedule(algorithm="double_binary_tree", ranks=n, size_bytes=m, steps=_compact(steps))


def pairwise_alltoall(*, ranks: int, size_bytes: float) -> CollectiveSchedule:
    """Pairwise-exchange all-to-all: ``n-1`` steps; in step ``k`` rank ``i`` sends ``M/n`` to ``i+k mod n``.

    ``size_bytes`` is each rank's whole send buffer ``M`` (one ``M/n`` block per destination).

    Examples
    --------
    >>> s = pairwise_alltoall(ranks=3, size_bytes=300.0)
    >>> [[(t.src, t.dst) for t in st.transfers] for st in s.steps]
    [[(0, 1), (1, 2), (2, 0)], [(0, 2), (1, 0), (2, 1)]]

    References
    ----------
    Thakur, Rabenseifner and Gropp, IJHPCA 2005, §3 (pairwise exchange).
    """
    n, m = _check_positive_int(ranks, "ranks"), _check_size(size_bytes)
    steps = [
        Step(
            transfers=tuple(Transfer(src=i, dst=(i + k) % n, size_bytes=m / n) for i in range(n)),
            label=f"shift_{k}",
        )
        for k in range(1, n)
    ]
    return CollectiveSchedule(algorithm="alltoall", ranks=n, size_bytes=m, steps=_compact(steps))


def pipeline_sendrecv(*, ranks: int, size_bytes: float, micro_batches: int = 1) -> CollectiveSchedule:
    """Pipeline-parallel send/recv between consecutive stages (GPipe fill-drain, one stage per rank).

    ``size_bytes`` is the activation bytes ``A`` of one micro-batch crossing a stage boundary (the
    gradient sent back has the same size). Forward: in step ``t`` stage ``s`` sends micro-batch ``t - s``
    to ``s+1``; backward (after the forward phase): stage ``s`` sends the gradient of micro-batch
    ``t - (n-1-s)`` to ``s-1``. Each phase has ``n - 2 + m`` steps (``m`` micro-batches).

    Examples
    --------
    >>> s = pipeline_sendrecv(ranks=3, size_bytes=10.0, micro_batches=2)
    >>> s.sent_bytes(), s.n_steps
    ((20.0, 40.0, 20.0), 6)

    References
    ----------
    Huang et al., "GPipe", NeurIPS 2019.
    """
    n, a = _check_positive_int(ranks, "ranks"), _check_size(size_bytes)
    mb = _check_positive_int(micro_batches, "micro_batches")
    nsteps = n - 2 + mb if n > 1 else 0
    steps = [
        Step(
            transfers=tuple(
                Transfer(src=s, dst=s + 1, size_bytes=a) for s in range(n - 1) if 0 <= t - s < mb
            ),
            label="forward",
        )
        for t in range(nsteps)
    ]
    steps += [
        Step(
            transfers=tuple(
                Transfer(src=s, dst=s - 1, size_bytes=a)
                for s in range(n - 1, 0, -1)
                if 0 <= t - (n - 1 - s) < mb
            ),
            label="backward",
        )
        for t in range(nsteps)
    ]
    return CollectiveSchedule(algorithm="pipeline", ranks=n, size_bytes=a, steps=_compact(steps))


def ps_push_pull(*, ranks: int, size_bytes: float, servers: int = 1) -> CollectiveSchedule:
    """Parameter-server push/pull with ``k`` servers holding ``M/k`` each.

    Workers are ranks ``0..n-1``, servers ``n..n+k-1``. Push: every worker sends ``M/k`` to every server;
    pull: every server sends ``M/k`` back to every worker.

    Examples
    --------
    >>> s = ps_push_pull(ranks=2, size_bytes=100.0, servers=2)
    >>> s.sent_bytes(), s.received_bytes()
    ((100.0, 100.0, 100.0, 100.0), (100.0, 100.0, 100.0, 100.0))

    References
    ----------
    Li et al., OSDI 2014; BytePS (Jiang et al., OSDI 2020) §3.
    """
    n, m = _check_positive_int(ranks, "ranks"), _check_size(size_bytes)
    k = _check_positive_int(servers, "servers")
    push = tuple(Transfer(src=w, dst=n + j, size_bytes=m / k) for w in range(n) for j in range(k))
    pull = tuple(Transfer(src=n + j, dst=w, size_bytes=m / k) for j in range(k) for w in range(n))
    steps = _compact([Step(transfers=push, label="push"), Step(transfers=pull, label="pull")])
    return CollectiveSchedule(algorithm="ps", ranks=n, size_bytes=m, steps=steps, servers=k)


def collective_registry() -> Registry[CollectiveBuilder]:
    """A fresh registry of the collective builders by name (used at the edges: CLI, scenario files).

    Examples
    --------
    >>> collective_registry().names()
    ('ring', 'halving_doubling', 'hierarchical_ring', 'double_binary_tree', 'alltoall', 'pipeline', 'ps')
    """
    reg: Registry[CollectiveBuilder] = Registry("collective algorithm")
    reg.register("ring", ring_allreduce)
    reg.register("halving_doubling", halving_doubling_allreduce)
    reg.register("hierarchical_ring", hierarchical_ring_allreduce)
    reg.register("double_binary_tree", double_binary_tree_allreduce)
    reg.register("alltoall", pairwise_alltoall)
    reg.register("pipeline", pipeline_sendrecv)
    reg.register("ps", ps_push_pull)
    return reg


def collective_params(name: str) -> dict[str, Any]:
    """Extra parameters (beyond ``ranks``/``size_bytes``) of a collective and their defaults.

    Examples
    --------
    >>> collective_params("ps")
    {'servers': 1}
    """
    fn = collective_registry().get(name, where="collective")
    return {
        p.name: p.default
        for p in inspect.signature(fn).parameters.values()
        if p.name not in ("ranks", "size_bytes")
    }


def build_collective(name: str, *, ranks: int, size_bytes: float, **params: Any) -> CollectiveSchedule:
    """Build the schedule of collective ``name`` over ``ranks`` ranks for ``size_bytes`` bytes.

    Raises
    ------
    UnknownNameError
        ``name`` is not a registered algorithm (the message lists the valid ones).
    InputError
        ``ranks < 1``, a negative or non-finite size, an unknown or invalid parameter.

    Examples
    --------
    >>> build_collective("hierarchical_ring", ranks=16, size_bytes=1e6, ranks_per_host=8).n_steps
    16
    >>> build_collective("ring", ranks=4, size_bytes=1.0, servers=2)
    Traceback (most recent call last):
    ...
    commsched.errors.InputError: servers: unknown parameter of collective 'ring' (expected no parameters)
    """
    fn = collective_registry().get(name, where="collective")
    allowed = collective_params(name)
    for key in params:
        if key not in allowed:
            exp = ", ".join(allowed) if allowed else "no parameters"
            raise InputError(f"unknown parameter of collective {name!r}", where=key, expected=exp)
    return fn(ranks=ranks, size_bytes=size_bytes, **params)
