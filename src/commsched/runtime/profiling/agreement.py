"""The split of a job's iterations its hosts agree on (:func:`job_split`).

Each host tells its iterations apart by their bytes (:func:`.iterations.host_splits`); the ranks
iterate together, so the job's period is the one most hosts have, and the compute after each
iteration's collective is silent on every host at once, which a stall inside one (a rank waiting
for a peer's data queued behind another job) is not.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from commsched.runtime.profiling.iterations import BYTES_KNOWN, Split, multiple_of

__all__ = ["AGREE", "BYTES_KNOWN", "PART_COVER", "SEEN", "SEEN_BINS", "job_split"]

#: hosts agree on a period within this fraction
AGREE = 0.05

#: a split is seen by a host when this share of its starts fall in (or next to) a silence of the host
SEEN = 0.8

#: bins of tolerance between one host's start of an iteration and the end of another's silence
SEEN_BINS = 3


#: a part replaces the split it divides only where its iterations span as much of the window, less this
#: (where the job's bytes per iteration are not known from elsewhere)
PART_COVER = 0.2


def _seen(s: Split, quiet: tuple[tuple[float, float], ...], tol: float) -> bool:
    """Whether the starts of ``s`` fall, :data:`SEEN` of them, in or next to the silences ``quiet``."""
    if not quiet:
        return False
    lo = np.array([a for a, _ in quiet]) - tol
    hi = np.array([b for _, b in quiet]) + tol
    t = np.asarray(s.starts)[:, None]
    return bool(np.count_nonzero(((t >= lo) & (t <= hi)).any(axis=1)) >= SEEN * len(s.starts))


def _seen_by_all(s: Split, quiet: Sequence[tuple[tuple[float, float], ...]]) -> bool:
    """Whether every host is silent at the starts of ``s``: the job's ranks compute together after
    each iteration's collective, while a stall inside it (a rank waiting for a peer's data queued
    behind another job) leaves the peer that sends it busy."""
    return all(_seen(s, q, SEEN_BINS * s.sample_s) for q in quiet)


def job_split(
    hosts: Sequence[Sequence[Split]],
    *,
    quiet: Sequence[tuple[tuple[float, float], ...]] | None = None,
    known_bytes: float | None = None,
) -> Split | None:
    """The split the job's hosts agree on.

    ``hosts``: each host's :func:`host_splits`; ``quiet``: each host's :func:`quiet_runs` (by
    default those of the hosts with a split). A period is supported by the hosts that have a split
    within :data:`AGREE` of it. The smallest bytes per iteration that more than half of the hosts
    support is the job's; where none has such a majority, the most supported, the larger bytes per
    iteration on a tie (a host that cannot tell stalls from iterations splits them, which gives
    less). Returns, of the hosts' splits of that period, the one that counts the most iterations
    (boundaries over the longest span), ``None`` when no host has one. Where a host's split is a
    part of that one (its bytes per iteration a whole fraction) whose iterations start where every
    host is silent (:func:`_seen_by_all`: the compute after each iteration's collective, on all ranks
    at once), the smallest such part is returned instead: a host whose silences vary too much to
    tell iterations apart by its bytes alone may merge two or three into one split, while a part of
    an iteration (a stall between the steps of a collective) leaves some host busy. A part must span
    the window as the split does (its ``cover`` at most :data:`PART_COVER` less): a job starved by
    higher classes stalls on all of its ranks at once between two buckets' collectives, and a host
    that splits there finds it only in stretches of the window, the rest of its bytes left unsplit.
    ``known_bytes``: the job's bytes per iteration (both directions) where known from elsewhere (the
    profiling window, at the top class): a program moves the same bytes per iteration whatever the
    network does, so of the splits a majority of hosts support, and between a split and a part of it,
    the one carrying them (within :data:`BYTES_KNOWN`) is the job's; the cover decides only where
    neither does.

    Examples
    --------
    >>> def s(mean, b):
    ...     return Split(starts=(0.0, 3 * mean), counts=(3,), silences=(1.0, 1.0), cover=1.0,
    ...                  bytes_per_iteration=b, gap_s=0.1, stalls=0, byte_error=0.0, spread=0.0)
    >>> job_split([[s(0.2, 1e5)], [s(1.0, 5e5)], [s(1.01, 5e5)]]).mean_s
    1.0
    """
    every = [(h, sp) for h, splits in enumerate(hosts) for sp in splits]
    if not every:
        return None

    def support(s: Split) -> int:
        return len({h for h, o in every if abs(o.mean_s / s.mean_s - 1) <= AGREE})

    def carries(sp: Split) -> bool:
        return known_bytes is not None and abs(sp.bytes_per_iteration / known_bytes - 1) <= BYTES_KNOWN

    majority = [sp for _, sp in every if 2 * support(sp) > len(hosts)]
    if any(carries(sp) for sp in majority):  # the program's own bytes per iteration: its iterations
        majority = [sp for sp in majority if carries(sp)]
    if majority:
        least = min(majority, key=lambda sp: sp.bytes_per_iteration)
        pick = [sp for sp in majority if abs(sp.bytes_per_iteration / least.bytes_per_iteration - 1) <= AGREE]
    else:
        top = max((sp for _, sp in every), key=lambda sp: (support(sp), sp.bytes_per_iteration))
        pick = [sp for _, sp in every if abs(sp.mean_s / top.mean_s - 1) <= AGREE]
    best = max(pick, key=lambda sp: sp.count)  # the hosts' splits of it: the one counting most
    quiet = [hs[0].quiet for hs in hosts if hs and hs[0].quiet] if quiet is None else quiet
    parts = [sp for _, sp in every if multiple_of(best, sp) and len(quiet) > 1 and _seen_by_all(sp, quiet)]
    if parts and known_bytes is not None and known_bytes > 0:
        if carries(best):
            parts = []
        elif any(carries(sp) for sp in parts):
            parts = [sp for sp in parts if carries(sp)]
        else:
            parts = [sp for sp in parts if sp.cover >= best.cover - PART_COVER]
    else:
        parts = [sp for sp in parts if sp.cover >= best.cover - PART_COVER]
    if parts:  # iterations merged by some hosts: a part of ``best`` that starts where every host is silent
        least = min(parts, key=lambda sp: sp.bytes_per_iteration)
        best = max(
            (sp for sp in parts if abs(sp.mean_s / least.mean_s - 1) <= AGREE), key=lambda sp: sp.count
        )
    return best
