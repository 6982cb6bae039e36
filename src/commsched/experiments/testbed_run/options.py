"""How a testbed run is run: policies in order, testbed name, rate scale, windows (:class:`RunOptions`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["RunOptions"]


@dataclass(frozen=True, slots=True, kw_only=True)
class RunOptions:
    """How to run: policies in order, testbed name, rate scale, windows (s)."""

    policies: tuple[str, ...]
    name: str
    rate_scale: float
    profiling_window_s: float = 10.0
    window_s: float = 30.0
    time_scale: float = 1.0
    #: class queue size set on every emulated egress (0: keep the testbed's); see :mod:`.queues`
    queue_bytes: int = 8 << 20
    #: send MTU-sized packets from the hosts (no GSO), see :func:`.queues.mtu_packets`; off by
    #: default: on a shared 2-core machine the extra packets cost more CPU than they save latency
    mtu_packets: bool = False
    #: give the twin the per-step latency the job processes measured (else: links' own latency);
    #: off by default: that latency, timed with tiny all-reduces, overlaps with the transfers of a
    #: real step, and the calibrated twin came out 9-12 % slower than measured (docs/testbed-run.md)
    calibrate: bool = False
    #: job processes post their measured profile to the daemon after this share of the profiling
    #: window (0: the daemon decides with the declared profiles)
    profile_share: float = 0.6
    seed: int | None = None
    #: the enforcing agents' path oracle (``routes`` or ``probe``, see docs/real-jobs.md)
    oracle: str = "routes"
    keep_dir: Path | None = None
    #: where progress lines go (the command line: stderr, unless --quiet)
    progress: Callable[[str], None] | None = None

    def say(self, line: str) -> None:
        if self.progress is not None:
            self.progress(line)
