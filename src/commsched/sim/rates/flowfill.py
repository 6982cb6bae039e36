"""The water-filling of the exact engine on its arrays (compiled): strict priority between classes,
max-min fair within one by progressive filling.

It is :func:`commsched.sim.reference.maxmin.max_min_rates_coo` step for step (the same rounds, the same
saturation tolerance, the same order of every floating-point operation, ties between links broken towards the
lower link id as the reference's ascending order does), so that a component's paces are the reference engine's
bit for bit: a crowded component is chaotic, and a difference of one ulp in a pace grows into a different
run. What makes it cheap is elsewhere: it runs on the engine's arrays without building a matrix, only on a
configuration of the component not met before (:mod:`commsched.sim.rates.flowkernel`), and only on the entries
that can bind (:func:`bind_rows`).

**What a solve reads.** A link that no other step of the component may load (a *private* link of a step)
can only freeze that step, and among a step's private links only the tightest (least capacity per unit of
share) can: it is the first of them to saturate, in the round the full solve would. So each step row is
read through the *bound pool* ``BF``: its entries on links that two or more slots of its component may
load, plus its private entries whose capacity per share lies within :data:`PRIVATE_TIE_RTOL` of its
tightest one (ties kept). A private link left out has at least ``1e-6`` of its capacity left when its step
freezes, far above the saturation tolerance, so it can neither set a round's rise nor saturate: the paces
are bit for bit those of the full solve (tested against the reference on random, tie-heavy problems).
Which links two slots may load is the component's business (:mod:`commsched.sim.rates.pacing`); a row never
bound reads every entry.
Layout of the arrays: :mod:`commsched.sim.rates.flowlayout`.
"""

from __future__ import annotations

import numpy as np

from commsched.sim.rates.flowlayout import (
    ACTIVE,
    BHI,
    BLINK,
    BSHARE,
    CAP,
    CLS,
    DEM,
    F64,
    HI,
    I64,
    LINK,
    LO,
    NEWPACE,
    PRIVATE_TIE_RTOL,
    RES,
    ROW,
    SAT_RTOL,
    SEEN,
    SHARE,
    SUB,
    jit,
)


@jit
def _used_links(SF: F64, PF: F64, BF: F64, LF: F64, members: I64) -> I64:
    """The links the active members load (in the order met), each starting at its capacity."""
    n = 0
    for s in members:
        if SF[s, ACTIVE] != 0.0:
            row = int(SF[s, ROW])
            n += int(BF[row, BHI]) - int(PF[row, LO])
    buf = np.empty(n, dtype=np.int64)
    m = 0
    for s in members:
        if SF[s, ACTIVE] == 0.0:
            continue
        row = int(SF[s, ROW])
        for k in range(int(PF[row, LO]), int(BF[row, BHI])):
            link = int(BF[k, BLINK])
            if LF[link, SEEN] == 0.0:
                LF[link, SEEN] = 1.0
                LF[link, RES] = LF[link, CAP]
                buf[m] = link
                m += 1
    used = buf[:m]
    for link in used:
        LF[link, SEEN] = 0.0
    return used


@jit
def _fill_one(SF: F64, PF: F64, BF: F64, LF: F64, s: int) -> None:
    """A class of one member: the pace its tightest residual link allows."""
    row = int(SF[s, ROW])
    lo, hi = int(PF[row, LO]), int(BF[row, BHI])
    pace, on = np.inf, False
    for k in range(lo, hi):
        if BF[k, BSHARE] > 0.0:
            on = True
            pace = min(pace, LF[int(BF[k, BLINK]), RES] / BF[k, BSHARE])
    if not on:
        SF[s, NEWPACE] = 0.0
        return
    pace = max(pace, 0.0)
    for k in range(lo, hi):
        link = int(BF[k, BLINK])
        if BF[k, BSHARE] > 0.0:
            LF[link, RES] -= pace * BF[k, BSHARE]
            if LF[link, RES] <= SAT_RTOL * LF[link, CAP]:
                LF[link, RES] = 0.0
    SF[s, NEWPACE] = pace


@jit
def _add_demand(SF: F64, PF: F64, BF: F64, LF: F64, group: I64, col: int) -> None:  # noqa: PLR0917 -- flat arrays
    """Add the shares of the unfrozen members of ``group`` (``NEWPACE`` < 0) to each link's ``col``."""
    for s in group:
        if SF[s, NEWPACE] < 0.0:
            row = int(SF[s, ROW])
            for k in range(int(PF[row, LO]), int(BF[row, BHI])):
                LF[int(BF[k, BLINK]), col] += BF[k, BSHARE]


