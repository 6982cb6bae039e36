"""The compiled event loop of exact mode: the flat events of the iteration cycle, on arrays.

A job's *flat* events (its compute end, the release of its communication, the end of a step) do the same
few things every iteration: set a handful of its fields, start or end a step of its component (the pace
cache, or a re-solve: :func:`commsched.sim.rates.flowkernel.step_change`), keep its component's one pending
end and push the next events. :func:`run` handles them here, in the order and with the arithmetic of the
interpreted handlers (:mod:`commsched.sim.jobs.iteration`, :meth:`commsched.sim.rates.pacing.Pacing.begin`,
``end_step`` and ``_change``), so that a run is the interpreted loop's bit for bit. It gives the loop
back to Python (its return value says why) *before* an event that needs more: an arrival, a sample, the
horizon, an event of a job not on the arrays (a grouped job, a job before its first decision), a job's
last iteration (its departure and the decision after it), a step whose schedule is not yet in the pool,
and a re-solve whose component (or schedule) is not yet bound (:mod:`commsched.sim.rates.binding`). The
wrapper that copies the state on and off the arrays is :mod:`commsched.sim.loop.compiled`.

Arrays (ids and counters as floats, exact below 2**53, like :mod:`commsched.sim.rates.flowlayout`):

* the state ``st = (JF, SF, CF, keys, H, K, CH)``: ``JF`` (jobs x :data:`JOB_FIELDS`), the iteration-cycle
  fields of every job on the arrays; ``SF``, the steps in flight (:mod:`commsched.sim.rates.flowlayout`);
  ``CF`` (components x :data:`COMP_FIELDS`), each component's configuration hash, whether it is bound and
  its pending end (job, step version, time); ``keys``, each slot's key (:func:`slot_key`; 0: inactive),
  then two scratch cells (the probed key and configuration hash); ``H`` (room x 5), the pending events as
  a binary heap of rows ``(time, kind, sequence, job, version)`` keyed by their first three, the order of
  :class:`commsched.sim.loop.kernel.EventKernel`; ``K``, the clock, the ledger's busy GPU-seconds of
  completed computations, the loop's counters (heap size, push sequence, events, stale events, peak
  pending) and the probe's scratch (step row, next step, cache hit); ``CH``, each component's
  configuration hash (the XOR of its slots' keys);
* the fabric ``fab = (PF, BF, LF, io, snap, CPTR, CSLOTS)``: the pool, its bound copy, the links, the
  control vector and snapshot of :func:`commsched.sim.rates.flowkernel.step_change`, and each component's
  slots (CSR: component ``c``'s are ``CSLOTS[CPTR[c]:CPTR[c + 1]]``).
"""

from __future__ import annotations

import math

from commsched.sim.loop.kernel import CLOCK, H_JOB, H_KIND, H_VER, K_CELLS, SIZE, STALE, pop_row, push_row
from commsched.sim.rates.flowkernel import matches_after, step_change
from commsched.sim.rates.flowlayout import (
    ACTIVE,
    CLS,
    END,
    F64,
    HIT,
    I64,
    INTENS,
    NEWROW,
    NOW,
    OUT_COUNT,
    OUT_END,
    OUT_SLOT,
    SLOT,
    jit,
)

#: the loop's state: job fields, slots, components, slot keys, heap, clock and counters, component hashes
State = tuple[F64, F64, F64, I64, F64, F64, I64]
#: the fabric: pool, bound pool, links, control vector, snapshot, component offsets and slots
Fabric = tuple[F64, F64, F64, F64, F64, I64, I64]
#: configuration hash -> its paces (a snapshot)
Cache = dict[int, F64]

# job fields (columns of JF)
(
    FLAT, FINISHED, COMPUTING, RELEASED, COMM_DONE, STEP, VERSION, STEP_VERSION, NSTEPS, STOP, BASE,
    COMP, KLASS, INTENSITY, BOUND, ITER_START, COMPUTE_END, RELEASE_S, ITERS, BUSY, LAST_END, DELAY,
    TARGET, BUSY_PER_IT, COMPUTE_S, OVERLAP,
) = range(26)  # fmt: skip
JOB_FIELDS = 26
# component fields (columns of CF): whether its configuration hash (in CH) is valid, bound, pending end
HASH_OK, CBOUND, PEND_JOB, PEND_VER, PEND_T = range(5)
COMP_FIELDS = 5
# K: the kernel's cells (clock, counters: commsched.sim.loop.kernel), busy GPU-seconds done, the probe's
# scratch
BUSY_DONE, W_ROW, W_NEXT, W_HIT = range(K_CELLS, K_CELLS + 4)
K_SIZE = K_CELLS + 4
# event kinds (the values of commsched.sim.jobs.runs.EventKind)
STEP_END_K, COMPUTE_END_K, RELEASE_K = 0, 1, 2
# why run() gave the loop back: the heap is empty, its earliest event needs Python, the heap needs room
EMPTY, NEEDS_PYTHON, NEEDS_ROOM = 0, 1, 2
#: configurations whose paces are kept before the cache is cleared (as commsched.sim.rates.pacing's)
CACHE_MAX = 200_000
_P1, _P2 = 2_147_483_647, 2_147_483_629  # primes below 2**31: each product below stays under 2**62


