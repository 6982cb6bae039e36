"""Periodic steady states of a group of contending jobs (the fast mode's detector).

Between job arrivals and departures a set of contending jobs tends to a periodic regime. At each
iteration start of the component's *anchor* job (its slowest job) the engine takes a signature: for
every job of the component, where it is in its iteration. Two signatures whose phases agree within a
tolerance delimit a period; the counters' increments over it can be repeated ``m`` times.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Signature:
    """The state of a component at an anchor iteration start, and its cumulative counters."""

    t: float
    phase: NDArray[np.float64]  # per job: time since its iteration start / its standalone iteration time
    step: NDArray[np.float64]  # per job: communication step index + progress (or -1 before release)
    done: NDArray[np.float64]  # per job: iterations completed
    busy: NDArray[np.float64]  # per job: busy GPU-seconds (completed iterations only)
    last_end: NDArray[np.float64]  # per job: end of its last completed iteration
    link_bytes: NDArray[np.float64]  # component links: cumulative bytes
    link_iw_bytes: NDArray[np.float64]


def distance(a: Signature, b: Signature) -> float:
    """Largest phase mismatch between two signatures (fractions of an iteration)."""
    if a.phase.shape != b.phase.shape:
        return float("inf")
    d_phase = float(np.max(np.abs(a.phase - b.phase))) if a.phase.size else 0.0
    d_step = float(np.max(np.abs(a.step - b.step))) if a.step.size else 0.0
    return max(d_phase, d_step)


def best_match(history: list[Signature], now: Signature) -> tuple[int, float]:
    """Index and distance of the earlier signature closest to ``now`` (latest wins ties).

    Only earlier signatures of the same shape after which every job has advanced by at least one
    whole iteration are candidates; ``(-1, inf)`` when there is none.
    """
    idx = [
        i
        for i, h in enumerate(history)
        if h.t < now.t and h.phase.shape == now.phase.shape and h.step.shape == now.step.shape
    ]
    if not idx:
        return -1, float("inf")
    done = np.stack([history[i].done for i in idx])
    ok = np.all(now.done - done >= 1, axis=1)
    if not ok.any():
        return -1, float("inf")
    d = np.zeros(len(idx))
    if now.phase.size:
        d = np.max(np.abs(np.stack([history[i].phase for i in idx]) - now.phase), axis=1)
    if now.step.size:
        d = np.maximum(d, np.max(np.abs(np.stack([history[i].step for i in idx]) - now.step), axis=1))
    d_ok = np.where(ok, d, np.inf)
    best_d = float(d_ok.min())
    last = int(np.flatnonzero(d_ok == best_d)[-1])
    return idx[last], best_d


def best_relative_match(history: list[Signature], now: Signature) -> tuple[int, float]:
    """Index and relative mismatch of the earlier signature that makes the best approximate period.

    The relative mismatch of a candidate is, over the jobs, the largest phase (or step) mismatch divided
    by the iterations the job completed since the candidate: extrapolating an approximate period
    misstates a job's throughput by about that fraction. Same candidates as :func:`best_match`;
    ``(-1, inf)`` when there is none.
    """
    idx = [
        i
        for i, h in enumerate(history)
        if h.t < now.t and h.phase.shape == now.phase.shape and h.step.shape == now.step.shape
    ]
    if not idx or not now.done.size:
        return -1, float("inf")
    adv = now.done - np.stack([history[i].done for i in idx])
    ok = np.all(adv >= 1, axis=1)
    if not ok.any():
        return -1, float("inf")
    mis = np.zeros(adv.shape)
    if now.phase.size:
        mis = np.abs(np.stack([history[i].phase for i in idx]) - now.phase)
    if now.step.size:
        mis = np.maximum(mis, np.abs(np.stack([history[i].step for i in idx]) - now.step))
    rel = np.max(mis / np.where(adv >= 1, adv, 1.0), axis=1)
    rel = np.where(ok, rel, np.inf)
    best = float(rel.min())
    last = int(np.flatnonzero(rel == best)[-1])
    return idx[last], best
