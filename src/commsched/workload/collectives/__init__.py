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
alltoall               ``(n-1) M / n`` (pairwise exchange: ``n - 1`` rounds, one peer per round)
alltoall_grouped       ``(n-1) M / n`` (NCCL's grouped send/recv: every peer at once, one step)
pipeline               stage ``s``: ``m A`` forward if ``s < n-1`` plus ``m A`` backward if ``s > 0``
ps                     workers send ``M`` and receive ``M``; each server receives and sends ``n M / k``
reduce_scatter         ``(n-1) M / n`` (ring; each rank ends with its ``M / n`` shard)
all_gather             ``(n-1) M / n`` (ring; ``M`` the gathered result)
broadcast              ranks ``0..n-2`` send ``M`` along the chain, the last none
pipeline_1f1b          stage ``s``: ``m A`` forward if ``s < n-1`` plus ``m A`` backward if ``s > 0``, in
                       1F1B order (``A`` = ``size_bytes``, ``m`` = ``micro_batches``)
=====================  ===================================================================================

The builders live in :mod:`commsched.workload.collectives.allreduce` (ring, halving/doubling,
hierarchical ring), :mod:`commsched.workload.collectives.tree` (double binary tree),
:mod:`commsched.workload.collectives.exchange` (all-to-all, pipeline, PS) and
:mod:`commsched.workload.collectives.sharded` (the parallel groups' reduce-scatter, all-gather,
broadcast and 1F1B pipeline, which a flat job may name too); this module holds the registry and
re-exports them.

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
from typing import Any

from commsched.errors import InputError
from commsched.registry import Registry
from commsched.workload.collectives.allreduce import (
    halving_doubling_allreduce,
    hierarchical_ring_allreduce,
    ring_allreduce,
)
from commsched.workload.collectives.common import CollectiveBuilder
from commsched.workload.collectives.exchange import (
    grouped_alltoall,
    pairwise_alltoall,
    pipeline_sendrecv,
    ps_push_pull,
)
from commsched.workload.collectives.sharded import (
    all_gather_ring,
    broadcast_chain,
    pipeline_1f1b,
    reduce_scatter_ring,
)
from commsched.workload.collectives.tree import (
    btree_parent,
    double_binary_tree_allreduce,
    double_binary_tree_parents,
)
from commsched.workload.records import CollectiveSchedule

__all__ = [
    "CollectiveBuilder",
    "all_gather_ring",
    "broadcast_chain",
    "btree_parent",
    "build_collective",
    "collective_params",
    "collective_registry",
    "double_binary_tree_allreduce",
    "double_binary_tree_parents",
    "grouped_alltoall",
    "halving_doubling_allreduce",
    "hierarchical_ring_allreduce",
    "pairwise_alltoall",
    "pipeline_1f1b",
    "pipeline_sendrecv",
    "ps_push_pull",
    "reduce_scatter_ring",
    "ring_allreduce",
]


def collective_registry() -> Registry[CollectiveBuilder]:
    """A fresh registry of the collective builders by name (used at the edges: CLI, scenario files).

    Examples
    --------
    >>> collective_registry().names()  # doctest: +NORMALIZE_WHITESPACE
    ('ring', 'halving_doubling', 'hierarchical_ring', 'double_binary_tree', 'alltoall', 'pipeline', 'ps',
     'reduce_scatter', 'all_gather', 'broadcast', 'pipeline_1f1b', 'alltoall_grouped')
    """
    reg: Registry[CollectiveBuilder] = Registry("collective algorithm")
    reg.register("ring", ring_allreduce)
    reg.register("halving_doubling", halving_doubling_allreduce)
    reg.register("hierarchical_ring", hierarchical_ring_allreduce)
    reg.register("double_binary_tree", double_binary_tree_allreduce)
    reg.register("alltoall", pairwise_alltoall)
    reg.register("pipeline", pipeline_sendrecv)
    reg.register("ps", ps_push_pull)
    reg.register("reduce_scatter", reduce_scatter_ring)
    reg.register("all_gather", all_gather_ring)
    reg.register("broadcast", broadcast_chain)
    reg.register("pipeline_1f1b", pipeline_1f1b)
    reg.register("alltoall_grouped", grouped_alltoall)
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
