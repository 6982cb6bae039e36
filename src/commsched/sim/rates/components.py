"""The components of contending jobs, as the engine's rate allocation holds them
(:mod:`commsched.sim.rates.pacing`; how jobs are cut into components:
:mod:`commsched.sim.decide.partition`)."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
from numpy.typing import NDArray


class Components(dict[int, list[int]]):
    """Component id -> indices of its jobs (in the running order), with, beside each, its slots as an
    array and the hash of its configuration (both dropped when the component is set anew).

    ``partner`` maps a grouped job's index to its overlapped stream's slot
    (:mod:`commsched.sim.jobs.streams`); ``forget`` is told of every component set anew or removed (its
    binding,
    :mod:`commsched.sim.rates.binding`,
    is made anew before its next solve)."""

    def __init__(
        self, partner: dict[int, int] | None = None, forget: Callable[[int], None] | None = None
    ) -> None:
        super().__init__()
        self.arrays: dict[int, NDArray[np.int64]] = {}
        self.hashes: dict[int, int] = {}
        self.partner: dict[int, int] = partner or {}
        self._forget = forget

    def _reset(self, comp: int) -> None:
        self.arrays.pop(comp, None)
        self.hashes.pop(comp, None)
        if self._forget is not None:
            self._forget(comp)

    def __setitem__(self, comp: int, idxs: list[int]) -> None:
        super().__setitem__(comp, idxs)
        self._reset(comp)

    def __delitem__(self, comp: int) -> None:
        super().__delitem__(comp)
        self._reset(comp)

    def pop(self, comp: int, default: list[int] | None = None) -> list[int] | None:  # type: ignore[override]
        self._reset(comp)
        return super().pop(comp, default)

    def slots(self, comp: int) -> NDArray[np.int64]:
        """The slots of a component's jobs (one per job: its index), then its grouped jobs' overlapped
        streams."""
        arr = self.arrays.get(comp)
        if arr is None:
            idxs = list(self.get(comp, ()))
            if self.partner:
                idxs += [self.partner[i] for i in idxs if i in self.partner]
            arr = self.arrays[comp] = np.array(idxs, dtype=np.int64)
        return arr
