"""Muri-like placement: put a job next to running jobs whose compute/communication mix complements its own.

Each job has a **communication share** ``rho = t / (c + t)``, with ``c`` the profile's per-iteration
``compute_s`` and ``t = 2 * sync_bytes * 8 / REF_BPS`` the time of a ring all-reduce of ``sync_bytes``
(about ``2M`` bytes per GPU; ``* 8``: bytes -> bits) at the reference rate :data:`REF_BPS` (100 Gb/s).
``rho`` near 0: compute-heavy; near 1: communication-heavy.

The **complementarity** of a domain (a host, or a ToR) for a new job ``j`` is the GPU-weighted mean of
``|rho_j - rho_k|`` over the running jobs ``k`` with GPUs in the domain (weight: ``k``'s GPUs there), and 0
for a domain with no running job. Rule:

* ``n <= host GPUs``: among hosts with ``n`` free GPUs, the most complementary; ties: fewest free GPUs
  (best fit), then topology order. The job gets the host's first ``n`` free GPUs.
* multi-host: among ToRs with ``n`` free GPUs, the most complementary, ties as above; inside it, hosts with
  the most free GPUs first (whole hosts first). If no ToR fits: ToRs with the most free GPUs first
  (ties: most complementary), hosts as above.

So links and hosts are shared by jobs whose communication phases take different shares of the
iteration (a compute-heavy job next to a communication-heavy one), the pairing Muri's interleaving
exploits. Muri never refuses a job that :func:`~commsched.scheduling.placement.pack` would place: it
returns ``None`` only when fewer than ``n`` GPUs are free.

References
----------
.. [1] Y. Zhao et al., "Multi-Resource Interleaving for Deep Learning Training" (Muri), SIGCOMM 2022,
   §3–4 (grouping jobs with complementary resource usage). .. [2] J. Cao et al., "Crux", SIGCOMM 2024,
   §6.4 (Muri as the job scheduler under Crux).
"""

from __future__ import annotations

from collections import Counter

from commsched.scheduling.interfaces import Allocation, PlacementRequest
from commsched.scheduling.jobsched.common import HostView, by_key, host_views, rank_order
from commsched.topology import HostId, NodeId
from commsched.workload import JobSpec

REF_BPS = 100e9  # reference network rate of the communication share, bits/s


def comm_share(job: JobSpec, *, ref_bps: float = REF_BPS) -> float:
    """``rho = t / (c + t)`` of a job (module docstring).

    Examples
    --------
    >>> from commsched.workload import job_from_model
    >>> [round(comm_share(job_from_model("a", m, gpus=8)), 3) for m in ("resnet50", "gnmt")]
    [0.036, 0.581]
    """
    t = 2.0 * job.profile.sync_bytes * 8.0 / ref_bps  # bytes -> bits
    c = job.profile.compute_s
    return t / (c + t) if c + t > 0 else 0.0


def _host_mix(req: PlacementRequest) -> dict[HostId, list[tuple[float, int]]]:
    """Per host: (rho, GPUs there) of every running job with GPUs on it."""
    out: dict[HostId, list[tuple[float, int]]] = {}
    for pj in req.running:
        rho = comm_share(pj.spec)
        for hid, k in Counter(req.topology.host_of(g).id for g in pj.gpus).items():
            out.setdefault(hid, []).append((rho, k))
    return out


def _score(mix: list[tuple[float, int]], rho: float) -> float:
    weight = sum(k for _, k in mix)
    return sum(k * abs(rho - r) for r, k in mix) / weight if weight else 0.0


def _take(hosts: list[HostView], n: int, score: dict[int, float]) -> list[NodeId]:
    gpus: list[NodeId] = []
    for v in sorted(hosts, key=lambda v: (-len(v.free), -score[v.order], v.order)):
        gpus.extend(v.free[: n - len(gpus)])
        if len(gpus) == n:
            break
    return gpus


def muri(req: PlacementRequest) -> Allocation | None:
    """Muri-like complementary placement (module docstring: the exact rule).

    Examples
    --------
    >>> from commsched.topology.builders.clos import two_layer_clos
    >>> from commsched.scheduling.state import PlacedJob
    >>> from commsched.workload import job_from_model
    >>> topo = two_layer_clos(tors=1, hosts_per_tor=2)
    >>> heavy = PlacedJob(spec=job_from_model("c", "gnmt", gpus=4), gpus=topo.hosts[0].gpus[:4])
    >>> light = PlacedJob(spec=job_from_model("d", "resnet50", gpus=4), gpus=topo.hosts[1].gpus[:4])
    >>> free = frozenset(topo.hosts[0].gpus[4:] + topo.hosts[1].gpus[4:])
    >>> req = PlacementRequest(topology=topo, job=job_from_model("j", "resnet50", gpus=4),
    ...                        free_gpus=free, running=(heavy, light))
    >>> muri(req).gpus[0]  # compute-heavy resnet50 joins the communication-heavy gnmt on h0
    'h0/gpu4'
    """
    n = req.job.gpus
    if n < 1 or len(req.free_gpus) < n:
        return None
    views, mix, rho = host_views(req), _host_mix(req), comm_share(req.job)
    score = {v.order: _score(mix.get(v.host.id, []), rho) for v in views}
    fits = [v for v in views if len(v.free) >= n]
    if fits and any(v.size >= n for v in views):
        v = min(fits, key=lambda v: (-score[v.order], len(v.free), v.order))
        return Allocation(gpus=tuple(v.free[:n]))
    tors = [hs for hs in by_key(views).values() if sum(len(v.free) for v in hs) > 0]
    tor_score = {id(hs): _score([m for v in hs for m in mix.get(v.host.id, [])], rho) for hs in tors}
    free = {id(hs): sum(len(v.free) for v in hs) for hs in tors}
    fit = [hs for hs in tors if free[id(hs)] >= n]
    if fit:
        hs = min(fit, key=lambda hs: (-tor_score[id(hs)], free[id(hs)], hs[0].order))
        return Allocation(gpus=rank_order(req.topology, _take(hs, n, score)))
    ordered = sorted(tors, key=lambda hs: (-free[id(hs)], -tor_score[id(hs)], hs[0].order))
    return Allocation(gpus=rank_order(req.topology, _take([v for hs in ordered for v in hs], n, score)))
