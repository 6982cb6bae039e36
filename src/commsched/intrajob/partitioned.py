"""Partition-granular push scheduling: ByteScheduler (user-level partitioning) and packet-level Mercury.

One event-driven engine serves both (Mercury §II-B, §III-A and §IV-A):

* every tensor is cut into partitions of at most ``partition_bytes`` once its BP ends;
* the scheduler hands the highest-priority ready partition (smallest layer index, then partition order;
  or FIFO) to the underlying FIFO transmission queue while the unacknowledged bytes stay within the
  credit ``credit_bytes`` (a partition is always allowed when nothing is outstanding);
* a partition can start ``startup_s`` after it is handed over (the user-level *startup time*: ack delay,
  scheduler, engine and library delay), and no earlier than the end of the previous transmission;
  it is acknowledged when its transmission ends (the ack delay is part of ``startup_s``);
* credit = partition size is stop-and-wait (§III-A); a larger credit lets the next partitions' startup
  overlap the current transmission but they can no longer be preempted;
* the pull of a partition starts when its push ends, on the downlink (full duplex), FIFO.

Mercury at packet size ``p`` is the engine with ``partition_bytes = credit_bytes = p`` and no startup
(preemption at packet boundaries, immediate per-packet aggregation); it tends to the fluid
:func:`commsched.intrajob.iteration.mercury` as ``p -> 0``.
"""

from __future__ import annotations

import heapq
import math
from collections import deque
from dataclasses import dataclass

import numpy as np

from commsched.errors import InputError
from commsched.intrajob.iteration import CommPolicy, bp_end_times
from commsched.intrajob.problem import CommSchedule, IterationProblem

#: ByteScheduler partition size found best for VGG-16 at 10 Gbps (Mercury §III-A, Fig. 4), bytes
DEFAULT_PARTITION_BYTES = 4e6
#: ByteScheduler credit size found best for VGG-16 at 10 Gbps (Mercury §III-A, Fig. 4), bytes
DEFAULT_CREDIT_BYTES = 20e6
#: startup time per partition: "less than ~1 ms" (Mercury §III-A); our reading takes 0.5 ms
DEFAULT_STARTUP_S = 0.5e-3
#: Mercury packet size of the implementation, "~30 KB" (Mercury §VI-C), bytes
DEFAULT_PACKET_BYTES = 30e3


@dataclass(frozen=True, slots=True, kw_only=True)
class PartitionConfig:
    """Knobs of a partition-granular scheduler (Mercury §III-A).

    Attributes
    ----------
    partition_bytes
        Largest partition (ByteScheduler partition size, or Mercury packet size), bytes.
    credit_bytes
        Most unacknowledged bytes in the FIFO transmission queue; ``None`` means one partition
        (stop-and-wait).
    startup_s
        Startup time before each partition's transmission.
    priority
        ``True``: smallest layer index first (preemption at partition boundaries); ``False``: FIFO.
    """

    partition_bytes: float = DEFAULT_PARTITION_BYTES
    credit_bytes: float | None = DEFAULT_CREDIT_BYTES
    startup_s: float = DEFAULT_STARTUP_S
    priority: bool = True

    def __post_init__(self) -> None:
        if not (math.isfinite(self.partition_bytes) and self.partition_bytes > 0):
            raise InputError(
                f"partition size {self.partition_bytes!r}", where="partition_bytes", expected="> 0"
            )
        if self.credit_bytes is not None and not self.credit_bytes > 0:
            raise InputError(f"credit {self.credit_bytes!r}", where="credit_bytes", expected="> 0")
        if not (math.isfinite(self.startup_s) and self.startup_s >= 0):
            raise InputError(f"startup time {self.startup_s!r}", where="startup_s", expected=">= 0")

    @property
    def credit(self) -> float:
        return self.partition_bytes if self.credit_bytes is None else self.credit_bytes


@dataclass(slots=True)
class _Link:
    """Mutable state of one worker's uplink/downlink during one simulated iteration."""

    bytes_per_s: float
    link_free: float = 0.0
    down_free: float = 0.0
    outstanding: float = 0.0

    def send(self, now: float, size: float, startup_s: float) -> tuple[float, float]:
        """Transmit ``size`` bytes handed over at ``now``; return (push end, pull end)."""
        start = max(now + startup_s, self.link_free)
        end = start + size / self.bytes_per_s
        self.link_free = end
        pull_start = max(end, self.down_free)
        self.down_free = pull_start + size / self.bytes_per_s
        self.outstanding += size
        return end, self.down_free


def _part_bytes(size: float, index: int, count: int, config: PartitionConfig) -> float:
    """Bytes of partition ``index`` of ``count``: full partitions, the remainder last."""
    return size - (count - 1) * config.partition_bytes if index == count - 1 else config.partition_bytes


