"""The intra-job models inside the cluster simulator.

The simulator runs a job as compute ``c`` with its communication released after ``o * c``. When the job
has a per-layer profile and an intra-job policy (WFBP, ByteScheduler, Mercury, ...), the policy's
iteration time at the job's own bandwidth replaces the single overlap fraction: the simulator asks for
the iteration time given the job's standalone communication time ``t``, reads the effective bandwidth
``B = 8 M / t`` (``M`` the synchronised bytes; bits, hence 8), and chooses ``o`` so that
``max(c, o c + t)`` equals the layer-wise model's iteration time. Contention then stretches ``t`` as
for any job.
"""

from __future__ import annotations

from collections.abc import Callable

from commsched.intrajob.iteration import CommPolicy, layers_iteration_time
from commsched.workload import ModelProfile


def iteration_model(profile: ModelProfile, policy: CommPolicy) -> Callable[[float], float]:
    """``t -> iteration time`` of ``profile`` under ``policy`` when its synchronisation alone takes ``t``."""
    if not profile.layers:
        raise ValueError(f"model {profile.name!r} has no per-layer profile")

    def model(comm_s: float) -> float:
        if comm_s <= 0 or profile.sync_bytes <= 0:
            return profile.compute_s
        bandwidth_bps = 8.0 * profile.sync_bytes / comm_s  # bytes -> bits
        return layers_iteration_time(profile.layers, bandwidth_bps=bandwidth_bps, policy=policy)

    return model


def effective_overlap(compute_s: float, comm_s: float, iteration_s: float) -> float:
    """The overlap ``o`` with ``max(c, o c + t) = iteration_s`` (clipped to ``[0, 1]``).

    Examples
    --------
    >>> effective_overlap(2.0, 1.0, 2.5)
    0.75
    >>> effective_overlap(2.0, 1.0, 1.0)  # fully hidden: any o <= 0.5 gives 2.0; the largest is kept
    0.5
    """
    if compute_s <= 0:
        return 1.0
    target = max(iteration_s, compute_s)
    return min(1.0, max(0.0, (target - comm_s) / compute_s))
