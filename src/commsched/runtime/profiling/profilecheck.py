"""A profile measured from traffic, checked before it is posted: its period, bytes and compute against
each other and against the bytes counted over its window (:func:`check_profile`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from commsched.runtime.profiling.iterations import silent_runs_s

__all__ = ["PROFILE_TOL", "check_profile"]

#: a profile's bytes per iteration times its iterations within this fraction of the window's bytes
PROFILE_TOL = 0.10


def check_profile(
    prof: Mapping[str, Any], *, rx: np.ndarray[Any, Any], tx: np.ndarray[Any, Any], sample_s: float
) -> str | None:
    """Why the profile ``prof`` of a window cannot be posted, or ``None`` when its parts hold together.

    ``rx``, ``tx``: the window's bytes received and sent per bin (``tx`` is what ``prof`` counts).
    The checks: period, bytes per iteration and compute positive; compute and busy time within the
    period (:data:`PROFILE_TOL`); the bytes per iteration times the iterations the period puts in the
    window within one iteration's bytes, or :data:`PROFILE_TOL`, of the bytes counted there; and no
    two silent runs longer than the period (an iteration silent for longer than it lasts: the
    period counts the bursts of an iteration, not its iterations); and iterations not found by
    counting bursts alone (``method`` ``"bursts"``: a stall inside an iteration's communication
    looks like a compute gap to a burst counter; a window whose iterations the bytes do not tell
    apart waits for a later one).

    Examples
    --------
    >>> one = np.r_[np.zeros(60), np.full(10, 1e4), np.zeros(10), np.full(10, 1e4)]   # 0.9 s per iteration
    >>> rx = np.tile(one, 10)
    >>> good = {"period_s": 0.9, "bytes_per_iteration": 2e5, "compute_s": 0.7, "busy_s": 0.2}
    >>> check_profile(good, rx=rx, tx=rx, sample_s=0.01) is None
    True
    >>> bad = {"period_s": 0.45, "bytes_per_iteration": 1e5, "compute_s": 0.35, "busy_s": 0.1}
    >>> check_profile(bad, rx=rx, tx=rx, sample_s=0.01)
    '9 silent runs longer than the period 0.45 s (up to 0.6 s): the period is not an iteration'
    """
    period, per = float(prof["period_s"]), float(prof["bytes_per_iteration"])
    compute, busy = float(prof["compute_s"]), float(prof.get("busy_s", 0.0))
    if not (period > 0 and per > 0 and compute > 0):
        return (
            f"period {period:g} s, bytes per iteration {per:g}, compute {compute:g} s: each must be positive"
        )
    if compute + busy > period * (1 + PROFILE_TOL) + sample_s:
        return f"compute {compute:g} s and busy {busy:g} s exceed the period {period:g} s"
    window = tx.size * sample_s
    total = float(tx.sum())
    expect = per * window / period
    if abs(expect - total) > max(PROFILE_TOL * total, per):
        return (
            f"{per:.4g} B per iteration over {window / period:.3g} iterations make {expect:.4g} B,"
            f" the window counted {total:.4g} B"
        )
    long = [g for g in silent_runs_s(rx, tx, sample_s=sample_s) if g > period * (1 + PROFILE_TOL)]
    if len(long) >= 2:
        return (
            f"{len(long)} silent runs longer than the period {period:g} s (up to {max(long):.3g} s):"
            " the period is not an iteration"
        )
    if prof.get("method") == "bursts":
        return (
            "iterations found by counting bursts, not told apart by whole iterations' bytes: under"
            " contention a burst may be a part of an iteration"
        )
    return None
