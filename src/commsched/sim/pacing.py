"""Rate allocation in the engine: the paces of the steps in flight, component by component.

Jobs that share links form a *component* (see :mod:`commsched.sim.decisions`); the paces of the active
steps of one component are recomputed (:func:`commsched.sim.rates.max_min_rates_coo`) whenever one of
them starts or ends, and each step's end is rescheduled at its new pace. Settling a step advances its
progress and the link counters to the clock at its current pace.

Units: the topology gives capacities in bits/s; this module works in **bytes/s** only
(``capacity_bytes_per_s``), as do the traffic's transfer sizes.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.traffic import JobTraffic
from commsched.sim.accounting import Ledger
from commsched.sim.kernel import EventKernel
from commsched.sim.rates import max_min_rates_coo
from commsched.sim.runs import EventKind, JobRun

#: entries of the pace cache before it is cleared
_PACE_CACHE_MAX = 200_000


def step_coo(members: Sequence[JobRun]) -> tuple[NDArray[np.int64], NDArray[np.int64], NDArray[np.float64]]:
    """The current steps of ``members`` as COO (member row, link, share) for ``max_min_rates_coo``."""
    steps = []
    for r in members:
        assert r.traffic is not None
        steps.append(r.traffic.steps[r.step])
    rows = np.repeat(np.arange(len(steps)), [s.links.size for s in steps])
    return rows, np.concatenate([s.links for s in steps]), np.concatenate([s.share for s in steps])


class Pacing:
    """Owns the components of contending jobs, the link capacities in bytes/s and the pace cache.

    Parameters
    ----------
    link_bits_per_s
        Link capacities in bits/s (the topology's unit); kept as ``capacity_bytes_per_s`` in bytes/s.
    runs, kernel, ledger
        The jobs' run state, the event kernel and the counters it updates.
    """

    def __init__(
        self,
        *,
        link_bits_per_s: NDArray[np.float64],
        runs: Sequence[JobRun],
        kernel: EventKernel,
        ledger: Ledger,
    ) -> None:
        self.capacity_bytes_per_s: NDArray[np.float64] = link_bits_per_s / 8.0  # bits/s -> bytes/s
        self._runs = runs
        self._kernel = kernel
        self._ledger = ledger
        #: component id -> indices of its jobs (in the running order)
        self.components: dict[int, list[int]] = {}
        #: max-min paces by the members' (traffic, step, class): see reallocate
        self._pace_cache: dict[
            tuple[tuple[int, int, int], ...], tuple[list[float], tuple[JobTraffic | None, ...]]
        ] = {}

    def standalone_pace(self, links: NDArray[np.int64], share: NDArray[np.float64]) -> float:
        """Pace (bytes/s) of a step alone on the fabric: the one its tightest link allows."""
        return float(np.min(self.capacity_bytes_per_s[links] / share))

    def settle(self, r: JobRun) -> None:
        """Advance an active step's progress and byte counters to ``now`` at its current pace."""
        now = self._kernel.now
        if not r.active or r.traffic is None:
            r.settled_s = max(r.settled_s, now)
            return
        dt = now - r.settled_s
        if dt <= 0:
            return
        r.settled_s = now
        if r.pace_bytes_per_s <= 0:
            return
        s = r.traffic.steps[r.step]
        prate = self.progress_rate(r)
        dp = min(dt * prate, 1.0 - r.step_progress)
        r.step_progress += dp
        moved = dp * s.repeat * s.bytes_per_rep
        self._ledger.link_bytes[s.links] += moved
        self._ledger.link_iw_bytes[s.links] += moved * r.intensity

    def progress_rate(self, r: JobRun) -> float:
        """Fraction of the step in flight done per second at its pace."""
        assert r.traffic is not None
        s = r.traffic.steps[r.step]
        if r.pace_bytes_per_s <= 0:
            return 0.0
        return 1.0 / (s.repeat * (s.latency_s + s.max_flow_bytes / r.pace_bytes_per_s))

    def settle_all(self, running: Sequence[int]) -> None:
        for i in running:
            self.settle(self._runs[i])

    def reallocate(self, comp: int) -> None:
        """Recompute the paces of the active steps of one component and reschedule their ends."""
        members = [self._runs[i] for i in self.components.get(comp, ()) if self._runs[i].active]
        for r in members:
            self.settle(r)
        if not members:
            return
        if len(members) == 1:  # alone: the pace its tightest link allows (max_min_rates' one-group case)
            r = members[0]
            assert r.traffic is not None
            s = r.traffic.steps[r.step]
            self._set_pace(r, max(self.standalone_pace(s.links, s.share), 0.0))
            return
        # the paces depend only on each member's step (its links and shares) and class: groups in a
        # periodic regime meet the same combinations again and again
        key = tuple((id(r.traffic), r.step, r.priority_class) for r in members)
        hit = self._pace_cache.get(key)
        if hit is None:
            rows, cols, vals = step_coo(members)
            paces = max_min_rates_coo(
                rows=rows,
                cols=cols,
                vals=vals,
                n_groups=len(members),
                capacity=self.capacity_bytes_per_s,
                classes=np.array([r.priority_class for r in members], dtype=np.int64),
            ).tolist()
            if len(self._pace_cache) >= _PACE_CACHE_MAX:
                self._pace_cache.clear()
            # the traffic objects are kept with the entry so that their ids are not reused while it lives
            hit = self._pace_cache[key] = (paces, tuple(r.traffic for r in members))
        for r, pace in zip(members, hit[0], strict=True):
            self._set_pace(r, pace)

    def _set_pace(self, r: JobRun, pace: float) -> None:
        """Give an active step (settled to now) its pace; its scheduled end stays valid at the same pace.

        A step's end is ``settled_s + (1 - step_progress) / rate``; settling moves both together, so
        the end scheduled at the same pace is still right. A new step starts at pace 0.
        """
        r.settled_s = max(r.settled_s, self._kernel.now)
        if pace != r.pace_bytes_per_s:
            r.pace_bytes_per_s = pace
            self.reschedule_step(r)

    def reschedule_step(self, r: JobRun) -> None:
        """Invalidate the pending end of the job's step and schedule it at the current pace."""
        r.step_version += 1
        prate = self.progress_rate(r)
        if prate > 0:
            self._kernel.push(
                r.settled_s + (1.0 - r.step_progress) / prate, EventKind.STEP_END, r.index, r.step_version
            )
