"""The files between the launcher and a job process: the spec it runs (``SPEC.json``) and the result it
writes (``spec["out"]``), as :mod:`commsched.runtime.launch.session` writes the one and
:mod:`.jobproc` the other (the keys: :mod:`.jobproc`'s docstring). A key the job process reads with a
default may be left out of a spec written by hand."""

from __future__ import annotations

from typing import Any, NotRequired

from typing_extensions import TypedDict  # subclasses PortAnswerJSON (a typing_extensions TypedDict)

from commsched.runtime.protocol.control_json import PortAnswerJSON

__all__ = [
    "AnswerRowJSON",
    "FlatJSON",
    "JobConnectionJSON",
    "JobResultJSON",
    "JobSpecJSON",
    "ProfileReportJSON",
    "ProfileSpecJSON",
]


class ProfileSpecJSON(TypedDict):
    """``spec["profile"]``: the profiler's window, where it posts, the factors to the job's units."""

    window_s: float
    min_iterations: NotRequired[int]
    daemon: NotRequired[str]  # the daemon's Unix socket (no post without it)
    token_file: NotRequired[str]
    compute_scale: NotRequired[float]
    bytes_scale: NotRequired[float]
    time_scale: NotRequired[float]


class FlatJSON(TypedDict):
    """``spec["flat"]``: one ring over every GPU of the job."""

    ranks: int
    local: list[int]  # this host's ranks of the ring
    peers: list[list[str | int]]  # every rank's [ip, port]


class JobSpecJSON(TypedDict):
    """A job process's spec."""

    job: str
    host_index: int
    hosts: int
    rails: int
    compute_s: float
    overlap: float
    rail_bytes: float  # bytes all-reduced per rail and iteration (scaled)
    listen: list[list[list[str | int]]]  # per rail: every host's [ip, port]
    ready: str
    go: str
    out: str
    flat: NotRequired[FlatJSON | None]
    agent: NotRequired[str | None]
    progress: NotRequired[str]
    refresh_s: NotRequired[float | None]
    calibration: NotRequired[int]
    timeout_s: NotRequired[float]
    go_timeout_s: NotRequired[float]
    profile: NotRequired[ProfileSpecJSON | None]


class JobConnectionJSON(TypedDict):
    """An outgoing connection of a job process, with the DSCP read back from its socket."""

    rail: int
    rank: int
    peer: int
    local: list[str | int]  # address, port
    remote: list[str | int]
    dscp: int


class AnswerRowJSON(PortAnswerJSON):
    """The agent's last answer for one connection of a rail (transport ranks ``src -> dst``)."""

    rail: int
    src: int
    dst: int


class ProfileReportJSON(TypedDict, total=False):
    """What the job's profiler measured and what posting it gave (``ProfilePoster.report``)."""

    #: the profiler's traffic profile (:meth:`commsched.runtime.profiling.profiler.Profiler.profile`)
    measured: dict[str, Any]
    fft_error: str
    period_factor: float
    period_from: str
    window_s: float
    posted: dict[str, float]
    status: int
    answer: object
    error: str


class JobResultJSON(TypedDict):
    """A job process's result: its iterations (start, end; wall clock), connections, answers, errors."""

    job: str
    host_index: int
    iterations: list[tuple[float, float]]
    connections: list[JobConnectionJSON]
    answers: list[AnswerRowJSON]
    errors: list[str]
    tcp: dict[str, int]  # TCP counters of the host namespace over the run (segments out, retransmitted)
    cpu_s: float
    profile: ProfileReportJSON | None
    step_latency_s: float | None
