"""The profile a command job's twin gets: the one its agent posted from the profiling window, and
the compute read from all of the job's hosts' traffic over that window.

The estimate reads the traffic alone (the hosts' byte counters), never the program's log: the log
is what the twin is checked against (:mod:`commsched.experiments.testbed_run.command_report`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

import numpy as np

from commsched.runtime.enforce.loops import profile_body
from commsched.runtime.launch.jobs import CommandJob
from commsched.runtime.profiling.compute import compute_of
from commsched.runtime.profiling.traffic import outside_profile

__all__ = ["compute_over", "twin_profile"]

#: how :func:`compute_of` names the compute of a clean window (split by bytes, not stalled)
CLEAN = "silence between iterations"
#: two clean windows whose bytes per iteration differ by this factor or more did not both find
#: whole iterations (a split by bytes read two as one, or a part of one as one)
MERGED = 1.5
#: the hosts' periods of a clean measuring window agree within this fraction
AGREE = 0.1
#: of two clean windows that disagree, one whose job moved this many times the bytes per second
#: of the other's is the one it was not held back in, whose split holds
FASTER = 1.2


def _rate(tr: Mapping[str, Any], start: float, end: float) -> float:
    """Bytes per second a host received in ``[start, end]`` (its counter is cumulative)."""
    t, rx = np.asarray(tr["t"], dtype=float), np.asarray(tr["rx_data_bytes"], dtype=float)
    i, j = np.searchsorted(t, [start, end], side="right") - 1
    return float(rx[max(j, 0)] - rx[max(i, 0)]) / max(end - start, 1e-9)


def _agree(a: float, b: float) -> bool:
    """Whether two readings of a job's bytes per iteration agree (within :data:`MERGED` times)."""
    return max(a, b) < MERGED * min(a, b)


def _host_profile(tr: Mapping[str, Any], start: float, end: float) -> dict[str, Any]:
    prof = outside_profile(
        tr["t"], tr["rx_data_bytes"], tr["data_bytes"], sample_s=float(tr["sample_s"]), start=start, end=end
    )
    return prof.to_json()


def _first_host(
    job: CommandJob, tr: Mapping[str, Any], decision: Mapping[str, Any], start: float, end: float
) -> tuple[dict[str, Any], str]:
    """The profile body from the first host's counter over ``[start, end]``, and how its iterations
    were found (``bytes``, ``bursts``...); raises where the traffic has no period."""
    prof = _host_profile(tr, start, end)
    # the host's share of the job's bytes: the decided connections that leave it (its agent's view)
    gpus = {str(r.gpu) for r in job.ranks if r.host == job.ranks[0].host}
    view = {"connections": [c for c in decision.get("connections", []) if str(c["src"]) in gpus]}
    return profile_body(prof, view, job.id), str(prof["method"])


def compute_over(job: CommandJob, data: Mapping[str, Any], start: float, end: float) -> dict[str, Any]:
    """:func:`compute_of` over the hosts of ``job`` with a period in ``[start, end]`` ({} without)."""
    per_host: dict[str, dict[str, Any]] = {}
    for host, d in data.items():
        try:
            per_host[host] = _host_profile(d["traffic"], start, end)
        except Exception:  # a host without a period in that window does not vote
            continue
    if not per_host:
        return {}
    several = {h for h, n in Counter(r.host for r in job.ranks).items() if n > 1}
    return compute_of(per_host, several=several)


def _measuring(
    job: CommandJob, data: Mapping[str, Any], decision: Mapping[str, Any], start: float, end: float
) -> dict[str, Any] | None:
    """The profile of the measuring window ``[start, end]`` where it is *clean* (the voting hosts'
    iterations told apart by their bytes, not stalled, and every host's period that of the first
    host, whose counter gives the bytes), else ``None``."""
    try:
        body, method = _first_host(job, data[job.ranks[0].host]["traffic"], decision, start, end)
    except Exception:
        return None
    body.update(compute_over(job, data, start, end))
    if method != "bytes" or body.get("compute_from") != CLEAN:
        return None
    for host in job.hosts:  # a host that read several iterations as one, or a part as one
        try:
            period = float(_host_profile(data[host]["traffic"], start, end)["period_s"])
        except Exception:
            return None
        if abs(period / float(body["period_s"]) - 1) > AGREE:
            return None
    return {**body, "from": "measuring window, computed at the end"}