@jit
def slot_key(s: int, row: int, cls: int) -> int:
    """The key of slot ``s`` holding step row ``row`` in class ``cls`` (never 0; 0: inactive); the same
    integers in Python and compiled (no product reaches 2**63).

    >>> slot_key(0, 0, 0) != slot_key(0, 1, 0) != slot_key(1, 0, 0)
    True
    """
    a = (s * 1_103_515_245 + row * 1_664_525 + cls * 22_695_477 + 12_345) % _P1
    b = (s * 69_069 + row * 1_013_904_223 + cls * 134_775_813 + 7) % _P2
    return a * 2_147_483_648 + b + 1


@jit
def push(st: State, t: float, kind: int, job: int, version: float) -> None:
    """Schedule an event (the loop has made room)."""
    push_row(st[4], st[5], t, kind, (job, version))


@jit
def _comp_hash(st: State, fab: Fabric, comp: int) -> int:
    CF, keys, CPTR, CSLOTS = st[2], st[3], fab[5], fab[6]
    if CF[comp, HASH_OK] != 0.0:
        return int(st[6][comp])
    h = 0
    for k in range(CPTR[comp], CPTR[comp + 1]):
        h ^= keys[CSLOTS[k]]
    return h


@jit
def _start(st: State, j: int, t: float) -> None:
    """:meth:`commsched.sim.jobs.iteration.Iterations.start` of a flat job (its slot dropped on the way)."""
    JF, SF, CF, keys = st[0], st[1], st[2], st[3]
    c = JF[j, COMPUTE_S]
    JF[j, ITER_START] = t
    JF[j, COMPUTE_END] = t + c
    JF[j, COMPUTING] = 1.0
    JF[j, RELEASED] = 0.0
    JF[j, COMM_DONE] = 1.0 if JF[j, NSTEPS] == 0.0 else 0.0
    JF[j, STEP] = -1.0
    if keys[j] != 0:
        keys[j] = 0
        CF[int(JF[j, COMP]), HASH_OK] = 0.0
    SF[j, ACTIVE] = 0.0
    SF[j, END] = math.inf
    JF[j, VERSION] += 1.0
    push(st, JF[j, COMPUTE_END], COMPUTE_END_K, j, JF[j, VERSION])
    if JF[j, COMM_DONE] == 0.0:
        JF[j, RELEASE_S] = t + JF[j, OVERLAP] * c
        push(st, JF[j, RELEASE_S], RELEASE_K, j, JF[j, VERSION])


@jit
def _end(st: State, j: int) -> None:
    """The iteration of ``j`` is complete (not its last: the caller has checked) and the next starts."""
    JF, K = st[0], st[5]
    now = K[CLOCK]
    JF[j, ITERS] += 1.0
    JF[j, LAST_END] = now
    start = now + JF[j, DELAY]
    JF[j, DELAY] = 0.0
    _start(st, j, start)


@jit
def _last(JF: F64, j: int) -> bool:
    """Whether completing ``j``'s iteration now completes its last one."""
    return bool(JF[j, ITERS] + 1.0 >= JF[j, TARGET] - 1e-9)


@jit
def _probe(st: State, fab: Fabric, cache: Cache, j: int, kind: int) -> bool:
    """Whether event ``kind`` of flat job ``j`` needs Python; else its step row, next step, key,
    configuration hash and cache hit are left in the scratch cells (nothing else is changed)."""
    JF, SF, CF, keys, K = st[0], st[1], st[2], st[3], st[5]
    if kind == COMPUTE_END_K:
        return bool(JF[j, COMM_DONE] != 0.0 and _last(JF, j))
    if kind == RELEASE_K and JF[j, NSTEPS] == 0.0:
        return True
    nxt = 0 if kind == RELEASE_K else int(JF[j, STEP]) + 1
    row = -1
    if nxt < int(JF[j, STOP]):
        if JF[j, BASE] < 0.0:
            return True  # its schedule enters the pool (Python's)
        row = int(JF[j, BASE]) + nxt
    elif JF[j, COMPUTING] == 0.0 and _last(JF, j):
        return True
    comp = int(JF[j, COMP])
    key = slot_key(j, row, int(JF[j, KLASS])) if row >= 0 else 0
    h = _comp_hash(st, fab, comp) ^ keys[j] ^ key
    hit = False
    if h in cache:
        cls = SF[j, CLS]
        if kind == RELEASE_K:
            SF[j, CLS] = JF[j, KLASS]
        hit = matches_after(SF, _members(fab, comp), cache[h], j, row)
        SF[j, CLS] = cls
    if not hit and (CF[comp, CBOUND] == 0.0 or (row >= 0 and JF[j, BOUND] == 0.0)):
        return True  # a re-solve of a component (or a schedule) not yet bound
    K[W_ROW], K[W_NEXT], K[W_HIT] = row, nxt, 1.0 if hit else 0.0
    keys[keys.size - 2], keys[keys.size - 1] = key, h
    return False


