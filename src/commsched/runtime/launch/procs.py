"""The processes of a run: daemon, host agents, job processes, a PS experiment's roles; all stopped in
``close``.

Every process is started by :class:`Processes` and remembered by its pid; ``close`` sends SIGTERM to
each, waits briefly, then SIGKILLs the ones still there (their whole process group: ``ip netns exec``
runs the Python process as its child). Nothing is stopped by name. A process's stderr goes to its log
file under the log directory (without one: to this process's stderr); its stdout, when captured, is
read line by line (:meth:`Processes.first_line`, :meth:`Processes.announced`) or whole at its exit
(:meth:`Processes.output`).
"""

from __future__ import annotations

import contextlib
import os
import select
import signal
import subprocess
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from commsched.errors import TestbedError

__all__ = ["Processes", "cli_argv"]


def cli_argv(*args: str) -> list[str]:
    """``commsched ARGS`` with this interpreter (no dependency on the PATH)."""
    return [sys.executable, "-c", "from commsched.cli.app import main; main()", *args]


class Processes:
    """Child processes of a run, each with a log file under ``logdir`` (``None``: stderr inherited)."""

    def __init__(self, logdir: Path | None) -> None:
        self.logdir = logdir
        self.procs: dict[str, subprocess.Popen[bytes]] = {}
        #: stdout read past the line a caller asked for, per process
        self._rest: dict[str, bytes] = {}

    def directory(self) -> Path:
        """The log directory (a testbed run's work directory), which a testbed run's processes have."""
        if self.logdir is None:
            raise TestbedError("these processes log to this process's stderr, not under a directory")
        return self.logdir

    def start(
        self,
        name: str,
        argv: Sequence[str],
        *,
        capture_stdout: bool = False,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start ``argv`` as ``name`` (its own session), with ``env`` (default: this process's)."""
        log = None if self.logdir is None else open(self.logdir / f"{name}.log", "wb")  # noqa: SIM115
        try:
            proc = subprocess.Popen(
                list(argv),
                stdout=subprocess.PIPE if capture_stdout else log,
                stderr=log,
                stdin=subprocess.DEVNULL,
                start_new_session=True,
                env=env,
            )
        finally:
            if log is not None:
                log.close()
        self.procs[name] = proc
        return proc

    def _line(self, name: str, timeout_s: float, prefix: str) -> str | None:
        """The first stdout line of ``name`` that starts with ``prefix`` (``None``: none in time)."""
        proc = self.procs[name]
        assert proc.stdout is not None
        deadline = time.monotonic() + timeout_s
        buf = self._rest.pop(name, b"")
        while True:
            while b"\n" in buf:
                line, buf = buf.split(b"\n", 1)
                text = line.decode(errors="replace")
                if text.startswith(prefix):
                    self._rest[name] = buf
                    return text
            if time.monotonic() >= deadline:
                break
            ready, _, _ = select.select([proc.stdout], [], [], 0.2)
            if ready:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:
                    break
                buf += chunk
            elif proc.poll() is not None:
                break
        self._rest[name] = buf
        return None

    def announced(self, name: str, timeout_s: float) -> str:
        """The address from the ``listening on ADDR`` line a daemon or agent prints on start."""
        line = self._line(name, timeout_s, "listening on ")
        if line is None:
            raise TestbedError(f"{name} did not start: {self.tail(name)}")
        return line.removeprefix("listening on ").strip()

    def first_line(self, name: str, timeout_s: float) -> str | None:
        """The first line ``name`` prints on stdout, stripped (``None``: none within ``timeout_s``)."""
        line = self._line(name, timeout_s, "")
        return None if line is None else line.strip()

    def output(self, name: str, timeout_s: float) -> str | None:
        """The rest of ``name``'s stdout, once it exits (``None``: still running at the timeout)."""
        proc = self.procs[name]
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            return None
        return (self._rest.pop(name, b"") + (out or b"")).decode(errors="replace")

    def tail(self, name: str) -> str:
        if self.logdir is None:
            return "(its stderr is this process's)"
        try:
            lines = (self.logdir / f"{name}.log").read_text(errors="replace").strip().splitlines()
        except OSError:
            return "(no log)"
        return lines[-1] if lines else "(empty log)"

    def wait_all(self, names: Sequence[str], timeout_s: float) -> dict[str, int | None]:
        """Wait for ``names`` to exit; their return codes (``None``: still running at the timeout)."""
        deadline = time.monotonic() + timeout_s
        out: dict[str, int | None] = {}
        for n in names:
            try:
                out[n] = self.procs[n].wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                out[n] = None
        return out

    def stop(self, names: Sequence[str], grace_s: float = 3.0) -> None:
        """SIGTERM, then SIGKILL after ``grace_s``, each process group of ``names``."""
        live = [n for n in names if self.procs[n].poll() is None]
        for n in live:
            _signal_group(self.procs[n], signal.SIGTERM)
        deadline = time.monotonic() + grace_s
        for n in live:
            try:
                self.procs[n].wait(timeout=max(0.01, deadline - time.monotonic()))
            except subprocess.TimeoutExpired:
                _signal_group(self.procs[n], signal.SIGKILL)
                self.procs[n].wait(timeout=5.0)
        for n in names:
            p = self.procs[n]
            if p.stdout is not None:
                p.stdout.close()

    def close(self) -> None:
        """Stop every process (job processes first, the daemon last)."""
        order = sorted(self.procs, key=lambda n: (n.startswith("agent"), n == "daemon"))
        self.stop(order)


def _signal_group(proc: subprocess.Popen[Any], sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(proc.pid, sig)  # the group this process leads (start_new_session)
