"""``runtime/`` sorted by role: every module in a package, one meaning per module name, imports downwards.

The layout and its order are written down in ``docs/runtime-layout.md``; this file holds them. Inside
``commsched.runtime`` each line may import only the lines below it, and two packages of one line never
import each other:

======  ==================================================================================
line    packages of ``commsched.runtime``
======  ==================================================================================
5       the package root (``runtime/__init__.py``: the job library's face)
4       ``launch`` (starts the daemon, agents and job processes) · ``slurm`` (Slurm's hooks)
3       ``daemon`` · ``agent`` · ``jobside`` · ``ps`` · ``torch``
2       ``enforce`` · ``transport``
1       ``profiling``
0       ``protocol`` · ``http``
======  ==================================================================================

So the agent server and the job-side client never import each other, and what crosses a socket
(``protocol``) and the local HTTP helpers (``http``) import nothing else of the runtime.

``enforce`` has rooms of its own: its core (the enforcer, its loops, pins, reports and ledger, directly
under ``enforce/``) may import each of them; ``pinning`` (path oracles, probes, the replies' ports) may
import ``marking`` (nftables, netlink counters, tracked connections, NCCL's traffic class); ``marking``
and ``processes`` (cgroups, started and adopted processes) import no other room and never the core.
"""

from __future__ import annotations

from collections import defaultdict
from pathlib import Path

import pytest

from tests.test_layers import SRC, all_modules, imports_of

RUNTIME = SRC / "commsched" / "runtime"

#: package of ``commsched.runtime`` ("" = its ``__init__``) -> line of the order above
LINE_OF: dict[str, int] = {
    "": 5,
    "launch": 4,
    "slurm": 4,
    "daemon": 3,
    "agent": 3,
    "jobside": 3,
    "ps": 3,
    "torch": 3,
    "enforce": 2,
    "transport": 2,
    "profiling": 1,
    "protocol": 0,
    "http": 0,
}

#: module names that several packages use, each with the one meaning they share there
SHARED_NAMES: dict[str, tuple[frozenset[str], str]] = {
    "__init__.py": (frozenset(), "a package's face"),
    "__main__.py": (frozenset(), "a package run with python -m"),
    "metrics.py": (frozenset({"agent/metrics.py", "daemon/metrics.py"}), "a service's GET /metrics"),
    "frame.py": (frozenset({"transport/frame.py", "ps/frame.py"}), "a data path's framed binary format"),
    "rendezvous.py": (
        frozenset({"transport/rendezvous.py", "ps/rendezvous.py"}),
        "where the processes of one job find each other",
    ),
}


ENFORCE = RUNTIME / "enforce"

#: room of ``commsched.runtime.enforce`` ("" = its core, the modules directly under it) -> rooms it may import
ENFORCE_ROOMS: dict[str, frozenset[str]] = {
    "": frozenset({"pinning", "marking", "processes"}),
    "pinning": frozenset({"marking"}),
    "marking": frozenset(),
    "processes": frozenset(),
}


def loose_modules(root: Path) -> list[str]:
    """Modules directly under ``root`` other than its ``__init__``."""
    return sorted(p.name for p in root.glob("*.py") if p.name != "__init__.py")


def name_clashes(root: Path, shared: dict[str, tuple[frozenset[str], str]]) -> list[str]:
    """Module names used by more than one module under ``root`` and not listed (with the same files)."""
    by_name: dict[str, set[str]] = defaultdict(set)
    for p in root.rglob("*.py"):
        by_name[p.name].add(p.relative_to(root).as_posix())
    out = []
    for name, paths in sorted(by_name.items()):
        if len(paths) < 2:
            continue
        listed = shared.get(name)
        if listed is None or (listed[0] and listed[0] != paths):
            out.append(f"{name}: {sorted(paths)}")
    return out


def _package(module: str) -> str | None:
    """``commsched.runtime.agent.app`` -> ``agent``; the root -> ``""``; outside the runtime -> ``None``."""
    parts = module.split(".")
    if parts[:2] != ["commsched", "runtime"]:
        return None
    return parts[2] if len(parts) > 2 else ""


def enforce_room(module: str, is_package: bool) -> str | None:
    """``commsched.runtime.enforce.pinning.oracle``: ``pinning``; a core module: ``""``; outside: ``None``."""
    parts = module.split(".")
    if parts[:3] != ["commsched", "runtime", "enforce"] or len(parts) == 3:
        return None
    return parts[3] if len(parts) > 4 or is_package else ""


def room_violations(edges: list[tuple[str, str]], rooms: dict[str, frozenset[str]]) -> list[tuple[str, str]]:
    """The ``(room, room)`` import edges (``""``: the core) that ``rooms`` does not allow."""
    return sorted({(a, b) for a, b in edges if a != b and b not in rooms[a]})


