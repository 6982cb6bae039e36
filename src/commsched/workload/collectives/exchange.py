"""Point-to-point exchange schedules: pairwise all-to-all, pipeline send/recv, PS push/pull.

Conventions and per-rank byte counts are those of :mod:`commsched.workload.collectives`.

References
----------
.. [1] Y. Huang et al., "GPipe", NeurIPS 2019 (fill-drain pipeline schedule).
.. [2] M. Li et al., "Scaling distributed machine learning with the parameter server", OSDI 2014.
"""

from __future__ import annotations

from commsched.workload.collectives.common import check_positive_int, check_size, compact_steps
from commsched.workload.records import CollectiveSchedule, Step, Transfer

__all__ = ["grouped_alltoall", "pairwise_alltoall", "pipeline_sendrecv", "ps_push_pull"]


def grouped_alltoall(*, ranks: int, size_bytes: float) -> CollectiveSchedule:
    """All-to-all as NCCL runs it: one grouped send/recv, every rank sending ``M/n`` to every peer at once.

    ``size_bytes`` is each rank's whole send buffer ``M``. NCCL implements ``ncclAllToAll`` (and
    PyTorch's ``all_to_all_single``, which Megatron-LM's MoE token dispatcher calls) as ``ncclSend`` /
    ``ncclRecv`` to every peer inside one ``ncclGroupStart`` / ``ncclGroupEnd``: all ``n (n - 1)``
    transfers are in flight together (one step). Alone, it takes its most loaded link's bytes over its
    capacity.

    Examples
    --------
    >>> s = grouped_alltoall(ranks=3, size_bytes=300.0)
    >>> s.n_steps, sorted((t.src, t.dst, t.size_bytes) for t in s.steps[0].transfers)[:2]
    (1, [(0, 1, 100.0), (0, 2, 100.0)])
    >>> s.sent_bytes()
    (200.0, 200.0, 200.0)

    References
    ----------
    NVIDIA NCCL 2.18 user guide, "Point-to-point communication": all-to-all as grouped
    ``ncclSend``/``ncclRecv``; PyTorch 2.1 ``ProcessGroupNCCL::alltoall_base``.
    """
    n, m = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    transfers = tuple(
        Transfer(src=i, dst=(i + k) % n, size_bytes=m / n) for i in range(n) for k in range(1, n)
    )
    steps = (Step(transfers=transfers, label="alltoall"),) if transfers else ()
    return CollectiveSchedule(algorithm="alltoall_grouped", ranks=n, size_bytes=m, steps=steps)


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
    n, m = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    steps = [
        Step(
            transfers=tuple(Transfer(src=i, dst=(i + k) % n, size_bytes=m / n) for i in range(n)),
            label=f"shift_{k}",
        )
        for k in range(1, n)
    ]
    return CollectiveSchedule(algorithm="alltoall", ranks=n, size_bytes=m, steps=compact_steps(steps))


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
    n, a = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    mb = check_positive_int(micro_batches, "micro_batches")
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
    return CollectiveSchedule(algorithm="pipeline", ranks=n, size_bytes=a, steps=compact_steps(steps))


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
    n, m = check_positive_int(ranks, "ranks"), check_size(size_bytes)
    k = check_positive_int(servers, "servers")
    push = tuple(Transfer(src=w, dst=n + j, size_bytes=m / k) for w in range(n) for j in range(k))
    pull = tuple(Transfer(src=n + j, dst=w, size_bytes=m / k) for j in range(k) for w in range(n))
    steps = compact_steps([Step(transfers=push, label="push"), Step(transfers=pull, label="pull")])
    return CollectiveSchedule(algorithm="ps", ranks=n, size_bytes=m, steps=steps, servers=k)
