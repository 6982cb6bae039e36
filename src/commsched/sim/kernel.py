"""The event kernel: the simulated clock and the heap of pending events.

Events are tuples ``(time, kind, sequence, job, version)``; simultaneous events are ordered by kind
(:class:`commsched.sim.runs.EventKind`), then by the order they were pushed. An event carries the
version of the job state it was scheduled for: a handler ignores it when the job has moved on.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from contextlib import contextmanager

from commsched.sim.runs import EventKind

#: a pending event: time, kind, push sequence number, job index (-1: none), version
Event = tuple[float, int, int, int, int]


class EventKernel:
    """Owns the clock (``now``), the pending events and the count of events handled.

    ``events`` counts the events popped and acted on or found stale; ``stale`` the stale ones among them
    (an event scheduled for a job state that has moved on, dropped by its handler); ``handled`` the others.
    ``peak`` is the most events ever pending at once.

    Examples
    --------
    >>> k = EventKernel()
    >>> k.push(2.0, EventKind.SAMPLE)
    >>> k.push(1.0, EventKind.ARRIVAL, job=0)
    >>> k.pop()[:2]
    (1.0, 3)
    """

    def __init__(self) -> None:
        self.now = 0.0
        self.events = 0
        self.stale = 0
        self.peak = 0
        self._seq = 0
        self._heap: list[Event] = []

    def push(self, t: float, kind: EventKind, job: int = -1, version: int = 0) -> None:
        """Schedule an event."""
        self._seq += 1
        heap = self._heap
        heapq.heappush(heap, (t, int(kind), self._seq, job, version))
        self.peak = max(self.peak, len(heap))

    @property
    def handled(self) -> int:
        """Events popped and acted on (stale ones left out)."""
        return self.events - self.stale

    def pop(self) -> Event:
        """Remove and return the earliest event."""
        return heapq.heappop(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def next_time(self) -> float:
        """Time of the earliest pending event (the heap must not be empty)."""
        return self._heap[0][0]

    @contextmanager
    def aside(self) -> Iterator[None]:
        """Set the pending events aside: inside, the heap starts empty; after, both are merged.

        A fast-mode catch-up replays one component's events on their own this way.
        """
        outer = self._heap
        self._heap = []
        try:
            yield
        finally:
            for ev in self._heap:
                heapq.heappush(outer, ev)
            self._heap = outer
