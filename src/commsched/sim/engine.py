"""The flow-level simulation engine: one ``Simulation`` owns the clock, the event heap, the RNG and all state.

Modelling contract (see ``docs/simulator.md``)
----------------------------------------------
* Fluid, flow-level; directed links with capacity (bits/s) and latency.
* Strict priority between classes, max-min fair within a class (:mod:`commsched.sim.rates`).
* A job iterates: compute ``c`` seconds; its communication (the steps of its collective, in order) is
  released after ``o * c``; the next iteration starts when both are done. GPU busy time is compute time.
* A step runs its transfers in lockstep at the pace of its slowest edge and costs, per repetition, the
  longest path latency ``alpha`` of its transfers plus its largest transfer over the pace.
* Decisions (routes, classes) are recomputed on every arrival and departure. New classes apply at once;
  new routes apply from the job's next communication release (a step in flight keeps its links).
* ``exact`` mode simulates every iteration; ``fast`` mode detects the periodic steady state of each
  group of jobs that share links and repeats it until the next arrival, departure or horizon.
"""

from __future__ import annotations

import heapq
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import IntEnum
from types import MappingProxyType

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from commsched.errors import InputError
from commsched.intrajob.tiein import effective_overlap
from commsched.scheduling.intensity import intensity_from_traffic
from commsched.scheduling.interfaces import (
    Allocation,
    PlacementFn,
    PlacementRequest,
    PolicyContext,
    PolicyFn,
    QueueOrderFn,
)
from commsched.scheduling.memo import Memo
from commsched.scheduling.state import ClusterState, Decisions, PlacedJob
from commsched.scheduling.traffic import JobTraffic, job_traffic
from commsched.sim.accounting import Jump, Sampler
from commsched.sim.rates import max_min_rates_coo
from commsched.sim.records import JobResult, Mode, SimConfig, SimResult, TimeSeries
from commsched.sim.steady import Signature, best_match, best_relative_match
from commsched.topology import NodeId, Topology
from commsched.workload import JobSpec

#: entries of the pace cache before it is cleared
_PACE_CACHE_MAX = 200_000


class _Ev(IntEnum):
    """Event kinds; the value orders simultaneous events."""

    STEP_END = 0
    COMPUTE_END = 1
    RELEASE = 2
    ARRIVAL = 3
    SAMPLE = 4
    HORIZON = 5


@dataclass(frozen=True, slots=True, kw_only=True)
class SimJob:
    """A job handed to the simulator: its spec and, optionally, an explicit placement (rank order)."""

    spec: JobSpec
    gpus: tuple[NodeId, ...] = ()
    iteration_model: Callable[[float], float] | None = None  # standalone comm time -> iteration time


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class _Ahead:
    """A component that a fast-mode jump moved ahead of the clock by ``m`` periods from ``t0``."""

    t0: float
    period: float
    m: int
    then: Signature
    now: Signature
    links: NDArray[np.int64]
    jump: Jump | None

    @property
    def t_end(self) -> float:
        return self.t0 + self.m * self.period


class _Run:
    """Mutable run state of one job (owned by the Simulation)."""

    __slots__ = (
        "busy",
        "cls",
        "comm_done",
        "comp",
        "compute_end",
        "computing",
        "delay",
        "done",
        "end_s",
        "finished",
        "gpus",
        "idx",
        "intensity",
        "it_start",
        "last_end",
        "last_t",
        "model",
        "next_traffic",
        "overlap",
        "pace",
        "placed",
        "progress",
        "release",
        "released",
        "shared",
        "shift",
        "spec",
        "standalone",
        "start_s",
        "step",
        "sver",
        "target",
        "traffic",
        "version",
        "weight",
    )

    def __init__(self, idx: int, spec: JobSpec) -> None:
        self.idx = idx
        self.spec = spec
        self.placed: PlacedJob | None = None
        self.gpus = spec.gpus
        self.traffic: JobTraffic | None = None
        self.next_traffic: JobTraffic | None = None
        self.cls = 0
        self.intensity = 0.0
        self.standalone = 0.0
        self.target: float | None = None
        self.done = 0.0
        self.busy = 0.0
        self.start_s: float | None = None
        self.end_s: float | None = None
        self.finished = False
        self.it_start = 0.0
        self.compute_end = 0.0
        self.release = 0.0
        self.computing = False
        self.released = False
        self.comm_done = False
        self.step = -1
        self.progress = 0.0
        self.pace = 0.0
        self.last_t = 0.0
        self.version = 0
        self.sver = 0
        self.comp = -1
        self.shared = False
        self.last_end = 0.0
        self.shift = 0.0
        self.delay = 0.0
        self.weight = float(spec.gpus)
        self.overlap = spec.profile.overlap
        self.model: Callable[[float], float] | None = None


