"""Placement (job scheduling) policies: which GPUs a job gets.

Each policy is a plain callable ``PlacementRequest -> tuple[NodeId, ...] | None`` (``None``: does not fit
now; the simulator queues the job FIFO).
"""

from __future__ import annotations

from collections import defaultdict

from commsched.scheduling.interfaces import Allocation, PlacementRequest
from commsched.topology import Host, NodeId


def _free_by_host(req: PlacementRequest) -> list[tuple[Host, list[NodeId]]]:
    out = []
    for h in req.topology.hosts:
        free = [g for g in h.gpus if g in req.free_gpus]
        if free:
            out.append((h, free))
    return out


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
    """The GPUs :func:`pack` would give, or ``None``."""
    n = req.job.gpus
    by_host = _free_by_host(req)
    if sum(len(f) for _, f in by_host) < n:
        return None
    single = [(len(f), h.id, f) for h, f in by_host if len(f) >= n]
    if single:
        _, _, free = min(single)
        return tuple(free[:n])
    by_tor: dict[str, list[tuple[Host, list[NodeId]]]] = defaultdict(list)
    for h, f in by_host:
        by_tor[str(h.tors[0]) if h.tors else ""].append((h, f))
    fits = [
        (sum(len(f) for _, f in hs), tor) for tor, hs in by_tor.items() if sum(len(f) for _, f in hs) >= n
    ]
    if fits:
        _, tor = min(fits)
        return _take(by_tor[tor], n)
    tors = sorted(by_tor.items(), key=lambda kv: (-sum(len(f) for _, f in kv[1]), kv[0]))
    return _take([hf for _, hs in tors for hf in hs], n)


def _take(hosts: list[tuple[Host, list[NodeId]]], n: int) -> tuple[NodeId, ...]:
    chosen: list[NodeId] = []
    for _, free in sorted(hosts, key=lambda hf: -len(hf[1])):
        take = free[: n - len(chosen)]
        chosen.extend(take)
        if len(chosen) == n:
            break
    order = {g: i for i, g in enumerate(g for h, _ in hosts for g in h.gpus)}
    return tuple(sorted(chosen, key=lambda g: order.get(g, 0)))
