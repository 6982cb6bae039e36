"""The iteration cycle of a running job: compute, release of its communication, steps, next iteration.

An iteration starting at ``t`` computes until ``t + c``; its communication (the steps of its collective,
in order) is released at ``t + o * c``; the next iteration starts when both are done (plus a one-time
delay after a change of CASSINI time shift). GPU busy time is compute time: a pipelined job's ranks
compute ``spec.busy_s`` of the ``c`` its blocking stream takes (the bubble is not busy).

A grouped job runs two streams at once (:mod:`commsched.sim.jobs.streams`): its blocking steps in its own
slot, released when its compute ends, and in its companion's slot the steady-state pipeline sends from
the start and its data-parallel steps from the overlap fraction of the blocking stream alone; its
iteration ends when the compute and both streams are done. Its traffic (new routes, steps in stream
order) changes at an iteration start.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import NamedTuple

from commsched.scheduling.traffic import JobTraffic
from commsched.sim.jobs.hooks import Counters, Events, IterationWatch, Paces
from commsched.sim.jobs.runs import EventKind, JobRun

#: the kinds an iteration's start schedules (bound once: every iteration start pushes them)
_COMPUTE_END, _RELEASE = EventKind.COMPUTE_END, EventKind.RELEASE


class CycleFields(NamedTuple):
    """A job's iteration-cycle fields as another loop hands them back (:mod:`commsched.sim.loop.compiled`)."""

    computing: bool
    released: bool
    comm_done: bool
    step: int
    version: int
    iteration_start_s: float
    compute_end_s: float
    release_s: float
    iterations_done: float
    busy_gpu_s: float
    last_end_s: float
    pending_delay_s: float


def restore(r: JobRun, f: CycleFields) -> None:
    """Set ``r``'s iteration-cycle fields to ``f`` (the compiled loop's, taken back)."""
    r.computing, r.released, r.comm_done, r.step, r.version = (
        f.computing, f.released, f.comm_done, f.step, f.version,
    )  # fmt: skip
    r.iteration_start_s, r.compute_end_s, r.release_s = f.iteration_start_s, f.compute_end_s, f.release_s
    r.iterations_done, r.busy_gpu_s, r.last_end_s = f.iterations_done, f.busy_gpu_s, f.last_end_s
    r.pending_delay_s = f.pending_delay_s


def shift(r: JobRun, dt: float, done: float, busy: float) -> None:
    """A jump moved ``r`` ``dt`` on: ``done`` iterations and ``busy`` GPU-seconds credited, its times
    shifted, its pending events stale (:mod:`commsched.sim.fast.jumps`)."""
    r.iterations_done += done
    r.busy_gpu_s += busy
    r.last_end_s += dt
    r.iteration_start_s += dt
    r.compute_end_s += dt
    r.release_s += dt
    r.version += 1


def run_traffic(r: JobRun, traffic: JobTraffic | None) -> None:
    """``r`` runs ``traffic`` from now on (a decision's routes; ``None``: a job gone)."""
    r.traffic = traffic


def delay_next(r: JobRun, delay_s: float) -> None:
    """``r``'s next iteration starts ``delay_s`` late (once: a change of time shift)."""
    r.pending_delay_s = delay_s


def credit(r: JobRun, done: float, busy: float) -> None:
    """``done`` iterations and ``busy`` GPU-seconds credited to ``r``, nothing moved in time (a measured
    regime's correction, :func:`commsched.sim.fast.jumps.correct`)."""
    r.iterations_done += done
    r.busy_gpu_s += busy


def credit_busy(r: JobRun, busy: float) -> None:
    """``busy`` GPU-seconds of compute credited to ``r`` (a fluid's progress)."""
    r.busy_gpu_s += busy


def set_progress(r: JobRun, iterations: float, last_end_s: float | None = None) -> None:
    """``r`` has completed ``iterations`` (the last one ending at ``last_end_s``, if given)."""
    if last_end_s is not None:
        r.last_end_s = last_end_s
    r.iterations_done = iterations


