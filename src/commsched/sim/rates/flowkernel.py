"""The compiled core of the exact engine: steps in flight on arrays, lazy settling, cached paces.

The active steps of the whole simulation live in *slots* (rows of ``SF``; a job's step in flight holds one
slot, and nothing here assumes one slot per job: a job with several steps in flight holds several). A
slot's links are a range of the *traffic pool* ``PF`` (each step of each transfer schedule is a step row
pointing at its range of link entries), so that starting a step writes a few numbers. ``LF`` holds the
per-link rows: capacities, the two byte counters of the ledger and scratch rows. Layout:
:mod:`commsched.sim.rates.flowlayout`.

* **Lazy settling.** A slot's progress is brought up to date (:func:`settle`, a few flops) at the changes
  of its component, as the reference engine cut it (so that its end is the reference's bit for bit); its
  bytes reach the link counters (:func:`flush`) once per step, at its end, or when the counters are read
  (samples, jumps, decisions, the end of the run).
* **Re-solves only of what changed.** A step that starts or ends (:func:`step_change`) re-solves its
  component (:mod:`commsched.sim.rates.flowfill`), and only when the component's configuration was not met
  before; the slots whose pace does not change keep their progress and their ends untouched.
* **Pace cache.** A component meets the same configurations (which steps are in flight, in which class)
  again and again; the caller keeps the paces of each and hands them back (``io[HIT]``): the kernel
  checks that they are the configuration's, and only sets them.
* **One pending end per component.** Each call leaves the earliest end among the component's slots (ties
  in the order their ends were set) in ``io``: the only step end the engine keeps in its event queue.

Every function is compiled by numba when it is installed (a core dependency) and runs as plain Python
otherwise (``NUMBA_DISABLE_JIT=1`` forces that: same results, far slower).

Units: paces and capacities in bytes/s, times in seconds.
"""

from __future__ import annotations

import math

import numpy as np

from commsched.sim.rates.flowfill import bind_rows, solve
from commsched.sim.rates.flowlayout import (
    ACTIVE,
    BHI,
    BIND_ROWS,
    BLINK,
    BPR,
    BSHARE,
    BYTES,
    CAP,
    CLS,
    COUNTER,
    END,
    F64,
    FLUSHED,
    HI,
    HIT,
    I64,
    INR,
    INTENS,
    IO_SIZE,
    IW_BYTES,
    LAT,
    LINK,
    LINK_ROWS,
    LO,
    MAXFLOW,
    NEWPACE,
    NEWROW,
    NOW,
    OUT_COUNT,
    OUT_END,
    OUT_SLOT,
    PACE,
    POOL_ROWS,
    PROG,
    REPEAT,
    ROW,
    SEQ,
    SETTLED,
    SHARE,
    SLOT,
    SLOT_FIELDS,
    SNAP_ROWS,
    jit,
)


@jit
def progress_rate(SF: F64, PF: F64, s: int) -> float:
    """Fraction of slot ``s``'s step done per second at its pace (0 at pace 0)."""
    pace = SF[s, PACE]
    if pace <= 0.0:
        return 0.0
    row = int(SF[s, ROW])
    return float(1.0 / (PF[row, REPEAT] * (PF[row, LAT] + PF[row, MAXFLOW] / pace)))


@jit
def settle(SF: F64, PF: F64, s: int, now: float) -> None:
    """Advance slot ``s``'s progress to ``now`` at its current pace (the link counters: :func:`flush`)."""
    if SF[s, ACTIVE] == 0.0:
        SF[s, SETTLED] = max(SF[s, SETTLED], now)
        return
    dt = now - SF[s, SETTLED]
    if dt <= 0.0:
        return
    SF[s, SETTLED] = now
    if SF[s, PACE] > 0.0:
        SF[s, PROG] += min(dt * progress_rate(SF, PF, s), 1.0 - SF[s, PROG])


@jit
def flush(SF: F64, PF: F64, LF: F64, s: int) -> None:
    """Add the bytes of slot ``s``'s progress since its last flush to the link counters."""
    dp = SF[s, PROG] - SF[s, FLUSHED]
    if dp <= 0.0:
        return
    SF[s, FLUSHED] = SF[s, PROG]
    row = int(SF[s, ROW])
    scale = dp * PF[row, REPEAT]
    w = SF[s, INTENS]
    for k in range(int(PF[row, LO]), int(PF[row, HI])):
        link = int(PF[k, LINK])
        moved = scale * PF[k, BPR]
        LF[link, BYTES] += moved
        LF[link, IW_BYTES] += moved * w


