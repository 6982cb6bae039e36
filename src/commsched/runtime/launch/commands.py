"""Command jobs through the host agents: start each rank's process (``POST /v1/jobs/{job}/processes``,
inside the job's cgroup), watch it iterate, post the traffic-measured profiles, stop and collect it.

What a command job is and how its ranks are laid out (torchrun's environment, ``processes: per_host``
or ``per_gpu``) is :mod:`commsched.experiments.testbed_run.commands`; docs/real-jobs.md.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any, TypedDict

from commsched.errors import TestbedError
from commsched.runtime.enforce.reports import ConnectionRowJSON, ReportJSON, TrafficJSON
from commsched.runtime.http.localclient import LocalClient
from commsched.runtime.launch.jobs import CommandJob

__all__ = [
    "CommandHostJSON",
    "collect",
    "finished",
    "post_profiles",
    "progress_line",
    "start_commands",
    "status",
    "stop_commands",
    "wait_iterating",
]


class CommandHostJSON(TypedDict):
    """What one host's agent measured of a command job (:func:`collect`)."""

    traffic: TrafficJSON
    connections: list[ConnectionRowJSON]
    report: ReportJSON


def _client(sock: Path, token: str) -> LocalClient:
    return LocalClient(f"unix:{sock}", token=token, timeout=30.0)


def _ok(r: Any, what: str) -> Any:
    if r.status_code >= 300:
        raise TestbedError(f"{what}: {r.status_code} {r.text[:200]}")
    return r.json()


def start_commands(jobs: list[CommandJob], agents: dict[str, Path], token: str, work: Path) -> None:
    """Start every rank of every command job through its host's agent."""
    for job in jobs:
        for rank in job.ranks:
            with _client(agents[rank.host], token) as c:
                env = dict(_ok(c.get(f"/v1/jobs/{job.id}/env"), f"environment of {job.id}")["env"])
                env.update(job.env(rank))
                body = {
                    "argv": list(job.argv),
                    "env": env,
                    "cwd": str(work),
                    "log": str(work / f"{job.id}-rank{rank.rank}.out"),
                }
                _ok(c.post(f"/v1/jobs/{job.id}/processes", json=body), f"start of {job.id} rank {rank.rank}")


def _stderr_tail(work: Path, job: str, rank: int) -> str:
    try:
        lines = (work / f"{job}-rank{rank}.out.err").read_text(errors="replace").strip().splitlines()
    except OSError:
        return "(no output)"
    return lines[-1][:200] if lines else "(no output)"


def status(job: CommandJob, agents: dict[str, Path], token: str) -> dict[str, ReportJSON]:
    """Per host of ``job``: the agent's report (processes, bytes sent, profile)."""
    out: dict[str, ReportJSON] = {}
    for host in job.hosts:
        with _client(agents[host], token) as c:
            out[host] = _ok(c.get(f"/v1/jobs/{job.id}"), f"report of {job.id} on {host}")
    return out


def _iterating(job: CommandJob, agents: dict[str, Path], token: str, work: Path) -> bool:
    """Whether ``job`` is in its training loop: two lines of its own log, or regular bursts (at least
    three spacings) in its last ten seconds of traffic."""
    from commsched.runtime.profiling.traffic import steady, window_iterations

    if job.iteration_log is not None:
        import re

        rx = re.compile(job.iteration_log)
        try:
            text = (work / f"{job.id}-rank0.out").read_text(errors="replace")
        except OSError:
            return False
        return sum(1 for line in text.splitlines() if rx.search(line)) >= 2
    with _client(agents[job.ranks[0].host], token) as c:  # the last ten seconds
        tr = _ok(c.get(f"/v1/jobs/{job.id}/traffic", params={"since": time.time() - 10}), "traffic")
    t, cum, dt = tr["t"], tr["rx_data_bytes"], float(tr["sample_s"])
    first = next((x for x, d in zip(t, cum, strict=True) if d > cum[0]), None) if t else None
    if first is None or t[-1] - first < 1.0:
        return False
    try:
        return steady(window_iterations(t, cum, tr["data_bytes"], sample_s=dt, start=first, end=t[-1]))
    except Exception:  # no period in the traffic yet
        return False


