"""Whether the emulation was short of CPU: the machine's and the testbed's CPU time against the wall clock.

The emulated fabric has no hardware of its own: its routers forward in the kernel's softirq context,
its hosts' ranks and agents are processes, and all of them share the machine's cores with whatever
else runs there. When the cores are all busy, a packet waits for a core rather than for a link, and
a run measures the machine instead of the fabric. :class:`CpuSampler` samples ``/proc/stat`` (every
core's user, system, softirq, steal and idle time) and the CPU time of the processes in the testbed's
namespaces, in a thread, while a run goes on; :func:`cpu_report` integrates a window of the samples.

A window is **short** of CPU when the machine's cores were busy :data:`SHORT` of the wall clock or more
(idle under the rest): the emulation then waited for cores some of the time.
"""

from __future__ import annotations

import itertools
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["SHORT", "CpuSample", "CpuSampler", "cpu_report", "read_stat"]

#: a window whose cores were busy this share of the wall clock or more was short of CPU
SHORT = 0.9

_TICK = float(os.sysconf("SC_CLK_TCK")) if hasattr(os, "sysconf") else 100.0


@dataclass(frozen=True, slots=True, kw_only=True)
class CpuSample:
    """Cumulative CPU seconds (all cores) at wall-clock time ``t``; ``testbed_s`` of the processes in
    the testbed's namespaces (those seen at that sample)."""

    t: float
    busy_s: float
    idle_s: float
    softirq_s: float
    steal_s: float
    testbed_s: float


def read_stat(text: str) -> tuple[float, float, float, float]:
    """``(busy, idle, softirq, steal)`` seconds from the ``cpu`` line of ``/proc/stat``'s text.

    >>> tuple(round(x, 3) for x in read_stat("cpu  100 0 50 800 25 0 10 5 0 0\\ncpu0 1 2 3\\n"))
    (1.65, 8.25, 0.1, 0.05)
    """
    f = [float(x) / _TICK for x in text.splitlines()[0].split()[1:]]
    user, nice, system, idle, iowait, irq, softirq, steal = (f + [0.0] * 8)[:8]
    return user + nice + system + irq + softirq + steal, idle + iowait, softirq, steal


def _netns_inodes(prefix: str) -> set[int]:
    root = Path("/var/run/netns")
    try:
        return {p.stat().st_ino for p in root.iterdir() if p.name.startswith(prefix)}
    except OSError:
        return set()


def _testbed_cpu_s(inodes: set[int]) -> float:
    """CPU seconds (user + system) of the live processes whose network namespace is one of ``inodes``."""
    total = 0.0
    if not inodes:
        return total
    for pid in os.listdir("/proc"):
        if not pid.isdigit():
            continue
        try:
            if os.stat(f"/proc/{pid}/ns/net").st_ino not in inodes:
                continue
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(")", 1)[1].split()
        total += (float(fields[11]) + float(fields[12])) / _TICK
    return total


class CpuSampler:
    """Samples the machine's CPU (and that of the testbed ``prefix``'s namespaces) every
    ``interval_s`` in a daemon thread, from :meth:`start` to :meth:`stop`; ``samples`` holds them."""

    def __init__(self, prefix: str | None = None, *, interval_s: float = 0.5,
                 clock: Callable[[], float] = time.time) -> None:  # fmt: skip
        self.prefix, self.interval_s, self.clock = prefix, interval_s, clock
        self.samples: list[CpuSample] = []
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def sample(self) -> None:
        try:
            busy, idle, softirq, steal = read_stat(Path("/proc/stat").read_text())
        except OSError:
            return
        inodes = _netns_inodes(f"{self.prefix}-") if self.prefix else set()
        self.samples.append(
            CpuSample(t=self.clock(), busy_s=busy, idle_s=idle, softirq_s=softirq, steal_s=steal,
                      testbed_s=_testbed_cpu_s(inodes))
        )  # fmt: skip

    def _loop(self) -> None:
        while not self._stop.wait(self.interval_s):
            self.sample()

    def start(self) -> CpuSampler:
        self.sample()
        self._thread = threading.Thread(target=self._loop, name="cpu-sampler", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> list[CpuSample]:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        self.sample()
        return self.samples

    def __enter__(self) -> CpuSampler:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()


def cpu_report(samples: Sequence[CpuSample], *, start: float, end: float) -> dict[str, Any]:
    """The CPU of the window ``[start, end)``: the samples nearest inside it, integrated.

    ``cores``: the machine's (busy + idle over the wall clock); ``busy_share``: busy over busy + idle;
    ``softirq_s`` (the routers' forwarding and the hosts' stacks), ``steal_s``, ``testbed_s`` (the
    processes in the testbed's namespaces: ranks, agents); ``short``: ``busy_share >= SHORT``.
    Empty of figures (``short`` ``None``) where the window holds fewer than two samples.

    >>> s = [CpuSample(t=t, busy_s=1.9 * t, idle_s=0.1 * t, softirq_s=0.2 * t, steal_s=0.0,
    ...                testbed_s=0.5 * t) for t in range(11)]
    >>> r = cpu_report(s, start=0.0, end=10.0)
    >>> r["short"], round(r["busy_share"], 3), round(r["cores"], 3), round(r["testbed_s"], 3)
    (True, 0.95, 2.0, 5.0)
    """
    inside = [s for s in samples if start <= s.t <= end]
    if len(inside) < 2 or inside[-1].t <= inside[0].t:
        return {"short": None, "samples": len(inside), "wall_s": end - start}
    a, b = inside[0], inside[-1]
    wall = b.t - a.t
    busy, idle = b.busy_s - a.busy_s, b.idle_s - a.idle_s
    share = busy / (busy + idle) if busy + idle > 0 else 0.0
    # the testbed's processes: summed per step (a process that exits takes its time with it)
    testbed = sum(max(y.testbed_s - x.testbed_s, 0.0) for x, y in itertools.pairwise(inside))
    return {
        "short": share >= SHORT,
        "busy_share": share,
        "cores": (busy + idle) / wall,
        "wall_s": wall,
        "busy_s": busy,
        "softirq_s": b.softirq_s - a.softirq_s,
        "steal_s": b.steal_s - a.steal_s,
        "testbed_s": testbed,
        "samples": len(inside),
    }
