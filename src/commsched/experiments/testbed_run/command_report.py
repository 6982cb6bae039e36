"""What a command job did on the testbed, measured from outside the program.

* **Iteration time from traffic**: the rank's host agent samples the job's bytes out
  (:mod:`commsched.runtime.profiling.traffic`); the bursts in the measuring window give the mean
  iteration time, per host, averaged over the job's hosts.
* **The program's own log** (optional ``iteration_log`` regex whose group is a time in seconds): the
  mean spacing of the times rank 0 printed for the iterations whose lines arrived in the window.
* **The twin's profile** is the one posted from the profiling window's traffic, its compute read
  from all of the job's hosts (:mod:`commsched.experiments.testbed_run.twin_profile`).
* **Paths**: every connection of the job is traced on the routers in both directions with the
  4-tuple the wire sees (the translated source port); the flow that carried the most bytes between
  two ranks' NICs in one direction is that direction's path (what the twin uses).
"""

from __future__ import annotations

import itertools
import json
import math
import re
import statistics
from collections.abc import Mapping
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from commsched.experiments.testbed_run.pauses import job_pause, shares_at_or_above
from commsched.experiments.testbed_run.twin import MeasuredJob
from commsched.experiments.testbed_run.twin_profile import compute_over, twin_profile
from commsched.runtime.launch.jobs import CommandJob
from commsched.runtime.profiling.agreement import BYTES_KNOWN, job_split
from commsched.runtime.profiling.harmonics import harmonic_period
from commsched.runtime.profiling.iterations import host_splits, quiet_runs
from commsched.runtime.profiling.traffic import IterationStats, series, window_iterations
from commsched.testbed import Testbed
from commsched.testbed.probe import trace_tuples
from commsched.topology import NodeId

__all__ = [
    "CommandInputs",
    "agreed_iterations",
    "command_inputs",
    "command_rows",
    "harmonic_iterations",
    "job_iterations",
    "logged_iterations",
    "paths_of",
    "profiling_bytes",
    "ring_order",
    "traffic_iterations",
]


def traffic_iterations(traffic: Mapping[str, Any], *, start: float, end: float) -> IterationStats | None:
    """Iterations in ``[start, end)`` of one host's samples (``None``: no period in that window)."""
    t, dt = traffic["t"], float(traffic["sample_s"])
    if len(t) < 2 or end - start < 4 * dt:
        return None
    try:
        return window_iterations(
            t, traffic["rx_data_bytes"], traffic["data_bytes"], sample_s=dt, start=start, end=min(end, t[-1])
        )
    except Exception:  # no traffic, or no period in it
        return None