@jit
def schedule_end(SF: F64, PF: F64, s: int, io: F64) -> None:
    """Set slot ``s``'s end from its settled state and pace (inf at pace 0), numbered in order."""
    prate = progress_rate(SF, PF, s)
    io[COUNTER] += 1.0
    SF[s, SEQ] = io[COUNTER]
    SF[s, END] = SF[s, SETTLED] + (1.0 - SF[s, PROG]) / prate if prate > 0.0 else math.inf


@jit
def earliest(SF: F64, members: I64, io: F64) -> None:
    """The earliest end among the active ``members`` (ties: the end set first) into ``io``."""
    best, best_seq, slot = math.inf, math.inf, -1.0
    for s in members:
        if SF[s, ACTIVE] != 0.0:
            e = SF[s, END]
            if e < best or (e == best and e < math.inf and SF[s, SEQ] < best_seq):
                best, best_seq, slot = e, SF[s, SEQ], float(s)
    io[OUT_END] = best
    io[OUT_SLOT] = slot


@jit
def _apply(SF: F64, PF: F64, members: I64, io: F64) -> None:
    """Give each re-solved member (``INR``) its new pace, settling first the ones whose pace changes."""
    now = io[NOW]
    for s in members:
        if SF[s, INR] == 0.0:
            continue
        SF[s, INR] = 0.0
        pace = SF[s, NEWPACE]
        if pace != SF[s, PACE]:
            settle(SF, PF, s, now)
            SF[s, SETTLED] = max(SF[s, SETTLED], now)
            SF[s, PACE] = pace
            schedule_end(SF, PF, s, io)


@jit
def resolve(SF: F64, PF: F64, BF: F64, LF: F64, members: I64, io: F64) -> None:  # noqa: PLR0917 -- flat arrays
    """Re-solve the component ``members`` (its active slots), then put its earliest end into ``io``."""
    for s in members:
        if SF[s, ACTIVE] != 0.0:
            SF[s, INR] = 1.0
    solve(SF, PF, BF, LF, members)
    _apply(SF, PF, members, io)
    earliest(SF, members, io)


@jit
def _matches(SF: F64, members: I64, snap: F64) -> bool:
    """Whether ``snap`` holds exactly the active members of ``members`` (slot, step row, class)."""
    n = 0
    for s in members:
        if SF[s, ACTIVE] != 0.0:
            n += 1
    if n != snap.shape[1]:
        return False
    for j in range(n):
        s = int(snap[0, j])
        if SF[s, ACTIVE] == 0.0 or SF[s, ROW] != snap[1, j] or SF[s, CLS] != snap[2, j]:
            return False
    return True


@jit
def _snapshot(SF: F64, members: I64, snap: F64, io: F64) -> None:
    n = 0
    for s in members:
        if SF[s, ACTIVE] != 0.0:
            snap[0, n], snap[1, n], snap[2, n], snap[3, n] = s, SF[s, ROW], SF[s, CLS], SF[s, PACE]
            n += 1
    io[OUT_COUNT] = n


@jit
def _settle_all(SF: F64, PF: F64, members: I64, now: float) -> None:
    """Settle every active member to ``now`` (progress only: a few flops each).

    Progress is a sum of constant-pace pieces; cutting it at every change of the component, as the
    reference engine does, keeps each step's end bit for bit the reference's (the link counters are
    still flushed once per step).
    """
    for s in members:
        if SF[s, ACTIVE] != 0.0:
            settle(SF, PF, s, now)


@jit
def _load(SF: F64, PF: F64, LF: F64, io: F64) -> int:
    """End slot ``io[SLOT]``'s step (settled and flushed) and start step row ``io[NEWROW]`` (if >= 0);
    returns the ended step's row (-1: none)."""
    now, s, new = io[NOW], int(io[SLOT]), int(io[NEWROW])
    old = -1
    if SF[s, ACTIVE] != 0.0:
        settle(SF, PF, s, now)
        flush(SF, PF, LF, s)
        old = int(SF[s, ROW])
    if new >= 0:
        SF[s, ROW] = float(new)
        SF[s, ACTIVE] = 1.0
        SF[s, PROG] = 0.0
        SF[s, FLUSHED] = 0.0
        SF[s, SETTLED] = now
    else:
        SF[s, ACTIVE] = 0.0
    SF[s, PACE] = 0.0
    SF[s, END] = math.inf
    return old