def partitioned_push(problem: IterationProblem, config: PartitionConfig) -> CommSchedule:
    """Simulate partition-granular push/pull of one iteration (event-driven, see module docstring).

    Examples
    --------
    One 3-byte layer ready at 1 s, 1-byte partitions at 8 bit/s (1 s each), stop-and-wait, 0.5 s
    startup: pushes end at 2.5, 4, 5.5; the last pull ends at 6.5.

    >>> from commsched.intrajob.problem import make_problem
    >>> p = make_problem(bandwidth_bps=8.0, size_bytes=[3], bp_s=[1], fp_s=[0])
    >>> s = partitioned_push(p, PartitionConfig(partition_bytes=1, credit_bytes=None, startup_s=0.5))
    >>> s.push_start_s.tolist(), s.push_end_s.tolist(), s.pull_end_s.tolist()
    ([1.5], [5.5], [6.5])

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §II-B, §III-A (startup time, stop-and-wait and credit-based
    preemption) and §IV-A; ByteScheduler (Peng et al., SOSP 2019).
    """
    n = problem.n_layers
    ready = bp_end_times(problem)
    size = problem.size_bytes
    start = ready.copy()
    end = ready.copy()
    pull = ready.copy()
    n_parts = np.maximum(1, np.ceil(size / config.partition_bytes)).astype(np.int64)  # >= 1 if size > 0
    done = np.zeros(n, dtype=np.int64)  # partitions handed over, per layer
    link = _Link(bytes_per_s=problem.bandwidth_bytes_per_s)
    inflight: deque[tuple[float, float]] = deque()  # (ack time, bytes), in transmission order
    heap: list[tuple[float, int]] = []  # (priority key, layer)
    arrivals = [i for i in range(n - 1, -1, -1) if size[i] > 0]  # readiness order L..1
    nxt, now, seq = 0, 0.0, 0
    while heap or nxt < len(arrivals):
        while nxt < len(arrivals) and ready[arrivals[nxt]] <= now:
            layer = arrivals[nxt]
            heapq.heappush(heap, (float(layer) if config.priority else float(seq), layer))
            nxt, seq = nxt + 1, seq + 1
        while inflight and inflight[0][0] <= now:
            link.outstanding -= inflight.popleft()[1]
        if heap:
            layer = heap[0][1]
            part = _part_bytes(float(size[layer]), int(done[layer]), int(n_parts[layer]), config)
            if not inflight or link.outstanding + part <= config.credit:
                if done[layer] == 0:
                    start[layer] = max(now + config.startup_s, link.link_free)
                push_end, pull_end = link.send(now, part, config.startup_s)
                inflight.append((push_end, part))
                done[layer] += 1
                end[layer], pull[layer] = push_end, pull_end
                if done[layer] == n_parts[layer]:
                    heapq.heappop(heap)
                continue
        events = [inflight[0][0]] if inflight else []
        if nxt < len(arrivals):
            events.append(float(ready[arrivals[nxt]]))
        now = max(now, min(events))
    return CommSchedule(push_start_s=start, push_end_s=end, pull_end_s=pull)


def bytescheduler(config: PartitionConfig | None = None) -> CommPolicy:
    """The ByteScheduler policy with ``config`` (default: 4 MB partitions, 20 MB credit, 0.5 ms startup).

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> from commsched.intrajob.iteration import iteration_time
    >>> p = make_problem(bandwidth_bps=8.0, size_bytes=[3], bp_s=[1], fp_s=[0])
    >>> iteration_time(p, bytescheduler(PartitionConfig(partition_bytes=1, credit_bytes=None,
    ...                                                 startup_s=0.0)))
    5.0

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §III-A and Fig. 4; ByteScheduler (Peng et al., SOSP 2019).
    """
    cfg = config or PartitionConfig()

    def policy(problem: IterationProblem) -> CommSchedule:
        return partitioned_push(problem, cfg)

    policy.__name__ = "bytescheduler"
    return policy


def mercury_packets(packet_bytes: float = DEFAULT_PACKET_BYTES, *, preemptive: bool = True) -> CommPolicy:
    """Mercury at packet granularity: priority (or FIFO) per packet, no startup, per-packet pull.

    Examples
    --------
    >>> from commsched.intrajob.problem import make_problem
    >>> from commsched.intrajob.iteration import iteration_time, mercury
    >>> p = make_problem(bandwidth_bps=8e9, size_bytes=[1e8, 3e8], bp_s=[0.1, 0.1], fp_s=[0.1, 0.1])
    >>> abs(iteration_time(p, mercury_packets(1e3)) - iteration_time(p, mercury)) < 1e-5
    True

    References
    ----------
    Mercury (Duan et al., TPDS 2023), §IV-A (key ideas 1-3), §IV-C and §V-B.
    """
    cfg = PartitionConfig(partition_bytes=packet_bytes, credit_bytes=None, startup_s=0.0, priority=preemptive)

    def policy(problem: IterationProblem) -> CommSchedule:
        return partitioned_push(problem, cfg)

    policy.__name__ = "mercury" if preemptive else "mercury-no-preemption"
    return policy
