"""What the engine knows of each job: the job as handed in (``SimJob``) and its mutable run state.

One :class:`JobRun` per job holds everything that changes while the job waits, runs and finishes. Its
fields are grouped by the part of the engine that writes them; the others only read them:

* placement and decisions (:mod:`commsched.sim.jobs.lifecycle`, :mod:`commsched.sim.decide.decisions`);
* the iteration cycle (:mod:`commsched.sim.jobs.iteration`);
* the step in flight (:mod:`commsched.sim.rates.pacing`); its progress and pace are not copied here: they live
  on the pacing's arrays, one slot per step in flight (:meth:`commsched.sim.rates.pacing.Pacing.progress`);
* the fast mode's jumps, which shift times and credit counters (:mod:`commsched.sim.fast.mode`).

A grouped job's data-parallel stream (:class:`StreamRun`) has its own slot and iteration-cycle fields but
holds none of the fields decided for its job (class, intensity, component, end): it reads them from its job.

Units: times in seconds of simulated time, paces in **bytes/s** (capacities of the topology are in
bits/s and are converted once, see :class:`commsched.sim.rates.pacing.Pacing`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum

from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import JobTraffic
from commsched.topology import NodeId
from commsched.workload import JobSpec


class EventKind(IntEnum):
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
    #: its ideal iteration (commsched.sim.results.ideal); ``None``: the simulation computes it on its own
    #: cluster
    ideal_iteration_s: float | None = None


class JobRun:
    """Mutable run state of one job.

    Attributes
    ----------
    index
        Position of the job in the simulation's job list (its id in events).
    spec
        The job as specified.
    iteration_model
        Layer-wise iteration model (standalone communication time -> iteration time), if any.
    placed
        The job as placed (GPUs, reserved links, pinned routes); ``None`` while it waits.
    gpu_count
        GPUs the job holds (its spec's count until placed).
    traffic
        Transfer schedule the job runs: its ``routed`` one (a grouped job: its stream plan of it).
    routed
        Transfer schedule under the job's routes now (a decision's new routes apply at once, to the
        bytes a step in flight has not yet sent: :meth:`commsched.sim.rates.pacing.Pacing.reroute`).
    priority_class
        Hardware priority class of its traffic (0 = highest).
    intensity
        Its GPU intensity (Crux), weighting the bytes it puts on links.
    standalone_s
        Its iteration time alone on the cluster, on the routes the policy gave it.
    ideal_s
        Its ideal iteration time (:mod:`commsched.sim.results.ideal`): alone on the empty cluster, its flows
        spread; the reference of its slowdown and of the iterations of a job given a duration.
    target_iterations
        Iterations after which it finishes (``None``: runs to the horizon).
    overlap
        Fraction of the compute after which the communication is released.
    iterations_done
        Iterations completed (fractional never; a float so that jumps can credit it).
    busy_gpu_s
        Busy GPU-seconds of its completed computations.
    start_s, end_s
        When it was placed and when it finished (``None`` before).
    finished
        Whether it has finished.
    shared_links
        Whether it ever shared a component (links) with another running job.
    component
        Id of the component of contending jobs it belongs to (-1 before the first decision).
    iteration_start_s
        Start of the current iteration.
    compute_end_s
        End of the current iteration's compute.
    release_s
        When the current iteration's communication is (or was) released.
    last_end_s
        End of its last completed iteration (its start time before the first).
    computing
        Whether its compute is running.
    released
        Whether the current iteration's communication has been released.
    comm_done
        Whether the current iteration's communication is complete.
    step
        Index of the communication step in flight (-1: none).
    version
        Bumped to invalidate its pending compute-end and release events.
    step_version
        Bumped to invalidate its pending step-end event.
    time_shift_s
        Phase offset of its iteration starts (CASSINI time shift) now in force.
    pending_delay_s
        Delay of its next iteration start after a change of time shift (applied once).
    stop_step
        The step after its stream's last (-1: the traffic's step count). A grouped job's own slot runs
        its blocking steps, ``[0, stop_step)``; its ``companion`` the data-parallel ones.
    companion
        A grouped job's data-parallel stream (:func:`companion_of`), in flight beside its blocking one.
    parent
        The job whose data-parallel stream this run is (``None`` for a job).
    """

    __slots__ = (
        "busy_gpu_s",
        "comm_done",
        "companion",
        "component",
        "compute_end_s",
        "computing",
        "end_s",
        "finished",
        "gpu_count",
        "ideal_s",
        "index",
        "intensity",
        "iteration_model",
        "iteration_start_s",
        "iterations_done",
        "last_end_s",
        "overlap",
        "parent",
        "pending_delay_s",
        "placed",
        "priority_class",
        "release_s",
        "released",
        "routed",
        "shared_links",
        "spec",
        "standalone_s",
        "start_s",
        "step",
        "step_version",
        "stop_step",
        "target_iterations",
        "time_shift_s",
        "traffic",
        "version",
    )

    def __init__(
        self,
        index: int,
        spec: JobSpec,
        iteration_model: Callable[[float], float] | None = None,
        ideal_s: float | None = None,
    ) -> None:
        self.index = index
        self.spec = spec
        self.iteration_model = iteration_model
        self.ideal_s = float("nan") if ideal_s is None else ideal_s
        self.placed: PlacedJob | None = None
        self.gpu_count = spec.gpus
        self.traffic: JobTraffic | None = None
        self.routed: JobTraffic | None = None
        self.standalone_s = 0.0
        self.target_iterations: float | None = None
        self.overlap = spec.profile.overlap
        self.iterations_done = 0.0
        self.busy_gpu_s = 0.0
        self.start_s: float | None = None
        self.end_s: float | None = None
        self.shared_links = False
        self.iteration_start_s = 0.0
        self.compute_end_s = 0.0
        self.release_s = 0.0
        self.last_end_s = 0.0
        self.computing = False
        self.released = False
        self.comm_done = False
        self.step = -1
        self.version = 0
        self.step_version = 0
        self.time_shift_s = 0.0
        self.pending_delay_s = 0.0
        self.stop_step = -1
        self.companion: JobRun | None = None
        self.parent: JobRun | None = None
        self._own_decisions()

    def _own_decisions(self) -> None:
        """The fields decided for a job (its class, intensity, component, end), as before its start."""
        self.priority_class = 0
        self.intensity = 0.0
        self.component = -1
        self.finished = False

    @property
    def active(self) -> bool:
        """Whether a communication step of this job is in flight."""
        return self.released and self.step >= 0 and not self.comm_done and not self.finished


class StreamRun(JobRun):
    """A grouped job's data-parallel stream: a slot of its own on the engine's arrays, with its own
    iteration-cycle and step fields, and its job's class, intensity, component and end, read from its job
    (``parent``) and never held or written here: they have one writer each, the job's."""

    __slots__ = ()
    parent: JobRun

    def __init__(self, index: int, parent: JobRun) -> None:
        super().__init__(index, parent.spec)
        self.parent = parent

    def _own_decisions(self) -> None:
        """Nothing of its own: see the properties."""

    @property
    def priority_class(self) -> int:
        return self.parent.priority_class

    @priority_class.setter
    def priority_class(self, value: int) -> None:
        raise AttributeError(f"a stream's priority_class is its job's (job {self.parent.index})")

    @property
    def intensity(self) -> float:
        return self.parent.intensity

    @intensity.setter
    def intensity(self, value: float) -> None:
        raise AttributeError(f"a stream's intensity is its job's (job {self.parent.index})")

    @property
    def component(self) -> int:
        return self.parent.component

    @component.setter
    def component(self, value: int) -> None:
        raise AttributeError(f"a stream's component is its job's (job {self.parent.index})")

    @property
    def finished(self) -> bool:
        return self.parent.finished

    @finished.setter
    def finished(self, value: bool) -> None:
        raise AttributeError(f"a stream's finished is its job's (job {self.parent.index})")


def companion_of(parent: JobRun, index: int) -> StreamRun:
    """The run state of ``parent``'s data-parallel stream, a slot of its own (``index``) on the engine's
    arrays; its class, intensity, component and end are its job's (:class:`StreamRun`)."""
    c = StreamRun(index, parent)
    parent.companion = c
    return c
