"""An opt-in starvation guard for priority policies: promote a job whose predicted loss exceeds a bound.

Crux's strict priorities maximise GPU utilisation but can starve a low-priority job whose links are kept
busy by higher classes (the paper leaves starvation to future work, Crux §8). The guard works from the
policy's own inputs, at every decision: for each job it predicts the throughput loss that the classes
would inflict, and promotes the job with the worst prediction above ``bound`` to the lowest class that
brings it within the bound (class 0 if none does), until no prediction exceeds the bound.

The prediction: on every network link of job ``j``, the jobs in strictly higher classes occupy the
fraction ``u = sum_k 8 M_{k,e} / (T_k B_e)`` of the capacity (``M`` bytes per iteration, ``T`` standalone
period, ``B`` bits/s); ``j``'s communication then takes ``t_j / (1 - max_e u)`` instead of ``t_j`` and its
period becomes ``max(c, o c + t_j / (1 - u))``; the loss is ``1 - T_j / period``. Jobs in ``j``'s own class
share fairly with it and are not counted (the guard bounds starvation by priority, not fair sharing).
The guard only promotes, so it never changes the ranking among the jobs it does not move, and with
``bound >= 1`` it changes nothing.

References
----------
Crux §4.2 (the priority order it protects), §8 (starvation left open).
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Mapping, Sequence

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.priority import JobFacts
from commsched.topology import Topology
from commsched.workload import JobId


def _utilisation(
    facts: Sequence[JobFacts], capacity_bps: NDArray[np.float64], network: NDArray[np.bool_]
) -> list[tuple[NDArray[np.int64], NDArray[np.float64]]]:
    """Per job: its network links and the fraction of each link's capacity it uses when alone."""
    out = []
    for f in facts:
        ids = f.traffic.link_ids
        keep = network[ids] if ids.size else np.zeros(0, dtype=bool)
        ids = ids[keep]
        period = f.period_s if f.period_s > 0 else float("inf")
        frac = 8.0 * f.traffic.link_bytes[keep] / (period * capacity_bps[ids])  # bytes -> bits
        out.append((ids, frac))
    return out


class _Loads:
    """The link load of the classes above any level: cumulative sums over the distinct levels."""

    def __init__(
        self, use: Sequence[tuple[NDArray[np.int64], NDArray[np.float64]]], levels: Sequence[int], links: int
    ) -> None:
        self.levels = sorted(set(levels))
        self.cum = [np.zeros(links, dtype=np.float64)]  # cum[i]: load of the classes below levels[i]
        for lv in self.levels:
            acc = self.cum[-1].copy()
            for (ids, frac), own in zip(use, levels, strict=True):
                if own == lv:
                    np.add.at(acc, ids, frac)
            self.cum.append(acc)

    def above(self, level: int, ids: NDArray[np.int64]) -> float:
        """The busiest of ``ids`` under the classes strictly above ``level``."""
        if not ids.size:
            return 0.0
        return float(self.cum[bisect_left(self.levels, level)][ids].max())


def predicted_loss(
    facts: Sequence[JobFacts],
    classes: Mapping[JobId, int],
    topology: Topology,
    network: NDArray[np.bool_],
) -> dict[JobId, float]:
    """The throughput loss the classes would inflict on each job, by the rule in the module docstring.

    A job in the top class, or alone, is predicted to lose nothing.
    """
    capacity = np.array([lk.capacity_bps for lk in topology.links], dtype=np.float64)
    use = _utilisation(facts, capacity, network)
    levels = [classes.get(f.job.id, 0) for f in facts]
    loads = _Loads(use, levels, len(topology.links))
    return {f.job.id: _loss(f, loads.above(lv, u[0])) for f, lv, u in zip(facts, levels, use, strict=True)}


def _loss(f: JobFacts, busy: float) -> float:
    """``1 - T / max(c, o c + t / (1 - busy))``; 1 when the higher classes fill a link."""
    if f.period_s <= 0 or f.intensity.bottleneck_s <= 0:
        return 0.0
    if busy >= 1.0:
        return 1.0
    p = f.job.spec.profile
    period = max(p.compute_s, p.overlap * p.compute_s + f.intensity.bottleneck_s / (1.0 - busy))
    return max(0.0, 1.0 - f.period_s / period)


def guard_classes(
    facts: Sequence[JobFacts],
    classes: Mapping[JobId, int],
    topology: Topology,
    network: NDArray[np.bool_],
    bound: float,
) -> dict[JobId, int]:
    """Promote jobs until no predicted loss exceeds ``bound`` (see the module docstring).

    Each round promotes the job with the worst prediction (ties: the lower class, then the job id) to
    the lowest class that brings its own prediction within ``bound``, or to class 0. A promoted job is
    not promoted again, so there are at most ``len(facts)`` rounds.

    Examples
    --------
    >>> guard_classes([], {}, None, None, 0.5)  # type: ignore[arg-type]
    {}
    """
    out = dict(classes)
    if not facts or bound >= 1.0:
        return out
    capacity = np.array([lk.capacity_bps for lk in topology.links], dtype=np.float64)
    use = _utilisation(facts, capacity, network)
    moved: set[JobId] = set()
    for _ in range(len(facts)):
        levels = [out.get(f.job.id, 0) for f in facts]
        loads = _Loads(use, levels, len(topology.links))
        over = []
        for i, (f, lv) in enumerate(zip(facts, levels, strict=True)):
            if lv > 0 and f.job.id not in moved:
                v = _loss(f, loads.above(lv, use[i][0]))
                if v > bound:
                    over.append((-v, lv, f.job.id, i))
        if not over:
            break
        _, level, job, i = min(over)
        target = 0
        for cand in range(level - 1, 0, -1):
            if _loss(facts[i], loads.above(cand, use[i][0])) <= bound:
                target = cand
                break
        out[job] = target
        moved.add(job)
    return out
