"""Job lifecycle: arrival, the waiting queue, placement on free GPUs, start and departure.

A job waits in the queue until the placement policy finds it GPUs (or its explicit GPUs are free); the
queue is served in order (an optional queue order sorts it first), strictly or with backfilling. Every
placement round that starts a job and every departure leads to a new decision.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.scheduling.freegpus import FreeGpus
from commsched.scheduling.inorder import OrderRules, place_in_order
from commsched.scheduling.interfaces import PlacementFn, QueueOrderFn
from commsched.scheduling.state import PlacedJob
from commsched.sim.jobs.hooks import Counters, Events
from commsched.sim.jobs.runs import JobRun
from commsched.topology import NodeId, Topology


@dataclass(frozen=True, slots=True, kw_only=True)
class QueueRules:
    """How waiting jobs are placed and served: the placement, an optional queue order, backfilling."""

    placement: PlacementFn
    queue_order: QueueOrderFn | None = None
    backfill: bool = False


@dataclass(frozen=True, slots=True, kw_only=True)
class LifecycleHooks:
    """Whom the lifecycle tells: of a job that starts, of one that finishes, and when to decide afresh."""

    started: Callable[[JobRun], None]
    departed: Callable[[JobRun], None]
    decide: Callable[[], None]


class JobLifecycle:
    """Owns the free GPUs, the waiting queue, the running jobs and the arrivals still to come.

    Parameters
    ----------
    topology
        The cluster (without hosts: an abstract cluster where every job fits).
    runs
        The jobs' run state.
    explicit
        Per job: its explicit GPUs (empty: placed by ``placement``).
    rules
        How waiting jobs are placed and served.
    kernel, ledger
        The clock and the counters of allocated GPUs.
    hooks
        ``started``/``departed`` are told of every job that starts (once placed) and of every job that
        finishes; ``decide`` asks for and applies a new decision on the domains that starts and
        departures changed.
    """

    def __init__(
        self,
        *,
        topology: Topology,
        runs: Sequence[JobRun],
        explicit: Sequence[tuple[NodeId, ...]],
        rules: QueueRules,
        kernel: Events,
        ledger: Counters,
        hooks: LifecycleHooks,
    ) -> None:
        self._topology = topology
        self._runs = runs
        self._explicit = explicit
        self._placement = rules.placement
        self._queue_order = rules.queue_order
        self._backfill = rules.backfill
        self._kernel = kernel
        self._ledger = ledger
        self._started = hooks.started
        self._departed = hooks.departed
        self._decide = hooks.decide
        self.abstract = len(topology.hosts) == 0
        self.cluster_gpus = topology.n_gpus if not self.abstract else sum(r.spec.gpus for r in runs)
        self._free = FreeGpus(topology)  # indexed: placements query it instead of scanning hosts
        self._running_placed: tuple[PlacedJob, ...] | None = None  # the running jobs, as placed
        self._queue: list[int] = []
        #: each job as it waits: its spec and its explicit GPUs (empty: placed by ``placement``)
        self._queued = [PlacedJob(spec=r.spec, gpus=g) for r, g in zip(runs, explicit, strict=True)]
        #: indices of the running jobs, in start order
        self.running: list[int] = []
        #: arrivals still to come
        self.arrivals = len(runs)

    def check_jobs(self) -> None:
        """Unique ids, jobs no larger than the cluster, explicit GPUs that exist."""
        seen: set[str] = set()
        for r, gpus in zip(self._runs, self._explicit, strict=True):
            if r.spec.id in seen:
                raise InputError(f"duplicate job id {r.spec.id!r}", where="jobs")
            seen.add(r.spec.id)
            if not self.abstract and r.spec.gpus > self.cluster_gpus:
                raise InputError(
                    f"job {r.spec.id!r} asks for {r.spec.gpus} GPUs but the cluster has {self.cluster_gpus}",
                    where=f"jobs.{r.spec.id}.gpus",
                )
            for g in gpus:
                self._topology.host_of(g)

    def active_work(self) -> bool:
        """Whether a job runs, waits or is still to arrive."""
        return bool(self.running or self._queue or self.arrivals)

    def arrive(self, job: int) -> None:
        self.arrivals -= 1
        self._queue.append(job)
        self.schedule_queue()

    def schedule_queue(self, *, decide: bool = True) -> None:
        """Start the waiting jobs that can be placed; decide afresh if any started and ``decide``."""
        if self._queue_order is not None and len(self._queue) > 1:
            by_id = {self._runs[i].spec.id: i for i in self._queue}
            order = self._queue_order([self._runs[i].spec for i in self._queue], self._kernel.now)
            self._queue = [by_id[s.id] for s in order]
        placed = place_in_order(
            (self._queued[i] for i in self._queue),
            free=self._free,
            running=self._running(),
            rules=OrderRules(placement=self._placement, backfill=self._backfill, now_s=self._kernel.now),
        )
        if placed:
            gone = {p.position for p in placed}
            starting = [(self._runs[self._queue[p.position]], p.job) for p in placed]
            self._queue = [i for k, i in enumerate(self._queue) if k not in gone]
            for r, job in starting:
                self._start(r, job)
        if placed and decide:
            self._decide()

    def _running(self) -> tuple[PlacedJob, ...]:
        """The running jobs as placed, in start order (kept until a job starts or departs)."""
        if self._running_placed is None:
            self._running_placed = tuple(p for i in self.running if (p := self._runs[i].placed) is not None)
        return self._running_placed

    def _start(self, r: JobRun, placed: PlacedJob) -> None:
        """Start ``r`` as ``placed`` (its GPUs already taken from the free index)."""
        now = self._kernel.now
        self._ledger.advance_alloc(now)
        self._running_placed = None
        r.placed = placed
        r.gpu_count = len(placed.gpus) if placed.gpus else r.spec.gpus
        self._ledger.alloc_gpus += r.gpu_count
        r.start_s = now
        self.running.append(r.index)
        self._started(r)

    def depart(self, r: JobRun) -> None:
        """``r`` has completed its last iteration: free its GPUs, serve the queue, decide afresh."""
        now = self._kernel.now
        self._ledger.advance_alloc(now)
        r.finished = True
        r.end_s = now
        self.running.remove(r.index)
        self._ledger.alloc_gpus -= r.gpu_count
        if r.placed is not None:
            self._free.give(r.placed.gpus)
        self._running_placed = None
        self._departed(r)
        self.schedule_queue(decide=False)
        self._decide()