@jit
def step_change(SF: F64, PF: F64, BF: F64, LF: F64, members: I64, io: F64, snap: F64) -> None:  # noqa: PLR0917 -- flat arrays: a record argument costs numba 8 us a call
    """Slot ``io[SLOT]`` ends its step now (when active) and starts step row ``io[NEWROW]`` (if >= 0).

    With ``io[HIT]`` 1, ``snap`` should hold the paces of the new configuration: they are checked and
    set (``io[HIT]`` left 1), or, if they are not the configuration's, nothing is done (``io[HIT]`` -1:
    call again without). Otherwise the component is re-solved and the configuration's paces are
    written into ``snap`` (``io[OUT_COUNT]`` columns).
    """
    s, new = int(io[SLOT]), int(io[NEWROW])
    if io[HIT] > 0.0:
        if not matches_after(SF, members, snap, s, new):
            io[HIT] = -1.0
            return
        _load(SF, PF, LF, io)
        _settle_all(SF, PF, members, io[NOW])
        for j in range(snap.shape[1]):
            t = int(snap[0, j])
            SF[t, NEWPACE] = snap[3, j]
            SF[t, INR] = 1.0
        _apply(SF, PF, members, io)
        earliest(SF, members, io)
        return
    _load(SF, PF, LF, io)
    _settle_all(SF, PF, members, io[NOW])
    resolve(SF, PF, BF, LF, members, io)
    _snapshot(SF, members, snap, io)


@jit
def matches_after(SF: F64, members: I64, snap: F64, s: int, new: int) -> bool:
    """:func:`_matches` as the configuration will be once slot ``s`` holds step row ``new``."""
    active, row = SF[s, ACTIVE], SF[s, ROW]
    SF[s, ACTIVE] = 1.0 if new >= 0 else 0.0
    if new >= 0:
        SF[s, ROW] = float(new)
    ok = _matches(SF, members, snap)
    SF[s, ACTIVE], SF[s, ROW] = active, row
    return ok


@jit
def settle_many(SF: F64, PF: F64, LF: F64, slots: I64, now: float) -> None:
    """:func:`settle` and :func:`flush` every slot of ``slots``."""
    for s in slots:
        settle(SF, PF, s, now)
        if SF[s, ACTIVE] != 0.0:
            flush(SF, PF, LF, s)


@jit
def settle_flush(SF: F64, PF: F64, LF: F64, slots: I64, now: float) -> None:
    """:func:`settle` and :func:`flush` each slot of ``slots`` in turn (what
    :meth:`commsched.sim.rates.pacing.Pacing.settle` does for a job with a step in flight)."""
    for s in slots:
        settle(SF, PF, s, now)
        flush(SF, PF, LF, s)


def warm_up() -> list[float]:
    """Compile (or load from numba's cache) every kernel on a tiny problem; returns the paces.

    Two single-flow steps on one link of 1 byte/s share it evenly:

    >>> warm_up()
    [0.5, 0.5]
    """
    SF = np.zeros((2, SLOT_FIELDS))
    PF = np.zeros((2, POOL_ROWS))
    PF[:, LINK], PF[:, SHARE], PF[:, BPR] = [0.0, 0.0], [1.0, 1.0], [1.0, 1.0]
    PF[:, REPEAT], PF[:, LAT], PF[:, MAXFLOW] = [1.0, 1.0], 0.0, 1.0
    PF[:, LO], PF[:, HI] = [0.0, 1.0], [1.0, 2.0]
    BF = np.zeros((2, BIND_ROWS))
    BF[:, BLINK], BF[:, BSHARE], BF[:, BHI] = PF[:, LINK], PF[:, SHARE], PF[:, HI]
    LF = np.zeros((1, LINK_ROWS))
    LF[:, CAP] = 1.0
    io = np.zeros(IO_SIZE)
    snap = np.zeros((SNAP_ROWS, 2))
    members = np.array([0, 1], dtype=np.int64)
    for s in (0, 1):
        io[NOW], io[SLOT], io[NEWROW], io[HIT] = 0.0, float(s), float(s), 0.0
        step_change(SF, PF, BF, LF, members, io, snap)
    io[HIT] = 1.0
    step_change(SF, PF, BF, LF, members, io, snap)
    settle_many(SF, PF, LF, members, 0.5)
    settle_flush(SF, PF, LF, members, 0.5)
    bind_rows(PF, BF, LF, np.ones(1, dtype=np.int64), np.arange(2, dtype=np.int64))
    resolve(SF, PF, BF, LF, members, io)
    schedule_end(SF, PF, 0, io)
    return [float(x) for x in SF[:, PACE]]
