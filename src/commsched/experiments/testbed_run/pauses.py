"""The gaps between the synchronous steps of a command job's collective, for its twin.

What a step costs on the testbed beyond its bytes was measured (docs/testbed-run.md, "What the
testbed does that the model does not"): the fabric's share of it is about nothing (a ring step of
256 KiB on four shaped hops took its bytes at the links' goodput within 0.2 ms, once the token
buckets were held to one segment); the store-and-forward fill that the segment size would give
(:func:`fill_latency_s`, 4.2 ms a step at 16 KiB on ``crux_testbed``'s uplinks) does not occur,
because a hop that is not the bottleneck passes a segment with the tokens it holds. What stays is
the program's: a step waits for gloo's reduction, the interpreter and the next bucket, a few
milliseconds each time, during which the job's links carry none of its bytes. The twin runs that
time per iteration (``pause_s``) as time the job holds no link (:mod:`.twin`).

Per job, from its own traffic: the silent time per iteration beyond its compute
(:func:`commsched.runtime.profiling.compute.compute_of`, the gaps a 10 ms bin shows), or, where no
job of its class or above shares one of its links (the decision's classes, the traced paths), the
time its communication lasts beyond its received bytes at its own pace in the measuring window
(:func:`commsched.runtime.profiling.stepgaps.step_gaps_s`, the least over its hosts), whichever is
longer. A job that shares a link with another of its class or above also waits for that one, which
the fluid model adds itself: there only the silent bins count. So does a job with several ranks on
a host: one rank's traffic goes on while the other computes, and the host's active time holds that
skew (a four-rank job alone in class 0 read 0.08 s per iteration, its twin 8.5 % slow).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from commsched.runtime.launch.jobs import CommandJob
from commsched.runtime.profiling.stepgaps import step_gaps_s

__all__ = ["fill_latency_s", "job_pause", "shares_at_or_above"]


def fill_latency_s(hop_rates_bps: Sequence[float], segment_bytes: int) -> float:
    """The store-and-forward model of a step's extra time: the last segment's serialisation at every
    hop beyond the bottleneck's (``sum(s / r_k) - s / min(r_k)``, ``s`` in bits). Measured, it does
    not occur on the testbed (module docstring); kept as the prediction the measurement refuted.

    Examples
    --------
    Host 125 Mbit/s, two uplinks of 62.5 Mbit/s, host 125 Mbit/s, 16 KiB segments:

    >>> round(fill_latency_s([125e6, 62.5e6, 62.5e6, 125e6], 16384) * 1e3, 3)
    4.194
    """
    if not hop_rates_bps:
        return 0.0
    bits = segment_bytes * 8  # bytes -> bits
    return sum(bits / r for r in hop_rates_bps) - bits / min(hop_rates_bps)


def shares_at_or_above(
    job: str, paths: Mapping[tuple[str, str, str], Sequence[int]], classes: Mapping[str, int]
) -> bool:
    """Whether another job of ``job``'s class or a higher one (a smaller number) uses one of its links.

    >>> p = {("a", "x", "y"): (1, 2), ("b", "u", "v"): (2, 3), ("c", "u", "w"): (1,)}
    >>> shares_at_or_above("a", p, {"a": 0, "b": 1, "c": 0}), shares_at_or_above("b", p, {"a": 0, "b": 1})
    (True, True)
    >>> shares_at_or_above("b", {k: v for k, v in p.items() if k[0] != "a"}, {"b": 1, "c": 0})
    False
    """
    mine = {int(x) for (j, _, _), links in paths.items() if j == job for x in links}
    top = classes.get(job, 0)
    return any(
        j != job and classes.get(j, 0) <= top and mine.intersection(int(x) for x in links)
        for (j, _, _), links in paths.items()
    )


def job_pause(
    job: CommandJob,
    data: Mapping[str, Any],
    profile: Mapping[str, Any],
    *,
    alone: bool,
    window: tuple[float, float],
) -> tuple[float, str]:
    """The pause per iteration the twin of ``job`` gets and where it came from (module docstring).

    ``profile``: the twin's profile (its ``pause_s``, ``period_s``); ``alone``: no job of its class or
    above shares its links; ``window``: the measuring window (wall clock).
    """
    silent = float(profile.get("pause_s", 0.0) or 0.0)
    period = float(profile.get("period_s", 0.0) or 0.0)
    if float(profile.get("overlap", 1.0)) <= 0:
        return 0.0, "none: communication behind compute"
    if not alone or period <= 0:
        return silent, "silent bins"
    if len(job.hosts) < len(job.ranks):  # a host of several ranks: its ranks' skew is no step gap
        return silent, "silent bins (several ranks per host)"
    gaps = [
        step_gaps_s(data[h]["traffic"], start=window[0], end=window[1], period_s=period) for h in job.hosts
    ]
    known = [g for g in gaps if g is not None]
    if not known or min(known) <= silent:
        return silent, "silent bins"
    return min(known), "communication beyond its bytes at its pace, measuring window"
