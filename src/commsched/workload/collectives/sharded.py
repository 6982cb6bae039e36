"""Sharded and rooted collectives, and the 1F1B pipeline schedule.

Conventions of :mod:`commsched.workload.collectives` (``M`` = ``size_bytes``, ``n`` = ranks):

* ``reduce_scatter`` and ``all_gather``: ``M`` is the whole buffer (the reduce-scatter's input, the
  all-gather's output, as NCCL and the AICB logs count it); a ring of ``n - 1`` steps, each rank sending
  one ``M/n`` shard per step: ``(n-1) M / n`` per rank.
* ``broadcast``: a chain from rank 0 (NCCL's ring broadcast, pipelined): rank ``i < n-1`` sends ``M`` to
  ``i+1``.
* ``pipeline_1f1b``: one-forward-one-backward (PipeDream-Flush / Megatron) send/recv between adjacent
  stages; ``M`` is one micro-batch's activation bytes ``A``; stage ``s`` sends ``m A`` forward if
  ``s < n-1`` and ``m A`` backward if ``s > 0`` (the bytes of GPipe's schedule, in 1F1B order).

References
----------
.. [1] P. Patarasuk and X. Yuan, JPDC 69(2), 2009 (ring reduce-scatter and all-gather phases).
.. [2] D. Narayanan et al., "Efficient large-scale language model training on GPU clusters using
   Megatron-LM", SC 2021, §2.2 (1F1B schedule, bubble ``(p-1)/m``).
"""

from __future__ import annotations

from commsched.workload.collectives.common import check_positive_int, check_size, compact_steps
from commsched.workload.records import CollectiveSchedule, Step, Transfer

__all__ = ["all_gather_ring", "broadcast_chain", "one_f_one_b_order", "pipeline_1f1b", "reduce_scatter_ring"]


def _ring_shards(n: int, m: float, algorithm: str) -> CollectiveSchedule:
    step = Step(
        transfers=tuple(Transfer(src=i, dst=(i + 1) % n, size_bytes=m / n) for i in range(n)),
        repeat=n - 1,
        label=algorithm,
    )
    return CollectiveSchedule(algorithm=algorithm, ranks=n, size_bytes=m, steps=compact_steps([step]))


def reduce_scatter_ring(*, ranks: int, size_bytes: float) -> CollectiveSchedule:
    """Ring reduce-scatter of an ``M``-byte buffer: ``n-1`` steps of ``M/n`` to the next rank.

    Examples
    --------
    >>> s = reduce_scatter_ring(ranks=4, size_bytes=400.0)
    >>> s.sent_bytes(), s.n_steps
    ((300.0, 300.0, 300.0, 300.0), 3)
    """
    return _ring_shards(check_positive_int(ranks, "ranks"), check_size(size_bytes), "reduce_scatter")


def all_gather_ring(*, ranks: int, size_bytes: float) -> CollectiveSchedule:
    """Ring all-gather of an ``M``-byte result: ``n-1`` steps of ``M/n`` to the next rank.

    Examples
    --------
    >>> all_gather_ring(ranks=2, size_bytes=10.0).sent_bytes()
    (5.0, 5.0)
    """
    return _ring_shards(check_positive_int(ranks, "ranks"), check_size(size_bytes), "all_gather")


def broadcast_chain(*, ranks: int, size_bytes: float) -> CollectiveSchedule:
    """Broadcast from rank 0 along the chain ``0 -> 1 -> ... -> n-1`` (pipelined: one step).

    Examples
    --------
    >>> broadcast_chain(ranks=3, size_bytes=8.0).sent_bytes()
    (8.0, 8.0, 0.0)
    """
    n, m = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    step = Step(
        transfers=tuple(Transfer(src=i, dst=i + 1, size_bytes=m) for i in range(n - 1)), label="chain"
    )
    return CollectiveSchedule(algorithm="broadcast", ranks=n, size_bytes=m, steps=compact_steps([step]))


def one_f_one_b_order(stages: int, micro_batches: int, stage: int) -> tuple[tuple[str, int], ...]:
    """The operations of one stage under 1F1B: ``("F", i)`` and ``("B", i)`` in execution order.

    Stage ``s`` runs ``w = min(p - s - 1, m)`` warm-up forwards, then ``m - w`` forward/backward pairs,
    then ``w`` cool-down backwards (Megatron's ``forward_backward_pipelining_without_interleaving``).

    Examples
    --------
    >>> one_f_one_b_order(3, 3, 0)
    (('F', 0), ('F', 1), ('F', 2), ('B', 0), ('B', 1), ('B', 2))
    >>> one_f_one_b_order(3, 3, 2)
    (('F', 0), ('B', 0), ('F', 1), ('B', 1), ('F', 2), ('B', 2))
    """
    w = min(stages - stage - 1, micro_batches)
    ops: list[tuple[str, int]] = [("F", i) for i in range(w)]
    for k in range(micro_batches - w):
        ops += [("F", w + k), ("B", k)]
    ops += [("B", micro_batches - w + k) for k in range(w)]
    return tuple(ops)


