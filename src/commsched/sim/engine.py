"""The flow-level simulation engine: ``Simulation`` wires its parts together and runs the event loop.

Modelling contract (see ``docs/simulator.md``)
----------------------------------------------
* Fluid, flow-level; directed links with capacity (bits/s) and latency.
* Strict priority between classes, max-min fair within a class (solved in ``sim/rates/``, held to the
  reference allocation of :mod:`commsched.sim.reference.maxmin`).
* A job iterates: compute ``c`` seconds; its communication (the steps of its collective, in order) is
  released after ``o * c``; the next iteration starts when both are done. GPU busy time is compute time.
* A job with parallel groups runs two streams at once, each a slot of its own: its blocking steps after
  its compute, and beside them its overlapped ones (1F1B steady-state sends, then the DP steps after the
  overlap); see :mod:`commsched.sim.jobs.streams`.
* A step runs its transfers in lockstep at the pace of its slowest edge and costs, per repetition, the
  longest path latency ``alpha`` of its transfers plus its largest transfer over the pace.
* Decisions (routes, classes) are recomputed on every arrival and departure, for the contention domain
  it changes (the jobs that can ever share a link with the job that came or went, transitively); other
  domains keep theirs. New classes apply at once, and new routes at once to the bytes a step in flight
  has not yet sent (:mod:`commsched.sim.decide.decisions`).
* ``exact`` mode simulates every iteration; ``fast`` mode detects the periodic steady state of each
  group of jobs that share links and repeats it until the next arrival, departure or horizon.

Where each concern lives: the rooms of ``sim/``
-----------------------------------------------
* ``sim/engine.py`` (here): wires the rooms and runs the one event loop both modes use
  (:meth:`Simulation.run`; the fast mode's catch-ups run it too);
* ``sim/loop/``: the clock and the pending events (:mod:`commsched.sim.loop.kernel`: the clock is set
  there only) and exact mode's compiled loop (:mod:`commsched.sim.loop.flatloop`, its Python side
  :mod:`commsched.sim.loop.compiled`);
* ``sim/jobs/``: each job's run state, one record per writer, and the event kinds
  (:mod:`commsched.sim.jobs.runs`); arrivals, the queue, placement, starts and departures
  (:mod:`commsched.sim.jobs.lifecycle`); the compute / release / step cycle
  (:mod:`commsched.sim.jobs.iteration`); a grouped job's two streams (:mod:`commsched.sim.jobs.streams`);
  the protocols through which the cycle, the lifecycle, the pacing and the decisions reach the fast mode,
  the kernel and the counters (:mod:`commsched.sim.jobs.hooks`);
* ``sim/decide/``: asking the policy per contention domain and applying its routes, classes and time
  shifts (:mod:`commsched.sim.decide.decisions`); the domains (:mod:`commsched.sim.decide.domains`) and
  the components, cut at the links that can saturate (:mod:`commsched.sim.decide.partition`);
* ``sim/rates/``: **where a component's rates are solved**, one path: :class:`Pacing.begin
  <commsched.sim.rates.pacing.Pacing>` / ``end_step`` -> :func:`commsched.sim.rates.flowkernel.step_change`
  (pace cache, lazy settling) -> :func:`commsched.sim.rates.flowfill.solve` (the water-filling), on the
  arrays of :mod:`commsched.sim.rates.flowlayout` and the pool of :mod:`commsched.sim.rates.trafficpool`,
  reading what :mod:`commsched.sim.rates.binding` says can bind, per component
  (:mod:`commsched.sim.rates.components`);
* ``sim/fast/``: the fast mode. **Where it decides to skip**: at its anchor job's iteration starts,
  :meth:`FastMode.on_iteration_start <commsched.sim.fast.mode.FastMode>` looks for a period
  (:mod:`commsched.sim.fast.steady`, its searches compiled in :mod:`commsched.sim.fast.searches`), else a
  regime at measured rates (:mod:`commsched.sim.fast.measured`,
  checked by :mod:`commsched.sim.fast.checks`); after a decision, :meth:`FluidMode.apply
  <commsched.sim.fast.fluid.FluidMode>` runs the large components as fluids
  (:mod:`commsched.sim.fast.fluid`); :mod:`commsched.sim.fast.jumps` moves a component's state forward;
* ``sim/results/``: the records of a run (:mod:`commsched.sim.results.records`), the counters and
  their samples (:mod:`commsched.sim.results.accounting`), the result (:mod:`commsched.sim.results.summary`),
  each job's ideal iteration (:mod:`commsched.sim.results.ideal`), derived figures
  (:mod:`commsched.sim.results.metrics`, :mod:`commsched.sim.results.gputime`) and comparisons
  (:mod:`commsched.sim.results.comparison`);
* ``sim/reference/``: what the engine is held to in tests: the reference rate allocation
  (:mod:`commsched.sim.reference.maxmin`) and the chunk-by-chunk ring
  (:mod:`commsched.sim.reference.validation`).

The rooms import one way, bottom up: ``jobs``, ``results``, ``rates``, ``loop``, then ``decide`` and
``fast`` side by side, then this engine (``tests/test_sim_layout.py``'s ``ROOM_IMPORTS``).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import replace

import numpy as np

from commsched.errors import InputError
from commsched.scheduling.interfaces import PlacementFn, PolicyFn, QueueOrderFn
from commsched.sim.decide.decisions import DecisionApplier
from commsched.sim.fast.fluid import FluidMode
from commsched.sim.fast.mode import FastMode
from commsched.sim.jobs.iteration import Iterations
from commsched.sim.jobs.lifecycle import JobLifecycle, LifecycleHooks, QueueRules
from commsched.sim.jobs.runs import EventKind, JobRun, SimJob, companion_of
from commsched.sim.loop.compiled import CompiledLoop
from commsched.sim.loop.kernel import EventKernel
from commsched.sim.rates.pacing import Pacing
from commsched.sim.results.accounting import Ledger
from commsched.sim.results.ideal import with_ideals
from commsched.sim.results.records import Loop, Mode, SimConfig, SimResult
from commsched.sim.results.summary import summarise
from commsched.topology import Topology
from commsched.topology.records import NETWORK_LINK_KINDS

__all__ = ["SimJob", "Simulation"]

# the event kinds as plain integers (the loop compares them once per event)
_STEP_END, _COMPUTE_END, _RELEASE = (
    int(EventKind.STEP_END),
    int(EventKind.COMPUTE_END),
    int(EventKind.RELEASE),
)
_ARRIVAL, _SAMPLE, _HORIZON = int(EventKind.ARRIVAL), int(EventKind.SAMPLE), int(EventKind.HORIZON)


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

    def __init__(  # noqa: PLR0913 -- the public entry point: keyword-only options, each with its default
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
        if config.loop is Loop.COMPILED and config.mode is not Mode.EXACT:
            raise InputError("the compiled loop runs exact mode only (mode: exact)", where="loop")
        self.topology = topology
        self.config = config
        self.policy_name = policy_name
        self._progress = progress
        # the jobs' one reference (commsched.sim.results.ideal)
        ideal = with_ideals(topology, jobs, placement)
        self._runs = [
            JobRun(i, sj.spec, sj.iteration_model, sj.ideal_iteration_s) for i, sj in enumerate(ideal)
        ]
        grouped = [r for r in self._runs if r.spec.parallel is not None]
        #: the overlapped streams of the grouped jobs: slots after the jobs' (see commsched.sim.jobs.streams)
        self._streams = [companion_of(r, len(self._runs) + k) for k, r in enumerate(grouped)]
        self._kernel = EventKernel()
        self._ledger = Ledger(len(topology.links))
        self._pacing = Pacing(
            link_bits_per_s=topology.capacity_bps,
            runs=[*self._runs, *self._streams],
            kernel=self._kernel,
            ledger=self._ledger,
            network_links=topology.links_of_kind(NETWORK_LINK_KINDS) if self._streams else None,
        )
        self._wire_modes()
        self._lifecycle = JobLifecycle(
            topology=topology,
            runs=self._runs,
            explicit=[sj.gpus for sj in jobs],
            rules=QueueRules(placement=placement, queue_order=queue_order, backfill=backfill),
            kernel=self._kernel,
            ledger=self._ledger,
            hooks=LifecycleHooks(started=self._joined, departed=self._left, decide=self._decide),
        )
        self._decisions = DecisionApplier(
            topology=topology,
            policy=policy,
            priority_levels=priority_levels,
            seed=config.seed,
            runs=self._runs,
            kernel=self._kernel,
            pacing=self._pacing,
            fast=self._fast,
            fluid=self._fluid,
            start=self._iterations.start,
        )
        self.cluster_gpus = self._lifecycle.cluster_gpus
        self._lifecycle.check_jobs()
        self._flat = (
            CompiledLoop(
                runs=[*self._runs, *self._streams],
                kernel=self._kernel,
                pacing=self._pacing,
                ledger=self._ledger,
            )
            if config.loop is Loop.COMPILED
            else None
        )

    def _wire_modes(self) -> None:
        """The fast mode, the iteration cycle and the fluid mode, over the runs, clock, ledger and paces."""
        config = self.config
        self._fast = FastMode(
            config=config,
            runs=self._runs,
            kernel=self._kernel,
            ledger=self._ledger,
            pacing=self._pacing,
            replay=self._events,
        )
        self._iterations = Iterations(
            kernel=self._kernel,
            ledger=self._ledger,
            pacing=self._pacing,
            fast=self._fast,
            jumps=config.mode is Mode.FAST,
            on_finished=self._depart,
        )
        self._fluid = FluidMode(
            min_jobs=config.fluid_min_jobs if config.mode is Mode.FAST else 0,
            runs=self._runs,
            kernel=self._kernel,
            ledger=self._ledger,
            capacity_bytes_per_s=self._pacing.capacity_bytes_per_s,
            start_detail=self._iterations.start,
            forget_step=self._pacing.forget_step,
        )

    @property
    def now(self) -> float:
        """The simulated time."""
        return self._kernel.now

    @property
    def events(self) -> int:
        """Events handled so far."""
        return self._kernel.events

    @property
    def handled_events(self) -> int:
        """Events handled so far, stale ones (dropped by their handler) left out."""
        return self._kernel.handled

    @property
    def peak_pending(self) -> int:
        """The most events pending at once so far."""
        return self._kernel.peak

    @property
    def fluid_solves(self) -> int:
        """Fast mode: fluid steady states solved for large components."""
        return self._fluid.solves

    @property
    def largest_domain(self) -> int:
        """The most running jobs one contention domain has held (jobs that can ever share a link)."""
        return self._decisions.domains.largest

    @property
    def largest_component(self) -> int:
        """The most running jobs one component (jobs sharing links under their routes) has held."""
        return self._decisions.largest_component

    @property
    def compiled_events(self) -> int:
        """Compiled loop: the events it handled on its arrays (0 with the interpreted loop)."""
        return 0 if self._flat is None else self._flat.handled

    @property
    def fast_catch_ups(self) -> int:
        """Fast mode: how often a component ahead of the clock was brought back to it."""
        return self._fast.catch_ups

    def run(self) -> SimResult:
        """Run to the horizon (or until every job is done) and return the results."""
        cfg, kernel = self.config, self._kernel
        for r in self._runs:
            kernel.push(max(0.0, r.spec.arrival_s), EventKind.ARRIVAL, r.index)
        kernel.push(cfg.horizon_s, EventKind.HORIZON)
        sample_s = cfg.sample_s or cfg.horizon_s / 200.0
        times = set(np.arange(sample_s, cfg.horizon_s, sample_s).tolist())
        if 0 < cfg.warmup_s < cfg.horizon_s:
            times.add(cfg.warmup_s)
        for t in sorted(times):
            kernel.push(t, EventKind.SAMPLE)
        self._record_sample()  # t = 0
        end = self._events(math.inf)
        kernel.move_to(end)
        self._pacing.settle_all(self._lifecycle.running)
        self._fluid.settle_all()
        self._record_sample()
        result = summarise(
            runs=self._runs,
            sampler=self._ledger.sampler,
            config=cfg,
            cluster_gpus=self.cluster_gpus,
            capacity_bytes_per_s=self._pacing.capacity_bytes_per_s,
            policy_name=self.policy_name,
            events=kernel.events,
            end=end,
        )
        result = replace(result, largest_domain=self.largest_domain, largest_component=self.largest_component)
        return self._fast.report(result)

    def _events(self, until: float) -> float:
        """The event loop, the one both modes use: handle the events in order, while the earliest is before
        ``until``, until the horizon or the end of the work; returns the time the run ends there (else the
        clock). The fast mode's catch-ups run it too, on one component's events set aside
        (:meth:`commsched.sim.fast.mode.FastMode.catch_up`); the compiled loop (exact mode) takes the flat
        events at the head of the queue first (:mod:`commsched.sim.loop.compiled`). A job's own events
        (its compute end, release and step end) are handled here, the rest in :meth:`_dispatch`."""
        kernel, flat, runs, n_jobs = self._kernel, self._flat, self._runs, len(self._runs)
        active = self._lifecycle.active_work
        while True:
            head = kernel.head()
            if head is None or head[0] >= until:
                break
            if flat is not None:
                flat.run_flat(n_jobs)
                head = kernel.head()
                if head is None:
                    break
            if head[1] == _SAMPLE and not active():
                kernel.pop()  # nothing to sample: dropped, uncounted
                continue
            t, kind, _, job, version = kernel.step()
            if kind == _HORIZON:
                return t
            if kind > _RELEASE or job >= n_jobs:
                self._dispatch(kind, job, version)
            else:
                self._job_event(kind, runs[job], version)
            if not active():
                return kernel.now
        return self.config.horizon_s if not kernel else kernel.now

    def _job_event(self, kind: int, r: JobRun, version: int) -> None:
        """A job's compute end, release or step end (dropped when stale)."""
        if r.finished or version != (r.step_version if kind == _STEP_END else r.version):
            self._kernel.stale += 1
        elif self._fluid.is_fluid(r.index):
            if kind == _COMPUTE_END:  # a job run as a fluid completes its last iteration
                self._fluid.on_finish(r)
                self._depart(r)
        elif kind == _STEP_END:
            self._iterations.on_step_end(r)
        elif kind == _COMPUTE_END:
            self._iterations.on_compute_end(r)
        else:
            self._iterations.on_release(r)

    def _dispatch(self, kind: int, job: int, version: int) -> None:
        """A sample, an arrival, or an event of a grouped job's overlapped stream."""
        if kind == _SAMPLE:
            self._sample()
        elif kind == _ARRIVAL:
            self._lifecycle.arrive(job)
        else:  # a grouped job's overlapped stream
            self._iterations.on_stream_event(EventKind(kind), self._streams[job - len(self._runs)], version)

    def _sample(self) -> None:
        self._pacing.settle_all(self._lifecycle.running)
        self._fluid.settle_all()
        self._record_sample()
        if self._progress is not None:
            self._progress(self._kernel.now)

    def _joined(self, r: JobRun) -> None:
        self._iterations.placed(r)
        self._decisions.joined(r)

    def _left(self, r: JobRun) -> None:
        self._decisions.left(r)

    def _decide(self) -> None:
        self._decisions.decide()

    def _depart(self, r: JobRun) -> None:
        self._iterations.stopped(r)
        self._lifecycle.depart(r)

    def _record_sample(self) -> None:
        busy = self._iterations.busy_now(self._lifecycle.running, self._runs)
        self._ledger.record(self._kernel.now, busy)
