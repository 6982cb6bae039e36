"""Slurm jobs' processes taken into their cgroups, with no change to the job (``agent --enforce --slurm``).

A Slurm job is registered with the daemon under its ``SLURM_JOB_ID`` (``commsched slurm prolog``,
:mod:`commsched.runtime.slurm.prolog`). Every process Slurm starts for it, the batch script, ``srun``'s
tasks and what they start (``torchrun``'s workers), carries ``SLURM_JOB_ID`` in its environment from
its first instruction. Every :data:`SCAN_S` the watch lists the host's processes, reads the
environment of each new one once (by PID and start time, so a reused PID is read again), and moves
those of a Slurm job in the host's view into the job's cgroup (:meth:`Enforcer.adopt`), where every
connection they open afterwards gets the job's mark, DSCP and paths. Slurm's own daemons
(``slurmstepd``, ``slurmd``) are left where they are, and so is anything in another network
namespace than the agent's. Slurm's cgroups are not touched (Slurm's v1 controllers on a hybrid
host; on a pure cgroup v2 host Slurm's tracking would lose the moved processes, docs/slurm.md).

A process opens its first connection well after it starts (a Python program importing torch: about a
second), so :data:`SCAN_S` of 0.2 s leaves it unmarked only if it connects within that time of its
start: such a connection is reported unenforced like any opened before its process was adopted.

The watch also beats for the job (``POST /v1/jobs/{id}/heartbeat``, every :data:`BEAT_S`) while it
has a process on this host, so a daemon with a heartbeat time-out keeps a job whose epilog has not
run, and drops one whose nodes went away.
"""

from __future__ import annotations

import contextlib
import os
import re
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from commsched.errors import InputError

__all__ = ["BEAT_S", "SCAN_S", "SlurmWatch", "slurm_job_of"]

SCAN_S = 0.2
BEAT_S = 3.0
_SLURM_ID = re.compile(r"\d+")
_SLURM_DAEMONS = frozenset({"slurmstepd", "slurmd", "slurmctld", "slurmdbd"})
_PROC = Path("/proc")


def _start_time(pid: int) -> int | None:
    try:
        stat = (_PROC / str(pid) / "stat").read_text()
    except OSError:
        return None
    return int(stat.rsplit(")", 1)[1].split()[19])


def slurm_job_of(pid: int, netns: int | None = None) -> str | None:
    """The ``SLURM_JOB_ID`` of process ``pid`` (``None``: none, a Slurm daemon, gone, another namespace).

    >>> slurm_job_of(os.getpid()) == os.environ.get("SLURM_JOB_ID")
    True
    """
    d = _PROC / str(pid)
    try:
        if (d / "comm").read_text().strip() in _SLURM_DAEMONS:
            return None
        if netns is not None and os.stat(d / "ns" / "net").st_ino != netns:
            return None
        env = (d / "environ").read_bytes()
    except OSError:
        return None
    for item in env.split(b"\0"):
        if item.startswith(b"SLURM_JOB_ID="):
            value = item[len(b"SLURM_JOB_ID=") :].decode(errors="replace")
            return value if _SLURM_ID.fullmatch(value) else None
    return None


class SlurmWatch:
    """The thread that adopts the Slurm jobs' processes of one enforcer (see the module docstring).

    ``enforcer``: what adopts (``view``, ``jobs``, ``lock``, ``adopt``); ``beat``: ``job -> None``,
    the daemon's heartbeat of a job (``None``: no heartbeat).
    """

    def __init__(self, enforcer: Any, beat: Callable[[str], Any] | None = None) -> None:
        self.e = enforcer
        self.beat = beat
        self._seen: dict[int, tuple[int, str | None]] = {}
        self._adopted: set[tuple[int, int]] = set()
        self._beaten: dict[str, float] = {}
        self._netns = os.stat("/proc/self/ns/net").st_ino
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="slurm-watch", daemon=True)
        self.errors: list[str] = []

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5.0)

    def _run(self) -> None:
        while not self._stop.wait(SCAN_S):
            try:
                self.step()
            except Exception as exc:  # the watch outlives a failed scan; the error is reported
                msg = f"slurm watch: {type(exc).__name__}: {exc}"
                if msg not in self.errors[-3:]:
                    self.errors = [*self.errors[-19:], msg]

    def scan(self) -> dict[str, list[tuple[int, int]]]:
        """Slurm job id -> (PID, start time) of its processes on this host (environments read once)."""
        found: dict[str, list[tuple[int, int]]] = {}
        alive: dict[int, tuple[int, str | None]] = {}
        me = os.getpid()
        for entry in os.scandir(_PROC):
            if not entry.name.isdigit() or int(entry.name) == me:
                continue
            pid = int(entry.name)
            start = _start_time(pid)
            if start is None:
                continue
            known = self._seen.get(pid)
            job = known[1] if known is not None and known[0] == start else slurm_job_of(pid, self._netns)
            alive[pid] = (start, job)
            if job is not None:
                found.setdefault(job, []).append((pid, start))
        self._seen = alive
        self._adopted &= {(p, s) for p, (s, _) in alive.items()}
        return found

    def step(self) -> None:
        """One scan: adopt the new processes of the view's Slurm jobs; beat for those with processes."""
        found = self.scan()
        with self.e.lock:
            decided = {j for j in self.e.view.jobs if _SLURM_ID.fullmatch(j)}
        now = time.monotonic()
        for job, procs in found.items():
            if job not in decided:
                continue
            for proc in procs:
                if proc not in self._adopted:
                    with contextlib.suppress(InputError):  # it exited since the scan
                        self.e.adopt(job, [proc[0]], children=False)
                    self._adopted.add(proc)
            if self.beat is not None and now - self._beaten.get(job, 0.0) >= BEAT_S:
                self._beaten[job] = now
                self.beat(job)
        for job in [j for j in self._beaten if j not in found]:
            del self._beaten[job]
