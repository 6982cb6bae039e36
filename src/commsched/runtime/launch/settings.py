"""How a testbed run is run (:class:`RunOptions`, the one options record) and what one policy's daemon
is told (:class:`RunSettings`: the options with the scenario's decision inputs)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["RunOptions", "RunSettings"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How to run: policies in order, testbed name, rate scale, windows and timeouts (s)."""

    policies: tuple[str, ...]
    name: str
    rate_scale: float
    profiling_window_s: float = 10.0
    window_s: float = 30.0
    #: time dilation: compute and bytes both multiplied, so the run is this much slower than the cluster
    time_scale: float = 1.0
    #: class queue size set on every emulated egress (0: keep the testbed's); see
    #: :func:`commsched.testbed.tuning.deepen_queues`
    queue_bytes: int = 8 << 20
    #: hosts send TCP packets of at most this many bytes (``gso_max_size``, see
    #: :func:`commsched.testbed.tuning.segment_packets`; 0: the kernel's 64 KB segments). 16 KiB: a
    #: top-class packet waits at most 2.1 ms per hop behind a lower class's at 62.5 Mbit/s (8.4 ms
    #: with 64 KB, which gave the lower classes the top class's time; docs/real-jobs.md), at a quarter
    #: of the packets of MTU frames (1500), whose CPU time slowed the jobs on a shared 2-core machine
    segment_bytes: int = 16384
    #: give the twin the per-step latency the job processes measured (else: links' own latency);
    #: off by default: that latency, timed with tiny all-reduces, overlaps with the transfers of a
    #: real step, and the calibrated twin came out 9-12 % slower than measured (docs/testbed-run.md)
    calibrate: bool = False
    #: the first host of every job measures its profile over this share of the profiling window and
    #: posts it to the daemon, which recomputes with it (0: the daemon keeps the declared profile)
    profile_share: float = 0.6
    #: the scenario's seed is used when ``None``
    seed: int | None = None
    #: the enforcing agents' path oracle: ``routes`` (the routers' own) or ``probe`` (TTL probes)
    oracle: str = "routes"
    #: a directory the run's work files are copied to at its end (``None``: none kept)
    keep_dir: Path | None = None
    start_timeout_s: float = 240.0
    refresh_s: float = 1.0
    #: tiny all-reduces each job process times before the run (per-step latency for the twin)
    calibration: int = 5
    #: command jobs are profiled over this share of the profiling window from its start (more than
    #: the library jobs: their iterations are measured from outside, with a sample's resolution)
    command_profile_share: float = 0.8
    #: where progress lines go (the command line: stderr, unless --quiet; ``None``: nowhere)
    progress: Callable[[str], None] | None = None

    def say(self, line: str) -> None:
        """Send ``line`` to :attr:`progress` (if any)."""
        if self.progress is not None:
            self.progress(line)


@dataclass(frozen=True, slots=True, kw_only=True)
class RunSettings:
    """One policy's run: the run's options, and what its daemon decides with (from the scenario)."""

    options: RunOptions
    priority_levels: int
    #: the seed the daemon decides with (the options' seed, else the scenario's)
    seed: int
    #: the topology spec the daemon loads (builder kind and parameters, circuits where rewired)
    topology: dict[str, Any]
