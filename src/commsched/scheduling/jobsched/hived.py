"""HiveD-like placement: buddy cells with topology affinity.

Cells form a hierarchy: within a host, aligned blocks of 1, 2, 4, 8 ... GPUs (buddies: GPUs ``2k`` and
``2k+1`` form a 2-cell, 2-cells ``2k``/``2k+1`` a 4-cell ...), then the host, the ToR (its hosts), the
pod (ToRs cabled to the same aggregation switches), the cluster. A cell is free when all its GPUs are.

Rule (stateless: the free cells are read off ``free_gpus`` at each request):

* **Job within a host** (``n <= host GPUs``): level = the smallest cell of ``2^k >= n`` GPUs (the whole
  host if that exceeds it). Among the free aligned cells of that level, the one whose largest free
  enclosing cell is smallest (buddy allocation: split the smallest free block, keep big ones whole),
  then the host whose ToR has the fewest whole free hosts (keep ToR cells whole), then topology order.
  The job gets the cell's first ``n`` GPUs.
* **Multi-host job**: ``ceil(n / host GPUs)`` whole free hosts. First the minimal number ``m`` of ToRs
  whose whole free hosts can hold the job is computed (largest first). If one ToR suffices, the
  best-fitting ToR (fewest whole free GPUs). Else a pod that holds the job on ``m`` ToRs (best fit), else
  across pods; ToRs taken largest first. So a job never straddles more ToRs than necessary.

Unlike :func:`~commsched.scheduling.placement.pack`, HiveD may **refuse** (return ``None``) although
enough GPUs are free: when no free cell of the needed level exists (fragmentation: e.g. 3 free GPUs
scattered over a host's 4-cells for a 3-GPU job, or free GPUs on partly used hosts for a multi-host
job). The job then waits in the simulator's FIFO queue, as in HiveD.

References
----------
.. [1] H. Zhao et al., "HiveD: Sharing a GPU Cluster for Deep Learning with Guarantees", OSDI 2020,
   §3 (cells, buddy cell allocation). .. [2] J. Cao et al., "Crux", SIGCOMM 2024, §6.4.
"""

from __future__ import annotations

import math
from collections.abc import Set as AbstractSet

from commsched.scheduling.interfaces import Allocation, PlacementRequest
from commsched.scheduling.jobsched.common import HostView, by_key, host_views, rank_order
from commsched.topology import NodeId


def _cell_size(n: int, host_size: int) -> int:
    size = 1 << max(0, math.ceil(math.log2(n)))
    return size if size < host_size else host_size


def _free_top(v: HostView, start: int, size: int, free: AbstractSet[NodeId]) -> int:
    """Size of the largest free aligned cell (within the host) that contains the cell at ``start``."""
    top = size
    while top < v.size:
        nxt = min(2 * top, v.size)
        lo = start - start % nxt if nxt < v.size else 0
        if not all(g in free for g in v.host.gpus[lo : lo + nxt]):
            break
        top = nxt
    return top


def _cells(v: HostView, n: int, free: AbstractSet[NodeId]) -> list[tuple[int, int]]:
    """(free top, start) of every free aligned cell of the level of ``n`` GPUs in host ``v``."""
    size = _cell_size(n, v.size)
    out = []
    for start in range(0, v.size - size + 1, size):
        if all(g in free for g in v.host.gpus[start : start + size]):
            out.append((_free_top(v, start, size, free), start))
    return out


def _within_host(req: PlacementRequest, views: list[HostView], n: int) -> tuple[NodeId, ...] | None:
    whole_per_tor = {t: sum(v.whole for v in hs) for t, hs in by_key(views).items()}
    best: tuple[tuple[int, int, int, int], HostView, int] | None = None
    for v in views:
        if len(v.free) < n or v.size < n:
            continue
        for top, start in _cells(v, n, req.free_gpus):
            key = (top, whole_per_tor[v.tor], v.order, start)
            if best is None or key < best[0]:
                best = (key, v, start)
    if best is None:
        return None
    _, v, start = best
    return tuple(v.host.gpus[start : start + n])


def _greedy_tors(groups: list[list[HostView]], n: int) -> list[list[HostView]] | None:
    """ToRs (lists of whole free hosts) largest first until they hold ``n`` GPUs, or ``None``."""
    out, total = [], 0
    for hs in sorted(groups, key=lambda hs: -sum(v.size for v in hs)):
        out.append(hs)
        total += sum(v.size for v in hs)
        if total >= n:
            return out
    return None


def _multi_host(req: PlacementRequest, views: list[HostView], n: int) -> tuple[NodeId, ...] | None:
    whole = [v for v in views if v.whole]
    tors = by_key(whole)
    overall = _greedy_tors(list(tors.values()), n)
    if overall is None:
        return None
    m = len(overall)
    chosen = overall
    if m == 1:
        fit = [hs for hs in tors.values() if sum(v.size for v in hs) >= n]
        chosen = [min(fit, key=lambda hs: (sum(v.size for v in hs), hs[0].order))]
    else:
        pods = []
        for hs in by_key(whole, pod=True).values():
            g = _greedy_tors(list(by_key(hs).values()), n)
            if g is not None and len(g) == m:
                pods.append((sum(v.size for v in hs), hs[0].order, g))
        if pods:
            chosen = min(pods, key=lambda p: (p[0], p[1]))[2]
    gpus: list[NodeId] = []
    for v in (v for hs in chosen for v in hs):
        gpus.extend(v.host.gpus[: n - len(gpus)])
        if len(gpus) == n:
            break
    return rank_order(req.topology, gpus)


def hived(req: PlacementRequest) -> Allocation | None:
    """HiveD-like buddy-cell placement (module docstring: the rule); ``None`` when no cell fits.

    Examples
    --------
    >>> from commsched.topology.builders.clos import two_layer_clos
    >>> from commsched.workload import job_from_model
    >>> topo = two_layer_clos(tors=2, hosts_per_tor=2)
    >>> busy = {"h0/gpu0"}  # host h0 is split already: a 2-GPU job goes there, to a free 2-cell
    >>> req = PlacementRequest(topology=topo, job=job_from_model("j", "bert", gpus=2),
    ...                        free_gpus=frozenset(g for g in topo.gpus if g not in busy))
    >>> hived(req).gpus
    ('h0/gpu2', 'h0/gpu3')
    """
    n = req.job.gpus
    if n < 1 or len(req.free_gpus) < n:
        return None
    views = host_views(req)
    fits_host = any(v.size >= n for v in views)
    gpus = _within_host(req, views, n) if fits_host else _multi_host(req, views, n)
    return None if gpus is None else Allocation(gpus=gpus)
