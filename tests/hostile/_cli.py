"""Running the command line in-process on hostile input and checking the one-line error contract."""

from __future__ import annotations

import resource
import time
from dataclasses import dataclass

from typer.testing import CliRunner

from commsched.cli.app import app

#: every hostile case must end within this many seconds
TIME_LIMIT_S = 10.0
#: and stay under this much memory (what the test process's resident size grew by, at its peak, while
#: the command ran: the suite's own imports and earlier tests already hold several hundred MB)
MEMORY_LIMIT_BYTES = 1 << 30


@dataclass(frozen=True, slots=True, kw_only=True)
class Outcome:
    exit_code: int
    stdout: str
    stderr: str
    seconds: float
    memory_bytes: int  # peak resident size while it ran, less the resident size before it


def _reset_peak() -> None:
    """Reset this process's peak resident size to its current one (Linux: ``clear_refs`` 5), so that the
    peak read after a command is the command's, not that of an earlier test of the same process."""
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
    except OSError:  # not Linux: the lifetime peak stands
        pass


def run(args: list[str]) -> Outcome:
    """Run ``commsched ARGS`` in this process (no start-up cost), time it and measure its memory."""
    _reset_peak()
    before = _status_bytes("VmRSS")
    t0 = time.perf_counter()
    res = CliRunner().invoke(app, args)
    seconds = time.perf_counter() - t0
    if res.exception is not None and not isinstance(res.exception, SystemExit):
        raise AssertionError(f"{args}: uncaught {type(res.exception).__name__}: {res.exception}")
    grew = peak_rss_bytes() - (before or 0)
    return Outcome(
        exit_code=res.exit_code, stdout=res.stdout, stderr=res.stderr, seconds=seconds, memory_bytes=grew
    )


def _status_bytes(key: str) -> int | None:
    """A ``/proc/self/status`` size (``VmRSS``, ``VmHWM``) in bytes, ``None`` where there is none."""
    try:
        with open("/proc/self/status") as f:
            kb = next((line.split()[1] for line in f if line.startswith(f"{key}:")), None)
    except OSError:
        kb = None
    return int(kb) * 1024 if kb is not None else None


def peak_rss_bytes() -> int:
    """Peak resident memory of this process since the last command started (``VmHWM``), else over its
    lifetime (Linux reports kilobytes)."""
    hwm = _status_bytes("VmHWM")
    return hwm if hwm is not None else resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024


def assert_user_error(args: list[str], fragment: str = "") -> str:
    """``commsched ARGS`` ends in exit 2 with one ``error:`` line and no traceback, in time and memory.

    Returns the error line.
    """
    out = run(args)
    lines = out.stderr.strip().splitlines()
    assert out.exit_code == 2, (args, out.exit_code, out.stderr, out.stdout[-500:])
    assert len(lines) == 1, (args, out.stderr)
    line = lines[0]
    assert line.startswith("error: "), (args, line)
    assert "Traceback" not in out.stderr + out.stdout, args
    assert "internal error" not in line, line
    assert fragment in line, (args, fragment, line)
    assert out.seconds < TIME_LIMIT_S, (args, out.seconds)
    assert out.memory_bytes < MEMORY_LIMIT_BYTES, (args, out.memory_bytes)
    return line
