"""A job's compute per iteration read from its hosts' silences (traffic alone, never its log).

From outside the program the compute is a silence: a rank sends nothing between the end of one
iteration's all-reduce and the start of the next one's. Each host's profile
(:func:`commsched.runtime.profiling.traffic.outside_profile`) gives three readings of it:

* ``compute_s``, the *silent time per iteration* (period minus busy time): the compute, the program's
  pauses inside its communication, and its waits for peers whose data a higher class holds back;
* ``gap_s``, the median *silence between iterations* in both directions: the compute alone where the
  iterations were told apart by their bytes (a peer that starts sending before this host's compute
  ends shortens it);
* ``rx_gap_s``, the same silence of the received bytes alone: for a host that runs several of the
  job's ranks, which sends from one and receives on another whose iterations end apart (both
  directions together are short by that skew).

The difference of the first two, on a host whose iterations were told apart by their bytes, is the
time it sat silent *inside* its communication: the gaps between the synchronous steps of its ring
and between its buckets, where a step waits for the program (gloo's reduction, the interpreter, the
next bucket) and its links carry none of its bytes. ``pause_s`` is the least of those over the
job's hosts (the host that waited least), in a window that is not stalled; in a stalled one the
gaps are the higher classes' holding it back, which the fluid model adds itself, and none is given.

A window is *stalled* when the job was starved there: its silent time per iteration is over
:data:`STALLED` times its silence between iterations. A host's silences then also hold its waits for a
stalled peer's data, which only lengthen them: the shortest of them tells the compute best.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import Any

__all__ = ["STALLED", "compute_of", "stalled"]

#: a window whose silent time per iteration exceeds the silence between its iterations by this factor
#: is stalled: the job waited for its peers' data there (on the profiling windows kept from eleven
#: testbed runs of three shapes: 1.1-1.25 where the job was not starved, 1.6 and more where it was)
STALLED = 1.5


def stalled(silent_s: float, between_s: float) -> bool:
    """Whether a window whose silent time per iteration is ``silent_s`` and whose silence between
    iterations is ``between_s`` is stalled.

    >>> stalled(0.21, 0.18), stalled(0.98, 0.22)
    (False, True)
    """
    return silent_s > STALLED * between_s


def compute_of(per_host: Mapping[str, Mapping[str, Any]], *, several: Collection[str] = ()) -> dict[str, Any]:
    """The compute from the profiles of the job's hosts over one window (``several``: the hosts that
    run more than one of the job's ranks).

    Hosts whose iterations were told apart by their bytes (``method`` ``"bytes"``) vote with their
    silence between iterations (received bytes alone on a host of several ranks), the longest
    winning; with hosts of several ranks, at most the shortest silent time per iteration: a silence
    of received bytes is the sending host's compute plus the skew between its ranks' ends, which
    contention lengthens (the waiting host of a four-rank job read 0.27-0.30 s for the program's
    0.2 s where the other's silent time per iteration was 0.204-0.211 s). In a stalled window, the
    shortest of their silences of both directions. Without
    such a host, the shortest silent time per iteration (the host that waited least). Returns
    ``compute_by_host``, ``compute_s``, ``compute_from`` (which reading it is) and, for a window that
    is not stalled, ``pause_s``: the least of the split hosts' silent time per iteration beyond that
    compute (the gaps between the steps of its collective, module docstring).

    >>> one = {"method": "bytes", "compute_s": 0.2, "gap_s": 0.18, "rx_gap_s": 0.18}
    >>> clean = compute_of({"h1": one, "h2": {**one, "gap_s": 0.19}})
    >>> clean["compute_s"], round(clean["pause_s"], 9)
    (0.19, 0.01)
    >>> starved = {"h1": {**one, "compute_s": 0.98, "gap_s": 0.22}, "h2": {**one, "compute_s": 0.93}}
    >>> compute_of(starved)["compute_s"], compute_of(starved)["compute_from"]
    (0.18, 'silence between iterations, stalled window')
    """
    split = {h: p for h, p in per_host.items() if p["method"] == "bytes"}
    silent = {h: float(p["compute_s"]) for h, p in per_host.items()}
    if not split:
        return {
            "compute_by_host": silent,
            "compute_s": min(silent.values()),
            "compute_from": "silent time per iteration",
        }
    between = {h: float((h in several and p.get("rx_gap_s")) or p["gap_s"]) for h, p in split.items()}
    if not stalled(min(silent[h] for h in split), max(between.values())):  # a burst is no iteration
        reading = max(between.values())
        if any(h in several for h in split):  # received bytes' silences: lengthened by the senders' skew
            reading = min(reading, *(silent[h] for h in split))
        return {
            "compute_by_host": between,
            "compute_s": reading,
            "compute_from": "silence between iterations",
            "pause_s": max(0.0, min(silent[h] for h in split) - reading),
        }
    both = {h: float(p["gap_s"]) for h, p in split.items()}
    return {
        "compute_by_host": both,
        "compute_s": min(both.values()),
        "compute_from": "silence between iterations, stalled window",
    }
