"""The profile a command job's twin gets: the one its agent posted from the profiling window, and
the compute read from all of the job's hosts' traffic over that window.

The estimate reads the traffic alone (the hosts' byte counters), never the program's log: the log
is what the twin is checked against (:mod:`commsched.experiments.testbed_run.command_report`).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from typing import Any

from commsched.runtime.enforce.loops import profile_body
from commsched.runtime.launch.jobs import CommandJob
from commsched.runtime.profiling.compute import compute_of
from commsched.runtime.profiling.traffic import outside_profile

__all__ = ["twin_profile"]


def _host_profile(tr: Mapping[str, Any], start: float, end: float) -> dict[str, Any]:
    prof = outside_profile(
        tr["t"], tr["rx_data_bytes"], tr["data_bytes"], sample_s=float(tr["sample_s"]), start=start, end=end
    )
    return prof.to_json()


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

    Where the agent posted none (it keeps back a profile whose iterations the bytes do not tell
    apart) and the profiling window computed here shows no split by bytes either, the window runs on
    to ``until`` (the end of the measuring window): a twin built from a burst counter's period would
    simulate a part of an iteration as the job.

    Where a host's iterations were told apart by their bytes, the compute is the longest of such
    hosts' median silences between two iterations (a host whose peer starts sending before its own
    compute ends sees a shorter one; a host whose split failed does not vote: in a starved window
    its stalled bursts look like iterations); a host that runs several ranks sends from one and
    receives on another, whose iterations end apart: there the silence of its received bytes alone
    (both together: short by that skew). The silences inside an iteration's communication are
    stalls (a peer's data queued behind another job's), which the fluid model adds back. In a
    stalled window (the job starved by higher classes: the silent time per iteration of every such
    host over ``STALLED`` times those silences, :mod:`commsched.runtime.profiling.compute`) a host's
    silence also holds its waits for a stalled peer's data, which only lengthen it: there the
    shortest of the hosts' silences of both directions. Where no host's split held, a host's silent
    time per iteration is the program's compute plus its waits for the others, and the host that
    waited least tells the compute best. ``end``: the end of the profiling window.
    """
    first = data[job.ranks[0].host]
    posted = (first["report"].get("profile") or {}).get("posted")
    window = (first["report"].get("profile") or {}).get("window")
    rejected = (first["report"].get("profile") or {}).get("rejected")
    if posted and window:
        body, start, end = {**posted, "from": "posted by the agent"}, float(window[0]), float(window[1])
    else:
        tr = first["traffic"]
        start = next((t for t, d in zip(tr["t"], tr["rx_data_bytes"], strict=True) if d > 0), 0.0)
        try:
            prof = _host_profile(tr, start, end)
            if prof["method"] == "bursts" and until is not None and until > end:
                prof, end = _host_profile(tr, start, until), until
        except Exception as exc:  # too little traffic for a period
            return {"error": f"{type(exc).__name__}: {exc}"}
        # the host's share of the job's bytes: the decided connections that leave it (its agent's view)
        gpus = {str(r.gpu) for r in job.ranks if r.host == job.ranks[0].host}
        view = {"connections": [c for c in decision.get("connections", []) if str(c["src"]) in gpus]}
        where = "profiling and measuring windows" if end == until else "profiling window"
        body = {**profile_body(prof, view, job.id), "from": f"{where}, computed at the end"}
        if rejected:
            body["rejected_by_agent"] = rejected
    per_host: dict[str, dict[str, Any]] = {}
    for host, d in data.items():
        try:
            per_host[host] = _host_profile(d["traffic"], start, end)
        except Exception:  # a host without a period in that window does not vote
            continue
    if per_host and body.get("overlap", 1.0) > 0:
        several = {h for h, n in Counter(r.host for r in job.ranks).items() if n > 1}
        body.update(compute_of(per_host, several=several))
    return body
