"""The system edge of the testbed: capabilities, ``ip``/``tc`` commands, and work inside a namespace.

Commands run through ``subprocess`` with whole batches on stdin (``ip -batch -``, ``tc -batch -``):
iproute2 is the reliable interface (pyroute2's ``route get`` ignores ports). Short reads and writes
inside a namespace (``/proc/sys`` settings, ``/proc/net/dev`` counters, sockets) switch the calling
thread into it with ``setns(2)`` and back, which costs microseconds instead of a process.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import functools
import os
import shutil
import subprocess
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

from commsched.errors import CapabilityError, TestbedError

NETNS_DIR = Path("/run/netns")
CLONE_NEWNET = 0x40000000
CAP_NET_ADMIN = 12
CAP_SYS_ADMIN = 21


def _caps() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("CapEff:"):
            return int(line.split()[1], 16)
    return 0


def missing_capability() -> str | None:
    """Why this process cannot build a testbed, or ``None`` when it can."""
    caps = _caps()
    if not (caps >> CAP_NET_ADMIN) & 1 or not (caps >> CAP_SYS_ADMIN) & 1:
        return "the testbed needs root (CAP_NET_ADMIN and CAP_SYS_ADMIN) to create network namespaces"
    for tool in ("ip", "tc"):
        if shutil.which(tool) is None:
            return f"the testbed needs the {tool!r} command (Debian package iproute2)"
    return None


def require_capability() -> None:
    """Raise :class:`CapabilityError` (one line, exit 2 on the command line) when not allowed."""
    why = missing_capability()
    if why is not None:
        raise CapabilityError(why, where="testbed")


def run(argv: Sequence[str], stdin: str = "", *, check: bool = True) -> str:
    """Run a command, feed ``stdin``, return stdout; a failure raises :class:`TestbedError`."""
    proc = subprocess.run(list(argv), input=stdin, capture_output=True, text=True, check=False)
    if check and proc.returncode != 0:
        err = (proc.stderr.strip().splitlines() or ["(no message)"])[0]
        raise TestbedError(f"{' '.join(argv[:4])} failed: {err}")
    return proc.stdout


def run_many(jobs: Sequence[tuple[Sequence[str], str]]) -> list[str]:
    """Run several batch commands at once (one process each); raise on the first failure."""
    procs = [
        (
            argv,
            subprocess.Popen(
                list(argv), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True
            ),
        )
        for argv, _ in jobs
    ]
    outs: list[str] = []
    errors: list[str] = []
    for (argv, p), (_, stdin) in zip(procs, jobs, strict=True):
        out, err = p.communicate(stdin)
        outs.append(out)
        if p.returncode != 0:
            first = (err.strip().splitlines() or ["(no message)"])[0]
            errors.append(f"{' '.join(argv[:4])} failed: {first}")
    if errors:
        raise TestbedError(errors[0])
    return outs


def exists(ns: str) -> bool:
    """Whether a named network namespace exists."""
    return (NETNS_DIR / ns).exists()


def list_namespaces() -> tuple[str, ...]:
    """Names of every named network namespace."""
    if not NETNS_DIR.is_dir():
        return ()
    return tuple(sorted(p.name for p in NETNS_DIR.iterdir()))


@functools.cache
def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6", use_errno=True)


def _setns(fd: int) -> None:
    if _libc().setns(fd, CLONE_NEWNET) != 0:
        err = ctypes.get_errno()
        raise TestbedError(f"setns failed: {os.strerror(err)}")


@contextmanager
def inside(ns: str) -> Iterator[None]:
    """Run the body with the calling thread in network namespace ``ns`` (sockets made here stay there)."""
    own = os.open("/proc/thread-self/ns/net", os.O_RDONLY)
    try:
        try:
            target = os.open(NETNS_DIR / ns, os.O_RDONLY)
        except OSError as exc:
            raise TestbedError(f"no network namespace {ns!r}: {exc.strerror}") from None
        try:
            _setns(target)
        finally:
            os.close(target)
        try:
            yield
        finally:
            _setns(own)
    finally:
        os.close(own)


def write_sysctls(ns: str, values: dict[str, str], *, optional: frozenset[str] = frozenset()) -> list[str]:
    """Write ``/proc/sys/net/...`` settings (dotted keys) inside a namespace.

    Keys in ``optional`` that this kernel does not have are skipped and returned; any other failure
    raises :class:`TestbedError`.
    """
    skipped: list[str] = []
    with inside(ns):
        for key, value in values.items():
            path = Path("/proc/sys") / key.replace(".", "/")
            if key in optional and not path.exists():
                skipped.append(key)
                continue
            try:
                path.write_text(value)
            except OSError as exc:
                raise TestbedError(f"{ns}: cannot set {key}={value}: {exc.strerror}") from None
    return skipped


def dev_counters(ns: str) -> dict[str, tuple[int, int]]:
    """Interface -> (received bytes, transmitted bytes) inside a namespace (``/proc/net/dev``)."""
    with inside(ns):
        text = Path("/proc/thread-self/net/dev").read_text()
    out: dict[str, tuple[int, int]] = {}
    for line in text.splitlines()[2:]:
        name, _, rest = line.partition(":")
        f = rest.split()
        out[name.strip()] = (int(f[0]), int(f[8]))
    return out
