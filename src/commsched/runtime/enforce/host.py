"""What the parts of an enforcer share: its settings, its jobs, and the face it shows its helpers.

:class:`~commsched.runtime.enforce.enforcer.Enforcer` owns the state; the pins
(:mod:`.pins`), the loops (:mod:`.loops`) and the reports (:mod:`.reports`) each see it through the
protocol below (and their own extension of it), so none of them imports the enforcer.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

from typing_extensions import TypedDict  # pydantic reads these on Python 3.11 (the agent's answers)

from commsched.runtime.enforce.processes.cgroups import JobCgroup
from commsched.runtime.enforce.processes.spawn import JobProcess
from commsched.runtime.protocol.control import HostView
from commsched.scheduling.dscp import CONTROL_DSCP

__all__ = ["EnforcerConfig", "EnforcerView", "JobProfileJSON", "JobState", "ProfilePoster"]

#: posts a job's profile body (``PUT /v1/jobs/{job}/profile``): job, body -> the daemon's answer
ProfilePoster = Callable[[str, dict[str, float]], object]


class JobProfileJSON(TypedDict, total=False):
    """What an enforcer did with a job's profile: pending, rejected (why) or posted (and the answer)."""

    pending: bool  # a thread is profiling the window
    tries: int  # windows rejected so far
    #: the window's traffic profile (:meth:`commsched.runtime.profiling.traffic.OutsideProfile.to_json`)
    measured: dict[str, Any]
    rejected: str  # why it was not posted
    at: float  # when (wall clock, s)
    window: list[float]  # start, end (wall clock, s)
    posted: dict[str, float]  # the body posted (:func:`commsched.runtime.profiling.body.profile_body`)
    answer: object  # the poster's answer, or ``{"error": ...}``


@dataclass(frozen=True, slots=True, kw_only=True)
class EnforcerConfig:
    """Where an agent's enforcement lives and how it samples."""

    host: str
    ledger: Path
    netns: str | None = None  # the namespace name (for ``testbed down``), when on a testbed
    label: str = ""  # part of the table and cgroup names (e.g. the testbed name)
    sample_s: float = 0.01
    hold_timeout_s: float = 4.0
    profile_window_s: float = 0.0  # 0: no profile is posted
    max_samples: int = 400_000
    #: DSCP of the jobs' pure ACKs (the control class's; ``None``: an ACK carries its connection's class)
    ack_dscp: int | None = CONTROL_DSCP


@dataclass(slots=True)
class JobState:
    """One job on this host (mutable, owned by the enforcer)."""

    id: str
    mark: int
    name: str
    cgroup: JobCgroup
    #: t, data bytes out, all bytes out, SYNs held, data bytes in
    samples: deque[tuple[float, int, int, int, int]] = field(default_factory=deque)
    procs: dict[int, JobProcess] = field(default_factory=dict)
    profile_window_s: float = 0.0
    profile: JobProfileJSON | None = None
    profile_checked: float = 0.0


class EnforcerView(Protocol):
    """What every helper of an enforcer reads: settings, jobs, the host's view, the table, the lock."""

    @property
    def cfg(self) -> EnforcerConfig: ...

    @property
    def jobs(self) -> dict[str, JobState]: ...

    @property
    def view(self) -> HostView: ...

    @property
    def table(self) -> str: ...

    @property
    def lock(self) -> AbstractContextManager[Any]: ...

    @property
    def replies(self) -> Any:
        """The probing oracle's replies' ports (:mod:`.replies`), or ``None``."""
        ...
