"""The pool of transfer schedules the compiled kernel reads: every step of every schedule in use, in CSR.

Each :class:`commsched.scheduling.traffic.JobTraffic` a job runs is copied once into the pool: each of its
steps becomes a *step row* (repetitions, latency, largest transfer, and the range of its link entries) and
each link a step loads becomes a *link entry* (link id, flow-equivalent share, bytes per repetition). A
slot in flight points at its step row, so starting a step copies nothing. Schedules no running job uses
any more are dropped when the pool has grown past its limit (:meth:`TrafficPool.compact`).

The layout is one float array ``pf`` of :data:`commsched.sim.rates.flowlayout.POOL_ROWS` columns (link entries
and step rows are rows of their own columns: one entry's fields share a cache line); ids and offsets are
stored as floats, exact below 2**53.

Beside it, ``bf`` (:data:`commsched.sim.rates.flowlayout.BIND_ROWS` columns, the same rows) is what a solve
reads of each step row: a copy of its entries as copied in (every entry), which the engine narrows to the
entries that can bind in the row's component (:func:`commsched.sim.rates.flowfill.bind_rows`).
"""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.traffic import JobTraffic
from commsched.sim.rates import flowlayout as fk

#: columns of the pool before schedules no longer in use are dropped (at least)
MIN_LIMIT = 1 << 16


class TrafficPool:
    """The transfer schedules in use, copied once each into one array (see the module notes)."""

    def __init__(self) -> None:
        self.pf: NDArray[np.float64] = np.zeros((1024, fk.POOL_ROWS))
        self.bf: NDArray[np.float64] = np.zeros((1024, fk.BIND_ROWS))
        self._first: dict[int, tuple[int, JobTraffic]] = {}
        self._entries = 0
        self._steps = 0
        self._limit = MIN_LIMIT
        #: per schedule (by id), the factor each step's repetitions are stretched by (a grouped job's
        #: blocking steps, see :mod:`commsched.sim.jobs.streams`): ``k`` times the repetitions, each ``1 / k``
        #: of the bytes; schedules not in it run as they are
        self.stretch: dict[int, NDArray[np.float64]] = {}

    def row(self, traffic: JobTraffic, step: int, compact: Callable[[], dict[int, int]]) -> int:
        """The step row of ``traffic``'s step ``step``, the schedule copied in on its first use;
        ``compact`` drops the schedules no longer in use when the pool is past its limit."""
        hit = self._first.get(id(traffic))
        if hit is None:
            if max(self._entries, self._steps) >= self._limit:
                compact()
                self._limit = max(MIN_LIMIT, 2 * max(self._entries, self._steps))
            first = self._add(traffic)
        else:
            first = hit[0]
        return first + step

    def rows(self, traffic: JobTraffic) -> range | None:
        """The step rows of ``traffic`` (None: not in the pool)."""
        hit = self._first.get(id(traffic))
        return None if hit is None else range(hit[0], hit[0] + len(traffic.steps))

    def _add(self, traffic: JobTraffic) -> int:
        steps = traffic.steps
        n_links = sum(s.links.size for s in steps)
        self._reserve(max(self._entries + n_links, self._steps + len(steps)))
        pf, bf, first = self.pf, self.bf, self._steps
        for k, s in enumerate(steps):
            lo, hi = self._entries, self._entries + s.links.size
            pf[lo:hi, fk.LINK] = bf[lo:hi, fk.BLINK] = s.links
            pf[lo:hi, fk.SHARE] = bf[lo:hi, fk.BSHARE] = s.share
            pf[lo:hi, fk.BPR] = s.bytes_per_rep
            row = first + k
            pf[row, fk.REPEAT] = s.repeat
            pf[row, fk.LAT] = s.latency_s
            pf[row, fk.MAXFLOW] = s.max_flow_bytes
            pf[row, fk.LO] = lo
            pf[row, fk.HI] = bf[row, fk.BHI] = hi
            self._entries = hi
        st = self.stretch.get(id(traffic))
        if st is not None:
            for k, s in enumerate(steps):
                row = first + k
                lo, hi = int(pf[row, fk.LO]), int(pf[row, fk.HI])
                pf[row, fk.REPEAT] = s.repeat * st[k]
                pf[lo:hi, fk.BPR] = s.bytes_per_rep / st[k]
        self._steps += len(steps)
        self._first[id(traffic)] = (first, traffic)  # the schedule is kept: its id stays unique
        return first

    def _reserve(self, size: int) -> None:
        if size > self.pf.shape[0]:
            rows = max(size, 2 * self.pf.shape[0])
            grown = np.zeros((rows, fk.POOL_ROWS))
            grown[: self.pf.shape[0]] = self.pf
            self.pf = grown
            bound = np.zeros((rows, fk.BIND_ROWS))
            bound[: self.bf.shape[0]] = self.bf
            self.bf = bound

    def compact(self, live: dict[int, JobTraffic]) -> dict[int, int]:
        """Keep only the schedules of ``live`` (by id); returns each one's new first step row."""
        self.pf = np.zeros((1024, fk.POOL_ROWS))
        self.bf = np.zeros((1024, fk.BIND_ROWS))
        self._first = {}
        self._entries = self._steps = 0
        self.stretch = {key: st for key, st in self.stretch.items() if key in live}
        return {key: self._add(t) for key, t in live.items()}
