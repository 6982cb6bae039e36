"""The JSON shapes of the control protocol's records (:mod:`commsched.runtime.protocol.control`), as
their ``to_json`` methods write them."""

from __future__ import annotations

from typing import TypedDict

__all__ = ["CauseJSON", "JobDecisionJSON", "LinkLoadJSON", "PortAnswerJSON"]


class CauseJSON(TypedDict):
    """:meth:`Cause.to_json`."""

    kind: str
    job: str | None
    detail: str


#: :meth:`JobDecision.to_json` (``class`` is a keyword, hence the functional form)
JobDecisionJSON = TypedDict(
    "JobDecisionJSON",
    {
        "rank": int | None,
        "class": int,
        "dscp": int,
        "tos": int,
        "profiling": bool,
        "gpus": list[str],
        "hosts": list[str],
        "intensity": float | None,
        "k": float | None,
        "compute_s": float,
        "comm_bytes": float,
    },
)


class LinkLoadJSON(TypedDict):
    """:meth:`LinkLoad.to_json`."""

    link: int
    bytes_per_iter: float
    jobs: list[str]
    src: str
    dst: str
    capacity_bps: float


#: :meth:`PortAnswer.to_json`
PortAnswerJSON = TypedDict(
    "PortAnswerJSON",
    {
        "api": int,
        "version": int | None,
        "job": str,
        "src_rank": int,
        "dst_rank": int,
        "class": int,
        "dscp": int,
        "tos": int,
        "src_port": int | None,
        "path": list[str] | None,
        "links": list[int] | None,
        "source": str,
        "stale": bool,
    },
)
