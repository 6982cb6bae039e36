"""The run of one policy while its jobs work: progress, profiles asked for, link counters, results.

:func:`wait_run` waits for the run's end (or every job's exit), printing a progress line per job
every 5 s, asking the command jobs' agents for their profiles at the end of their profiling share
(:data:`.settings.RunOptions.command_profile_share`), and reading every link's counters at the start and end
of the measuring window; :func:`collect_outputs` reads the library job processes' results.
"""

from __future__ import annotations

import json
import time
from collections import defaultdict
from pathlib import Path
from typing import Any

from commsched.errors import TestbedError
from commsched.runtime.launch import commands as cmd
from commsched.runtime.launch.jobs import CommandJob, JobLayout
from commsched.runtime.launch.procs import Processes
from commsched.runtime.launch.settings import RunSettings
from commsched.testbed import Testbed

__all__ = ["collect_outputs", "wait_run"]


def _post_profiles(
    commands: list[CommandJob],
    agents: dict[str, Path],
    token: str,
    st: RunSettings,
    window: tuple[float, float],
) -> None:
    """Ask the command jobs' agents for their profiles over ``window`` (start, end) and say what came."""
    for jid, body in cmd.post_profiles(commands, agents, token, window[0], window[1]).items():
        got = body.get("measured")
        st.options.say(
            f"  {jid}: profile posted: period {got['period_s']:.3f} s, "
            f"compute {got['compute_s']:.3f} s, {got['bytes_per_iteration'] / 1e6:.2f} MB/iteration"
            if got and "rejected" not in body
            else f"  {jid}: no profile from its traffic: {body.get('rejected') or body.get('error')}"
        )


def _say_progress(
    names: list[str],
    commands: list[CommandJob],
    *,
    agents: dict[str, Path],
    token: str,
    st: RunSettings,
    work: Path,
) -> None:
    for n in names:
        done = work / f"{n.removeprefix('job-')}.progress"
        count = done.read_text() if done.exists() else "0"
        st.options.say(f"  {n.removeprefix('job-')}: {count} iterations")
    for job in commands:
        st.options.say(f"  {job.id}: {cmd.progress_line(job, agents, token, work)}")


def wait_run(
    procs: Processes,
    names: list[str],
    commands: list[CommandJob],
    *,
    agents: dict[str, Path],
    token: str,
    st: RunSettings,
    end_at: float,
    tb: Testbed,
) -> tuple[dict[str, float], dict[int, int]]:
    """Wait until the run's end or every job's exit, with a progress line per job every 5 s.

    Returns when each command job's last rank exited by itself (wall clock), and, when there are
    command jobs, the bytes every link sent in the measuring window (its counters).
    """
    from commsched.testbed.counters import delta, link_bytes

    ended: dict[str, float] = {}
    last = polled = time.monotonic()
    work = procs.directory()
    start = end_at - st.options.profiling_window_s - st.options.window_s
    share = st.options.command_profile_share
    profile_at = (
        start + share * st.options.profiling_window_s if commands and st.options.profile_share else None
    )
    window_at: float | None = start + st.options.profiling_window_s if commands else None
    before: dict[Any, int] = {}
    while time.time() < end_at + 1.0:
        if window_at is not None and time.time() >= window_at:
            before, window_at = link_bytes(tb.layout), None
        if profile_at is not None and time.time() >= profile_at:
            _post_profiles(commands, agents, token, st, (start, profile_at))
            profile_at = None
        lib_done = all(procs.procs[n].poll() is not None for n in names)
        if time.monotonic() - polled >= 2.0:
            polled = time.monotonic()
            for job in commands:
                if job.id not in ended and cmd.finished(job, agents, token):
                    ended[job.id] = time.time()
        if lib_done and len(ended) == len(commands):
            break
        if st.options.progress is not None and time.monotonic() - last >= 5.0:
            last = time.monotonic()
            _say_progress(names, commands, agents=agents, token=token, st=st, work=work)
        time.sleep(0.5)
    counted = {int(k): int(v) for k, v in delta(link_bytes(tb.layout), before).items()} if before else {}
    return ended, counted


def collect_outputs(
    specs: list[tuple[JobLayout, int, str]], work: Path, codes: dict[str, int | None], procs: Processes
) -> dict[str, list[dict[str, Any]]]:
    """The result records of the library job processes (an error names the first failure)."""
    outputs: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for job, k, _host in specs:
        path = work / f"{job.id}-{k}.json"
        if not path.exists():
            raise TestbedError(
                f"job {job.id} host {k} gave no result (exit {codes[f'job-{job.id}-{k}']}): "
                f"{procs.tail(f'job-{job.id}-{k}')}"
            )
        res = json.loads(path.read_text())
        if res["errors"]:
            raise TestbedError(f"job {job.id} host {k}: {res['errors'][0]}")
        outputs[job.id].append(res)
    return outputs