def _finish_times(p: int, m: int) -> dict[tuple[str, int, int], float]:
    """Finish time of every op with unit forward and twice-as-long backward, no transfer time."""
    done: dict[tuple[str, int, int], float] = {}
    orders = [list(one_f_one_b_order(p, m, s)) for s in range(p)]
    free = [0.0] * p
    pending = sum(len(o) for o in orders)
    while pending:
        progressed = False
        for s in range(p):
            while orders[s]:
                kind, i = orders[s][0]
                dep = (kind, s - 1, i) if kind == "F" else ("B", s + 1, i)
                ready = 0.0
                if (kind == "F" and s > 0) or (kind == "B" and s < p - 1):
                    if dep not in done:
                        break
                    ready = done[dep]
                if kind == "B":
                    ready = max(ready, done[("F", s, i)])
                done[(kind, s, i)] = max(free[s], ready) + (1.0 if kind == "F" else 2.0)
                free[s] = done[(kind, s, i)]
                orders[s].pop(0)
                pending -= 1
                progressed = True
        if not progressed:  # pragma: no cover - 1F1B orders never deadlock
            raise RuntimeError("1F1B dependency cycle")
    return done


def pipeline_1f1b(
    *, ranks: int, size_bytes: float, micro_batches: int = 1, chunks: int = 1
) -> CollectiveSchedule:
    """1F1B pipeline send/recv: the sends of all stages grouped by the time their operation finishes.

    Each stage runs :func:`one_f_one_b_order`; a forward of micro-batch ``i`` on stage ``s < n-1`` ends
    with a send of ``A`` to ``s+1``, a backward on ``s > 0`` with a send of ``A`` to ``s-1``. Sends that
    finish at the same time (unit forward, backward twice as long) form one step.

    ``chunks = v > 1``: interleaved 1F1B, each rank holding ``v`` model chunks (virtual stage ``j`` on
    rank ``j mod n``): a micro-batch crosses the ``n v - 1`` chunk boundaries each way, the last rank
    sending on to the first between chunks; the sends are those of a 1F1B pipeline over the ``n v``
    virtual stages, folded onto the ranks (sends between the same two ranks in one step merged).

    Examples
    --------
    >>> s = pipeline_1f1b(ranks=3, size_bytes=10.0, micro_batches=2)
    >>> s.sent_bytes()
    (20.0, 40.0, 20.0)
    >>> [st.label for st in s.steps][:3]
    ['F', 'F', 'F']
    >>> pipeline_1f1b(ranks=2, size_bytes=10.0, micro_batches=2, chunks=2).sent_bytes()  # 3 boundaries
    (60.0, 60.0)

    References
    ----------
    Narayanan et al., SC 2021, §2.2 (1F1B; §2.2.2 the interleaved schedule).
    """
    n, a = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    m = check_positive_int(micro_batches, "micro_batches")
    v = check_positive_int(chunks, "chunks")
    if n == 1:
        return CollectiveSchedule(algorithm="pipeline_1f1b", ranks=1, size_bytes=a, steps=())
    virtual = n * v
    by_time: dict[float, dict[tuple[int, int], float]] = {}
    labels: dict[float, set[str]] = {}
    for (kind, s, _), t in sorted(_finish_times(virtual, m).items(), key=lambda kv: (kv[1], kv[0])):
        dst = s + 1 if kind == "F" else s - 1
        if 0 <= dst < virtual:
            pair = (s % n, dst % n)
            sends = by_time.setdefault(t, {})
            sends[pair] = sends.get(pair, 0.0) + a
            labels.setdefault(t, set()).add(kind)
    steps = [
        Step(
            transfers=tuple(Transfer(src=x, dst=y, size_bytes=b) for (x, y), b in by_time[t].items()),
            label="".join(sorted(labels[t])),
        )
        for t in sorted(by_time)
    ]
    return CollectiveSchedule(algorithm="pipeline_1f1b", ranks=n, size_bytes=a, steps=compact_steps(steps))
