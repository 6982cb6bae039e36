"""Components: the jobs whose rates depend on each other, joined only through links that can saturate.

Under strict priority and max-min fairness a link binds a job only once it is saturated. A job's rate on
a link never exceeds its *standalone demand* there: each step's pace alone (the one its tightest link
allows) times its share on the link, the most over its steps (a grouped job runs two streams at once:
twice that). A link whose users' summed standalone demands stay below its capacity, by a margin of
:data:`SATURATION_MARGIN`, can never saturate, under any classes and any timing: it can freeze no one,
and the rates of the jobs on it are those of the parts it would join, solved apart. So two jobs are in
one component only when a chain of links that *can* saturate joins them; the ones that cannot are cut.

The cut is exact in the mathematics of the max-min solve (the paces of every part are those of the
union); bit for bit only where a class has one step per part, since the water rises in other rounds.
Bytes on a link that several components load are the sum of theirs: every credit is per job
(:mod:`commsched.sim.fast.jumps`).

Contention *domains* (:mod:`commsched.sim.decide.domains`) are not cut this way: a domain holds the jobs that
a decision must look at together, and which links can saturate depends on the routes that decision picks.

Examples
--------
Two jobs of one 4-byte/s step each on a link of 10 bytes/s (their own links 4 bytes/s): 8 < 10, the link
never saturates and they are two components; on a link of 6 bytes/s they are one:

>>> import numpy as np
>>> from commsched.scheduling.traffic import JobTraffic, StepLoad
>>> def traffic(links):
...     links = np.array(links, dtype=np.int64)
...     step = StepLoad(links=links, bytes_per_rep=np.ones(2), max_flow_bytes=1.0, repeat=1, latency_s=0.0,
...                     share=np.ones(2))
...     return JobTraffic(steps=(step,), link_ids=links, link_bytes=np.ones(2))
>>> jobs = [(0, traffic([0, 1]), 1), (1, traffic([0, 2]), 1)]
>>> Partition().components(jobs, np.array([10.0, 4.0, 4.0]))
[[0], [1]]
>>> Partition().components(jobs, np.array([6.0, 4.0, 4.0]))
[[0, 1]]
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray
from scipy import sparse
from scipy.sparse.csgraph import connected_components

from commsched.scheduling.traffic import JobTraffic

#: a link can saturate when its users' summed standalone demands reach this close to its capacity
#: (relative; far above the solve's saturation tolerance of 1e-9 and rounding)
SATURATION_MARGIN = 1e-6

#: one job to partition: its index, its traffic under its routes (None: no traffic yet) and how many
#: streams it runs at once (2: a grouped job)
PartJob = tuple[int, JobTraffic | None, int]


def standalone_demand(traffic: JobTraffic, capacity_bytes_per_s: NDArray[np.float64]) -> NDArray[np.float64]:
    """Per link of ``traffic.link_ids``: the most bytes/s any of its steps can put there, alone."""
    out = np.zeros(traffic.link_ids.size)
    for s in traffic.steps:
        on = s.share > 0
        if not on.any():
            continue
        pace = float(np.min(capacity_bytes_per_s[s.links[on]] / s.share[on]))
        pos = np.searchsorted(traffic.link_ids, s.links)
        np.maximum.at(out, pos, pace * s.share)
    return out


class Partition:
    """Cuts jobs into components; keeps each traffic's standalone demands (by id, the traffic beside)."""

    def __init__(self) -> None:
        self._demand: dict[int, tuple[JobTraffic, NDArray[np.float64]]] = {}

    def forget(self, traffic: JobTraffic | None) -> None:
        if traffic is not None:
            self._demand.pop(id(traffic), None)

    def _of(self, traffic: JobTraffic, capacity: NDArray[np.float64]) -> NDArray[np.float64]:
        hit = self._demand.get(id(traffic))
        if hit is None or hit[0] is not traffic:
            hit = self._demand[id(traffic)] = (traffic, standalone_demand(traffic, capacity))
        return hit[1]

    def components(
        self, jobs: Sequence[PartJob], capacity_bytes_per_s: NDArray[np.float64]
    ) -> list[list[int]]:
        """The components of ``jobs`` (each in the order given, components by their first job)."""
        rows: list[NDArray[np.int64]] = []
        cols: list[NDArray[np.int64]] = []
        loads: list[NDArray[np.float64]] = []
        for k, (_, tr, streams) in enumerate(jobs):
            if tr is not None and tr.link_ids.size:
                rows.append(np.full(tr.link_ids.size, k, dtype=np.int64))
                cols.append(tr.link_ids)
                loads.append(streams * self._of(tr, capacity_bytes_per_s))
        if not rows:
            return [[i] for i, _, _ in jobs]
        r_all, c_all = np.concatenate(rows), np.concatenate(cols)
        links, local = np.unique(c_all, return_inverse=True)  # the links of these jobs only
        total = np.bincount(local, weights=np.concatenate(loads), minlength=links.size)
        users = np.bincount(local, minlength=links.size)
        can = (users >= 2) & (total >= capacity_bytes_per_s[links] * (1.0 - SATURATION_MARGIN))
        keep = can[local]
        n = len(jobs)
        adj = sparse.csr_matrix(
            (np.ones(int(keep.sum()), dtype=np.int8), (r_all[keep], local[keep].astype(np.int64) + n)),
            shape=(n + links.size, n + links.size),
        )
        _, labels = connected_components(adj, directed=False)
        comps: dict[int, list[int]] = {}
        for k, (i, _, _) in enumerate(jobs):
            comps.setdefault(int(labels[k]), []).append(i)
        return list(comps.values())