@jit
def _round(LF: F64, links: I64) -> float:
    """Raise the water to the next saturation over ``links``; flag the saturated ones (``SEEN`` 1);
    returns the rise."""
    k, best = 0, np.inf
    for i in range(links.size):  # the tightest; of equal ones the lowest link, as in ascending order
        head = LF[links[i], RES] / LF[links[i], DEM]
        if head < best or (head == best and links[i] < links[k]):
            k, best = i, head
    delta = max(best, 0.0)
    nsat = 0
    for link in links:
        LF[link, RES] -= delta * LF[link, DEM]
        if LF[link, RES] <= SAT_RTOL * LF[link, CAP]:
            LF[link, SEEN] = 1.0
            nsat += 1
    if nsat == 0:  # rounding: the tightest link is the one that set delta
        LF[links[k], SEEN] = 1.0
    for link in links:
        if LF[link, SEEN] != 0.0:
            LF[link, RES] = 0.0
    return delta


@jit
def _freeze(SF: F64, PF: F64, BF: F64, LF: F64, group: I64) -> int:
    """Flag (``NEWPACE`` -2) the unfrozen members loading a saturated link; returns how many are left."""
    left = 0
    for s in group:
        if SF[s, NEWPACE] != -1.0:
            continue
        row = int(SF[s, ROW])
        hit = False
        for k in range(int(PF[row, LO]), int(BF[row, BHI])):
            if BF[k, BSHARE] > 0.0 and LF[int(BF[k, BLINK]), SEEN] != 0.0:
                hit = True
        if hit:
            SF[s, NEWPACE] = -2.0  # frozen in this round
        else:
            left += 1
    return left


@jit
def _settle_frozen(SF: F64, PF: F64, BF: F64, LF: F64, group: I64, water: float) -> None:  # noqa: PLR0917 -- flat arrays
    """The members frozen in this round get ``water``; their shares are summed per link into ``SUB``
    (taken off the demand at once, as the reference's matrix product does)."""
    for s in group:
        if SF[s, NEWPACE] <= -2.0:
            row = int(SF[s, ROW])
            for k in range(int(PF[row, LO]), int(BF[row, BHI])):
                LF[int(BF[k, BLINK]), SUB] += BF[k, BSHARE]
            SF[s, NEWPACE] = water


@jit
def _fill(SF: F64, PF: F64, BF: F64, LF: F64, group: I64, used: I64) -> None:  # noqa: PLR0917 -- flat arrays
    """Progressive filling of one class (``commsched.sim.reference.maxmin._fill``): paces into ``NEWPACE``."""
    for link in used:
        LF[link, DEM] = 0.0
        LF[link, SUB] = 0.0
    left = 0
    for s in group:  # a member with no link carries nothing
        row = int(SF[s, ROW])
        on = False
        for k in range(int(PF[row, LO]), int(BF[row, BHI])):
            on = on or BF[k, BSHARE] > 0.0
        SF[s, NEWPACE] = -1.0 if on else 0.0
        left += 1 if on else 0
    _add_demand(SF, PF, BF, LF, group, DEM)
    links = used[LF[used, DEM] > 0.0]
    water = 0.0
    while links.size > 0 and left > 0:
        water += _round(LF, links)
        left = _freeze(SF, PF, BF, LF, group)
        _settle_frozen(SF, PF, BF, LF, group, water)
        for link in links:
            LF[link, DEM] -= LF[link, SUB]
            LF[link, SUB] = 0.0
            if LF[link, SEEN] != 0.0:
                LF[link, DEM] = 0.0
                LF[link, SEEN] = 0.0
        links = links[LF[links, DEM] > 1e-12]
    for s in group:
        SF[s, NEWPACE] = max(SF[s, NEWPACE], 0.0)


@jit
def solve(SF: F64, PF: F64, BF: F64, LF: F64, members: I64) -> None:
    """The paces of the active ``members`` of a component into ``NEWPACE``, class by class."""
    used = _used_links(SF, PF, BF, LF, members)
    act = members[SF[members, ACTIVE] != 0.0]
    if act.size == 0:
        return
    classes = np.unique(SF[act, CLS])
    for c in classes:
        group = act[SF[act, CLS] == c]
        if group.size == 1:
            _fill_one(SF, PF, BF, LF, group[0])
        else:
            _fill(SF, PF, BF, LF, group, used)


@jit
def bind_rows(PF: F64, BF: F64, LF: F64, shared: I64, rows: I64) -> None:
    """Bind step ``rows`` of the pool: their entries on links with ``shared[link]`` != 0 (two or more
    slots of their component may load them) and their tightest private entries (within
    :data:`PRIVATE_TIE_RTOL`), written into ``BF`` from each row's ``LO``; entries of no share are left
    out."""
    for row in rows:
        lo, hi = int(PF[row, LO]), int(PF[row, HI])
        best = np.inf
        for k in range(lo, hi):
            link, share = int(PF[k, LINK]), PF[k, SHARE]
            if share > 0.0 and shared[link] == 0:
                best = min(best, LF[link, CAP] / share)
        limit = best * (1.0 + PRIVATE_TIE_RTOL)
        n = lo
        for k in range(lo, hi):
            link, share = int(PF[k, LINK]), PF[k, SHARE]
            if share > 0.0 and (shared[link] != 0 or LF[link, CAP] / share <= limit):
                BF[n, BLINK] = link
                BF[n, BSHARE] = share
                n += 1
        BF[row, BHI] = n
