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
    levels = np.array([classes.get(f.job.id, 0) for f in facts], dtype=np.int64)
    out: dict[JobId, float] = {}
    load = np.zeros(len(topology.links), dtype=np.float64)
    # sweep the classes from the highest priority: ``load`` holds the strictly higher classes' share
    for level in sorted(set(levels.tolist())):
        members = np.flatnonzero(levels == level).tolist()
        for i in members:
            ids, _ = use[i]
            u = float(load[ids].max()) if ids.size else 0.0
            out[facts[i].job.id] = _loss(facts[i], u)
        for i in members:
            ids, frac = use[i]
            np.add.at(load, ids, frac)
    return out


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
    moved: set[JobId] = set()
    for _ in range(len(facts)):
        loss = predicted_loss(facts, out, topology, network)
        over = [
            (-v, out.get(j, 0), j) for j, v in loss.items() if v > bound and j not in moved and out.get(j, 0)
        ]
        if not over:
            break
        _, level, job = min(over)
        target = 0
        for cand in range(level - 1, 0, -1):
            trial = {**out, job: cand}
            if predicted_loss(facts, trial, topology, network)[job] <= bound:
                target = cand
                break
        out[job] = target
        moved.add(job)
    return out