def twin_profile(
    job: CommandJob,
    data: Mapping[str, Any],
    decision: Mapping[str, Any],
    *,
    end: float,
    until: float | None = None,
) -> dict[str, Any]:
    """The profile the twin gets: the one posted from the profiling window (else the same computed
    here), with the compute from the job's hosts over that window.

    Where that window is not clean (the agent kept its profile back, or its compute comes from a
    stalled window or from no split by bytes: the job was starved there, or moved between classes)
    and the measuring window (``end`` to ``until``) is, the measuring window's profile: the program's
    bytes and compute are the same in both, and the traffic tells them best where the iterations
    stand apart. Where both are clean but their bytes per iteration differ by :data:`MERGED` times
    or more, one of the splits read two iterations as one or a part of one as one: the window the
    job moved :data:`FASTER` times the bytes per second in is the one it was not held back in, and
    otherwise the measuring window, the longer one (the profiling windows of two runs read a ring
    of three at 4.22 MB for its 2.1 MB of gradients, twin 65 % slow, and a ring of two at 1.39 MB
    for 4.72 MB, which made the job below it 51 % fast; the measuring window of a starved ring read
    1.05 MB for 2.1 MB). Else, where the profiling window shows no split by bytes, the two windows
    together (a twin built from a burst counter's period would simulate a part of an iteration as
    the job).

    The compute (:func:`commsched.runtime.profiling.compute.compute_of`): where a host's iterations
    were told apart by their bytes, the longest of such hosts' median silences between two
    iterations (a host whose peer starts sending before its own compute ends sees a shorter one); a
    host that runs several ranks sends from one and receives on another, whose iterations end apart:
    there the silence of its received bytes alone, at most the shortest silent time per iteration.
    In a stalled window (the silent time per iteration over ``STALLED`` times those silences) the
    shortest of the hosts' silences of both directions, which waits only lengthen; where no host's
    split held, the shortest silent time per iteration.
    ``end``: the end of the profiling window.
    """
    first = data[job.ranks[0].host]
    tr = first["traffic"]
    report = first["report"].get("profile") or {}
    posted, window, rejected = report.get("posted"), report.get("window"), report.get("rejected")
    method, p_end = "bytes", end
    start = next((t for t, d in zip(tr["t"], tr["rx_data_bytes"], strict=True) if d > 0), 0.0)
    try:
        if posted and window:
            body, start, end = {**posted, "from": "posted by the agent"}, float(window[0]), float(window[1])
        else:
            body, method = _first_host(job, tr, decision, start, end)
            body["from"] = "profiling window, computed at the end"
    except Exception as exc:  # too little traffic for a period
        body = {"error": f"{type(exc).__name__}: {exc}"}
    if "error" not in body and body.get("overlap", 1.0) > 0:
        body.update(compute_over(job, data, start, end))
    if until is not None and until > p_end:
        body = _with_measuring(job, data, decision, body, method=method, times=(start, p_end, until))
    return {**body, "rejected_by_agent": rejected} if rejected else body


def _measured_compute(body: dict[str, Any], later: dict[str, Any] | None) -> dict[str, Any]:
    """``body`` with the compute (and the pauses beside it) of the clean measuring window ``later``:
    the program's own time per iteration where the twin is compared with it. In the profiling window
    every job is in the top class and a host's silence may hold waits for a peer's data behind
    another job's in one FIFO (run c of docs/real-jobs.md: 0.49 s read for a 0.2 s conv net, the
    measuring window 0.2 s), and on a machine short of CPU the program's own work between two
    all-reduces grows from one window to the next (run d's static: a 0.05 s ring read 0.105-0.11 s in
    the profiling window and 0.17-0.18 s in the measuring one, a conv net 0.23-0.24 and 0.30-0.31 s;
    twins 9 % and 15 % fast)."""
    if later is None:
        return body
    keys = ("compute_s", "compute_by_host", "compute_from", "pause_s")
    return {**body, **{k: later[k] for k in keys if k in later}, "compute_window": "measuring"}


def _with_measuring(
    job: CommandJob,
    data: Mapping[str, Any],
    decision: Mapping[str, Any],
    body: dict[str, Any],
    *,
    method: str,
    times: tuple[float, float, float],
) -> dict[str, Any]:
    """The profiling window's ``body`` (its iterations found by ``method``), the measuring window's
    profile instead, or both windows' (``times``: start, end of the profiling window, end of the
    measuring window), as :func:`twin_profile` says."""
    start, p_end, until = times
    clean = "error" not in body and method != "bursts" and body.get("compute_from", CLEAN) == CLEAN
    later = _measuring(job, data, decision, p_end, until)
    if clean and (later is None or _agree(float(body["comm_bytes"]), float(later["comm_bytes"]))):
        return _measured_compute(body, later)
    tr = data[job.ranks[0].host]["traffic"]
    if clean and later is not None and _rate(tr, start, p_end) > FASTER * _rate(tr, p_end, until):
        return _measured_compute(body, later)  # the measuring window is the one the job was held back in
    if later is not None:
        why = "no split by bytes" if method == "bursts" else body.get("error") or body.get("compute_from")
        if clean:
            why = f"{float(body['comm_bytes']):.0f} bytes per iteration, not one iteration's"
        return {**later, "profiling_window": f"not used: {why}"}
    if method != "bursts":
        return body
    try:  # the profiling window had a period: both windows together have one
        both, _ = _first_host(job, data[job.ranks[0].host]["traffic"], decision, start, until)
    except Exception as exc:
        return {"error": f"{type(exc).__name__}: {exc}"}
    both["from"] = "profiling and measuring windows, computed at the end"
    if both.get("overlap", 1.0) > 0:
        both.update(compute_over(job, data, start, until))
    return both