class Simulation:
    """Plays decisions forward in time and measures GPU utilisation, JCT and link load.

    Parameters
    ----------
    topology
        The cluster.
    jobs
        The jobs, with explicit placements where given.
    policy
        Communication policy called on every arrival and departure.
    placement
        Placement policy for jobs without an explicit placement (FIFO queue when nothing fits).
    config
        Horizon, mode, seed, sampling.
    policy_name
        Name reported in the results.
    priority_levels
        Hardware priority classes available to the policy.
    progress
        Called with the simulated time at every sample (progress bars live at the edges).
    queue_order
        Orders the waiting jobs before each placement round (default FIFO by arrival).
    backfill
        When the first waiting job does not fit, let later ones that fit go ahead (default: strict order).
    """

    def __init__(
        self,
        *,
        topology: Topology,
        jobs: Sequence[SimJob],
        policy: PolicyFn,
        placement: PlacementFn,
        config: SimConfig,
        policy_name: str = "",
        priority_levels: int = 8,
        progress: Callable[[float], None] | None = None,
        queue_order: QueueOrderFn | None = None,
        backfill: bool = False,
    ) -> None:
        if config.horizon_s <= 0 or not math.isfinite(config.horizon_s):
            raise InputError("horizon must be a positive finite number of seconds", where="horizon_s")
        self.topology = topology
        self.config = config
        self.policy = policy
        self.placement = placement
        self.policy_name = policy_name
        self.priority_levels = priority_levels
        self._progress = progress
        self._queue_order = queue_order
        self._backfill = backfill
        self.rng = np.random.default_rng(config.seed)
        self.now = 0.0
        self._seq = 0
        self._heap: list[tuple[float, int, int, int, int]] = []
        self._runs = [_Run(i, sj.spec) for i, sj in enumerate(jobs)]
        for r, sj in zip(self._runs, jobs, strict=True):
            r.model = sj.iteration_model
        self._explicit = [sj.gpus for sj in jobs]
        self._abstract = len(topology.hosts) == 0
        self.cluster_gpus = topology.n_gpus if not self._abstract else sum(j.spec.gpus for j in jobs)
        self._free: set[NodeId] = set(topology.gpus)
        self._queue: list[int] = []
        self._running: list[int] = []
        self._cap_Bps = topology.capacity_bps / 8.0  # bits/s -> bytes/s
        n_links = len(topology.links)
        self._link_bytes = np.zeros(n_links)
        self._link_iw = np.zeros(n_links)
        self._alloc_gpus = 0
        self._alloc_gpu_s = 0.0
        self._alloc_t = 0.0
        self._busy_done = 0.0
        self._epoch = 0
        self._memo = Memo()  # pure per-job / per-pair results the policy reuses between decisions
        self._events = 0
        self._sampler = Sampler()
        self._comp_jobs: dict[int, list[int]] = {}
        self._history: dict[int, list[Signature]] = {}
        #: per component: the traffic objects its signature links were computed from, and the links
        self._sig_links: dict[int, tuple[tuple[JobTraffic | None, ...], NDArray[np.int64]]] = {}
        self._anchor: dict[int, int] = {}
        #: per component that has jumped ahead of the clock: the stretch it extrapolated (see _Ahead)
        self._ahead: dict[int, _Ahead] = {}
        self._replaying = False  # catching a component up to the clock: no jumps
        #: max-min paces by the members' (traffic, step, class): see _reallocate
        self._pace_cache: dict[
            tuple[tuple[int, int, int], ...], tuple[list[float], tuple[JobTraffic | None, ...]]
        ] = {}
        self._routes_cache: dict[int, dict[tuple[str, str], int]] = {}  # per job: its routes now
        self._arrivals: list[float] = []
        self._alloc_extra: dict[int, Allocation] = {}
        self._check_jobs()

    # ------------------------------------------------------------------ setup
    def _check_jobs(self) -> None:
        seen: set[str] = set()
        for r, gpus in zip(self._runs, self._explicit, strict=True):
            if r.spec.id in seen:
                raise InputError(f"duplicate job id {r.spec.id!r}", where="jobs")
            seen.add(r.spec.id)
            if not self._abstract and r.spec.gpus > self.cluster_gpus:
                raise InputError(
                    f"job {r.spec.id!r} asks for {r.spec.gpus} GPUs but the cluster has {self.cluster_gpus}",
                    where=f"jobs.{r.spec.id}.gpus",
                )
            for g in gpus:
                self.topology.host_of(g)

    def _push(self, t: float, kind: _Ev, job: int = -1, version: int = 0) -> None:
        self._seq += 1
        heapq.heappush(self._heap, (t, int(kind), self._seq, job, version))

    # ------------------------------------------------------------------ run
    def run(self) -> SimResult:
        """Run to the horizon (or until every job is done) and return the results."""
        cfg = self.config
        for r in self._runs:
            self._push(max(0.0, r.spec.arrival_s), _Ev.ARRIVAL, r.idx)
        self._arrivals = sorted(max(0.0, r.spec.arrival_s) for r in self._runs)
        self._push(cfg.horizon_s, _Ev.HORIZON)
        sample_s = cfg.sample_s or cfg.horizon_s / 200.0
        times = set(np.arange(sample_s, cfg.horizon_s, sample_s).tolist())
        if 0 < cfg.warmup_s < cfg.horizon_s:
            times.add(cfg.warmup_s)
        for t in sorted(times):
            self._push(t, _Ev.SAMPLE)
        self._record_sample()  # t = 0
        end = cfg.horizon_s
        while self._heap:
            t, kind, _, job, version = heapq.heappop(self._heap)
            if kind == _Ev.SAMPLE and not self._active_work():
                continue
            self.now = t
            self._events += 1
            if kind == _Ev.HORIZON:
                end = t
                break
            self._dispatch(_Ev(kind), job, version)
            if not self._active_work():
                end = self.now
                break
        self.now = end
        self._settle_all()
        self._record_sample()
        return self._result(end)

    def _active_work(self) -> bool:
        return bool(self._running or self._queue or self._arrivals)

    def _dispatch(self, kind: _Ev, job: int, version: int) -> None:
        if kind == _Ev.SAMPLE:
            self._settle_all()
            self._record_sample()
            if self._progress is not None:
                self._progress(self.now)
            return
        if kind == _Ev.ARRIVAL:
            self._arrivals.pop(0)
            self._queue.append(job)
            self._schedule_queue()
            return
        r = self._runs[job]
        if r.finished or version != (r.sver if kind == _Ev.STEP_END else r.version):
            return
        if kind == _Ev.COMPUTE_END:
            self._on_compute_end(r)
        elif kind == _Ev.RELEASE:
            self._on_release(r)
        elif kind == _Ev.STEP_END:
            self._on_step_end(r)

    # ------------------------------------------------------------------ placement and decisions
    def _schedule_queue(self, *, decide: bool = True) -> None:
        placed_any = False
        if self._queue_order is not None and len(self._queue) > 1:
            by_id = {self._runs[i].spec.id: i for i in self._queue}
            order = self._queue_order([self._runs[i].spec for i in self._queue], self.now)
            self._queue = [by_id[s.id] for s in order]
        k = 0
        while k < len(self._queue):
            r = self._runs[self._queue[k]]
            gpus = self._place(r)
            if gpus is None:
                if not self._backfill:
                    break  # strict order: the head blocks the queue
                k += 1
                continue
            self._queue.pop(k)
            self._start_job(r, gpus)
            placed_any = True
        if placed_any and decide:
            self._decide()

    def _place(self, r: _Run) -> tuple[NodeId, ...] | None:
        if self._abstract:
            return ()
        explicit = self._explicit[r.idx]
        if explicit:
            return explicit if all(g in self._free for g in explicit) else None
        if r.spec.gpus > len(self._free):
            return None
        running = tuple(p for i in self._running if (p := self._runs[i].placed) is not None)
        alloc = self.placement(
            PlacementRequest(
                topology=self.topology,
                job=r.spec,
                free_gpus=frozenset(self._free),
                running=running,
                now_s=self.now,
            )
        )
        if alloc is None:
            return None
        self._alloc_extra[r.idx] = alloc
        return alloc.gpus

    def _start_job(self, r: _Run, gpus: tuple[NodeId, ...]) -> None:
        self._advance_alloc()
        for g in gpus:
            self._free.discard(g)
        extra = self._alloc_extra.pop(r.idx, None)
        r.placed = PlacedJob(
            spec=r.spec,
            gpus=gpus,
            reserved_links=extra.reserved_links if extra is not None else frozenset(),
            pinned_routes=extra.pinned_routes if extra is not None else MappingProxyType({}),
            start_s=self.now,
        )
        r.gpus = len(gpus) if gpus else r.spec.gpus
        r.weight = float(r.gpus)
        self._alloc_gpus += r.gpus
        r.start_s = self.now
        r.last_end = self.now
        self._running.append(r.idx)

    def _decide(self) -> None:
        """Ask the policy for decisions on the running jobs and apply them."""
        self._settle_all()
        state = ClusterState(
            topology=self.topology,
            jobs=tuple(p for i in self._running if (p := self._runs[i].placed) is not None),
            priority_levels=self.priority_levels,
        )
        ctx = PolicyContext(seed=self.config.seed, now_s=self.now, epoch=self._epoch, memo=self._memo)
        self._epoch += 1
        decisions = self.policy(state, ctx)
        self._apply(decisions)

    def _apply(self, d: Decisions) -> None:
        own: dict[str, dict[tuple[str, str], int]] = {}
        for k, v in d.routes.items():
            own.setdefault(k.job, {})[(k.src, k.dst)] = v
        # first what the decision changes, with nothing changed yet: a component that a jump moved ahead
        # of the clock and that the decision touches is caught up first, under the regime it extrapolated
        changed: set[int] = set()  # jobs whose routes or phase this decision changes
        reclassed: set[int] = set()  # jobs whose class it changes (matters only beside other jobs)
        plan: list[tuple[_Run, int, dict[tuple[str, str], int], JobTraffic | None, float]] = []
        no_routes: dict[tuple[str, str], int] = {}
        for i in self._running:
            r = self._runs[i]
            assert r.placed is not None
            cls = d.class_of(r.spec.id)
            if cls != r.cls:
                reclassed.add(i)
            key = own.get(r.spec.id, no_routes)
            new_tr = None
            if r.next_traffic is None or self._routes_cache.get(i) != key:
                new_tr = job_traffic(self.topology, r.placed, d.routes)
                changed.add(i)
            shift = float(d.time_shift_s.get(r.spec.id, 0.0))
            if r.traffic is not None and shift != r.shift and r.standalone > 0:
                changed.add(i)
            plan.append((r, cls, key, new_tr, shift))
        comps = self._partition(
            [
                (r.traffic if r.traffic is not None else t, t if t is not None else r.next_traffic)
                for r, _, _, t, _ in plan
            ]
        )
        keep = self._untouched(comps, changed, reclassed)
        for c in list(self._ahead):
            if tuple(self._comp_jobs.get(c, ())) not in keep:
                self._catch_up(c)
        for r, cls, key, new_tr, shift in plan:
            r.cls = cls
            if new_tr is not None:
                r.next_traffic = new_tr
                self._routes_cache[r.idx] = key
            new_job = r.traffic is None
            if new_job:
                r.traffic = r.next_traffic
                self._init_job(r)
            if not new_job and shift != r.shift and r.standalone > 0:
                # CASSINI: a changed phase delays the next iteration start once by the difference
                r.delay = (shift - r.shift) % r.standalone
            r.shift = shift
        self._rebuild_components(comps, keep)
        for comp in self._comp_jobs:
            if comp not in self._ahead:  # a component ahead of the clock keeps its paces and events
                self._reallocate(comp)
        for i in list(self._running):
            r = self._runs[i]
            if r.start_s == self.now and r.done == 0 and not r.computing and not r.released:
                self._start_iteration(r, self.now + r.shift)

    def _init_job(self, r: _Run) -> None:
        """Standalone iteration time, intensity and iteration target of a newly started job."""
        assert r.traffic is not None
        p = r.spec.profile
        comm = 0.0
        for s in r.traffic.steps:
            pace = float(np.min(self._cap_Bps[s.links] / s.share))
            comm += s.repeat * (s.latency_s + s.max_flow_bytes / pace)
        if r.model is not None:
            r.overlap = effective_overlap(p.compute_s, comm, r.model(comm))
        r.standalone = max(p.compute_s, r.overlap * p.compute_s + comm)
        assert r.placed is not None
        r.intensity = intensity_from_traffic(self.topology, r.placed, r.traffic).value
        if r.spec.iterations is not None:
            r.target = float(r.spec.iterations)
        elif r.spec.duration_s is not None:
            r.target = float(max(1, round(r.spec.duration_s / max(r.standalone, 1e-12))))

    # ------------------------------------------------------------------ iteration dynamics
    def _start_iteration(self, r: _Run, t: float) -> None:
        c = r.spec.profile.compute_s
        r.it_start = t
        r.compute_end = t + c
        r.computing = True
        r.released = False
        tr = r.next_traffic or r.traffic
        assert tr is not None
        r.comm_done = not tr.steps
        r.step = -1
        r.progress = 0.0
        r.version += 1
        self._push(r.compute_end, _Ev.COMPUTE_END, r.idx, r.version)
        if not r.comm_done:
            r.release = t + r.overlap * c
            self._push(r.release, _Ev.RELEASE, r.idx, r.version)
        if (
            self.config.mode is Mode.FAST
            and not self._replaying
            and self._anchor.get(r.comp) == r.idx
            and self.now == t
        ):
            self._maybe_jump(r.comp)

    def _on_compute_end(self, r: _Run) -> None:
        r.computing = False
        r.busy += r.gpus * r.spec.profile.compute_s
        self._busy_done += r.gpus * r.spec.profile.compute_s
        if r.comm_done:
            self._end_iteration(r)

    def _on_release(self, r: _Run) -> None:
        r.released = True
        if r.next_traffic is not None and r.next_traffic is not r.traffic:
            r.traffic = r.next_traffic
        assert r.traffic is not None
        if not r.traffic.steps:
            r.comm_done = True
            if not r.computing:
                self._end_iteration(r)
            return
        r.step = 0
        r.progress = 0.0
        r.last_t = self.now
        r.pace = 0.0
        self._reallocate(r.comp)

    def _on_step_end(self, r: _Run) -> None:
        self._settle(r)
        assert r.traffic is not None
        r.step += 1
        r.progress = 0.0
        r.pace = 0.0  # a new step: its end is scheduled afresh (see _reallocate)
        if r.step >= len(r.traffic.steps):
            r.step = -1
            r.comm_done = True
            r.pace = 0.0
            self._reallocate(r.comp)
            if not r.computing:
                self._end_iteration(r)
            return
        self._reallocate(r.comp)

    def _end_iteration(self, r: _Run) -> None:
        r.done += 1.0
        r.last_end = self.now
        if r.target is not None and r.done >= r.target - 1e-9:
            self._depart(r)
            return
        start = self.now + r.delay
        r.delay = 0.0
        self._start_iteration(r, start)

    def _depart(self, r: _Run) -> None:
        self._advance_alloc()
        r.finished = True
        r.end_s = self.now
        r.version += 1
        self._running.remove(r.idx)
        self._alloc_gpus -= r.gpus
        if r.placed is not None:
            self._free.update(r.placed.gpus)
        self._schedule_queue(decide=False)
        if self._running:
            self._decide()

    # ------------------------------------------------------------------ rates
    def _active(self, r: _Run) -> bool:
        return r.released and r.step >= 0 and not r.comm_done and not r.finished

    def _settle(self, r: _Run) -> None:
        """Advance an active step's progress and byte counters to ``now`` at its current pace."""
        if not self._active(r) or r.traffic is None:
            r.last_t = max(r.last_t, self.now)
            return
        dt = self.now - r.last_t
        if dt <= 0:
            return
        r.last_t = self.now
        if r.pace <= 0:
            return
        s = r.traffic.steps[r.step]
        prate = self._progress_rate(r)
        dp = min(dt * prate, 1.0 - r.progress)
        r.progress += dp
        moved = dp * s.repeat * s.bytes_per_rep
        self._link_bytes[s.links] += moved
        self._link_iw[s.links] += moved * r.intensity

    def _progress_rate(self, r: _Run) -> float:
        assert r.traffic is not None
        s = r.traffic.steps[r.step]
        if r.pace <= 0:
            return 0.0
        return 1.0 / (s.repeat * (s.latency_s + s.max_flow_bytes / r.pace))

    def _settle_all(self) -> None:
        for i in self._running:
            self._settle(self._runs[i])

    def _reallocate(self, comp: int) -> None:
        """Recompute the paces of the active steps of one component and reschedule their ends."""
        members = [self._runs[i] for i in self._comp_jobs.get(comp, ()) if self._active(self._runs[i])]
        for r in members:
            self._settle(r)
        if not members:
            return
        if len(members) == 1:  # alone: the pace its tightest link allows (max_min_rates' one-group case)
            r = members[0]
            assert r.traffic is not None
            s = r.traffic.steps[r.step]
            self._set_pace(r, max(float(np.min(self._cap_Bps[s.links] / s.share)), 0.0))
            return
        # the paces depend only on each member's step (its links and shares) and class: groups in a
        # periodic regime meet the same combinations again and again
        key = tuple((id(r.traffic), r.step, r.cls) for r in members)
        hit = self._pace_cache.get(key)
        if hit is None:
            rows, cols, vals = [], [], []
            for k, r in enumerate(members):
                assert r.traffic is not None
                s = r.traffic.steps[r.step]
                rows.append(np.full(s.links.size, k))
                cols.append(s.links)
                vals.append(s.share)
            paces = max_min_rates_coo(
                rows=np.concatenate(rows),
                cols=np.concatenate(cols),
                vals=np.concatenate(vals),
                n_groups=len(members),
                capacity=self._cap_Bps,
                classes=np.array([r.cls for r in members], dtype=np.int64),
            ).tolist()
            if len(self._pace_cache) >= _PACE_CACHE_MAX:
                self._pace_cache.clear()
            # the traffic objects are kept with the entry so that their ids are not reused while it lives
            hit = self._pace_cache[key] = (paces, tuple(r.traffic for r in members))
        for r, pace in zip(members, hit[0], strict=True):
            self._set_pace(r, pace)

    def _set_pace(self, r: _Run, pace: float) -> None:
        """Give an active step (settled to now) its pace; its scheduled end stays valid at the same pace.

        A step's end is ``last_t + (1 - progress) / rate``; settling moves ``last_t`` and ``progress``
        together, so the end scheduled at the same pace is still right. A new step starts at pace 0.
        """
        r.last_t = max(r.last_t, self.now)
        if pace != r.pace:
            r.pace = pace
            self._reschedule_step(r)

    def _reschedule_step(self, r: _Run) -> None:
        """Invalidate the pending end of the job's step and schedule it at the current pace."""
        r.sver += 1
        prate = self._progress_rate(r)
        if prate > 0:
            self._push(r.last_t + (1.0 - r.progress) / prate, _Ev.STEP_END, r.idx, r.sver)

    def _partition(self, traffics: list[tuple[JobTraffic | None, JobTraffic | None]]) -> list[list[int]]:
        """Components of the running jobs (``_running`` order), given each one's current and next traffic."""
        running = self._running
        if not running:
            return []
        rows: list[NDArray[np.int64]] = []
        cols: list[NDArray[np.int64]] = []
        for k, (cur, nxt) in enumerate(traffics):
            for tr in (cur,) if nxt is cur else (cur, nxt):
                if tr is not None:
                    rows.append(np.full(tr.link_ids.size, k, dtype=np.int64))
                    cols.append(tr.link_ids)
        n_jobs, n_links = len(running), self._cap_Bps.size
        r_all = np.concatenate(rows) if rows else np.zeros(0, np.int64)
        c_all = np.concatenate(cols).astype(np.int64) + n_jobs if cols else np.zeros(0, np.int64)
        adj = sparse.csr_matrix(
            (np.ones(r_all.size, dtype=np.int8), (r_all, c_all)), shape=(n_jobs + n_links, n_jobs + n_links)
        )
        _, labels = connected_components(adj, directed=False)
        comps: dict[int, list[int]] = {}
        for k, i in enumerate(running):
            comps.setdefault(int(labels[k]), []).append(i)
        return list(comps.values())

    def _untouched(
        self, comps: list[list[int]], changed: set[int], reclassed: set[int]
    ) -> dict[tuple[int, ...], int]:
        """The new components that a decision leaves as they were, with their current ids.

        Untouched: the same jobs as an existing component, none of whose routes or phase change and,
        for a component of several jobs, none of whose classes change. Its periodic regime goes on.
        """
        old = {tuple(idxs): c for c, idxs in self._comp_jobs.items()}
        keep: dict[tuple[int, ...], int] = {}
        for idxs in comps:
            prev = old.get(tuple(idxs))
            if prev is None:
                continue
            touched = changed | reclassed if len(idxs) > 1 else changed
            if not touched.intersection(idxs):
                keep[tuple(idxs)] = prev
        return keep

    def _rebuild_components(self, comps: list[list[int]], keep: dict[tuple[int, ...], int]) -> None:
        """Install the new components; those in ``keep`` keep their fast-mode history and jump."""
        old_history, old_ahead, old_anchor = self._history, self._ahead, self._anchor
        self._comp_jobs = dict(enumerate(comps))
        self._sig_links = {}
        self._history = {}
        self._ahead = {}
        self._anchor = {}
        for c, idxs in self._comp_jobs.items():
            prev = keep.get(tuple(idxs))
            if prev is not None:
                if prev in old_history:
                    self._history[c] = old_history[prev]
                if prev in old_ahead and old_ahead[prev].t_end > self.now:
                    self._ahead[c] = old_ahead[prev]
            for i in idxs:
                self._runs[i].comp = c
                if len(idxs) > 1:
                    self._runs[i].shared = True
            if prev is not None and old_anchor.get(prev) in idxs:
                self._anchor[c] = old_anchor[prev]
            else:
                self._anchor[c] = max(idxs, key=lambda i: (self._runs[i].standalone, -i))

    # ------------------------------------------------------------------ fast mode
    def _signature(self, comp: int) -> tuple[Signature, NDArray[np.int64]]:
        runs = [self._runs[i] for i in self._comp_jobs[comp]]
        for r in runs:
            self._settle(r)
        traffics = tuple(r.traffic for r in runs)
        cached = self._sig_links.get(comp)
        if (
            cached is not None
            and len(cached[0]) == len(traffics)
            and all(a is b for a, b in zip(cached[0], traffics, strict=True))
        ):
            links = cached[1]
        else:
            links = np.unique(
                np.concatenate([t.link_ids for t in traffics if t is not None] or [np.zeros(0, np.int64)])
            ).astype(np.int64)
            self._sig_links[comp] = (traffics, links)
        sig = Signature(
            t=self.now,
            phase=np.array([(self.now - r.it_start) / max(r.standalone, 1e-12) for r in runs]),
            step=np.array(
                [
                    (r.step + r.progress) if self._active(r) else (-1.0 if not r.released else -2.0)
                    for r in runs
                ]
            ),
            done=np.array([r.done for r in runs]),
            busy=np.array([r.busy for r in runs]),
            last_end=np.array([r.last_end for r in runs]),
            link_bytes=self._link_bytes[links].copy(),
            link_iw_bytes=self._link_iw[links].copy(),
        )
        return sig, links

    def _maybe_jump(self, comp: int) -> None:
        """At an anchor iteration start: look for a period and, if found, repeat it as often as allowed."""
        runs = [self._runs[i] for i in self._comp_jobs[comp]]
        if any(r.next_traffic is not None and r.next_traffic is not r.traffic for r in runs):
            return  # routes about to change: not a steady state yet
        sig, links = self._signature(comp)
        hist = self._history.setdefault(comp, [])
        cfg = self.config
        idx, dist = best_match(hist, sig)
        if idx < 0 or dist > cfg.fast_tolerance:
            # no exact period: the approximate one that misstates the jobs' throughputs least, accepted
            # at once within fast_rel_tolerance (the phases of quasi-periodic groups never meet
            # exactly) and after fast_max_history anchor iterations in any case
            idx, rel = best_relative_match(hist, sig)
            if idx < 0 and len(hist) >= cfg.fast_max_history:
                # no candidate in a full history: some job has not finished an iteration over it
                # (slowed far below its standalone speed); take signatures at its iteration starts
                adv = sig.done - hist[0].done
                k = int(np.argmin(adv))
                if adv[k] < 1 and runs[k].idx != self._anchor.get(comp):
                    self._anchor[comp] = runs[k].idx
                    self._history[comp] = []
                    return
            if idx < 0 or (rel > cfg.fast_rel_tolerance and len(hist) < cfg.fast_max_history):
                self._remember(hist, sig)
                return
        then = hist[idx]
        m = self._jump_count(runs, sig.t - then.t, sig.done - then.done)
        if m < 1:
            self._remember(hist, sig)
            return
        jump = self._apply_jump(runs, links, then, sig, m)
        self._ahead[comp] = _Ahead(
            t0=self.now, period=sig.t - then.t, m=m, then=then, now=sig, links=links, jump=jump
        )
        # the regime goes on: keep the matched stretch of history, moved forward, for the next jump
        shift = m * (sig.t - then.t)
        self._history[comp] = [self._shifted(h, then, sig, m, shift) for h in hist[idx:]]

    def _remember(self, hist: list[Signature], sig: Signature) -> None:
        """Keep the latest signatures only (a bounded search per anchor iteration)."""
        hist.append(sig)
        excess = len(hist) - 2 * self.config.fast_max_history
        if excess > 0:
            del hist[:excess]

    @staticmethod
    def _shifted(h: Signature, then: Signature, now: Signature, m: int, shift: float) -> Signature:
        return Signature(
            t=h.t + shift,
            phase=h.phase,
            step=h.step,
            done=h.done + m * (now.done - then.done),
            busy=h.busy + m * (now.busy - then.busy),
            last_end=h.last_end + shift,
            link_bytes=h.link_bytes + m * (now.link_bytes - then.link_bytes),
            link_iw_bytes=h.link_iw_bytes + m * (now.link_iw_bytes - then.link_iw_bytes),
        )

    def _jump_count(self, runs: list[_Run], period: float, d_done: NDArray[np.float64]) -> int:
        """How many periods the component may repeat: up to the horizon, and short of its own departures.

        Events outside the component (arrivals, other departures) do not bound the jump: a decision that
        touches the component catches it up to the clock first (``_catch_up``), and one that does not
        leaves its regime as it was.
        """
        m = math.floor((self.config.horizon_s - self.now) / period) - 1
        for r, dn in zip(runs, d_done.tolist(), strict=True):
            if r.target is not None and dn > 0:
                # one period of margin: catching up replays less than a period, which must not finish a job
                m = min(m, math.floor((r.target - r.done - 1.0) / dn) - 2)
        return m

    def _catch_up(self, comp: int) -> None:
        """Bring a component that a jump moved ahead of the clock back to ``now``.

        The jump repeated ``m`` periods from ``t0``; ``k`` of them have elapsed by now. The ``m - k``
        periods not yet due are taken back (counters, times and the sampler's record), and the part of
        the current period up to now is simulated, events of this component only (no other job shares
        its links, so nothing else can interleave).
        """
        a = self._ahead.pop(comp, None)
        if a is None or self.now >= a.t_end:
            return
        t_now = self.now
        k = min(a.m, max(0, math.floor((t_now - a.t0) / a.period)))
        runs = [self._runs[i] for i in self._comp_jobs[comp]]
        outer = self._heap
        self._heap = []
        self.now = a.t_end
        self._apply_jump(runs, a.links, a.then, a.now, k - a.m, record=False)
        if a.jump is not None:
            self._sampler.truncate_jump(a.jump, a.t0 + k * a.period)
        self.now = a.t0 + k * a.period
        self._replaying = True
        try:
            while self._heap and self._heap[0][0] < t_now:
                t, kind, _, job, version = heapq.heappop(self._heap)
                self.now = t
                self._events += 1
                self._dispatch(_Ev(kind), job, version)
        finally:
            self._replaying = False
            self.now = t_now
            for ev in self._heap:
                heapq.heappush(outer, ev)
            self._heap = outer
        for r in runs:
            self._settle(r)

    def _apply_jump(
        self,
        runs: list[_Run],
        links: NDArray[np.int64],
        then: Signature,
        now: Signature,
        m: int,
        *,
        record: bool = True,
    ) -> Jump | None:
        """Move the component ``m`` periods forward: same state, counters credited ``m`` times.

        ``m`` may be negative (periods taken back by ``_catch_up``; the caller corrects the sampler).
        Returns the sampler's record of the stretch when ``record``.
        """
        shift = m * (now.t - then.t)
        busy_inc = 0.0
        for k, r in enumerate(runs):
            db = float(now.busy[k] - then.busy[k])
            r.done += m * float(now.done[k] - then.done[k])
            r.busy += m * db
            busy_inc += m * db
            r.last_end += shift
            r.it_start += shift
            r.compute_end += shift
            r.release += shift
            r.version += 1
            if r.computing:
                self._push(r.compute_end, _Ev.COMPUTE_END, r.idx, r.version)
            if not r.released and not r.comm_done:
                self._push(r.release, _Ev.RELEASE, r.idx, r.version)
            if self._active(r):
                r.last_t = self.now + shift
                self._reschedule_step(r)
        self._busy_done += busy_inc
        lb = m * (now.link_bytes - then.link_bytes)
        liw = m * (now.link_iw_bytes - then.link_iw_bytes)
        self._link_bytes[links] += lb
        self._link_iw[links] += liw
        if not record:
            return None
        jump = Jump(
            t0=self.now,
            t1=self.now + shift,
            busy_gpu_s=busy_inc,
            links=links,
            link_bytes=lb,
            link_iw_bytes=liw,
        )
        self._sampler.add_jump(jump)
        return jump

    # ------------------------------------------------------------------ accounting
    def _advance_alloc(self) -> None:
        self._alloc_gpu_s += self._alloc_gpus * (self.now - self._alloc_t)
        self._alloc_t = self.now

    def _busy_now(self) -> float:
        partial = 0.0
        for i in self._running:
            r = self._runs[i]
            if r.computing:
                partial += r.gpus * max(0.0, min(self.now, r.compute_end) - r.it_start)
        return self._busy_done + partial

    def _record_sample(self) -> None:
        self._advance_alloc()
        self._sampler.record(self.now, self._busy_now(), self._alloc_gpu_s, self._link_bytes, self._link_iw)

    def _result(self, end: float) -> SimResult:
        from commsched.sim.summary import summarise

        return summarise(self, end)

    # read-only views for the summary module
    @property
    def runs(self) -> tuple[_Run, ...]:
        return tuple(self._runs)

    @property
    def sampler(self) -> Sampler:
        return self._sampler

    @property
    def events(self) -> int:
        return self._events

    def job_results(self, end: float) -> tuple[JobResult, ...]:
        out = []
        for r in self._runs:
            start = r.start_s
            stop = r.end_s if r.finished else (end if start is not None else None)
            mean_it = (r.last_end - start) / r.done if (start is not None and r.done > 0) else float("nan")
            out.append(
                JobResult(
                    id=r.spec.id,
                    gpus=r.gpus,
                    arrival_s=r.spec.arrival_s,
                    start_s=start,
                    end_s=stop,
                    iterations=r.done,
                    target_iterations=r.target,
                    standalone_iteration_s=r.standalone,
                    mean_iteration_s=mean_it,
                    busy_gpu_s=r.busy,
                    finished=r.finished,
                    priority_class=r.cls,
                    intensity=r.intensity,
                    shared_links=r.shared,
                    placement=tuple(str(g) for g in r.placed.gpus) if r.placed is not None else (),
                )
            )
        return tuple(out)

    def series(self) -> TimeSeries:
        s = self._sampler.samples
        t = np.array([x.t for x in s])
        dt = np.diff(t)
        busy = np.diff([x.busy_gpu_s for x in s])
        alloc = np.diff([x.alloc_gpu_s for x in s])
        ok = dt > 0
        util = np.where(ok, busy / np.where(ok, dt * max(self.cluster_gpus, 1), 1.0), np.nan)
        a_util = np.where(alloc > 0, busy / np.where(alloc > 0, alloc, 1.0), np.nan)
        links = np.arange(self._cap_Bps.size, dtype=np.int64)
        lb = np.diff(np.array([x.link_bytes for x in s]), axis=0) if len(s) > 1 else np.zeros((0, links.size))
        liw = (
            np.diff(np.array([x.link_iw_bytes for x in s]), axis=0)
            if len(s) > 1
            else np.zeros((0, links.size))
        )
        cap = self._cap_Bps[None, :] * np.where(ok, dt, 1.0)[:, None]
        l_util = lb / cap
        with np.errstate(invalid="ignore", divide="ignore"):
            l_int = np.where(lb > 0, liw / np.where(lb > 0, lb, 1.0), np.nan)
        return TimeSeries(
            t=t[1:],
            gpu_utilization=util,
            allocated_gpu_utilization=a_util,
            link_ids=links,
            link_utilization=l_util,
            link_intensity=l_int,
        )
