"""The iteration cycle of a running job: compute, release of its communication, steps, next iteration.

An iteration starting at ``t`` computes until ``t + c``; its communication (the steps of its collective,
in order) is released at ``t + o * c``; the next iteration starts when both are done (plus a one-time
delay after a change of CASSINI time shift). GPU busy time is compute time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from commsched.sim.accounting import Ledger
from commsched.sim.fast import FastMode
from commsched.sim.kernel import EventKernel
from commsched.sim.pacing import Pacing
from commsched.sim.runs import EventKind, JobRun


class Iterations:
    """Handles the iteration events of the running jobs.

    Parameters
    ----------
    kernel, ledger, pacing
        The engine's parts the cycle drives.
    fast
        The fast mode, told of every iteration start when ``jumps`` is true.
    jumps
        Whether the run is in fast mode.
    on_finished
        Called when a job completes its last iteration.
    """

    def __init__(
        self,
        *,
        kernel: EventKernel,
        ledger: Ledger,
        pacing: Pacing,
        fast: FastMode,
        jumps: bool,
        on_finished: Callable[[JobRun], None],
    ) -> None:
        self._kernel = kernel
        self._ledger = ledger
        self._pacing = pacing
        self._fast = fast
        self._jumps = jumps
        self._on_finished = on_finished

    def start(self, r: JobRun, t: float) -> None:
        """Start an iteration of ``r`` at ``t`` (compute now, communication after ``overlap``)."""
        c = r.spec.profile.compute_s
        r.iteration_start_s = t
        r.compute_end_s = t + c
        r.computing = True
        r.released = False
        tr = r.next_traffic or r.traffic
        assert tr is not None
        r.comm_done = not tr.steps
        r.step = -1
        r.step_progress = 0.0
        self._pacing.drop(r)  # a step abandoned (a job back from the fluid) leaves no slot behind
        r.version += 1
        self._kernel.push(r.compute_end_s, EventKind.COMPUTE_END, r.index, r.version)
        if not r.comm_done:
            r.release_s = t + r.overlap * c
            self._kernel.push(r.release_s, EventKind.RELEASE, r.index, r.version)
        if self._jumps:
            self._fast.on_iteration_start(r, t)

    def on_compute_end(self, r: JobRun) -> None:
        r.computing = False
        r.busy_gpu_s += r.gpu_count * r.spec.profile.compute_s
        self._ledger.busy_done_gpu_s += r.gpu_count * r.spec.profile.compute_s
        if r.comm_done:
            self._end(r)

    def on_release(self, r: JobRun) -> None:
        r.released = True
        if r.next_traffic is not None and r.next_traffic is not r.traffic:
            r.traffic = r.next_traffic
        assert r.traffic is not None
        if not r.traffic.steps:
            r.comm_done = True
            if not r.computing:
                self._end(r)
            return
        r.step = 0
        r.step_progress = 0.0
        r.settled_s = self._kernel.now
        r.pace_bytes_per_s = 0.0
        self._pacing.begin(r)

    def on_step_end(self, r: JobRun) -> None:
        self._pacing.end_step(r)  # the next step starts, or the communication is done
        if r.comm_done and not r.computing:
            self._end(r)

    def _end(self, r: JobRun) -> None:
        now = self._kernel.now
        r.iterations_done += 1.0
        r.last_end_s = now
        if r.target_iterations is not None and r.iterations_done >= r.target_iterations - 1e-9:
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
            if r.computing:
                partial += r.gpu_count * max(0.0, min(now, r.compute_end_s) - r.iteration_start_s)
        return self._ledger.busy_done_gpu_s + partial
