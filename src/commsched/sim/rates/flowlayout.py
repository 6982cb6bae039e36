"""The layout of the exact engine's arrays, shared by its compiled parts
(:mod:`commsched.sim.rates.flowkernel`,
:mod:`commsched.sim.rates.flowfill`), and the switch that compiles them.

* ``SF`` (slots x :data:`SLOT_FIELDS`): the steps in flight, one slot each;
* ``PF`` (entries x :data:`POOL_ROWS`): the traffic pool (:mod:`commsched.sim.rates.trafficpool`);
* ``BF`` (entries x :data:`BIND_ROWS`): what a solve reads of the pool: per step row, the entries that can
  bind its pace in its component (:func:`commsched.sim.rates.flowfill.bind_rows`), from the row's ``LO``;
* ``LF`` (links x :data:`LINK_ROWS`): capacities, the ledger's counters and scratch columns;
* ``io``: the control vector of one call.

Ids and offsets are stored as floats (exact below 2**53), so that each table is one array.
"""

from __future__ import annotations

import importlib.util
import os
from collections.abc import Callable
from typing import Any, TypeVar, cast

import numpy as np
from numpy.typing import NDArray

_F = TypeVar("_F", bound=Callable[..., Any])

#: whether the kernels are compiled (numba installed and not switched off by ``NUMBA_DISABLE_JIT=1``)
COMPILED = importlib.util.find_spec("numba") is not None and os.environ.get("NUMBA_DISABLE_JIT") != "1"


def jit(fn: _F) -> _F:
    """Compile ``fn`` with numba (cached on disk) when it is installed, else leave it as it is."""
    if importlib.util.find_spec("numba") is None:  # pragma: no cover - numba is a dependency
        return fn
    from numba import njit

    return cast(_F, njit(cache=True, nogil=True)(fn))


F64 = NDArray[np.float64]
I64 = NDArray[np.int64]

# slot fields (columns of SF); FLUSHED: the progress already added to the link counters
PROG, SETTLED, PACE, END, SEQ, INTENS, ACTIVE, CLS, ROW, NEWPACE, INR, FLUSHED = range(12)
SLOT_FIELDS = 12
# traffic pool columns (PF): per link entry LINK, SHARE, BPR; per step row REPEAT, LAT, MAXFLOW, and the
# range [LO, HI) of its link entries
LINK, SHARE, BPR, REPEAT, LAT, MAXFLOW, LO, HI = range(8)
POOL_ROWS = 8
# the bound pool (BF): per entry kept BLINK, BSHARE (from the row's LO on); per step row BHI, the end of
# its kept entries (BHI = HI: every entry kept, the pool as copied in)
BLINK, BSHARE, BHI = range(3)
BIND_ROWS = 3
# per-link columns (LF): capacity, the ledger's counters, scratch (residual, demand, flags, sums, the
# link's place among the links a solve uses)
CAP, BYTES, IW_BYTES, RES, DEM, SEEN, SUB, POS = range(8)
LINK_ROWS = 8  # (a link's fields fill one 64-byte cache line)
# the control vector (io): in: now, slot, new step row (-1: none), cache hit (1: the cache argument
# holds the paces of this configuration; out: 1 if it did, 0 if a snapshot was written, -1 on a
# mismatch); out: earliest end and its slot, snapshot size; the counter of ends set
NOW, SLOT, NEWROW, HIT, OUT_END, OUT_SLOT, OUT_COUNT, COUNTER = range(8)
IO_SIZE = 8
# rows of a pace snapshot (the cache's entries): slot, step row, class, pace
SNAP_ROWS = 4

#: relative tolerance under which a link counts as saturated (as in commsched.sim.reference.maxmin)
SAT_RTOL = 1e-9
#: a step's private links (no other step of its component may load them) kept in its solve: those whose
#: capacity per share lies within this relative margin of its tightest one (ties and near-ties: far above
#: SAT_RTOL and rounding, so a link left out can never saturate before the step is frozen)
PRIVATE_TIE_RTOL = 1e-6