def pause(r: JobRun) -> None:
    """``r`` leaves its iteration cycle (it runs as a fluid): nothing computing, released or in flight."""
    r.computing = False
    r.released = False
    r.comm_done = False
    r.step = -1
    r.pending_delay_s = 0.0


def invalidate(r: JobRun) -> None:
    """``r``'s pending compute end and release are stale from now on."""
    r.version += 1


class Iterations:
    """Handles the iteration events of the running jobs.

    Parameters
    ----------
    kernel, ledger, pacing
        The engine's parts the cycle drives.
    fast
        The fast mode (:class:`commsched.sim.jobs.hooks.IterationWatch`), told of every iteration start when
        ``jumps`` is true.
    jumps
        Whether the run is in fast mode.
    on_finished
        Called when a job completes its last iteration.
    """

    def __init__(
        self,
        *,
        kernel: Events,
        ledger: Counters,
        pacing: Paces,
        fast: IterationWatch,
        jumps: bool,
        on_finished: Callable[[JobRun], None],
    ) -> None:
        self._kernel = kernel
        self._ledger = ledger
        self._pacing = pacing
        self._fast = fast
        self._jumps = jumps
        self._on_finished = on_finished

    def placed(self, r: JobRun) -> None:
        """``r`` was placed now: the end of its last iteration, before the first, is its start."""
        r.last_end_s = self._kernel.now

    @staticmethod
    def stopped(r: JobRun) -> None:
        """``r`` completed its last iteration: its pending events are stale from now on."""
        r.version += 1

    def start(self, r: JobRun, t: float) -> None:
        """Start an iteration of ``r`` at ``t`` (compute now, communication after ``overlap``)."""
        if r.companion is not None:
            self._start_grouped(r, r.companion, t)
            return
        c = r.spec.profile.compute_s
        r.iteration_start_s = t
        r.compute_end_s = t + c
        r.computing = True
        r.released = False
        tr = r.traffic
        assert tr is not None
        r.comm_done = not tr.steps
        r.step = -1
        self._pacing.drop(r)  # a step abandoned (a job back from the fluid) leaves no slot behind
        r.version += 1
        self._kernel.push(r.compute_end_s, _COMPUTE_END, r.index, r.version)
        if not r.comm_done:
            r.release_s = t + r.overlap * c
            self._kernel.push(r.release_s, _RELEASE, r.index, r.version)
        if self._jumps:
            self._fast.on_iteration_start(r, t)

    def _start_grouped(self, r: JobRun, dp: JobRun, t: float) -> None:
        """Start an iteration of grouped job ``r`` (``dp``: its overlapped stream) at ``t``."""
        c = r.spec.profile.compute_s
        src = r.routed
        assert src is not None
        plan = self._pacing.stream_plan(r, src)
        r.traffic = plan.traffic
        n = len(plan.traffic.steps)
        r.iteration_start_s = t
        r.compute_end_s = t + c
        r.computing = True
        for x in (r, dp):
            x.released = False
            x.step = -1
            self._pacing.drop(x)
            x.version += 1
        r.stop_step = plan.blocking_steps
        r.comm_done = plan.blocking_steps == 0
        dp.comm_done = plan.blocking_steps == n
        dp.stop_step = plan.steady_end if plan.steady_end > plan.blocking_steps else n
        self._kernel.push(r.compute_end_s, _COMPUTE_END, r.index, r.version)
        if not r.comm_done:
            r.release_s = r.compute_end_s
            self._kernel.push(r.release_s, _RELEASE, r.index, r.version)
        dp.release_s = t + plan.dp_start_s(c, r.overlap)  # its DP steps: in the last micro-batch
        if plan.steady_end > plan.blocking_steps:  # the steady-state sends, from the start
            self._kernel.push(t, EventKind.RELEASE, dp.index, dp.version)
        if plan.steady_end < n:
            self._kernel.push(dp.release_s, EventKind.RELEASE, dp.index, dp.version)
        if self._jumps:
            self._fast.on_iteration_start(r, t)

    def on_stream_event(self, kind: EventKind, dp: JobRun, version: int) -> None:
        """An event of a grouped job's overlapped stream ``dp``: a release (its steady-state sends at the
        iteration's start, its DP steps after the overlap) or the end of its step in flight."""
        r = dp.parent
        assert r is not None and r.traffic is not None
        if r.finished or version != (dp.step_version if kind == EventKind.STEP_END else dp.version):
            self._kernel.stale += 1
            return
        n = len(r.traffic.steps)
        if kind == EventKind.RELEASE:
            if not dp.released:
                self._begin_stream(dp, r, r.stop_step)
            elif dp.step < 0:  # the steady-state sends are done: the DP steps start
                self._dp_phase(dp, r, n)
        else:
            dp.step = self._pacing.end_step(dp)
            dp.comm_done = dp.step < 0
            if dp.comm_done and dp.stop_step < n:  # the steady-state sends are done
                dp.comm_done = False
                if self._kernel.now >= dp.release_s:
                    self._dp_phase(dp, r, n)
        if self._done(r):
            self._end(r)

    def _dp_phase(self, dp: JobRun, r: JobRun, n: int) -> None:
        """The DP steps of ``r`` start in its overlapped stream ``dp``, after its steady-state sends."""
        first = dp.stop_step
        dp.stop_step = n
        self._begin_stream(dp, r, first)

    def _begin_stream(self, x: JobRun, r: JobRun, first: int) -> None:
        """Stream ``x`` of grouped job ``r`` starts its steps at ``first`` now."""
        x.released = True
        x.traffic = r.traffic
        x.step = first
        self._pacing.begin(x)

    @staticmethod
    def _done(r: JobRun) -> bool:
        """Whether ``r``'s iteration is complete (a grouped job: both its streams too)."""
        dp = r.companion
        return r.comm_done and not r.computing and (dp is None or dp.comm_done)

    def on_compute_end(self, r: JobRun) -> None:
        r.computing = False
        r.busy_gpu_s += r.gpu_count * r.spec.busy_s
        self._ledger.busy_done_gpu_s += r.gpu_count * r.spec.busy_s
        if r.comm_done and (r.companion is None or r.companion.comm_done):
            self._end(r)

    def on_release(self, r: JobRun) -> None:
        if r.companion is not None:
            self._begin_stream(r, r, 0)
            return
        r.released = True
        assert r.traffic is not None
        if not r.traffic.steps:
            r.comm_done = True
            if not r.computing:
                self._end(r)
            return
        r.step = 0
        self._pacing.begin(r)

    def on_step_end(self, r: JobRun) -> None:
        r.step = self._pacing.end_step(r)  # the next step starts, or the communication is done
        r.comm_done = r.step < 0
        if r.comm_done and not r.computing and (r.companion is None or r.companion.comm_done):
            self._end(r)

    def _end(self, r: JobRun) -> None:
        now = self._kernel.now
        r.iterations_done += 1.0
        r.last_end_s = now
        if r.target_iterations is not None and r.iterations_done >= r.target_iterations - 1e-9:
            if r.companion is not None:
                self._pacing.drop(r.companion)
            self._on_finished(r)
            return
        start = now + r.pending_delay_s
        r.pending_delay_s = 0.0
        self.start(r, start)

    def busy_now(self, running: Sequence[int], runs: Sequence[JobRun]) -> float:
        """Busy GPU-seconds up to now, the computations in progress included."""
        now = self._kernel.now
        partial = 0.0
        for i in running:
            r = runs[i]
            if r.computing:  # the bubble's share of the compute so far is not busy
                busy = r.spec.busy_s / r.spec.profile.compute_s if r.spec.parallel is not None else 1.0
                partial += r.gpu_count * max(0.0, min(now, r.compute_end_s) - r.iteration_start_s) * busy
        return self._ledger.busy_done_gpu_s + partial
