"""What the iteration cycle and the decisions ask of the fast mode: two small protocols.

The fast mode (:class:`commsched.sim.fast.mode.FastMode`, :class:`commsched.sim.fast.fluid.FluidMode`) is
wired in by the engine alone; the iteration cycle (:mod:`commsched.sim.jobs.iteration`) and the decisions
(:mod:`commsched.sim.decide.decisions`) reach it only through these, so that neither imports it, and exact
mode runs the same cycle and decisions with the fast mode's parts doing nothing.

:class:`Counters` is what the lifecycle and the cycle add to of the engine's counters, and :class:`Events`
what they and the pacing ask of the event kernel, so that ``jobs/`` imports neither ``results/`` nor
``loop/`` and ``rates/`` does not import ``loop/``: those rooms read the run state and run the cycle and the
pacing, one direction each.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Protocol

from commsched.scheduling.traffic import JobTraffic
from commsched.sim.jobs.runs import EventKind, JobRun
from commsched.sim.jobs.streams import StreamPlan


class IterationWatch(Protocol):
    """Told of every iteration start (fast mode: where it looks for a period and decides to skip)."""

    def on_iteration_start(self, r: JobRun, t: float) -> None: ...


class Paces(Protocol):
    """What the iteration cycle asks of the pacing (:class:`commsched.sim.rates.pacing.Pacing`)."""

    def begin(self, r: JobRun) -> None:
        """``r`` starts its step ``r.step`` now."""
        ...

    def end_step(self, r: JobRun) -> int:
        """``r``'s step ends now; its next step (-1: none)."""
        ...

    def drop(self, r: JobRun) -> None:
        """Forget ``r``'s slot."""
        ...

    def stream_plan(self, r: JobRun, traffic: JobTraffic) -> StreamPlan:
        """A grouped job's streams of ``traffic``."""
        ...


class Regimes(Protocol):
    """What a decision asks of the fast mode's step-by-step regimes (periodic and measured jumps)."""

    @property
    def ahead(self) -> Mapping[int, object]:
        """The components a jump moved ahead of the clock."""
        ...

    def catch_up(self, comp: int) -> None:
        """Bring ``comp`` back to the clock."""
        ...

    def expire(self, comps: Iterable[int]) -> None:
        """Forget the jumps of ``comps`` that the clock has passed."""
        ...

    def adopt(self, comps: Mapping[int, list[int]]) -> None:
        """New components, each starting afresh."""
        ...

    def forget(self, comps: Iterable[int]) -> None:
        """Components that no longer exist."""
        ...


class Fluids(Protocol):
    """What a decision asks of the fluid mode (large components at their analytic steady state)."""

    def is_fluid(self, job: int) -> bool:
        """Whether ``job`` runs as a fluid."""
        ...

    def settle(self, job: int) -> None:
        """Credit a fluid job's progress up to the clock."""
        ...

    def apply(self, comps: dict[int, list[int]], keep: set[int]) -> set[int]:
        """After a decision: which components run as fluids."""
        ...


class Counters(Protocol):
    """The cumulative counters the lifecycle and the iteration cycle add to
    (:class:`commsched.sim.results.accounting.Ledger`)."""

    #: busy GPU-seconds of the completed computations
    busy_done_gpu_s: float
    #: GPUs allocated now
    alloc_gpus: int

    def advance_alloc(self, now: float) -> None:
        """Integrate the allocated GPUs up to ``now``."""
        ...


class Events(Protocol):
    """What the lifecycle, the iteration cycle and the pacing ask of the event kernel
    (:class:`commsched.sim.loop.kernel.EventKernel`): the clock, which they read only, and a push."""

    #: events found stale (dropped by their handler)
    stale: int

    @property
    def now(self) -> float:
        """The simulated clock (set by the kernel alone)."""
        ...

    def push(self, t: float, kind: EventKind, job: int = -1, version: int = 0) -> None:
        """Schedule an event."""
        ...
