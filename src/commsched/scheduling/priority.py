"""Priority assignment: Crux's ``P_j = k_j I_j`` ranking and the ranking baselines (Crux §4.2).

Every function ranks the jobs of a decision from the per-job facts :func:`job_facts` collects under
the chosen routes (rank 0 = most important):

* :func:`crux_ranking` — reference job ``r`` = the highest average injected network rate
  (``sum_e M_{j,e} / T_iter``, network links only; crux-spec §3.4 item 1); ``k_j`` from the exact
  single-link pairwise comparison of ``j`` against ``r`` (:mod:`commsched.scheduling.correction`)
  with ``c`` = compute per iteration, ``t`` = ``t_j`` (bottleneck transfer time), ``o`` = overlap;
  unique ranking by ``P_j`` (ties: higher ``I_j``, then id). The comparison rationalises times to
  ``1/max_denominator`` s (default 1 ms) and caps its window at ``max_iterations`` = 32 periods
  (:class:`CruxPriority`), and it is computed once per distinct ``(c, t, o)`` in a decision.
* :func:`sincronia_ranking` — BSSI on the big-switch model whose ports are the NICs (ingress =
  uplink, egress = downlink, rate = the NIC's access link); coflow = a job's per-iteration traffic;
  weight 1 (``weight="one"``, plain coflow completion time) or the job's GPU count (``"gpus"``).
* :func:`varys_ranking` — SEBF on the same big switch.
* :func:`taccl_ranking` — TACCL*: longer transmission distance first (the most network hops of any
  of its connections), ties by more bytes per iteration, then id (crux-spec §8.1).

On the abstract single-link topology the big switch has the two link ends as ports.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.2 (Eq. 3), §4.4, §6.6; crux-spec §3, §8.1, §8.2.
.. [2] Sincronia (SIGCOMM 2018) §3; Varys (SIGCOMM 2014) §5.1.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from functools import partial
from typing import Literal

import numpy as np

from commsched.scheduling.coflow import sincronia_order, varys_order
from commsched.scheduling.correction import (
    CorrectionSettings,
    LinkJob,
    correction_factor,
    rank_jobs,
    reference_job,
)
from commsched.scheduling.intensity import Intensity, intensity_from_traffic
from commsched.scheduling.memo import Memo, maybe
from commsched.scheduling.routing import network_pair
from commsched.scheduling.state import ConnectionKey, PlacedJob
from commsched.scheduling.traffic import JobTraffic, job_connections, job_traffic
from commsched.topology import NodeId, Topology
from commsched.topology.records import NETWORK_LINK_KINDS
from commsched.workload import JobId

__all__ = [
    "CruxPriority",
    "JobFacts",
    "Ranking",
    "crux_ranking",
    "job_facts",
    "network_link_mask",
    "sincronia_ranking",
    "taccl_ranking",
    "varys_ranking",
]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobFacts:
    """What the rankers need to know about one placed job under given routes.

    Attributes
    ----------
    job
        The placed job.
    traffic
        Its per-iteration traffic on links.
    intensity
        ``I_j`` with ``W_j`` and ``t_j``.
    period_s
        Standalone iteration time estimate ``max(c, o c + t_j)``.
    network_bytes
        Bytes per iteration summed over the network links it uses.
    """

    job: PlacedJob
    traffic: JobTraffic
    intensity: Intensity
    period_s: float
    network_bytes: float

    @property
    def link_job(self) -> LinkJob:
        """The job as the single-link comparison sees it (``c``, ``t_j``, ``o``)."""
        p = self.job.spec.profile
        return LinkJob(compute_s=p.compute_s, transfer_s=self.intensity.bottleneck_s, overlap=p.overlap)

    @property
    def injected_rate(self) -> float:
        """Average network rate, bytes per second per iteration period."""
        return self.network_bytes / self.period_s if self.period_s > 0 else 0.0


def network_link_mask(topology: Topology) -> np.ndarray:
    """Boolean mask of the network links (access, fabric, abstract) by link id."""
    mask = np.zeros(len(topology.links), dtype=bool)
    mask[[lk.id for lk in topology.links if lk.kind in NETWORK_LINK_KINDS]] = True
    return mask


def standalone_period_s(job: PlacedJob, bottleneck_s: float) -> float:
    """``max(c, o c + t_j)``: the iteration time alone, communication at its bottleneck rate."""
    p = job.spec.profile
    return max(p.compute_s, p.overlap * p.compute_s + bottleneck_s)


def job_facts(
    topology: Topology,
    job: PlacedJob,
    routes: Mapping[ConnectionKey, int] | None,
    network: np.ndarray,
) -> JobFacts:
    """Collect a job's traffic, intensity, period and network bytes under ``routes``.

    ``network`` is :func:`network_link_mask` of the topology.
    """
    traffic = job_traffic(topology, job, routes)
    inten = intensity_from_traffic(topology, job, traffic)
    net = float(traffic.link_bytes[network[traffic.link_ids]].sum()) if traffic.link_ids.size else 0.0
    return JobFacts(
        job=job,
        traffic=traffic,
        intensity=inten,
        period_s=standalone_period_s(job, inten.bottleneck_s),
        network_bytes=net,
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Ranking:
    """A unique ranking (most important first) with, for Crux, the factors behind it.

    ``factor`` holds ``k_j`` (empty for baselines); ``reference`` is Crux's reference job.
    """

    order: tuple[JobId, ...]
    factor: Mapping[JobId, float] = field(default_factory=dict)
    reference: JobId | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class CruxPriority:
    """Settings of Crux's priority assignment: the pairwise comparison's resolution and window cap."""

    correction: CorrectionSettings = field(
        default_factory=lambda: CorrectionSettings(max_denominator=1000, max_iterations=32)
    )


def _link_key(job: LinkJob, settings: CorrectionSettings) -> tuple[Fraction, Fraction, Fraction]:
    def q(x: float) -> Fraction:
        return Fraction(x).limit_denominator(settings.max_denominator)

    return q(job.compute_s), q(job.transfer_s), q(job.overlap)


def crux_ranking(
    facts: Sequence[JobFacts], settings: CruxPriority | None = None, *, memo: Memo | None = None
) -> Ranking:
    """Crux's unique ranking by ``P_j = k_j I_j`` (module docstring).

    Examples
    --------
    Crux Example 1 (crux-spec A3): see ``tests/policies``; with ``I_1 = I_2`` and ``k_2 = 1.5``,
    Job 2 ranks first.

    References
    ----------
    Crux §4.2 (Eq. 3, reference job, pairwise comparison); crux-spec §3.3-§3.5.
    """
    cfg = (settings or CruxPriority()).correction
    if not facts:
        return Ranking(order=())
    ref = JobId(reference_job({str(f.job.id): f.injected_rate for f in facts}))
    ref_link = next(f for f in facts if f.job.id == ref).link_job

    def link_key(lj: LinkJob) -> tuple[Fraction, Fraction, Fraction]:
        return maybe(memo, ("link-key", lj, cfg), partial(_link_key, lj, cfg))

    ref_key = link_key(ref_link)
    cache: dict[tuple[Fraction, Fraction, Fraction], float] = {ref_key: 1.0}
    factor: dict[JobId, float] = {}
    for f in facts:
        if f.job.id == ref:
            factor[f.job.id] = 1.0
            continue
        lj = f.link_job
        key = link_key(lj)
        if key not in cache:
            cache[key] = (
                maybe(
                    memo,
                    ("k", key, ref_key, cfg),
                    partial(correction_factor, lj, ref_link, settings=cfg),
                )
                if lj.transfer_s > 0
                else 1.0
            )
        factor[f.job.id] = cache[key]
    intensity = {str(f.job.id): f.intensity.value for f in facts}
    order = rank_jobs(intensity, {str(k): v for k, v in factor.items()})
    return Ranking(order=tuple(JobId(k) for k in order), factor=factor, reference=ref)


def _ports(topology: Topology, key: ConnectionKey) -> tuple[NodeId, NodeId] | None:
    if not topology.hosts:
        return key.src, key.dst
    pair = network_pair(topology, key)
    return None if pair is None else (NodeId(pair[0]), NodeId(pair[1]))


def big_switch(topology: Topology, jobs: Sequence[PlacedJob]) -> tuple[np.ndarray, np.ndarray]:
    """``(loads, port_rates)`` of the big-switch model: NIC ports, bytes per iteration, bytes/s.

    ``loads`` is ``(jobs, 2 * ports)`` (ingress columns then egress columns).
    """
    index: dict[NodeId, int] = {}
    rows: list[tuple[int, int, int, float]] = []
    for j, job in enumerate(jobs):
        for key, size in job_connections(topology, job).items():
            ends = _ports(topology, key)
            if ends is None:
                continue
            a = index.setdefault(ends[0], len(index))
            b = index.setdefault(ends[1], len(index))
            rows.append((j, a, b, size))
    n = max(1, len(index))
    loads = np.zeros((len(jobs), 2 * n))
    for j, a, b, size in rows:
        loads[j, a] += size
        loads[j, n + b] += size
    rate = np.ones(n)
    for node, i in index.items():
        out = topology.out_links(node)
        rate[i] = out[0].capacity_bps / 8.0 if out else 1.0  # bits/s -> bytes/s
    return loads, np.concatenate([rate, rate])


def sincronia_ranking(
    topology: Topology, facts: Sequence[JobFacts], *, weight: Literal["one", "gpus"] = "one"
) -> Ranking:
    """Sincronia's BSSI order of the jobs' per-iteration coflows on the NIC big switch.

    References
    ----------
    Sincronia §3 (BSSI); crux-spec §8.2 (co-flow = a job's iteration, ports = NICs).
    """
    jobs = [f.job for f in facts]
    loads, rates = big_switch(topology, jobs)
    weights = np.array([float(j.n_gpus) if weight == "gpus" else 1.0 for j in jobs])
    order = sincronia_order(loads, weights=weights, port_rates=rates)
    return Ranking(order=tuple(jobs[i].id for i in order))


def varys_ranking(topology: Topology, facts: Sequence[JobFacts]) -> Ranking:
    """Varys' SEBF order (smallest effective bottleneck first) on the NIC big switch.

    References
    ----------
    Varys §5.1 (SEBF); crux-spec §8.2.
    """
    jobs = [f.job for f in facts]
    loads, rates = big_switch(topology, jobs)
    return Ranking(order=tuple(jobs[i].id for i in varys_order(loads, port_rates=rates)))


def _max_hops(topology: Topology, job: PlacedJob, routes: Mapping[ConnectionKey, int]) -> int:
    hops = 0
    for key in job_connections(topology, job):
        ends = _ports(topology, key)
        if ends is None or not topology.hosts:
            hops = max(hops, 1 if ends is not None else 0)
            continue
        paths = topology.equal_cost_paths(*ends)
        hops = max(hops, paths[routes.get(key, 0) % len(paths)].hops)
    return hops


def taccl_ranking(
    topology: Topology, facts: Sequence[JobFacts], routes: Mapping[ConnectionKey, int]
) -> Ranking:
    """TACCL*: the job whose traffic travels farthest (most network hops) first.

    References
    ----------
    Crux §4.4 footnote 3 and §6.6; crux-spec §8.1.
    """
    keyed = [(-_max_hops(topology, f.job, routes), -f.network_bytes, f.job.id) for f in facts]
    return Ranking(order=tuple(k[2] for k in sorted(keyed)))
