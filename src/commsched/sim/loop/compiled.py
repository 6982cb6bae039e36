"""The compiled loop's Python side: the state copied onto the arrays of :mod:`commsched.sim.loop.flatloop` and
back, around each stretch of flat events.

The interpreted loop stays the reference: :class:`CompiledLoop` is asked, before each event the engine
pops, to handle the flat events at the head of the queue on the arrays (:meth:`CompiledLoop.run_flat`).
It copies onto them the jobs of every component without a grouped job (their iteration-cycle fields,
the components' slots, pending ends and bindings), the heap, the clock and the counters; runs
:func:`commsched.sim.loop.flatloop.run` until the earliest event needs Python; and copies everything back,
so that the interpreted handlers find each job, each component and the queue as they would have left
them. The pace cache of the compiled side is its own (its entries are the same paces: a cache hit and a
re-solve set the same).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from commsched.sim.jobs.iteration import CycleFields, restore
from commsched.sim.jobs.runs import JobRun
from commsched.sim.loop import flatloop as fx
from commsched.sim.loop.kernel import EVENTS, EventKernel
from commsched.sim.rates import flowlayout as fl
from commsched.sim.rates.pacing import Pacing
from commsched.sim.results.accounting import Ledger

#: spare rows of the heap's array per stretch (more are added when the loop asks for room)
_ROOM = 4096


def _new_cache() -> Any:
    """The compiled side's pace cache: a typed dictionary when numba compiles, else a dict."""
    if not fl.COMPILED:
        return {}
    from numba import types
    from numba.typed import Dict

    return Dict.empty(key_type=types.int64, value_type=types.float64[:, :])


