"""The water-filling of the exact engine on its arrays (compiled): strict priority between classes,
max-min fair within one by progressive filling.

It is :func:`commsched.sim.reference.maxmin.max_min_rates_coo` step for step (the same rounds, the same
saturation tolerance, the same order of every floating-point operation, ties between links broken towards the
lower link id as the reference's ascending order does), so that a component's paces are the reference engine's
bit for bit: a crowded component is chaotic, and a difference of one ulp in a pace grows into a different
run. What makes it cheap is elsewhere: it runs on the engine's arrays without building a matrix, only on a
configuration of the component not met before (:mod:`commsched.sim.rates.flowkernel`), and only on the entries
that can bind (:func:`bind_rows`).

**What a round costs.** A round raises the water over the links still loaded, freezes the members on
the links it saturated and takes their shares off. The links are passed over twice a round (the rise and
the saturation; then the shares taken off, the links left kept, and the next round's tightest found); in
a class of :data:`LISTED_FROM` members or more each link lists its members once, before the first round,
so that a round visits only the members of the links it saturated (with fewer, every unfrozen member's
entries are read, which is cheaper than listing them). Neither changes an operation on any number: the
paces are the same bit for bit.

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
    POS,
    PRIVATE_TIE_RTOL,
    RES,
    ROW,
    SAT_RTOL,
    SEEN,
    SHARE,
    SUB,
    jit,
)

#: a class of this many members or more lists each link's members before its first round
#: (:func:`_by_link`); in smaller ones listing costs more than it saves
LISTED_FROM = 24


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
def _freeze(  # noqa: PLR0917 -- flat arrays
    SF: F64, PF: F64, BF: F64, LF: F64, group: I64, sat: I64, lists: tuple[I64, I64], frozen: I64
) -> int:
    """Flag (``NEWPACE`` -2) the unfrozen members loading a saturated link (``sat``), their positions in
    ``group`` (in its order) into ``frozen``; returns how many. With member lists (:func:`_by_link`,
    ``lists`` not empty) only the saturated links' members are visited, else every unfrozen member's
    entries are read."""
    start, listed = lists
    n = 0
    if start.size == 0:
        for g in range(group.size):
            s = group[g]
            if SF[s, NEWPACE] != -1.0:
                continue
            row = int(SF[s, ROW])
            for k in range(int(PF[row, LO]), int(BF[row, BHI])):
                if BF[k, BSHARE] > 0.0 and LF[int(BF[k, BLINK]), SEEN] != 0.0:
                    SF[s, NEWPACE] = -2.0  # frozen in this round
                    frozen[n] = g
                    n += 1
                    break
        return n
    for link in sat:
        p = int(LF[link, POS])
        for j in range(start[p], start[p + 1]):
            s = group[listed[j]]
            if SF[s, NEWPACE] == -1.0:
                SF[s, NEWPACE] = -2.0
                frozen[n] = listed[j]
                n += 1
    frozen[:n].sort()  # the group's order, as the full scan meets them
    return n


@jit
def _by_link(SF: F64, PF: F64, BF: F64, LF: F64, group: I64, used: I64) -> tuple[I64, I64]:  # noqa: PLR0917 -- flat arrays
    """Per link of ``used`` (at its ``POS``, written here), the members of ``group`` with a share on it,
    as positions in ``group`` in its order: the link at ``i`` holds ``listed[start[i]:start[i + 1]]``."""
    for i in range(used.size):
        LF[used[i], POS] = i
    start = np.zeros(used.size + 1, dtype=np.int64)
    for s in group:
        row = int(SF[s, ROW])
        for k in range(int(PF[row, LO]), int(BF[row, BHI])):
            if BF[k, BSHARE] > 0.0:
                start[int(LF[int(BF[k, BLINK]), POS]) + 1] += 1
    for i in range(used.size):
        start[i + 1] += start[i]
    fill = start[:-1].copy()
    listed = np.empty(start[used.size], dtype=np.int64)
    for g in range(group.size):
        row = int(SF[group[g], ROW])
        for k in range(int(PF[row, LO]), int(BF[row, BHI])):
            if BF[k, BSHARE] > 0.0:
                i = int(LF[int(BF[k, BLINK]), POS])
                listed[fill[i]] = g
                fill[i] += 1
    return start, listed


@jit
def _settle_frozen(SF: F64, PF: F64, BF: F64, LF: F64, group: I64, frozen: I64, water: float) -> None:  # noqa: PLR0917 -- flat arrays
    """The members frozen in this round (``frozen``: positions in ``group``, in its order) get ``water``;
    their shares are summed per link into ``SUB`` (taken off the demand at once, as the reference's
    matrix product does)."""
    for g in frozen:
        s = group[g]
        row = int(SF[s, ROW])
        for k in range(int(PF[row, LO]), int(BF[row, BHI])):
            LF[int(BF[k, BLINK]), SUB] += BF[k, BSHARE]
        SF[s, NEWPACE] = water


@jit
def _rise(LF: F64, links: I64, tightest: int, best: float, sat: I64) -> tuple[float, int]:
    """Raise the water by ``best`` (the rise link ``tightest`` sets) over ``links``; flag the saturated
    ones (``SEEN`` 1) and list them in ``sat``; returns the rise and how many saturated."""
    delta = max(best, 0.0)
    nsat = 0
    for i in range(links.size):
        link = links[i]
        LF[link, RES] -= delta * LF[link, DEM]
        if LF[link, RES] <= SAT_RTOL * LF[link, CAP]:
            LF[link, SEEN] = 1.0
            sat[nsat] = link
            nsat += 1
    if nsat == 0:  # rounding: the tightest link is the one that set delta
        LF[tightest, SEEN] = 1.0
        sat[0] = tightest
        nsat = 1
    return delta, nsat


@jit
def _keep(LF: F64, links: I64, n: int) -> tuple[int, int, float]:
    """Take the frozen shares (``SUB``) off the first ``n`` links' demand, empty the saturated ones,
    keep those still loaded (more than ``1e-12``) at the front of ``links``; returns how many, and the
    position and rise of the tightest (of equal ones the lowest link, as in ascending order)."""
    m, k, best = 0, 0, np.inf
    for i in range(n):
        link = links[i]
        LF[link, DEM] -= LF[link, SUB]
        LF[link, SUB] = 0.0
        if LF[link, SEEN] != 0.0:
            LF[link, RES] = 0.0
            LF[link, DEM] = 0.0
            LF[link, SEEN] = 0.0
        elif LF[link, DEM] > 1e-12:
            links[m] = link
            head = LF[link, RES] / LF[link, DEM]
            if head < best or (head == best and link < links[k]):
                k, best = m, head
            m += 1
    return m, k, best


@jit
def _unfrozen(SF: F64, PF: F64, BF: F64, group: I64) -> int:
    """Mark the members of ``group`` that load a link unfrozen (``NEWPACE`` -1; the others carry nothing,
    0); returns how many."""
    left = 0
    for s in group:
        row = int(SF[s, ROW])
        on = False
        for k in range(int(PF[row, LO]), int(BF[row, BHI])):
            on = on or BF[k, BSHARE] > 0.0
        SF[s, NEWPACE] = -1.0 if on else 0.0
        left += 1 if on else 0
    return left


@jit
def _fill(SF: F64, PF: F64, BF: F64, LF: F64, group: I64, used: I64, listed: bool) -> None:  # noqa: PLR0917 -- flat arrays
    """Progressive filling of one class (``commsched.sim.reference.maxmin._fill``): paces into ``NEWPACE``.

    Each round raises the water to the next saturation (the tightest link; ties and rounding as the
    reference), flags the saturated links, freezes the members loading one, takes their shares off the
    demand and keeps the links still loaded. ``listed``: freeze through per-link member lists
    (:func:`_by_link`), else by scanning the unfrozen members."""
    for link in used:
        LF[link, DEM] = 0.0
        LF[link, SUB] = 0.0
    left = _unfrozen(SF, PF, BF, group)
    _add_demand(SF, PF, BF, LF, group, DEM)
    lists = _by_link(SF, PF, BF, LF, group, used) if listed else (used[:0], used[:0])
    links = used[LF[used, DEM] > 0.0]  # a copy: the links kept are written over it
    sat = np.empty(links.size, dtype=np.int64)
    frozen = np.empty(group.size, dtype=np.int64)
    n, water = links.size, 0.0
    k, best = 0, np.inf
    for i in range(n):  # the first round's tightest
        head = LF[links[i], RES] / LF[links[i], DEM]
        if head < best or (head == best and links[i] < links[k]):
            k, best = i, head
    while n > 0 and left > 0:
        delta, nsat = _rise(LF, links[:n], links[k], best, sat)
        water += delta
        nf = _freeze(SF, PF, BF, LF, group, sat[:nsat], lists, frozen)
        left -= nf
        _settle_frozen(SF, PF, BF, LF, group, frozen[:nf], water)
        n, k, best = _keep(LF, links, n)
    for s in group:
        SF[s, NEWPACE] = max(SF[s, NEWPACE], 0.0)


@jit
def solve(SF: F64, PF: F64, BF: F64, LF: F64, members: I64, listed_from: int = LISTED_FROM) -> None:  # noqa: PLR0917 -- flat arrays
    """The paces of the active ``members`` of a component into ``NEWPACE``, class by class (a class of
    ``listed_from`` members or more frozen through per-link member lists: the same paces)."""
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
            _fill(SF, PF, BF, LF, group, used, group.size >= listed_from)


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
