"""What the engine knows of each job: the job as handed in (``SimJob``) and its mutable run state.

One :class:`JobRun` per job holds everything that changes while the job waits, runs and finishes. It is
split by concern, one record per writer, each extending the one before (slots all, so a field is read as
fast as on one flat record); every other part of the engine only reads them:

* :class:`JobSetup`: the job as handed in, written by no one once made;
* :class:`Placement`: placed, started and finished (:mod:`commsched.sim.jobs.lifecycle`);
* :class:`Decided`: routes, class, intensity, component, phase and target
  (:mod:`commsched.sim.decide.decisions`);
* :class:`Cycle`: the iteration cycle (:mod:`commsched.sim.jobs.iteration`; the fast mode's jumps shift its
  times and credit its counters through that module's functions);
* :class:`JobRun`: the pace, the step end pending (:mod:`commsched.sim.rates.pacing`); the step's progress
  and pace are not copied here: they live on the pacing's arrays, one slot per step in flight
  (:meth:`commsched.sim.rates.pacing.Pacing.progress`).

Each record names its writer (``WRITER``); ``tests/sim/test_one_writer.py`` holds each field to it.

A grouped job's data-parallel stream (:class:`StreamRun`) has its own slot and iteration-cycle fields but
holds none of the fields decided for its job (class, intensity, component, end): it reads them from its job.

Units: times in seconds of simulated time, paces in **bytes/s** (capacities of the topology are in
bits/s and are converted once, see :class:`commsched.sim.rates.pacing.Pacing`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from enum import IntEnum
from typing import ClassVar

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


class JobSetup:
    """The job as handed in: written when the record is made, then read only.

    Attributes
    ----------
    index
        Position of the job in the simulation's job list (its id in events).
    spec
        The job as specified.
    iteration_model
        Layer-wise iteration model (standalone communication time -> iteration time), if any.
    ideal_s
        Its ideal iteration time (:mod:`commsched.sim.results.ideal`): alone on the empty cluster, its flows
        spread; the reference of its slowdown and of the iterations of a job given a duration.
    companion
        A grouped job's data-parallel stream (:func:`companion_of`), in flight beside its blocking one.
    parent
        The job whose data-parallel stream this run is (``None`` for a job).
    """

    WRITER: ClassVar[str | None] = None
    __slots__ = ("companion", "ideal_s", "index", "iteration_model", "parent", "spec")

    def __init__(
        self,
        index: int,
        spec: JobSpec,
        iteration_model: Callable[[float], float] | None = None,
        ideal_s: float | None = None,
        parent: JobRun | None = None,
    ) -> None:
        self.index = index
        self.spec = spec
        self.iteration_model = iteration_model
        self.ideal_s = float("nan") if ideal_s is None else ideal_s
        self.companion: JobRun | None = None
        self.parent: JobRun | None = parent
        self._fresh()

    def _fresh(self) -> None:
        """Set the fields of each record after this one as before the job arrives."""


class Placement(JobSetup):
    """Where and when the job runs: written by :mod:`commsched.sim.jobs.lifecycle`.

    Attributes
    ----------
    placed
        The job as placed (GPUs, reserved links, pinned routes); ``None`` while it waits.
    gpu_count
        GPUs the job holds (its spec's count until placed).
    start_s, end_s
        When it was placed and when it finished (``None`` before).
    finished
        Whether it has finished.
    """

    WRITER: ClassVar[str | None] = "jobs/lifecycle.py"
    __slots__ = ("end_s", "finished", "gpu_count", "placed", "start_s")

    def _fresh(self) -> None:
        super()._fresh()
        self.placed: PlacedJob | None = None
        self.gpu_count = self.spec.gpus
        self.start_s: float | None = None
        self.end_s: float | None = None
        if self.parent is None:  # a stream's is its job's (StreamRun)
            self.finished = False


class Decided(Placement):
    """What the policy's decisions set for the job: written by :mod:`commsched.sim.decide.decisions`.

    Attributes
    ----------
    routed
        Transfer schedule under the job's routes now (a decision's new routes apply at once, to the
        bytes a step in flight has not yet sent: :meth:`commsched.sim.rates.pacing.Pacing.reroute`).
    priority_class
        Hardware priority class of its traffic (0 = highest).
    intensity
        Its GPU intensity (Crux), weighting the bytes it puts on links.
    component
        Id of the component of contending jobs it belongs to (-1 before the first decision).
    shared_links
        Whether it ever shared a component (links) with another running job.
    standalone_s
        Its iteration time alone on the cluster, on the routes the policy gave it.
    target_iterations
        Iterations after which it finishes (``None``: runs to the horizon).
    overlap
        Fraction of the compute after which the communication is released.
    time_shift_s
        Phase offset of its iteration starts (CASSINI time shift) now in force.
    """

    WRITER: ClassVar[str | None] = "decide/decisions.py"
    __slots__ = (
        "component", "intensity", "overlap", "priority_class", "routed", "shared_links", "standalone_s",
        "target_iterations", "time_shift_s",
    )  # fmt: skip

    def _fresh(self) -> None:
        super()._fresh()
        self.routed: JobTraffic | None = None
        if self.parent is None:  # a stream's are its job's (StreamRun)
            self.priority_class = 0
            self.intensity = 0.0
            self.component = -1
        self.shared_links = False
        self.standalone_s = 0.0
        self.target_iterations: float | None = None
        self.overlap = self.spec.profile.overlap
        self.time_shift_s = 0.0


class Cycle(Decided):
    """The iteration cycle: written by :mod:`commsched.sim.jobs.iteration` (the fast mode through its
    functions).

    Attributes
    ----------
    traffic
        Transfer schedule the job runs: its ``routed`` one (a grouped job: its stream plan of it).
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
    iterations_done
        Iterations completed (fractional never; a float so that jumps can credit it).
    busy_gpu_s
        Busy GPU-seconds of its completed computations.
    pending_delay_s
        Delay of its next iteration start after a change of time shift (applied once).
    stop_step
        The step after its stream's last (-1: the traffic's step count). A grouped job's own slot runs
        its blocking steps, ``[0, stop_step)``; its ``companion`` the data-parallel ones.
    """

    WRITER: ClassVar[str | None] = "jobs/iteration.py"
    __slots__ = (
        "busy_gpu_s", "comm_done", "compute_end_s", "computing", "iteration_start_s", "iterations_done",
        "last_end_s", "pending_delay_s", "release_s", "released", "step", "stop_step", "traffic", "version",
    )  # fmt: skip

    def _fresh(self) -> None:
        super()._fresh()
        self.traffic: JobTraffic | None = None
        self.iteration_start_s = 0.0
        self.compute_end_s = 0.0
        self.release_s = 0.0
        self.last_end_s = 0.0
        self.computing = False
        self.released = False
        self.comm_done = False
        self.step = -1
        self.version = 0
        self.iterations_done = 0.0
        self.busy_gpu_s = 0.0
        self.pending_delay_s = 0.0
        self.stop_step = -1


class JobRun(Cycle):
    """Mutable run state of one job: the records above, and its pace's, written by
    :mod:`commsched.sim.rates.pacing`.

    Attributes
    ----------
    step_version
        Bumped to invalidate its pending step-end event.
    """

    WRITER: ClassVar[str | None] = "rates/pacing.py"
    __slots__ = ("step_version",)

    def _fresh(self) -> None:
        super()._fresh()
        self.step_version = 0

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
        super().__init__(index, parent.spec, parent=parent)

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
