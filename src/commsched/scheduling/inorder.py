"""Placing the queued jobs in order: the one loop behind the simulator, ``plan``, the testbed and the daemon.

A queue of jobs is served in its order. A job with explicit GPUs keeps them; any other job asks the
placement policy with a :class:`~commsched.scheduling.interfaces.PlacementRequest` that sees the free
GPUs and every job placed before it (the running ones, then the ones this round placed, with their
reserved links and pinned routes). A job that cannot be placed waits and, in strict order, blocks the
jobs behind it; with backfilling the jobs behind it are still tried.

How explicit GPUs are taken is the caller's rule (:data:`Explicit`):

- ``"when-free"``: the job starts on its GPUs when they are all free, else it waits (the simulator,
  ``plan``);
- ``"as-given"``: the job is on its GPUs whatever was placed before (a testbed run, whose jobs start
  together);
- ``"replayed"``: every job already runs on its GPUs and the placement is asked again for each, in
  order; where it grants exactly the job's GPUs the job gets the grant's reserved links and pinned
  routes, else it is left as it was (the daemon, which does not place jobs, serving a bundle whose
  routes are decided at placement).

On a topology without hosts (an abstract cluster) every job fits, on no GPUs.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from typing import Literal

from commsched.scheduling.freegpus import FreeGpus
from commsched.scheduling.interfaces import PlacementFn, PlacementRequest
from commsched.scheduling.state import PlacedJob

__all__ = ["Explicit", "OrderRules", "Placed", "place_in_order"]

#: How a job's explicit GPUs are taken (see the module's text).
Explicit = Literal["when-free", "as-given", "replayed"]


@dataclass(frozen=True, slots=True, kw_only=True)
class OrderRules:
    """How a queue is served: the placement, backfilling, the time of the round, explicit GPUs."""

    placement: PlacementFn
    backfill: bool = False
    now_s: float = 0.0
    explicit: Explicit = "when-free"


@dataclass(frozen=True, slots=True, kw_only=True)
class Placed:
    """A job the round placed: its position in the queue and the job as placed."""

    position: int
    job: PlacedJob


def place_in_order(
    queue: Iterable[PlacedJob],
    *,
    free: FreeGpus,
    running: Sequence[PlacedJob] = (),
    rules: OrderRules,
) -> list[Placed]:
    """Place the queued jobs in order; the jobs placed, in the order they were placed.

    Parameters
    ----------
    queue
        The waiting jobs in the order they are served; ``gpus`` holds a job's explicit GPUs (empty: the
        placement chooses). Read lazily: in strict order the jobs behind the first that waits are not read.
    free
        The free GPUs (with their topology). The GPUs of every job placed are taken from it, so the
        caller that owns the index sees them busy (and gives them back when the job ends).
    running
        The jobs already running, as placed; each request sees them, then the jobs placed before it.
    rules
        The placement, backfilling, the round's time (``start_s`` of the jobs it places, ``now_s`` of
        the requests) and how explicit GPUs are taken.

    Returns
    -------
    list[Placed]
        The jobs placed, with their queue position: a job placed by the policy carries the grant's GPUs,
        reserved links and pinned routes. The positions missing are the jobs left waiting.

    Examples
    --------
    >>> from commsched.scheduling.placement import pack
    >>> from commsched.topology import two_layer_clos
    >>> from commsched.workload import ModelProfile, job_from_model
    >>> prof = ModelProfile(name="m", gpu="test", compute_s=1.0, sync_bytes=1e9, overlap=1.0, source="doc")
    >>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)  # 4 hosts of 8 GPUs
    >>> queue = [PlacedJob(spec=job_from_model(n, prof, gpus=g), gpus=()) for n, g in
    ...          [("a", 20), ("b", 16), ("c", 8)]]
    >>> rules = OrderRules(placement=pack)  # strict order: b does not fit, c waits behind it
    >>> [(p.position, len(p.job.gpus)) for p in place_in_order(queue, free=FreeGpus(topo), rules=rules)]
    [(0, 20)]
    >>> free = FreeGpus(topo)
    >>> rules = OrderRules(placement=pack, backfill=True)
    >>> [(p.position, len(p.job.gpus)) for p in place_in_order(queue, free=free, rules=rules)]
    [(0, 20), (2, 8)]
    >>> len(free)  # the placed jobs' GPUs are taken from the index
    4
    """
    done: list[PlacedJob] = list(running)
    placed: list[Placed] = []
    abstract = len(free.topology.hosts) == 0
    for k, job in enumerate(queue):
        if rules.explicit == "replayed":
            got: PlacedJob | None = _replayed(job, free, done, rules)
        elif abstract:
            got = replace(job, gpus=(), start_s=rules.now_s)
        else:
            got = _place(job, free, done, rules)
        if got is None:
            if not rules.backfill:
                break  # strict order: the head blocks the queue
            continue
        free.take(got.gpus)
        done.append(got)
        placed.append(Placed(position=k, job=got))
    return placed


def _request(job: PlacedJob, free: FreeGpus, done: list[PlacedJob], rules: OrderRules) -> PlacementRequest:
    return PlacementRequest(
        topology=free.topology, job=job.spec, free_gpus=free, running=tuple(done), now_s=rules.now_s
    )


def _place(job: PlacedJob, free: FreeGpus, done: list[PlacedJob], rules: OrderRules) -> PlacedJob | None:
    """``job`` as placed now, or ``None`` when it waits."""
    if job.gpus:
        if rules.explicit == "when-free" and not all(g in free for g in job.gpus):
            return None
        return replace(job, start_s=rules.now_s)
    if job.spec.gpus > len(free):
        return None
    alloc = rules.placement(_request(job, free, done, rules))
    if alloc is None:
        return None
    return replace(
        job,
        gpus=alloc.gpus,
        reserved_links=alloc.reserved_links,
        pinned_routes=alloc.pinned_routes,
        start_s=rules.now_s,
    )


def _replayed(job: PlacedJob, free: FreeGpus, done: list[PlacedJob], rules: OrderRules) -> PlacedJob:
    """A running ``job`` with the reservations of a grant of its own GPUs, else as it was."""
    alloc = rules.placement(_request(job, free, done, rules))
    if alloc is None or tuple(alloc.gpus) != tuple(job.gpus):
        return job
    return replace(job, reserved_links=alloc.reserved_links, pinned_routes=alloc.pinned_routes)