def test_no_loose_module_under_runtime() -> None:
    assert loose_modules(RUNTIME) == [], "put these in a package whose name says their role"


def test_one_meaning_per_module_name() -> None:
    assert name_clashes(RUNTIME, SHARED_NAMES) == []


def test_every_runtime_package_has_a_line() -> None:
    found = {p.parent.name for p in RUNTIME.glob("*/*.py")}  # ``ps`` is a namespace package
    missing = sorted(found - set(LINE_OF))
    assert not missing, f"place these in LINE_OF and in docs/runtime-layout.md: {missing}"
    assert set(LINE_OF) - {""} <= found, "LINE_OF names a package that is gone"


def test_runtime_imports_go_down() -> None:
    modules = all_modules()
    bad = []
    for name, path in modules.items():
        here = _package(name)
        if here is None:
            continue
        for line, target in imports_of(name, path, modules):
            there = _package(target)
            if there is None or there == here:
                continue
            if LINE_OF[there] >= LINE_OF[here]:
                bad.append(f"{path.relative_to(SRC)}:{line}: {name} -> {target}")
    assert not bad, "imports against the runtime's order:\n" + "\n".join(bad)


def test_every_enforce_room_is_listed() -> None:
    found = {p.parent.name for p in ENFORCE.glob("*/__init__.py")}
    assert found == set(ENFORCE_ROOMS) - {""}, "list the rooms of enforce/ in ENFORCE_ROOMS and the docstring"
    assert not list(ENFORCE.glob("*/*/*.py")), "enforce/'s rooms hold modules, not rooms of their own"


def test_enforce_rooms_import_as_allowed() -> None:
    modules = all_modules()
    edges: list[tuple[str, str]] = []
    where: dict[tuple[str, str], str] = {}
    for name, path in modules.items():
        here = enforce_room(name, path.name == "__init__.py")
        if here is None:
            continue
        for line, target in imports_of(name, path, modules):
            there = enforce_room(target, modules[target].name == "__init__.py")
            if there is not None:
                edges.append((here, there))
                where.setdefault((here, there), f"{path.relative_to(SRC)}:{line} -> {target}")
    bad = [where[e] for e in room_violations(edges, ENFORCE_ROOMS)]
    assert not bad, "imports between enforce/'s rooms against their order:\n" + "\n".join(bad)
    # the check sees an import the order does not allow (the rooms import at all: the core uses them)
    assert {("", "pinning"), ("", "marking"), ("", "processes"), ("pinning", "marking")} <= set(edges)


@pytest.mark.parametrize(
    ("module", "is_package", "room"),
    [
        ("commsched.runtime.enforce", True, None),
        ("commsched.runtime.enforce.enforcer", False, ""),
        ("commsched.runtime.enforce.pinning.oracle", True, "pinning"),
        ("commsched.runtime.enforce.pinning.oracle", False, "pinning"),
        ("commsched.runtime.agent.app", False, None),
    ],
)
def test_enforce_room_of_a_module(module: str, is_package: bool, room: str | None) -> None:
    assert enforce_room(module, is_package) == room


def test_room_violations_see_a_wrong_way() -> None:
    edges = [("", "pinning"), ("pinning", "marking"), ("marking", "pinning"), ("processes", ""), ("", "")]
    assert room_violations(edges, ENFORCE_ROOMS) == [("marking", "pinning"), ("processes", "")]


@pytest.mark.parametrize(
    ("files", "loose", "clashes"),
    [
        (["__init__.py", "a/__init__.py", "a/x.py"], [], []),
        (["__init__.py", "wire.py", "a/__init__.py"], ["wire.py"], []),
        (["__init__.py", "a/__init__.py", "a/wire.py", "b/__init__.py", "b/wire.py"], [], ["wire.py"]),
        # a listed name used by other files than those listed is a clash again
        (["__init__.py", "a/__init__.py", "a/frame.py", "b/__init__.py", "b/frame.py"], [], ["frame.py"]),
        (
            ["__init__.py", "ps/__init__.py", "ps/frame.py", "transport/__init__.py", "transport/frame.py"],
            [],
            [],
        ),
    ],
)
def test_the_checks_see_a_loose_module_and_a_clash(
    tmp_path: Path, files: list[str], loose: list[str], clashes: list[str]
) -> None:
    for f in files:
        (tmp_path / f).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / f).write_text("")
    assert loose_modules(tmp_path) == loose
    assert [c.split(":")[0] for c in name_clashes(tmp_path, SHARED_NAMES)] == clashes