def logged_iterations(path: Path, pattern: str, *, start: float, end: float) -> dict[str, float] | None:
    """Mean spacing of the times a program printed for its iterations whose lines came in the window.

    Examples
    --------
    >>> import json, tempfile
    >>> lines = [{"t": 10.0 + i, "line": f"iteration {i} {0.5 * i:.3f}"} for i in range(6)]
    >>> p = Path(tempfile.mkdtemp()) / "log.lines.jsonl"
    >>> _ = p.write_text("".join(json.dumps(x) + "\\n" for x in lines))
    >>> logged_iterations(p, r"iteration \\d+ ([0-9.]+)", start=11.5, end=20.0)
    {'mean_s': 0.5, 'iterations': 3.0}
    """
    rx = re.compile(pattern)
    times = []
    try:
        rows = [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    except (OSError, ValueError):
        return None
    for row in rows:
        m = rx.search(str(row.get("line", "")))
        if m and start <= float(row["t"]) < end:
            times.append(float(m.group(1)))
    if len(times) < 2:
        return None
    return {"mean_s": (times[-1] - times[0]) / (len(times) - 1), "iterations": float(len(times) - 1)}


def _traced(tb: Testbed, rows: list[dict[str, Any]]) -> list[tuple[tuple[int, ...], tuple[int, ...]]]:
    nic = {ip: n for n, ip in tb.layout.nic_ip.items()}
    flows = []
    for r in rows:
        s, d = nic[r["local"][0]], nic[r["remote"][0]]
        flows += [
            (s, d, int(r["wire_sport"]), int(r["remote"][1])),
            (d, s, int(r.get("reply_sport") or r["remote"][1]), int(r["wire_sport"])),
        ]
    links = [tuple(int(x) for x in lk) for lk in trace_tuples(tb.layout, flows)]
    return [(links[2 * i], links[2 * i + 1]) for i in range(len(rows))]


def paths_of(
    tb: Testbed, job: CommandJob, data: Mapping[str, Any], decision: Mapping[str, Any]
) -> dict[str, Any]:
    """The job's connections traced both ways; per decided connection the path its bytes took.

    Returns ``{"paths": {(job, src GPU, dst GPU): links}, "connections": [...], "unpinned": [...],
    "on_decision_path": n, "reverse_on_decision_path": n, "fabric_connections": n}``.
    """
    mine = {r.ip for r in job.ranks}
    host_of_ip = {r.ip: r.host for r in job.ranks}
    rows = [
        {**row, "host": host}
        for host, d in data.items()
        for row in d["connections"]
        if row["role"] == "connecting"
        and row["remote"][0] in mine
        and host_of_ip.get(row["remote"][0]) != host
    ]
    replies = {  # the accepting side's replies may leave from a port of their own (probing oracle)
        (*row["remote"], *row["local"]): row.get("reply_sport")
        for d in data.values()
        for row in d["connections"]
        if row["role"] == "accepting"
    }
    for row in rows:
        row["reply_sport"] = replies.get((row["local"][0], row["wire_sport"], *row["remote"]))
    traced = _traced(tb, rows) if rows else []
    best: dict[tuple[str, str], tuple[int, tuple[int, ...]]] = {}  # (src ip, dst ip) -> (bytes, links)
    for row, (fwd, rev) in zip(rows, traced, strict=True):
        row["forward_taken"], row["reverse_taken"] = list(fwd), list(rev)
        s, d = row["local"][0], row["remote"][0]
        for key, nbytes, links in (
            ((s, d), row.get("bytes_out") or 0, fwd),
            ((d, s), row.get("bytes_in") or 0, rev),
        ):
            if key not in best or nbytes > best[key][0]:
                best[key] = (int(nbytes), links)
    ips = {str(r.gpu): r.ip for r in job.ranks}
    paths: dict[tuple[str, str, str], tuple[int, ...]] = {}
    for a, b in itertools.permutations(ips, 2):  # every pair of ranks: the twin's ring may differ
        hit = best.get((ips[a], ips[b]))
        if hit is not None:
            paths[(job.id, a, b)] = hit[1]
    unpinned = [
        {k: row[k] for k in ("host", "local", "remote", "wire_sport", "reason")}
        for row in rows
        if not row.get("pinned")
    ]
    on_fwd = sum(1 for r in rows if r.get("forward") is None or r["forward"] == r["forward_taken"])
    on_rev = sum(1 for r in rows if r.get("reverse") is None or r["reverse"] == r["reverse_taken"])
    return {
        "paths": paths,
        "flow_bytes": {k: v[0] for k, v in best.items()},
        "connections": rows,
        "unpinned": unpinned,
        "fabric_connections": len(rows),
        "on_decision_path": on_fwd,
        "reverse_on_decision_path": on_rev,
    }


def ring_order(job: CommandJob, flow_bytes: Mapping[tuple[str, str], int]) -> tuple[NodeId, ...]:
    """The job's GPUs in the order its ring really runs: rank order, or reversed after rank 0 when
    the bytes between hosts flow from each rank to the one before it (gloo's ring may run either
    way; the twin's ring follows the GPUs' order, so that its connections are the loaded ones).

    Examples
    --------
    >>> from commsched.runtime.launch.jobs import Rank
    >>> rk = tuple(Rank(rank=i, local_rank=0, host=f"h{i}", gpu=NodeId(f"h{i}/gpu0"), ip=f"10.0.{i}.1",
    ...                 iface="eth0") for i in range(3))
    >>> job = CommandJob(id="j", argv=("x",), ranks=rk, local_world=1, master_port=1, iteration_log=None,
    ...                  compute_s=1.0, sync_bytes=1.0, overlap=1.0, collective="ring", declared=False)
    >>> flows = {("10.0.0.1", "10.0.2.1"): 9, ("10.0.2.1", "10.0.1.1"): 9, ("10.0.1.1", "10.0.0.1"): 9}
    >>> ring_order(job, flows)
    ('h0/gpu0', 'h2/gpu0', 'h1/gpu0')
    """
    r = job.ranks
    if len(r) < 3:
        return job.gpus

    def along(step: int) -> int:
        return sum(int(flow_bytes.get((r[i].ip, r[(i + step) % len(r)].ip), 0)) for i in range(len(r)))

    if along(-1) > 1.5 * along(1):
        return (r[0].gpu, *(x.gpu for x in reversed(r[1:])))
    return job.gpus


def agreed_iterations(
    traffic: list[Mapping[str, Any]], *, start: float, end: float, known_bytes: float | None = None
) -> dict[str, float] | None:
    """Mean iteration time, count and bytes per iteration (both directions) the job's hosts agree on over
    ``[start, end)`` (:func:`commsched.runtime.profiling.agreement.job_split`, given ``known_bytes``),
    ``None`` when they show no split."""
    per_host, quiet = [], []
    for tr in traffic:
        t, dt = tr["t"], float(tr["sample_s"])
        if len(t) < 2 or min(end, t[-1]) - start < 4 * dt:
            continue
        rx = series(t, tr["rx_data_bytes"], sample_s=dt, start=start, end=min(end, t[-1]))
        tx = series(t, tr["data_bytes"], sample_s=dt, start=start, end=min(end, t[-1]))
        per_host.append(host_splits(rx, sample_s=dt, start=start, also=tx, known_bytes=known_bytes))
        quiet.append(quiet_runs(rx, sample_s=dt, start=start, also=tx))
    agreed = job_split(per_host, quiet=quiet, known_bytes=known_bytes)
    if agreed is None:
        return None
    return {"mean": agreed.mean_s, "iterations": float(agreed.count), "bytes": agreed.bytes_per_iteration}


def harmonic_iterations(
    traffic: list[Mapping[str, Any]], *, start: float, end: float, known_bytes: float
) -> dict[str, Any] | None:
    """The job's iteration over ``[start, end)`` from its hosts' byte rate at ``known_bytes`` per
    iteration, refined by the periodogram's harmonics where they agree
    (:func:`commsched.runtime.profiling.harmonics.harmonic_period`); ``None`` where nothing is found."""
    ys, dt = [], 0.0
    for tr in traffic:
        t, dt = tr["t"], float(tr["sample_s"])
        if len(t) < 2 or min(end, t[-1]) - start < 4 * dt:
            continue
        rx = series(t, tr["rx_data_bytes"], sample_s=dt, start=start, end=min(end, t[-1]))
        tx = series(t, tr["data_bytes"], sample_s=dt, start=start, end=min(end, t[-1]))
        ys.append(rx + tx)
    h = harmonic_period(ys, sample_s=dt, bytes_per_iteration=known_bytes) if ys else None
    if h is None:
        return None
    return {"mean": h.period_s, "iterations": float(int(h.count)), "method": h.method}


def job_iterations(
    traffic: list[Mapping[str, Any]], *, start: float, end: float, known_bytes: float | None
) -> tuple[dict[str, Any] | None, str | None]:
    """The iterations the report gives a job over ``[start, end)`` and how they were found.

    The split its hosts agree on (``"bytes"``), unless its bytes per iteration disagree with
    ``known_bytes`` (the profiling window's, :data:`BYTES_KNOWN`): that split is refused. Where no split
    stands and the bytes are known, the byte rate refined by the harmonics
    (:func:`harmonic_iterations`). ``(None, None)`` where neither finds the iteration (the caller falls
    back to the hosts' own estimates, which no bytes check)."""
    agreed = agreed_iterations(traffic, start=start, end=end, known_bytes=known_bytes)
    if agreed is not None and (known_bytes is None or abs(agreed["bytes"] / known_bytes - 1) <= BYTES_KNOWN):
        return agreed, "bytes"
    if known_bytes is not None and known_bytes > 0:
        found = harmonic_iterations(traffic, start=start, end=end, known_bytes=known_bytes)
        if found is not None:
            return found, str(found["method"])
    return None, None


def profiling_bytes(job: CommandJob, data: Mapping[str, Any], *, start: float, end: float) -> float | None:
    """The job's bytes per iteration (both directions, per host) that its hosts agree on over the
    profiling window ``[start, end)``, for the measuring window's split to follow; ``None`` where
    they show no split, or where the window is stalled (the job starved there: two bursts of one
    iteration read as two iterations, as a ring of three's behind a four-rank job of half its
    period did, and the measuring window's split then counted twice its iterations)."""
    known = agreed_iterations([data[h]["traffic"] for h in job.hosts], start=start, end=end)
    if known is None or "stalled" in compute_over(job, data, start, end).get("compute_from", ""):
        return None
    return float(known["bytes"])


def mean_over_hosts(stats: list[IterationStats | None]) -> dict[str, float]:
    """Mean iteration time over the hosts that showed iterations, and the smallest count."""
    ok = [s for s in stats if s is not None and s.mean_s > 0]
    if not ok:
        return {"mean": float("nan"), "iterations": 0.0}
    return {"mean": statistics.fmean(s.mean_s for s in ok), "iterations": float(min(s.count for s in ok))}


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandInputs:
    """What the report and the twin take from the command jobs of one policy's run."""

    paths: dict[tuple[str, str, str], tuple[int, ...]]
    measured: dict[str, MeasuredJob]
    profiles: dict[str, dict[str, Any]]
    traced: dict[str, dict[str, Any]]
    windows: dict[str, tuple[float, float]]  # job -> measuring window (wall clock)
    missing: dict[str, str]  # job -> why it has no twin


def command_inputs(
    tb: Testbed, commands: list[CommandJob], run: Any, *, profiling_s: float, window_s: float
) -> CommandInputs:
    """Paths, twin profiles and measuring windows of the command jobs of ``run`` (a PolicyRun)."""
    paths: dict[tuple[str, str, str], tuple[int, ...]] = {}
    measured: dict[str, MeasuredJob] = {}
    profiles, traced, windows, missing = {}, {}, {}, {}
    p_end, w_end = run.start + profiling_s, run.start + profiling_s + window_s
    for job in commands:
        data = run.commands[job.id]
        traced[job.id] = paths_of(tb, job, data, run.decision)
        paths.update(traced[job.id]["paths"])
        ended = run.ended.get(job.id)
        windows[job.id] = (p_end, min(w_end, ended) if ended is not None else w_end)
        prof = twin_profile(job, data, run.decision, end=p_end, until=windows[job.id][1])
        profiles[job.id] = prof
        bad = [k for k in ("compute_s", "comm_bytes") if not 0 <= float(prof.get(k, -1.0)) < math.inf]
        if "error" in prof or bad or float(prof["compute_s"]) <= 0:
            missing[job.id] = str(
                prof.get("error", f"profile without a usable {', '.join(bad) or 'compute_s'}")
            )
            continue
        count = None
        if ended is not None:
            whole = traffic_iterations(data[job.ranks[0].host]["traffic"], start=run.start, end=ended)
            count = max(1, whole.count) if whole is not None else None
        measured[job.id] = MeasuredJob(
            compute_s=float(prof["compute_s"]),
            sync_bytes=float(prof["comm_bytes"]),
            overlap=float(prof.get("overlap", 1.0)),
            gpus=ring_order(job, traced[job.id]["flow_bytes"]),
            iterations=count,
        )
    every = {**run.paths, **paths}
    classes = {j: int(v["class"]) for j, v in run.decision.get("jobs", {}).items() if "class" in v}
    for job in (j for j in commands if j.id in measured):  # the gaps between its steps (.pauses)
        alone = not shares_at_or_above(job.id, every, classes)
        pause, where = job_pause(
            job, run.commands[job.id], profiles[job.id], alone=alone, window=windows[job.id]
        )
        measured[job.id] = replace(measured[job.id], pause_s=pause)
        profiles[job.id] = {**profiles[job.id], "twin_pause_s": pause, "twin_pause_from": where}
    return CommandInputs(
        paths=paths, measured=measured, profiles=profiles, traced=traced, windows=windows, missing=missing
    )


def command_rows(
    commands: list[CommandJob], inputs: CommandInputs, run: Any, simulated: Mapping[str, float], work: Path
) -> dict[str, dict[str, Any]]:
    """The report's row of every command job (the library jobs' keys, and what only these have)."""
    out: dict[str, dict[str, Any]] = {}
    for job in commands:
        start, end = inputs.windows[job.id]
        data = run.commands[job.id]
        per_host = [traffic_iterations(data[h]["traffic"], start=start, end=end) for h in job.hosts]
        traffic = [data[h]["traffic"] for h in job.hosts]
        agreed, method = job_iterations(
            traffic, start=start, end=end, known_bytes=profiling_bytes(job, data, start=run.start, end=start)
        )
        m = agreed or mean_over_hosts(per_host)
        method = method or next((x.method for x in per_host if x is not None), None)
        s = simulated.get(job.id, float("nan"))
        info = run.decision.get("jobs", {}).get(job.id, {})
        logged = (
            logged_iterations(
                work / f"{job.id}-rank0.out.lines.jsonl", job.iteration_log, start=start, end=end
            )
            if job.iteration_log
            else None
        )
        tr = inputs.traced[job.id]
        out[job.id] = {
            "measured_iteration_s": m["mean"],
            "simulated_iteration_s": s,
            "gap": m["mean"] / s - 1 if s > 0 else float("nan"),
            "measured_median_iteration_s": m["mean"],
            "iterations_measured": m["iterations"],
            "logged_iteration_s": logged["mean_s"] if logged else None,
            "log_gap": m["mean"] / logged["mean_s"] - 1 if logged else None,
            "class": info.get("class"),
            "dscp": info.get("dscp"),
            "dscp_on_sockets": [],
            "dscp_marked": info.get("dscp"),
            "command": list(job.argv),
            "ranks": len(job.ranks),
            "compute_s": inputs.profiles[job.id].get("compute_s"),
            # the gaps between the synchronous steps of its collective per iteration, from its traffic
            "pause_s": inputs.measured[job.id].pause_s if job.id in inputs.measured else None,
            "scaled_bytes": inputs.profiles[job.id].get("comm_bytes"),
            "profile": inputs.profiles[job.id],
            "twin_missing": inputs.missing.get(job.id),
            # how the measured iteration was found: the hosts' agreed split by bytes; else the byte
            # rate at the profiling window's bytes per iteration ("harmonics" where the periodogram's
            # comb refined it, "byte-rate" where it did not); else the first host's own method
            # (bursts or spectrum, which nothing checks against the bytes)
            "traffic_method": method,
            "held_syns": sum(int(d["report"]["held_syns"]) for d in data.values()),
            "connections": tr["fabric_connections"],
            "unpinned": tr["unpinned"],
            "window_s": [start - run.start, end - run.start],
        }
    return out
