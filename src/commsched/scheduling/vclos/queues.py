"""Job-queue policies of the vClos evaluation (FIFO, smallest-first, EDF) and one admission pass.

An ordering is a pure function from the waiting jobs to the order they are offered to placement.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from commsched.errors import InfeasibleError
from commsched.registry import Registry
from commsched.scheduling.vclos.fabric import FabricState, JobRequest, Placement
from commsched.scheduling.vclos.placement import Allocator

QueueOrder = Callable[[Sequence[JobRequest]], tuple[JobRequest, ...]]


def fifo_order(queue: Sequence[JobRequest]) -> tuple[JobRequest, ...]:
    """First in, first out: by arrival time, ties in queue order.

    Examples
    --------
    >>> q = [JobRequest(job_id="b", gpus=4, arrival_s=2.0), JobRequest(job_id="a", gpus=8, arrival_s=1.0)]
    >>> [j.job_id for j in fifo_order(q)]
    ['a', 'b']

    References
    ----------
    vClos §4.3 (FIFO is the default job scheduler).
    """
    return tuple(sorted(queue, key=lambda j: j.arrival_s))


def smallest_first_order(queue: Sequence[JobRequest]) -> tuple[JobRequest, ...]:
    """Smallest (fewest-GPU) first, ties by arrival then queue order (SF / FF of §9.7).

    Examples
    --------
    >>> q = [JobRequest(job_id="a", gpus=8, arrival_s=0.0), JobRequest(job_id="b", gpus=2, arrival_s=1.0)]
    >>> [j.job_id for j in smallest_first_order(q)]
    ['b', 'a']

    References
    ----------
    vClos §4.3, §9.7 (Table 6).
    """
    return tuple(sorted(queue, key=lambda j: (j.gpus, j.arrival_s)))


def edf_order(queue: Sequence[JobRequest]) -> tuple[JobRequest, ...]:
    """Earliest deadline first; jobs without a deadline go last, ties by arrival then queue order.

    Examples
    --------
    >>> q = [JobRequest(job_id="a", gpus=1, deadline_s=None), JobRequest(job_id="b", gpus=1, deadline_s=9.0)]
    >>> [j.job_id for j in edf_order(q)]
    ['b', 'a']

    References
    ----------
    vClos §9.7 (Table 6).
    """
    return tuple(
        sorted(queue, key=lambda j: (math.inf if j.deadline_s is None else j.deadline_s, j.arrival_s))
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class Admission:
    """Result of one admission pass: the new state, the jobs placed (in order) and those still waiting."""

    state: FabricState
    placed: tuple[Placement, ...]
    waiting: tuple[JobRequest, ...]


def admit(
    state: FabricState,
    queue: Sequence[JobRequest],
    allocate: Allocator,
    order: QueueOrder = fifo_order,
    *,
    backfill: bool = False,
) -> Admission:
    """Offer the waiting jobs to ``allocate`` in ``order``.

    Without ``backfill`` the first job that cannot be placed blocks the ones behind it (strict
    queue order, as in the paper: a job that cannot be placed "enters the waiting phase"); with it,
    later jobs that fit are placed anyway.

    Examples
    --------
    >>> from commsched.scheduling.vclos.fabric import Fabric, empty_state
    >>> from commsched.scheduling.vclos.placement import allocate_vclos
    >>> s = empty_state(Fabric(leaves=1, spines=2, servers_per_leaf=1, gpus_per_server=2))
    >>> q = [JobRequest(job_id="a", gpus=2), JobRequest(job_id="b", gpus=1)]
    >>> r = admit(s, q, allocate_vclos)
    >>> [p.job_id for p in r.placed], [j.job_id for j in r.waiting]
    (['a'], ['b'])
    """
    placed: list[Placement] = []
    waiting: list[JobRequest] = []
    for job in order(queue):
        if waiting and not backfill:
            waiting.append(job)
            continue
        try:
            state, p = allocate(state, job)
        except InfeasibleError:
            waiting.append(job)
            continue
        placed.append(p)
    return Admission(state=state, placed=tuple(placed), waiting=tuple(waiting))


def queue_registry() -> Registry[QueueOrder]:
    """A fresh registry of the queue orderings by name: ``fifo``, ``sf``, ``edf``."""
    reg: Registry[QueueOrder] = Registry("job queue policy")
    reg.register("fifo", fifo_order)
    reg.register("sf", smallest_first_order)
    reg.register("edf", edf_order)
    return reg
