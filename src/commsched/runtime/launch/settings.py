"""How one policy's testbed run is timed and how its daemon decides (:class:`RunSettings`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

__all__ = ["RunSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings:
    """Timing of one policy's run (seconds) and how the daemon decides."""

    profiling_window_s: float
    window_s: float
    priority_levels: int
    seed: int
    topology: dict[str, Any]
    #: time dilation: compute and bytes both multiplied, so the run is this much slower than the cluster
    time_scale: float = 1.0
    start_timeout_s: float = 240.0
    refresh_s: float = 1.0
    #: tiny all-reduces each job process times before the run (per-step latency for the twin)
    calibration: int = 5
    #: the first host of every job measures its profile over this share of the profiling window and
    #: posts it to the daemon, which recomputes with it (0: the daemon keeps the declared profile)
    profile_share: float = 0.6
    #: testbed rate scale (to turn the bytes a job process measures back into the job's bytes)
    rate_scale: float = 1.0
    #: command jobs are profiled over this share of the profiling window from its start (more than
    #: the library jobs: their iterations are measured from outside, with a sample's resolution)
    command_profile_share: float = 0.8
    #: the enforcing agents' path oracle: ``routes`` (the routers' own) or ``probe`` (TTL probes)
    oracle: str = "routes"
    #: where progress lines go (``None``: nowhere)
    progress: Callable[[str], None] | None = None

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)