def wait_iterating(
    jobs: list[CommandJob], agents: dict[str, Path], token: str, work: Path, timeout_s: float
) -> None:
    """Wait until every command job is in its training loop (its start-up done), or a rank fails."""
    deadline = time.monotonic() + timeout_s
    waiting = {j.id for j in jobs}
    while waiting:
        for job in [j for j in jobs if j.id in waiting]:
            for host, body in status(job, agents, token).items():
                for p in body["processes"]:
                    if p["returncode"] not in (None, 0):
                        rank = next(r.rank for r in job.ranks if r.host == host)
                        tail = _stderr_tail(work, job.id, rank)
                        raise TestbedError(
                            f"command job {job.id} exited with {p['returncode']} on {host}: {tail}"
                        )
            if _iterating(job, agents, token, work):
                waiting.discard(job.id)
        if waiting and time.monotonic() > deadline:
            raise TestbedError(
                f"command jobs not iterating after {timeout_s:.0f} s: {', '.join(sorted(waiting))}"
            )
        time.sleep(0.5)


def finished(job: CommandJob, agents: dict[str, Path], token: str) -> bool:
    """Whether every rank of ``job`` has exited."""
    rep = status(job, agents, token)
    procs = [p for body in rep.values() for p in body["processes"]]
    return bool(procs) and all(p["returncode"] is not None for p in procs)


def progress_line(job: CommandJob, agents: dict[str, Path], token: str, work: Path) -> str:
    """How far ``job`` is: iterations in its own log (or its recent period), bytes sent, profile."""
    import re

    from commsched.runtime.profiling.traffic import window_iterations

    rep = status(job, agents, token)
    sent = sum(body["data_bytes"] for body in rep.values()) / 1e6
    done = ""
    if job.iteration_log is not None:
        rx = re.compile(job.iteration_log)
        try:
            text = (work / f"{job.id}-rank0.out").read_text(errors="replace")
            done = f"{sum(1 for line in text.splitlines() if rx.search(line))} iterations (its log), "
        except OSError:
            pass
    else:  # the last ten seconds of traffic: its period now
        with _client(agents[job.ranks[0].host], token) as c:
            tr = _ok(c.get(f"/v1/jobs/{job.id}/traffic", params={"since": time.time() - 10}), "traffic")
        if len(tr["t"]) > 2:
            dt = float(tr["sample_s"])
            try:
                st = window_iterations(
                    tr["t"],
                    tr["rx_data_bytes"],
                    tr["data_bytes"],
                    sample_s=dt,
                    start=tr["t"][0],
                    end=tr["t"][-1],
                )
                done = f"iterating every {st.mean_s:.3f} s, "
            except Exception:  # no period in the last seconds
                done = "no period yet, "
    prof = rep[job.ranks[0].host].get("profile")
    posted = ", profile posted" if prof and "posted" in prof else ""
    return f"{done}{sent:.1f} MB sent{posted}"


def post_profiles(
    jobs: list[CommandJob], agents: dict[str, Path], token: str, start: float, end: float
) -> dict[str, dict[str, Any]]:
    """Ask the agent of every job's first rank to profile ``[start, end)`` and post it to the daemon.

    Per job the agent's answer (:class:`~commsched.runtime.enforce.host.JobProfileJSON`) or its
    refusal (``{"error": ...}``), as JSON."""
    out: dict[str, dict[str, Any]] = {}
    for job in jobs:
        with _client(agents[job.ranks[0].host], token) as c:
            r = c.post(f"/v1/jobs/{job.id}/profile", json={"start": start, "end": end})
            out[job.id] = r.json() if r.status_code < 300 else {"error": r.json().get("error", r.text[:200])}
    return out


def stop_commands(jobs: list[CommandJob], agents: dict[str, Path], token: str) -> None:
    """Stop what is still running (SIGTERM, then SIGKILL after 3 s), on every host of every job."""
    for job in jobs:
        for host in job.hosts:
            try:
                with _client(agents[host], token) as c:
                    c.delete(f"/v1/jobs/{job.id}/processes")
            except Exception:  # an agent already gone: its processes go with the testbed
                pass


def collect(job: CommandJob, agents: dict[str, Path], token: str) -> dict[str, CommandHostJSON]:
    """What the agents measured of ``job``: per host its traffic, connections and report."""
    out: dict[str, CommandHostJSON] = {}
    for host in job.hosts:
        with _client(agents[host], token) as c:
            out[host] = {
                "traffic": _ok(c.get(f"/v1/jobs/{job.id}/traffic"), f"traffic of {job.id}"),
                "connections": _ok(c.get(f"/v1/jobs/{job.id}/connections"), f"connections of {job.id}")[
                    "connections"
                ],
                "report": _ok(c.get(f"/v1/jobs/{job.id}"), f"report of {job.id}"),
            }
    return out
