"""Cumulative counters and their sampling into time series, aware of fast-mode jumps.

The engine keeps cumulative counters (busy GPU-seconds, allocated GPU-seconds, bytes per link and
intensity-weighted bytes per link). A fast-mode jump adds a whole extrapolated stretch at once; the
sampler spreads such an increment evenly over the stretch it stands for, so the time series look as if
the stretch had been simulated.

A sample keeps the per-link counters only of the links whose counters changed since the sample before
(sparse), so the samples' memory follows the traffic, not the size of the fabric: a 16,384-GPU fabric
has 135 K links, most of which carry nothing in most sampling intervals.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Jump:
    """An extrapolated stretch ``[t0, t1)`` and what it added to the counters."""

    t0: float
    t1: float
    busy_gpu_s: float
    links: NDArray[np.int64]
    link_bytes: NDArray[np.float64]
    link_iw_bytes: NDArray[np.float64]


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class Sample:
    """Cumulative counters at time ``t``; the per-link ones only where they changed since the sample
    before (``links``, with their new cumulative values)."""

    t: float
    busy_gpu_s: float
    alloc_gpu_s: float
    links: NDArray[np.int64]
    link_bytes: NDArray[np.float64]
    link_iw_bytes: NDArray[np.float64]


class Sampler:
    """Collects samples of cumulative counters, correcting for jumps not yet elapsed."""

    def __init__(self, n_links: int) -> None:
        self.samples: list[Sample] = []
        self._jumps: list[Jump] = []
        #: the per-link counters as of the last sample (corrected), in full
        self.link_bytes = np.zeros(n_links)
        self.link_iw_bytes = np.zeros(n_links)

    def add_jump(self, jump: Jump) -> None:
        if jump.t1 > jump.t0:
            self._jumps.append(jump)

    def truncate_jump(self, jump: Jump, t1: float) -> None:
        """Shorten a recorded stretch to ``[t0, t1)``, its increments scaled to match (a catch-up)."""
        self._jumps = [j for j in self._jumps if j is not jump]
        if t1 > jump.t0:
            f = (t1 - jump.t0) / (jump.t1 - jump.t0)
            self.add_jump(
                Jump(
                    t0=jump.t0,
                    t1=t1,
                    busy_gpu_s=jump.busy_gpu_s * f,
                    links=jump.links,
                    link_bytes=jump.link_bytes * f,
                    link_iw_bytes=jump.link_iw_bytes * f,
                )
            )

    def record(
        self,
        t: float,
        busy_gpu_s: float,
        alloc_gpu_s: float,
        link_bytes: NDArray[np.float64],
        link_iw_bytes: NDArray[np.float64],
    ) -> Sample:
        """Record the counters at ``t`` (the engine has settled everything up to ``t``)."""
        lb = link_bytes.copy()
        liw = link_iw_bytes.copy()
        busy = busy_gpu_s
        keep: list[Jump] = []
        for j in self._jumps:
            if j.t1 <= t:
                continue
            keep.append(j)
            if j.t0 < t:
                ahead = (j.t1 - t) / (j.t1 - j.t0)
                busy -= j.busy_gpu_s * ahead
                lb[j.links] -= j.link_bytes * ahead
                liw[j.links] -= j.link_iw_bytes * ahead
            else:
                busy -= j.busy_gpu_s
                lb[j.links] -= j.link_bytes
                liw[j.links] -= j.link_iw_bytes
        self._jumps = keep
        changed = np.flatnonzero((lb != self.link_bytes) | (liw != self.link_iw_bytes))
        self.link_bytes, self.link_iw_bytes = lb, liw
        s = Sample(
            t=t,
            busy_gpu_s=busy,
            alloc_gpu_s=alloc_gpu_s,
            links=changed,
            link_bytes=lb[changed],
            link_iw_bytes=liw[changed],
        )
        self.samples.append(s)
        return s


class Ledger:
    """The engine's cumulative counters, and their samples.

    Attributes
    ----------
    link_bytes
        Per link: bytes carried so far.
    link_iw_bytes
        Per link: bytes carried so far, each weighted by the GPU intensity of its job.
    busy_done_gpu_s
        Busy GPU-seconds of every completed computation (iterations in compute are added when sampled).
    alloc_gpus
        GPUs held by running jobs now.
    alloc_gpu_s
        GPU-seconds held by running jobs up to ``alloc_t``.
    alloc_t
        Time up to which ``alloc_gpu_s`` is accounted.
    sampler
        The samples taken so far.
    """

    def __init__(self, n_links: int) -> None:
        self.link_bytes = np.zeros(n_links)
        self.link_iw_bytes = np.zeros(n_links)
        self.busy_done_gpu_s = 0.0
        self.alloc_gpus = 0
        self.alloc_gpu_s = 0.0
        self.alloc_t = 0.0
        self.sampler = Sampler(n_links)

    def advance_alloc(self, now: float) -> None:
        """Account the GPUs held up to ``now``."""
        self.alloc_gpu_s += self.alloc_gpus * (now - self.alloc_t)
        self.alloc_t = now

    def record(self, now: float, busy_gpu_s: float) -> None:
        """Take a sample at ``now``; ``busy_gpu_s`` includes the computations in progress."""
        self.advance_alloc(now)
        self.sampler.record(now, busy_gpu_s, self.alloc_gpu_s, self.link_bytes, self.link_iw_bytes)
