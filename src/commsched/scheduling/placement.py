"""Placement (job scheduling) policies: which GPUs a job gets.

Each policy is a plain callable ``PlacementRequest -> tuple[NodeId, ...] | None`` (``None``: does not fit
now; the simulator queues the job FIFO).
"""

from __future__ import annotations

from commsched.scheduling.freegpus import FreeGpus, free_index
from commsched.scheduling.interfaces import Allocation, PlacementRequest
from commsched.topology import NodeId


def pack(req: PlacementRequest) -> Allocation | None:
    """Production-like locality packing: fill a host, then a ToR, then the whole fabric.

    1. If the job fits in one host, the host with the fewest free GPUs that fits (best fit).
    2. Else, if it fits under one ToR, the ToR with the fewest free GPUs that fits; hosts with the most
       free GPUs first.
    3. Else, across ToRs, the ToRs with the most free GPUs first.

    GPUs are returned in host order, so consecutive ranks share a host where possible.
    """
    gpus = pack_gpus(req)
    return None if gpus is None else Allocation(gpus=gpus)


def pack_gpus(req: PlacementRequest) -> tuple[NodeId, ...] | None:
    """The GPUs :func:`pack` would give, or ``None`` (read from the free-GPU index: no scan of the GPUs)."""
    n = req.job.gpus
    free = free_index(req)
    if len(free) < n:
        return None
    h = free.best_fit_host(n)
    if h >= 0:
        return free.host_free(h)[:n]
    groups = [
        (free.group_count(g), free.groups[g], g) for g in range(len(free.groups)) if free.group_count(g) > 0
    ]
    fits = [x for x in groups if x[0] >= n]
    if fits:
        return _take(free, free.group_hosts[min(fits)[2]], n)
    ordered = sorted(groups, key=lambda x: (-x[0], x[1]))
    return _take(free, [h for _, _, g in ordered for h in free.group_hosts[g]], n)


def _take(free: FreeGpus, hosts: list[int], n: int) -> tuple[NodeId, ...]:
    """``n`` GPUs from ``hosts``, the hosts with the most free GPUs first, returned in ``hosts`` order."""
    hosts = [h for h in hosts if free.host_count(h) > 0]
    chosen: list[NodeId] = []
    for h in sorted(hosts, key=lambda h: -free.host_count(h)):
        chosen.extend(free.host_free(h)[: n - len(chosen)])
        if len(chosen) == n:
            break
    order = {g: i for i, g in enumerate(g for h in hosts for g in free.hosts[h].gpus)}
    return tuple(sorted(chosen, key=lambda g: order.get(g, 0)))