class CompiledLoop:
    """Owns the compiled side's pace cache and copies the engine's state on and off its arrays.

    Parameters
    ----------
    runs, kernel, pacing, ledger
        The jobs' run state (the grouped jobs' streams after them), the event kernel, the paces and the
        counters: the parts whose state the flat events change.
    """

    def __init__(
        self, *, runs: Sequence[JobRun], kernel: EventKernel, pacing: Pacing, ledger: Ledger
    ) -> None:
        self._runs = runs
        self._kernel = kernel
        self._pacing = pacing
        self._ledger = ledger
        self._cache = _new_cache()
        #: stretches run, those that handled no event (the head needed Python at once), events handled
        self.stretches = 0
        self.idle = 0
        self.handled = 0

    def run_flat(self, n_jobs: int) -> None:
        """Handle the flat events at the head of the queue on the arrays (``n_jobs``: the jobs, streams
        left out)."""
        pacing = self._pacing
        comps = self._flat_components()
        jf = np.zeros((n_jobs, fx.JOB_FIELDS))
        jf[:, fx.FINISHED] = [1.0 if r.finished else 0.0 for r in self._runs[:n_jobs]]
        cf = np.zeros((max(len(comps), 1), fx.COMP_FIELDS))
        cf[:, fx.PEND_JOB] = -1.0
        ptr = np.zeros(len(comps) + 1, dtype=np.int64)
        slots_list = []
        synced: list[JobRun] = []
        binding = pacing.binding
        for k, comp in enumerate(comps):
            slots = pacing.components.slots(comp)
            slots_list.append(slots)
            ptr[k + 1] = ptr[k] + slots.size
            token = binding.token(comp)
            cf[k, fx.CBOUND] = 1.0 if token is not None else 0.0
            pend = pacing.pending_end(comp)
            if pend is not None:
                cf[k, fx.PEND_JOB], cf[k, fx.PEND_VER], cf[k, fx.PEND_T] = pend
            for i in pacing.components[comp]:
                r = self._runs[i]
                self._load(jf, r, k, token)
                synced.append(r)
        pool, sf, lf, io = pacing.arrays
        keys = np.zeros(sf.shape[0] + 2, dtype=np.int64)
        for r in synced:
            s = r.index
            if sf[s, fl.ACTIVE] != 0.0:
                keys[s] = fx.slot_key(s, int(sf[s, fl.ROW]), int(sf[s, fl.CLS]))
        heap, cells = self._kernel.to_arrays(_ROOM + 4 * n_jobs, fx.K_SIZE)
        cells[fx.BUSY_DONE] = self._ledger.busy_done_gpu_s
        cslots = np.concatenate(slots_list) if slots_list else np.zeros(0, dtype=np.int64)
        ch = np.zeros(max(len(comps), 1), dtype=np.int64)
        before = int(cells[EVENTS])
        snap = np.zeros((fl.SNAP_ROWS, sf.shape[0]))
        while True:
            st = (jf, sf, cf, keys, heap, cells, ch)
            fab = (pool.pf, pool.bf, lf, io, snap, ptr, cslots)
            why = fx.run(st, fab, self._cache)
            if why != fx.NEEDS_ROOM:
                break
            heap = np.concatenate([heap, np.zeros((heap.shape[0], 5))])
        self.stretches += 1
        self.idle += int(cells[EVENTS]) == before
        self.handled += int(cells[EVENTS]) - before
        self._kernel.from_arrays(heap, cells)
        self._ledger.busy_done_gpu_s = float(cells[fx.BUSY_DONE])
        for r in synced:
            self._store(jf, r)
        for k, comp in enumerate(comps):
            j = int(cf[k, fx.PEND_JOB])
            pend = (j, int(cf[k, fx.PEND_VER]), float(cf[k, fx.PEND_T])) if j >= 0 else None
            versions = [int(jf[i, fx.STEP_VERSION]) for i in pacing.components[comp]]
            pacing.took_back(comp, pend, versions)

    def _flat_components(self) -> list[int]:
        """The components without a grouped job (whose jobs' flat events the arrays can take)."""
        runs = self._runs
        return [
            c for c, idxs in self._pacing.components.items() if all(runs[i].companion is None for i in idxs)
        ]

    def _load(self, jf: fl.F64, r: JobRun, k: int, token: int | None) -> None:
        """Copy ``r``'s fields (a member of the ``k``-th flat component) onto its row of ``jf``."""
        row = jf[r.index]
        tr = r.traffic
        flat = not r.finished and tr is not None and r.companion is None and r.parent is None
        rows = self._pacing.arrays[0].rows(tr) if tr is not None else None
        bound = tr is not None and token is not None and self._pacing.binding.bound_under(tr, token)
        n = len(tr.steps) if tr is not None else 0
        row[fx.FLAT] = 1.0 if flat else 0.0
        row[fx.FINISHED] = 1.0 if r.finished else 0.0
        row[fx.COMPUTING : fx.STEP + 1] = r.computing, r.released, r.comm_done, r.step
        row[fx.VERSION : fx.COMP + 1] = (
            r.version, r.step_version, n, n if r.stop_step < 0 else r.stop_step,
            rows.start if rows is not None else -1.0, k,
        )  # fmt: skip
        row[fx.KLASS : fx.BOUND + 1] = r.priority_class, r.intensity, bound
        row[fx.ITER_START : fx.DELAY + 1] = (
            r.iteration_start_s, r.compute_end_s, r.release_s, r.iterations_done, r.busy_gpu_s,
            r.last_end_s, r.pending_delay_s,
        )  # fmt: skip
        row[fx.TARGET] = math.inf if r.target_iterations is None else r.target_iterations
        row[fx.BUSY_PER_IT] = r.gpu_count * r.spec.busy_s
        row[fx.COMPUTE_S], row[fx.OVERLAP] = r.spec.profile.compute_s, r.overlap

    @staticmethod
    def _store(jf: fl.F64, r: JobRun) -> None:
        """Hand ``r``'s iteration-cycle fields back from its row of ``jf`` (its step version: with its
        component's, :meth:`commsched.sim.rates.pacing.Pacing.took_back`)."""
        row = jf[r.index].tolist()
        restore(
            r,
            CycleFields(
                computing=bool(row[fx.COMPUTING]),
                released=bool(row[fx.RELEASED]),
                comm_done=bool(row[fx.COMM_DONE]),
                step=int(row[fx.STEP]),
                version=int(row[fx.VERSION]),
                iteration_start_s=row[fx.ITER_START],
                compute_end_s=row[fx.COMPUTE_END],
                release_s=row[fx.RELEASE_S],
                iterations_done=row[fx.ITERS],
                busy_gpu_s=row[fx.BUSY],
                last_end_s=row[fx.LAST_END],
                pending_delay_s=row[fx.DELAY],
            ),
        )


def warm_up() -> int:
    """Compile (or load from numba's cache) the compiled loop, on an empty queue; returns why it stopped.

    >>> warm_up() == fx.EMPTY
    True
    """
    st = (
        np.zeros((1, fx.JOB_FIELDS)),
        np.zeros((1, fl.SLOT_FIELDS)),
        np.zeros((1, fx.COMP_FIELDS)),
        np.zeros(3, dtype=np.int64),
        np.zeros((8, 5)),
        np.zeros(fx.K_SIZE),
        np.zeros(1, dtype=np.int64),
    )
    fab = (
        np.zeros((1, fl.POOL_ROWS)),
        np.zeros((1, fl.BIND_ROWS)),
        np.zeros((1, fl.LINK_ROWS)),
        np.zeros(fl.IO_SIZE),
        np.zeros((fl.SNAP_ROWS, 1)),
        np.zeros(2, dtype=np.int64),
        np.zeros(0, dtype=np.int64),
    )
    return int(fx.run(st, fab, _new_cache()))
