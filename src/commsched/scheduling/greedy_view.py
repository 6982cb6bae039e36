"""What one job's turn in a greedy path selection saw and did, so that the next pass can skip it.

In the greedy least-congested selection (:func:`commsched.scheduling.paths.greedy_routes`) a job's
choices depend on nothing but its key (id and flow weight), its flows and the loads it finds on its
candidate links when its turn comes: its *view*. When a later pass finds the same key, the same flows
and the same view, bit for bit, the job would choose exactly as before; its additions to the loads are
replayed (in the same order, so the loads stay bit-identical) instead of being recomputed. A newcomer
changes the view of the jobs after it whose candidate links it loads, and those of the jobs their
changed choices reach; everyone else is replayed. The records live in the policy's memo under the
job's id, so a job that leaves takes its record with it.
"""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.routemap import RouteMap

__all__ = ["JobView", "candidate_links"]


def candidate_links(candidates: list[NDArray[np.int64]]) -> NDArray[np.int64]:
    """Every link of every candidate path of a job's flows, once each."""
    if not candidates:
        return np.zeros(0, dtype=np.int64)
    return np.unique(np.concatenate([c.ravel() for c in candidates]))


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class JobView:
    """A job's last turn: its key and flows, the loads it found, the additions it made, its routes."""

    key: Hashable
    flows: object  # the flows tuple it was given (compared by identity: flows are memoised per job)
    links: NDArray[np.int64]  # its candidate links
    view: NDArray[np.float64]  # the loads on ``links`` when its turn came
    add_links: NDArray[np.int64]  # its additions to the loads, in order
    add_weights: NDArray[np.float64]
    routes: RouteMap

    def matches(self, key: Hashable, flows: object, load: NDArray[np.float64]) -> bool:
        """Whether a turn with this key, these flows and these loads would go exactly as this one."""
        return self.flows is flows and self.key == key and np.array_equal(load[self.links], self.view)

    def replay(self, load: NDArray[np.float64]) -> None:
        """Add its additions to ``load`` again, in their order (``add.at``: repeated links in sequence)."""
        np.add.at(load, self.add_links, self.add_weights)

    @staticmethod
    def of(
        *,
        key: Hashable,
        flows: object,
        links: NDArray[np.int64],
        view: NDArray[np.float64],
        adds: list[tuple[NDArray[np.int64], float]],
        routes: RouteMap,
    ) -> JobView:
        add_links = np.concatenate([a for a, _ in adds]) if adds else np.zeros(0, dtype=np.int64)
        add_weights = (
            np.concatenate([np.full(a.size, w) for a, w in adds]) if adds else np.zeros(0, dtype=np.float64)
        )
        return JobView(
            key=key,
            flows=flows,
            links=links,
            view=view,
            add_links=add_links,
            add_weights=add_weights,
            routes=routes,
        )
