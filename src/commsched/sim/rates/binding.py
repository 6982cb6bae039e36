"""Which entries of each step row a component's solve reads: the links that can bind (see
:mod:`commsched.sim.rates.flowfill`, "What a solve reads").

A component's *shared* links are the links that two or more of its slots may load: a job's slot counts
the links of its traffic now and of its next traffic, a grouped job's two streams (its blocking steps and
its overlapped data-parallel ones, :mod:`commsched.sim.jobs.streams`) count as two slots on every link of its
traffic. Every step row of a member's schedules in the pool is bound to them
(:func:`commsched.sim.rates.flowfill.bind_rows`). The binding of a component is made anew when it is set
(a decision installs or re-partitions it), and a schedule that enters the pool later (a job's next
traffic at its release, a grouped job's streams at an iteration start) is bound on its first step; a
compaction of the pool (which copies every schedule in afresh, unbound) forgets every binding.

Examples
--------
Two jobs on a link of 10 bytes/s they share; the first also crosses a private link of 4 bytes/s and one of
50 bytes/s. Only the tightest private link stays in the first job's row:

>>> import numpy as np
>>> from commsched.scheduling.traffic import JobTraffic, StepLoad
>>> from commsched.sim.rates import flowlayout as fl
>>> from commsched.sim.rates.trafficpool import TrafficPool
>>> def traffic(links):
...     links = np.array(links, dtype=np.int64)
...     step = StepLoad(links=links, bytes_per_rep=np.ones(links.size), max_flow_bytes=1.0, repeat=1,
...                     latency_s=0.0, share=np.ones(links.size))
...     return JobTraffic(steps=(step,), link_ids=links, link_bytes=np.zeros(links.size))
>>> lf = np.zeros((3, fl.LINK_ROWS))
>>> lf[:, fl.CAP] = [10.0, 4.0, 50.0]
>>> pool = TrafficPool()
>>> a, b = traffic([0, 1, 2]), traffic([0])
>>> rows = [pool.row(t, 0, dict) for t in (a, b)]
>>> binding = Binding(n_links=3)
>>> binding.bind(pool, lf, [(a, None, 1), (b, None, 1)])
>>> lo, hi = int(pool.pf[rows[0], fl.LO]), int(pool.bf[rows[0], fl.BHI])
>>> pool.bf[lo:hi, fl.BLINK].tolist()
[0.0, 1.0]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.traffic import JobTraffic
from commsched.sim.rates.flowfill import bind_rows
from commsched.sim.rates.trafficpool import TrafficPool

#: what one slot of a component may load: its traffic now, its next traffic (or None), and how many slots
#: it stands for (2: a grouped job's two streams)
SlotTraffic = tuple[JobTraffic | None, JobTraffic | None, int]


class Binding:
    """Owns, per component, the token of its binding and its shared links, and per schedule (by id) the
    token it was last bound under."""

    def __init__(self, *, n_links: int) -> None:
        self._count = np.zeros(n_links, dtype=np.int64)  # scratch: slots per link, zero between uses
        self._mask = np.zeros(n_links, dtype=np.int64)  # scratch: 1 on the shared links, zero between uses
        self._token = 0
        #: component id -> (token, its shared links)
        self._comps: dict[int, tuple[int, NDArray[np.int64]]] = {}
        #: schedule id -> token it was bound under
        self._bound: dict[int, int] = {}

    def forget(self, comp: int) -> None:
        """``comp`` was set anew or removed: bind it afresh before its next solve."""
        self._comps.pop(comp, None)

    def forget_all(self) -> None:
        """The pool was copied in afresh (every row unbound)."""
        self._comps.clear()
        self._bound.clear()

    def is_bound(self, comp: int) -> bool:
        return comp in self._comps

    def token(self, comp: int) -> int | None:
        """The token ``comp`` is bound under (``None``: not bound)."""
        hit = self._comps.get(comp)
        return None if hit is None else hit[0]

    def bound_under(self, traffic: JobTraffic, token: int) -> bool:
        """Whether ``traffic`` was last bound under ``token`` (:meth:`ensure` would do nothing)."""
        return self._bound.get(id(traffic)) == token

    def bind_component(
        self, comp: int, pool: TrafficPool, lf: NDArray[np.float64], slots: Sequence[SlotTraffic]
    ) -> None:
        """Bind every schedule of ``comp``'s slots that is in the pool, under ``comp``'s shared links."""
        shared = self._shared(slots)
        self._token += 1
        self._comps[comp] = (self._token, shared)
        traffics = {id(t): t for cur, nxt, _ in slots for t in (cur, nxt) if t is not None}
        self._bind(pool, lf, shared, list(traffics.values()), self._token)

    def bind(self, pool: TrafficPool, lf: NDArray[np.float64], slots: Sequence[SlotTraffic]) -> None:
        """Bind the schedules of ``slots`` under their own shared links (one component, no id kept)."""
        shared = self._shared(slots)
        traffics = {id(t): t for cur, nxt, _ in slots for t in (cur, nxt) if t is not None}
        self._bind(pool, lf, shared, list(traffics.values()), 0)

    def ensure(self, comp: int, traffic: JobTraffic, pool: TrafficPool, lf: NDArray[np.float64]) -> None:
        """Bind ``traffic`` (a member's schedule, about to run a step) under ``comp`` if it is not yet."""
        token, shared = self._comps[comp]
        if self._bound.get(id(traffic)) != token:
            self._bind(pool, lf, shared, [traffic], token)

    def _shared(self, slots: Sequence[SlotTraffic]) -> NDArray[np.int64]:
        count = self._count
        touched: list[NDArray[np.int64]] = []
        for cur, nxt, weight in slots:
            if cur is None and nxt is None:
                continue
            if cur is None or nxt is None or nxt is cur:
                links = (cur if cur is not None else nxt).link_ids  # type: ignore[union-attr]
            else:
                links = np.union1d(cur.link_ids, nxt.link_ids)
            count[links] += weight
            touched.append(links)
        if not touched:
            return np.zeros(0, dtype=np.int64)
        every = np.unique(np.concatenate(touched))
        shared = every[count[every] >= 2]
        count[every] = 0
        return shared

    def _bind(
        self,
        pool: TrafficPool,
        lf: NDArray[np.float64],
        shared: NDArray[np.int64],
        traffics: list[JobTraffic],
        token: int,
    ) -> None:
        mask = self._mask
        mask[shared] = 1
        try:
            for t in traffics:
                rows = pool.rows(t)
                if rows is None:
                    continue
                bind_rows(pool.pf, pool.bf, lf, mask, np.arange(rows.start, rows.stop, dtype=np.int64))
                if token:
                    self._bound[id(t)] = token
        finally:
            mask[shared] = 0
