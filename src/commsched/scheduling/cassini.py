"""CASSINI-style time shifts: interleave the communication phases of jobs that share links.

Model (crux-spec §8.2, CASSINI NSDI'24 §3-4, adapted to a fixed placement as the Crux baseline)
------------------------------------------------------------------------------------------------
* Each job iterates with period ``T_j`` (its standalone iteration time estimate) and is "up" on a
  link ``e`` during ``[o c, o c + t_j)`` of every iteration, at rate ``M_{j,e} / t_j`` (bytes/s).
* Time is discretised in units ``q = max_j T_j / resolution``; every period is rounded to whole
  units. The *unified circle* of a link has perimeter ``lcm`` of its jobs' periods (in units),
  capped at ``max_circle`` units (beyond, the patterns are simply unrolled up to the cap).
* Per shared network link, jobs in decreasing rate order choose a rotation (in units, within their
  own period) that minimises the demand exceeding the link capacity, given the rotations chosen
  before them (ties: smallest rotation). The link's *compatibility* is ``1 - excess / demand``.
* Affinity graph (jobs <-> shared links) traversal, BFS from the job with the most traffic:
  crossing link ``e`` from job ``a`` (shift known) to job ``b`` gives
  ``shift_b = shift_a + (rot_b(e) - rot_a(e)) q`` modulo ``T_b``; links are visited in decreasing
  compatibility and the first assignment of a job wins (on cycles later links are ignored).
* Output: a time shift ``in [0, T_j)`` per job, to be enforced by delaying the job's iteration starts.

References
----------
.. [1] S. Rajasekaran, M. Ghobadi, A. Akella, "CASSINI: Network-Aware Job Scheduling in Machine
   Learning Clusters", NSDI 2024 (arXiv 2308.00852), §3 (geometric abstraction, unified circle),
   §4 (affinity graph, time shifts).
.. [2] Crux (SIGCOMM 2024) §6.6 (CASSINI as a baseline); crux-spec §8.1, §8.2.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.priority import JobFacts
from commsched.topology import Topology
from commsched.workload import JobId

__all__ = ["CassiniSettings", "cassini_shifts"]


@dataclass(frozen=True, slots=True, kw_only=True)
class CassiniSettings:
    """Discretisation of the unified circles: units per longest period, and the circle cap in units."""

    resolution: int = 32
    max_circle: int = 256


@dataclass(frozen=True, slots=True)
class _Pattern:
    period: int  # units
    start: int  # units after the iteration start
    length: int  # units


def _pattern(f: JobFacts, unit: float) -> _Pattern:
    p = f.job.spec.profile
    period = max(1, round(f.period_s / unit))
    start = round(p.overlap * p.compute_s / unit) % period
    length = min(period, max(1, round(f.intensity.bottleneck_s / unit)))
    return _Pattern(period=period, start=start, length=length)


def _demand(pat: _Pattern, rate: float, size: int) -> NDArray[np.float64]:
    t = np.arange(size)
    phase = (t - pat.start) % pat.period
    return np.where(phase < pat.length, rate, 0.0)


@dataclass(frozen=True, slots=True)
class _LinkFit:
    rotation: dict[int, int]  # job index -> rotation in units
    compatibility: float


def _fit_link(
    pats: list[_Pattern], rates: list[float], members: list[int], cap: float, size: int
) -> _LinkFit:
    order = sorted(members, key=lambda i: (-rates[i], i))
    total = np.zeros(size)
    rotation: dict[int, int] = {}
    for i in order:
        base = _demand(pats[i], rates[i], size)
        rolls = np.stack([np.roll(base, r) for r in range(pats[i].period)])
        excess = np.maximum(total[None, :] + rolls - cap, 0.0).sum(axis=1)
        r = int(np.argmin(excess))
        rotation[i] = r
        total += rolls[r]
    demand = float(total.sum())
    excess = float(np.maximum(total - cap, 0.0).sum())
    return _LinkFit(rotation=rotation, compatibility=1.0 - excess / demand if demand > 0 else 1.0)


def _circle(pats: list[_Pattern], members: list[int], cap_units: int) -> int:
    size = 1
    for i in members:
        size = math.lcm(size, pats[i].period)
        if size > cap_units:
            return cap_units
    return size


def _shared_links(facts: Sequence[JobFacts], network: NDArray[np.bool_]) -> dict[int, list[int]]:
    users: dict[int, list[int]] = {}
    for i, f in enumerate(facts):
        for lid in f.traffic.link_ids.tolist():
            if network[lid]:
                users.setdefault(lid, []).append(i)
    return {lid: m for lid, m in users.items() if len(m) > 1}


def _traverse(
    facts: Sequence[JobFacts], fits: dict[int, _LinkFit], pats: list[_Pattern], unit: float
) -> dict[int, float]:
    by_job: dict[int, list[int]] = {}
    for lid in sorted(fits, key=lambda e: (-fits[e].compatibility, e)):
        for i in fits[lid].rotation:
            by_job.setdefault(i, []).append(lid)
    shift: dict[int, float] = {}
    roots = sorted(range(len(facts)), key=lambda i: (-facts[i].network_bytes, facts[i].job.id))
    for root in roots:
        if root in shift:
            continue
        shift[root] = 0.0
        queue = deque([root])
        while queue:
            a = queue.popleft()
            for lid in by_job.get(a, []):
                rot = fits[lid].rotation
                for b, rb in rot.items():
                    if b in shift:
                        continue
                    period = pats[b].period * unit
                    shift[b] = (shift[a] + (rb - rot[a]) * unit) % period
                    queue.append(b)
    return shift


def cassini_shifts(
    topology: Topology,
    facts: Sequence[JobFacts],
    network: NDArray[np.bool_],
    settings: CassiniSettings | None = None,
) -> dict[JobId, float]:
    """CASSINI time shifts (seconds, in ``[0, T_j)``) for jobs sharing network links.

    Parameters
    ----------
    topology
        The cluster (link capacities).
    facts
        Per-job traffic, periods and bottleneck times under the chosen routes.
    network
        Boolean mask of network links (``commsched.scheduling.priority.network_link_mask``).
    settings
        Discretisation.

    References
    ----------
    CASSINI §3-4; crux-spec §8.2.
    """
    cfg = settings or CassiniSettings()
    if not facts:
        return {}
    unit = max(f.period_s for f in facts) / cfg.resolution
    if unit <= 0:
        return {f.job.id: 0.0 for f in facts}
    pats = [_pattern(f, unit) for f in facts]
    fits: dict[int, _LinkFit] = {}
    cap_bytes = topology.capacity_bps / 8.0  # bits/s -> bytes/s
    for lid, members in _shared_links(facts, network).items():
        rates = [0.0] * len(facts)
        for i in members:
            f = facts[i]
            sel = f.traffic.link_ids == lid
            t_j = max(f.intensity.bottleneck_s, 1e-12)
            rates[i] = float(f.traffic.link_bytes[sel].sum()) / t_j
        size = _circle(pats, members, cfg.max_circle)
        fits[lid] = _fit_link(pats, rates, members, float(cap_bytes[lid]), size)
    shift = _traverse(facts, fits, pats, unit)
    return {f.job.id: float(shift.get(i, 0.0)) for i, f in enumerate(facts)}