@jit
def _members(fab: Fabric, comp: int) -> I64:
    return fab[6][fab[5][comp] : fab[5][comp + 1]]


@jit
def _step(st: State, fab: Fabric, cache: Cache, j: int, kind: int) -> None:
    """A release or a step end of ``j`` (probed): :meth:`commsched.sim.rates.pacing.Pacing.begin` /
    ``end_step`` and ``_change``, then the iteration's end if it is complete."""
    JF, SF, CF, keys, K = st[0], st[1], st[2], st[3], st[5]
    io, snap = fab[3], fab[4]
    row, comp, now = int(K[W_ROW]), int(JF[j, COMP]), K[CLOCK]
    if kind == RELEASE_K:
        JF[j, RELEASED] = 1.0
        JF[j, STEP] = 0.0
        SF[j, CLS] = JF[j, KLASS]
        SF[j, INTENS] = JF[j, INTENSITY]
    else:
        if CF[comp, PEND_JOB] == j:
            CF[comp, PEND_JOB] = -1.0
        JF[j, STEP] = K[W_NEXT] if row >= 0 else -1.0
        JF[j, COMM_DONE] = 1.0 if row < 0 else 0.0
    h = keys[keys.size - 1]
    keys[j] = keys[keys.size - 2]
    st[6][comp] = h
    CF[comp, HASH_OK] = 1.0
    io[NOW], io[SLOT], io[NEWROW] = now, j, row
    members = _members(fab, comp)
    if K[W_HIT] != 0.0:
        io[HIT] = 1.0
        step_change(SF, fab[0], fab[1], fab[2], members, io, cache[h])
    else:
        io[HIT] = 0.0
        step_change(SF, fab[0], fab[1], fab[2], members, io, snap)
        if len(cache) >= CACHE_MAX:
            cache.clear()
        cache[h] = snap[:, : int(io[OUT_COUNT])].copy()
    _schedule(st, io, comp)
    if kind == STEP_END_K and JF[j, COMM_DONE] != 0.0 and JF[j, COMPUTING] == 0.0:
        _end(st, j)


@jit
def _schedule(st: State, io: F64, comp: int) -> None:
    """:meth:`commsched.sim.rates.pacing.Pacing._schedule` (not forced): one pending end per component."""
    JF, CF = st[0], st[2]
    end, slot = io[OUT_END], int(io[OUT_SLOT])
    pj = int(CF[comp, PEND_JOB])
    if pj >= 0:
        if JF[pj, STEP_VERSION] == CF[comp, PEND_VER]:
            if pj == slot and CF[comp, PEND_T] == end:
                return
            JF[pj, STEP_VERSION] += 1.0
        CF[comp, PEND_JOB] = -1.0
    if slot < 0 or end == math.inf:
        return
    push(st, end, STEP_END_K, slot, JF[slot, STEP_VERSION])
    CF[comp, PEND_JOB] = slot
    CF[comp, PEND_VER] = JF[slot, STEP_VERSION]
    CF[comp, PEND_T] = end


@jit
def run(st: State, fab: Fabric, cache: Cache) -> int:
    """Handle flat events until the earliest pending one needs Python; returns why it stopped."""
    JF, H, K = st[0], st[4], st[5]
    n_jobs = JF.shape[0]
    while K[SIZE] > 0.0:
        if K[SIZE] + 4.0 > H.shape[0]:
            return NEEDS_ROOM
        kind, j, ver = int(H[0, H_KIND]), int(H[0, H_JOB]), H[0, H_VER]
        if kind > RELEASE_K or j < 0 or j >= n_jobs:
            return NEEDS_PYTHON
        if JF[j, FINISHED] != 0.0 or (
            JF[j, FLAT] != 0.0 and ver != (JF[j, STEP_VERSION] if kind == STEP_END_K else JF[j, VERSION])
        ):
            pop_row(st[4], st[5])
            K[STALE] += 1.0
            continue
        if JF[j, FLAT] == 0.0 or _probe(st, fab, cache, j, kind):
            return NEEDS_PYTHON
        pop_row(st[4], st[5])
        if kind != COMPUTE_END_K:
            _step(st, fab, cache, j, kind)
            continue
        JF[j, COMPUTING] = 0.0
        JF[j, BUSY] += JF[j, BUSY_PER_IT]
        K[BUSY_DONE] += JF[j, BUSY_PER_IT]
        if JF[j, COMM_DONE] != 0.0:
            _end(st, j)
    return EMPTY
