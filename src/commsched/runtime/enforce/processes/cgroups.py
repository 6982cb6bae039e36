"""cgroup v2 groups for a job's processes: made, filled (started or adopted by PID), emptied, removed.

A v2 cgroup takes processes without any controller enabled, which is all the enforcement needs: the
kernel records in every socket the cgroup its creator was in, and nftables matches it
(``socket cgroupv2``). The hierarchy may be mounted alone at ``/sys/fs/cgroup`` (unified) or beside
the v1 controllers at ``/sys/fs/cgroup/unified`` (hybrid); :func:`cgroup2_root` finds it in
``/proc/self/mountinfo``. nftables resolves the path of a rule relative to ``/sys/fs/cgroup``, so the
hierarchy must be mounted under it, and the calling process must see it: ``ip netns exec`` remounts
``/sys`` and hides it; enter a namespace with ``nsenter --net=/run/netns/NAME`` instead.
"""

from __future__ import annotations

import contextlib
import os
import signal
import time
from dataclasses import dataclass
from pathlib import Path

from commsched.errors import CapabilityError, InputError

__all__ = [
    "NFT_CGROUP_BASE",
    "JobCgroup",
    "cgroup2_root",
    "descendants",
    "parse_mountinfo",
    "process_start",
    "stop_processes",
]

#: nftables resolves ``socket cgroupv2`` paths under this directory
NFT_CGROUP_BASE = Path("/sys/fs/cgroup")


def parse_mountinfo(text: str) -> list[Path]:
    """Mount points of every cgroup2 file system in a ``/proc/PID/mountinfo`` text.

    Examples
    --------
    >>> line = "35 24 0:30 / /sys/fs/cgroup/unified rw,nosuid - cgroup2 cgroup2 rw"
    >>> parse_mountinfo(line + "\\n")
    [PosixPath('/sys/fs/cgroup/unified')]
    """
    out = []
    for line in text.splitlines():
        left, sep, right = line.partition(" - ")
        fields = left.split()
        if sep and len(fields) > 4 and right.split()[:1] == ["cgroup2"]:
            out.append(Path(fields[4].replace("\\040", " ")))
    return out


def cgroup2_root(mountinfo: Path = Path("/proc/self/mountinfo")) -> Path:
    """The cgroup v2 hierarchy this process sees under ``/sys/fs/cgroup`` (else a clear error)."""
    try:
        mounts = parse_mountinfo(mountinfo.read_text())
    except OSError as exc:
        raise CapabilityError(f"cannot read {mountinfo}: {exc.strerror}", where="cgroups") from None
    under = [m for m in mounts if m == NFT_CGROUP_BASE or NFT_CGROUP_BASE in m.parents]
    if not under:
        raise CapabilityError(
            "no cgroup v2 hierarchy under /sys/fs/cgroup in this mount namespace (run in the host's mount "
            "namespace: nsenter --net=/run/netns/NAME, not ip netns exec, which remounts /sys)",
            where="cgroups",
        )
    return min(under, key=lambda p: len(p.parts))


def descendants(pid: int, proc: Path = Path("/proc")) -> list[int]:
    """``pid`` and every process below it (children first found through ``/proc/*/stat``)."""
    children: dict[int, list[int]] = {}
    for entry in proc.iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        ppid = int(stat.rpartition(")")[2].split()[1])
        children.setdefault(ppid, []).append(int(entry.name))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        out.append(p)
        todo.extend(children.get(p, []))
    return out


def process_start(pid: int, proc: Path = Path("/proc")) -> int | None:
    """When process ``pid`` started (clock ticks after boot, ``/proc/PID/stat`` field 22); ``None``
    when there is no such process, or only its exit status is left (a zombie). A PID and its start
    time name one process, even after PID reuse.
    """
    try:
        stat = (proc / str(pid) / "stat").read_text()
    except OSError:
        return None
    fields = stat.rpartition(")")[2].split()
    return None if fields[0] in ("Z", "X") else int(fields[19])


def stop_processes(procs: dict[int, int], grace_s: float = 3.0) -> list[int]:
    """SIGTERM each process ``pid`` of ``procs`` (``pid -> start``: one that has not been replaced),
    SIGKILL those still there after ``grace_s``; returns the PIDs that were signalled."""
    live = [pid for pid, start in procs.items() if process_start(pid) == start]
    for pid in live:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace_s
    while time.monotonic() < deadline and any(process_start(p) == procs[p] for p in live):
        time.sleep(0.05)
    for pid in live:
        if process_start(pid) == procs[pid]:
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.kill(pid, signal.SIGKILL)
    return live


@dataclass(frozen=True, slots=True, kw_only=True)
class JobCgroup:
    """One job's cgroup: ``path`` (absolute) at ``level`` below the hierarchy's root."""

    path: Path
    root: Path

    @property
    def level(self) -> int:
        return len(self.path.relative_to(self.root).parts)

    @property
    def nft_path(self) -> str:
        """The path as an nftables rule names it (relative to ``/sys/fs/cgroup``)."""
        return str(self.path.relative_to(NFT_CGROUP_BASE))

    def create(self) -> None:
        self.path.mkdir(parents=True, exist_ok=True)

    def exists(self) -> bool:
        return self.path.is_dir()

    def add(self, pid: int) -> None:
        """Move process ``pid`` (all its threads) into the group."""
        try:
            (self.path / "cgroup.procs").write_text(f"{pid}\n")
        except ProcessLookupError:
            raise InputError(f"no process {pid}", where="pids", expected="a running process") from None
        except OSError as exc:
            raise InputError(f"cannot move process {pid}: {exc.strerror}", where="pids") from None

    def pids(self) -> list[int]:
        try:
            return [int(x) for x in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def release(self) -> list[int]:
        """Move every process back to the hierarchy's root; returns them (the job goes on, unenforced)."""
        moved = self.pids()
        for pid in moved:
            with contextlib.suppress(OSError):
                (self.root / "cgroup.procs").write_text(f"{pid}\n")
        return moved

    def stop(self, grace_s: float = 3.0) -> list[int]:
        """SIGTERM every process in the group, SIGKILL what is left after ``grace_s``; the PIDs."""
        pids = self.pids()
        stop_processes({p: s for p in pids if (s := process_start(p)) is not None}, grace_s)
        self.kill()
        return pids

    def kill(self, timeout_s: float = 5.0) -> None:
        """SIGKILL every process in the group and wait until it is empty."""
        deadline = time.monotonic() + timeout_s
        while self.pids() and time.monotonic() < deadline:
            for pid in self.pids():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            time.sleep(0.05)

    def remove(self) -> bool:
        """Remove the (empty) group and its empty parents up to the root; ``False`` if still busy."""
        try:
            self.path.rmdir()
        except FileNotFoundError:
            pass
        except OSError:
            return False
        parent = self.path.parent
        while parent != self.root and self.root in parent.parents:
            try:
                parent.rmdir()
            except OSError:
                break
            parent = parent.parent
        return True
