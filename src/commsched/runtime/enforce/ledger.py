"""What an agent made on its host (nftables table, cgroups), written down before it makes it.

The ledger is a small JSON file, replaced atomically before every creation step, so that whatever a
killed agent left behind is listed: its next start (:meth:`Enforcer.start`) and ``commsched testbed
down`` (:func:`clean_dir`) remove exactly what is listed, and nothing else::

    {"format": 1, "agent_pid": 4242, "netns": "csr123-h0" | null, "table": "commsched_h0_4242",
     "cgroup_root": "/sys/fs/cgroup/unified", "cgroup_parent": ".../commsched-h0-4242",
     "jobs": {"big": {"mark": 1129512961, "cgroup": ".../commsched-h0-4242/big"}}}

An agent that stops cleanly keeps its ledger, its table and the cgroups of the jobs still running
(:meth:`Enforcer.close`): their processes go on with their marks and translated ports until the next
agent adopts them, or ``testbed down`` stops them.
"""

from __future__ import annotations

import contextlib
import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import NotRequired, TypedDict

from commsched.runtime.enforce.marking.nft import delete_table_script, run_nft
from commsched.runtime.enforce.processes.cgroups import JobCgroup

__all__ = [
    "Ledger",
    "LedgerJSON",
    "LedgerJobJSON",
    "PinSetJSON",
    "clean",
    "clean_dir",
    "read_ledger",
    "write_ledger",
]

LEDGER_FORMAT = 1


class PinSetJSON(TypedDict):
    """One set of source ports installed for a key: what a successor reports its connections on."""

    key: list[int | str]  # job mark, source address, destination address, destination port
    ports: list[int]
    forward: list[int] | None  # the decided links it pins, each direction
    reverse: list[int] | None
    pinned: bool
    version: int  # the decision it was made for


class LedgerJobJSON(TypedDict):
    """A job of the ledger: its connection mark, its cgroup and (since the pins came) its sets of ports."""

    mark: int
    cgroup: str
    pins: NotRequired[list[PinSetJSON]]


class LedgerJSON(TypedDict):
    """The ledger file (:meth:`Ledger.to_json`; see the module docstring)."""

    format: int
    agent_pid: int
    netns: str | None
    table: str
    cgroup_root: str
    cgroup_parent: str
    jobs: dict[str, LedgerJobJSON]


@dataclass(frozen=True, slots=True, kw_only=True)
class Ledger:
    """One agent's table, cgroup parent and job cgroups (with their connection marks)."""

    agent_pid: int
    netns: str | None
    table: str
    cgroup_root: str
    cgroup_parent: str
    jobs: dict[str, LedgerJobJSON] = field(default_factory=dict)

    def to_json(self) -> LedgerJSON:
        return {
            "format": LEDGER_FORMAT,
            "agent_pid": self.agent_pid,
            "netns": self.netns,
            "table": self.table,
            "cgroup_root": self.cgroup_root,
            "cgroup_parent": self.cgroup_parent,
            "jobs": self.jobs,
        }


def write_ledger(path: Path, ledger: Ledger) -> None:
    """Replace ``path`` with ``ledger`` atomically (temporary file, fsync, rename)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(ledger.to_json(), fh)
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_ledger(path: Path) -> Ledger | None:
    """The ledger at ``path``, or ``None`` when there is none or it cannot be read."""
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError):
        return None
    if not isinstance(data, dict) or data.get("format") != LEDGER_FORMAT:
        return None
    try:
        return Ledger(
            agent_pid=int(data["agent_pid"]),
            netns=data.get("netns"),
            table=str(data["table"]),
            cgroup_root=str(data["cgroup_root"]),
            cgroup_parent=str(data["cgroup_parent"]),
            jobs={str(k): _job(v) for k, v in dict(data.get("jobs", {})).items()},
        )
    except (KeyError, TypeError, ValueError):
        return None


def _job(v: LedgerJobJSON) -> LedgerJobJSON:
    """A job of a read ledger (a ``TypeError`` or ``KeyError`` where it is not one)."""
    out: LedgerJobJSON = {"mark": int(v["mark"]), "cgroup": str(v["cgroup"])}
    if "pins" in v:
        out["pins"] = list(v["pins"])
    return out


def _netns_exists(name: str) -> bool:
    return (Path("/run/netns") / name).exists()


def clean(ledger: Ledger, *, kill: bool, current_netns: bool = False) -> list[str]:
    """Remove what ``ledger`` lists: the table, then every job cgroup and the parent.

    ``kill``: SIGKILL the processes still in a job cgroup (``testbed down``: the testbed goes away);
    otherwise they are moved back to the hierarchy's root and go on running. ``current_netns``: the
    table is in this process's own network namespace (the agent's next start), else in
    ``ledger.netns`` (skipped when that namespace is gone, and the table with it). Returns what was
    removed, one line each.
    """
    done: list[str] = []
    if current_netns or ledger.netns is None or _netns_exists(ledger.netns):
        try:
            run_nft(delete_table_script(ledger.table), None if current_netns else ledger.netns)
            done.append(f"table inet {ledger.table}")
        except Exception:  # already gone (or no nft): nothing of it is left to remove
            pass
    root = Path(ledger.cgroup_root)
    for info in ledger.jobs.values():
        cg = JobCgroup(path=Path(info["cgroup"]), root=root)
        if not cg.exists():
            continue
        if kill:
            done += [f"process {pid}" for pid in cg.pids()]
            cg.kill()
        else:
            cg.release()
        if cg.remove():
            done.append(f"cgroup {cg.path}")
    parent = Path(ledger.cgroup_parent)
    with contextlib.suppress(OSError):
        parent.rmdir()
        done.append(f"cgroup {parent}")
    return done


def clean_dir(directory: Path, *, kill: bool = True) -> list[str]:
    """Clean every ledger in ``directory`` (a testbed's agents) and delete the ledgers."""
    done: list[str] = []
    if not directory.is_dir():
        return done
    for path in sorted(directory.glob("*.json")):
        ledger = read_ledger(path)
        if ledger is not None:
            done += clean(ledger, kill=kill)
        path.unlink(missing_ok=True)
    with contextlib.suppress(OSError):
        directory.rmdir()
    return done
