"""Job processes an agent starts inside a job's cgroup, with their output kept and time-stamped.

The process enters the cgroup before its program runs: a shell writes its own PID to the cgroup's
``cgroup.procs`` and then ``exec``\\ s the program, so every socket the program ever opens belongs to
the job. Standard output goes, through a reader process of its own (:mod:`.stamp`, which outlives
the agent), to ``LOG`` as written and, one JSON line per output line with the wall-clock time it
arrived, to ``LOG.lines.jsonl`` (the program's own log of its iterations, timed from outside);
standard error goes to ``LOG.err``.
"""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

from typing_extensions import TypedDict  # pydantic reads these on Python 3.11 (the agent's answers)

__all__ = ["JobProcess", "ProcessJSON", "ProcessSpec"]

_ENTER = 'echo $$ > "$0" && exec "$@"'


@dataclass(frozen=True, slots=True, kw_only=True)
class ProcessSpec:
    """What to run for a job: the program, its extra environment, where its output goes."""

    argv: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    cwd: str | None = None
    log: str | None = None


class ProcessJSON(TypedDict):
    """:meth:`JobProcess.to_json`: a started process, its exit code once it exited, its output lines."""

    pid: int
    argv: list[str]
    started: float
    returncode: int | None
    lines: int
    log: str | None


class JobProcess:
    """One started process of a job (its own session, so it is stopped with its children)."""

    def __init__(self, spec: ProcessSpec, *, cgroup_procs: Path, base_env: Mapping[str, str]) -> None:
        self.spec = spec
        log = Path(spec.log) if spec.log else None
        err: IO[bytes] | int = subprocess.DEVNULL
        if log is not None:
            log.parent.mkdir(parents=True, exist_ok=True)
            err = open(log.with_name(log.name + ".err"), "wb")  # noqa: SIM115 - closed below
        try:
            self.proc = subprocess.Popen(
                ["/bin/sh", "-c", _ENTER, str(cgroup_procs), *spec.argv],
                stdout=subprocess.PIPE if log is not None else subprocess.DEVNULL,
                stderr=err,
                stdin=subprocess.DEVNULL,
                env={**base_env, **spec.env},
                cwd=spec.cwd,
                start_new_session=True,
            )
        finally:
            if not isinstance(err, int):
                err.close()
        self.pid = self.proc.pid
        self.started = time.time()
        self._stamp: subprocess.Popen[bytes] | None = None
        if log is not None and self.proc.stdout is not None:
            # the job's output goes to a reader of its own, which outlives this agent
            self._stamp = subprocess.Popen(
                [sys.executable, "-m", "commsched.runtime.enforce.processes.stamp", str(log)],
                stdin=self.proc.stdout,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
                start_new_session=True,
            )
            self.proc.stdout.close()

    @property
    def lines(self) -> int:
        """Lines of output so far."""
        try:
            with open(str(self.spec.log), "rb") as fh:
                return sum(1 for _ in fh)
        except (OSError, TypeError):
            return 0

    def returncode(self) -> int | None:
        return self.proc.poll()

    def stop(self, grace_s: float = 3.0) -> int | None:
        """SIGTERM the process group, SIGKILL after ``grace_s``; its exit code."""
        if self.proc.poll() is None:
            with contextlib.suppress(ProcessLookupError):
                os.killpg(self.pid, signal.SIGTERM)
            try:
                self.proc.wait(timeout=grace_s)
            except subprocess.TimeoutExpired:
                with contextlib.suppress(ProcessLookupError):
                    os.killpg(self.pid, signal.SIGKILL)
                self.proc.wait(timeout=5.0)
        if self._stamp is not None:
            try:
                self._stamp.wait(timeout=5.0)  # its input ended with the job
            except subprocess.TimeoutExpired:
                self._stamp.kill()
                self._stamp.wait(timeout=5.0)
        return self.proc.returncode

    def to_json(self) -> ProcessJSON:
        return {
            "pid": self.pid,
            "argv": list(self.spec.argv),
            "started": self.started,
            "returncode": self.proc.poll(),
            "lines": self.lines,
            "log": self.spec.log,
        }


def parse_argv(value: Any, where: str) -> tuple[str, ...]:
    """A command as a non-empty list of strings (what a scenario's ``command:`` and the API take)."""
    from commsched.errors import InputError

    if not isinstance(value, Sequence) or isinstance(value, str) or not value:
        raise InputError("not a command", where=where, expected="a non-empty list of strings")
    if not all(isinstance(x, str) and x for x in value):
        raise InputError(
            "every argument must be a non-empty string", where=where, expected="[PROGRAM, ARG...]"
        )
    return tuple(value)
