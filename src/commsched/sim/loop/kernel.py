"""The event kernel: the simulated clock and the heap of pending events.

Events are tuples ``(time, kind, sequence, job, version)``; simultaneous events are ordered by kind
(:class:`commsched.sim.jobs.runs.EventKind`), then by the order they were pushed. An event carries the
version of the job state it was scheduled for: a handler ignores it when the job has moved on.

The compiled loop (:mod:`commsched.sim.loop.flatloop`) runs on the same heap as rows of an array
(:meth:`EventKernel.to_arrays`, :func:`push_row`, :func:`pop_row`: the same order, by the same key) and
hands it back with the clock and the counters (:meth:`EventKernel.from_arrays`): the clock is set here
only.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterator
from contextlib import contextmanager

import numpy as np

from commsched.sim.jobs.runs import EventKind
from commsched.sim.rates.flowlayout import F64, jit

#: a pending event: time, kind, push sequence number, job index (-1: none), version
Event = tuple[float, int, int, int, int]

# the heap as rows (columns of H) and the cells of K the kernel owns (the clock, the counters)
H_T, H_KIND, H_SEQ, H_JOB, H_VER = range(5)
CLOCK, SIZE, SEQ_N, EVENTS, STALE, PEAK = range(6)
K_CELLS = 6


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
        if len(heap) > self.peak:  # noqa: PLR1730 -- every push: a comparison, not a call of max
            self.peak = len(heap)

    @property
    def handled(self) -> int:
        """Events popped and acted on (stale ones left out)."""
        return self.events - self.stale

    def pop(self) -> Event:
        """Remove and return the earliest event (the clock stays: an event dropped unhandled)."""
        return heapq.heappop(self._heap)

    def step(self) -> Event:
        """Remove the earliest event, move the clock to it, count it and return it (SimPy's
        ``Environment.step``: the one way the event loop advances time)."""
        ev = heapq.heappop(self._heap)
        self.now = ev[0]
        self.events += 1
        return ev

    def head(self) -> Event | None:
        """The earliest pending event, left pending (None: none is)."""
        heap = self._heap
        return heap[0] if heap else None

    def move_to(self, t: float) -> None:
        """Set the clock to ``t``: the end of a run, and the fast mode's stretches (a component moved
        ahead and brought back, inside :meth:`aside`). Nothing outside this module sets the clock."""
        self.now = t

    def __bool__(self) -> bool:
        return bool(self._heap)

    def to_arrays(self, room: int, cells: int) -> tuple[F64, F64]:
        """The heap as rows ``(time, kind, sequence, job, version)`` with ``room`` rows to spare, and the
        clock and counters as the first :data:`K_CELLS` of ``cells`` (for the compiled loop)."""
        heap = self._heap
        rows = np.zeros((len(heap) + room, 5))
        if heap:
            rows[: len(heap)] = np.array(heap, dtype=np.float64)
        cell = np.zeros(cells)
        cell[:K_CELLS] = self.now, len(heap), self._seq, self.events, self.stale, self.peak
        return rows, cell

    def from_arrays(self, rows: F64, cell: F64) -> None:
        """Take the heap, the clock and the counters back from :meth:`to_arrays`'s arrays (a heap in
        the same order: its rows are one already)."""
        n = int(cell[SIZE])
        self._heap = [(t, int(k), int(q), int(j), int(v)) for t, k, q, j, v in rows[:n].tolist()]
        self.now = float(cell[CLOCK])
        self._seq, self.events, self.stale, self.peak = (int(x) for x in cell[SEQ_N : PEAK + 1])

    @contextmanager
    def aside(self, back: float | None = None) -> Iterator[None]:
        """Set the pending events aside: inside, the heap starts empty; after, both are merged and the
        clock is set back to ``back`` (if given).

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
            if back is not None:
                self.now = back


@jit
def _less(H: F64, a: int, b: int) -> bool:
    for c in range(3):
        if H[a, c] != H[b, c]:
            return bool(H[a, c] < H[b, c])
    return False


@jit
def _swap(H: F64, a: int, b: int) -> None:
    for c in range(5):
        H[a, c], H[b, c] = H[b, c], H[a, c]


@jit
def push_row(H: F64, K: F64, t: float, kind: int, jv: tuple[int, float]) -> None:
    """:meth:`EventKernel.push` on the arrays: event ``kind`` at ``t`` for ``jv`` (job, version); the
    caller has made room."""
    K[SEQ_N] += 1.0
    i = int(K[SIZE])
    K[SIZE] += 1.0
    K[PEAK] = max(K[PEAK], K[SIZE])
    H[i, H_T], H[i, H_KIND], H[i, H_SEQ], H[i, H_JOB], H[i, H_VER] = t, kind, K[SEQ_N], jv[0], jv[1]
    while i > 0:
        p = (i - 1) // 2
        if not _less(H, i, p):
            break
        _swap(H, i, p)
        i = p


@jit
def pop_row(H: F64, K: F64) -> None:
    """:meth:`EventKernel.pop` on the arrays, the event counted and the clock moved to it (read the
    event at row 0 first)."""
    K[CLOCK] = H[0, H_T]
    K[EVENTS] += 1.0
    n = int(K[SIZE]) - 1
    K[SIZE] = n
    if n == 0:
        return
    _swap(H, 0, n)
    i = 0
    while True:
        c = 2 * i + 1
        if c >= n:
            break
        if c + 1 < n and _less(H, c + 1, c):
            c += 1
        if not _less(H, c, i):
            break
        _swap(H, i, c)
        i = c
