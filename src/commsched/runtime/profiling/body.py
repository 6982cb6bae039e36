"""The one builder of the daemon's profile body (``PUT /v1/jobs/{id}/profile``).

A job's profile reaches the daemon from inside the job (:mod:`commsched.runtime.jobside.profilepost`: the
compute it reports, the bytes its transport sent, the period) or from outside it (the agent's counters,
:mod:`commsched.runtime.profiling.traffic`); both end here, in :func:`profile_body`, so that the body has
one shape: ``compute_s`` (``W_j``, seconds of compute per iteration, at least 1 us), ``comm_bytes``
(``t_j``, bytes the job synchronises per iteration), ``period_s`` (the iteration period) and, where it
was measured, ``overlap``.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from commsched.runtime.protocol.control import HostView

__all__ = ["MeasuredProfile", "from_host", "host_profile_body", "profile_body"]

#: the least compute time posted (a job whose traffic never pauses still computes)
MIN_COMPUTE_S = 1e-6


@dataclass(frozen=True, slots=True, kw_only=True)
class MeasuredProfile:
    """What was measured of a job, in the job's units: seconds and bytes per iteration."""

    compute_s: float
    comm_bytes: float
    period_s: float
    overlap: float | None = None


def profile_body(m: MeasuredProfile) -> dict[str, float]:
    """The JSON body of ``PUT /v1/jobs/{id}/profile``.

    Raises
    ------
    ValueError
        A negative or non-finite number (a measurement gone wrong is not posted).

    Examples
    --------
    >>> profile_body(MeasuredProfile(compute_s=0.3, comm_bytes=2e6, period_s=0.4, overlap=1.0))
    {'compute_s': 0.3, 'comm_bytes': 2000000.0, 'period_s': 0.4, 'overlap': 1.0}
    >>> profile_body(MeasuredProfile(compute_s=0.0, comm_bytes=1.0, period_s=0.1))
    {'compute_s': 1e-06, 'comm_bytes': 1.0, 'period_s': 0.1}
    """
    values = [m.compute_s, m.comm_bytes, m.period_s, *([] if m.overlap is None else [m.overlap])]
    if any(not math.isfinite(v) or v < 0 for v in values):
        raise ValueError(f"a negative or non-finite measurement: {m}")
    body = {
        "compute_s": max(float(m.compute_s), MIN_COMPUTE_S),
        "comm_bytes": float(m.comm_bytes),
        "period_s": float(m.period_s),
    }
    if m.overlap is not None:
        body["overlap"] = float(m.overlap)
    return body


def host_share(view: HostView | Mapping[str, Any], job: str) -> float:
    """The share of ``job``'s bytes per iteration that the host of ``view`` carries: the sum of the
    ``share`` of its decided connections leaving it (0 where the decision gives none). ``view`` is a
    typed :class:`~commsched.runtime.protocol.control.HostView` (the agent's) or its JSON form (a
    decision's connections cut by hand, as a replay does)."""
    if isinstance(view, HostView):
        return sum(c.share or 0.0 for c in view.connections if c.job == job)
    return sum(float(c.get("share", 0.0)) for c in view.get("connections", []) if c["job"] == job)


def from_host(prof: Mapping[str, Any], view: HostView | Mapping[str, Any], job: str) -> MeasuredProfile:
    """A job's profile from one host's measured traffic profile (``bytes_per_iteration`` the host
    carried): the host carries the share of the job's bytes its decided connections have (``share``,
    from the decision), so the job's bytes per iteration are the host's over that share.

    Examples
    --------
    >>> view = {"connections": [{"job": "a", "share": 1.5}]}
    >>> from_host({"compute_s": 0.3, "bytes_per_iteration": 3e6, "period_s": 0.4}, view, "a").comm_bytes
    2000000.0
    """
    share = host_share(view, job)
    per = float(prof["bytes_per_iteration"])
    return MeasuredProfile(
        compute_s=float(prof["compute_s"]),
        comm_bytes=per / share if share > 0 else per,
        period_s=float(prof["period_s"]),
        overlap=float(prof.get("overlap", 1.0)),
    )


def host_profile_body(
    prof: Mapping[str, Any], view: HostView | Mapping[str, Any], job: str
) -> dict[str, float]:
    """``PUT /v1/jobs/{job}/profile`` from one host's measured profile: :func:`profile_body` of
    :func:`from_host` (the host's share of the job's bytes as :func:`host_share` takes it).

    Examples
    --------
    >>> view = {"connections": [{"job": "a", "share": 1.5}]}
    >>> host_profile_body({"compute_s": 0.3, "bytes_per_iteration": 3e6, "period_s": 0.4}, view, "a")
    {'compute_s': 0.3, 'comm_bytes': 2000000.0, 'period_s': 0.4, 'overlap': 1.0}
    """
    return profile_body(from_host(prof, view, job))
