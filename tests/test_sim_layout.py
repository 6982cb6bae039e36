"""``sim/`` as rooms a newcomer can read: its import graph shallow and acyclic, the fast mode reached only
through the engine, one event loop, one clock.

* the longest chain of imports between ``sim``'s own modules (its ``__init__`` left out) is at most
  :data:`MAX_DEPTH` modules, and there is no cycle;
* ``FastMode`` and ``FluidMode`` are imported only by the engine that wires them (the iteration cycle and
  the decisions reach them through the protocols of ``sim/jobs/hooks.py``);
* nothing outside ``sim/loop/kernel.py`` assigns the clock (``.now``), and the kernel's ``step()`` (pop,
  clock, count) is called only by the engine's one event loop;
* each room imports only the rooms :data:`ROOM_IMPORTS` allows it, and no two rooms import each other.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

from tests.test_layers import SRC, all_modules, imports_of

SIM = SRC / "commsched" / "sim"
PKG = "commsched.sim"
MAX_DEPTH = 8


def sim_graph() -> dict[str, set[str]]:
    """``sim``'s modules (its ``__init__`` left out) -> the ``sim`` modules each imports."""
    modules = all_modules()
    own = {n: p for n, p in modules.items() if n.startswith(PKG + ".")}
    return {n: {t for _, t in imports_of(n, p, modules) if t in own} for n, p in own.items()}


def longest_chain(graph: dict[str, set[str]]) -> tuple[list[str], list[str]]:
    """The longest import chain (modules, top first) and the modules found on a cycle."""
    on_stack: set[str] = set()
    cycles: list[str] = []

    @cache
    def chain(m: str) -> tuple[str, ...]:
        on_stack.add(m)
        best: tuple[str, ...] = ()
        for t in sorted(graph[m]):
            if t in on_stack:
                cycles.append(t)
                continue
            c = chain(t)
            if len(c) > len(best):
                best = c
        on_stack.discard(m)
        return (m, *best)

    top = max((chain(m) for m in sorted(graph)), key=len, default=())
    return list(top), cycles


def _trees() -> list[tuple[Path, ast.Module]]:
    return [(p, ast.parse(p.read_text(), filename=str(p))) for p in sorted(SIM.rglob("*.py"))]


def test_sim_imports_are_shallow_and_acyclic() -> None:
    top, cycles = longest_chain(sim_graph())
    assert not cycles, f"import cycle through {sorted(set(cycles))}"
    assert len(top) <= MAX_DEPTH, " -> ".join(top)


def test_the_fast_mode_is_wired_by_the_engine_alone() -> None:
    bad = []
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = {a.name for a in node.names} & {"FastMode", "FluidMode"}
                if names and path.name != "engine.py":
                    bad.append(f"{path.relative_to(SIM)}:{node.lineno} imports {sorted(names)}")
    assert not bad, bad


def test_only_the_kernel_sets_the_clock_and_one_loop_steps_it() -> None:
    sets, steps = [], []
    for path, tree in _trees():
        rel = path.relative_to(SIM).as_posix()
        for node in ast.walk(tree):
            targets = node.targets if isinstance(node, ast.Assign) else []
            if isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            for t in targets:
                if isinstance(t, ast.Attribute) and t.attr == "now" and not rel.endswith("kernel.py"):
                    sets.append(f"{rel}:{node.lineno}")
            if isinstance(node, ast.Call) and not node.args:
                f = node.func
                if isinstance(f, ast.Attribute) and f.attr == "step":
                    steps.append(rel)
    assert sets == [], f"the clock set outside the kernel: {sets}"
    assert {s.rsplit("/", 1)[-1] for s in steps} == {"engine.py"}, steps


def test_the_chain_finder_sees_depth_and_cycles() -> None:
    top, cycles = longest_chain({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}})
    assert top == ["a", "b", "c"] and cycles == []
    _, cycles = longest_chain({"a": {"b"}, "b": {"a"}})
    assert cycles


#: the rooms of ``sim/`` -> what each holds (the engine's docstring names each, with its modules)
ROOMS: dict[str, str] = {
    "loop": "the clock, the pending events and exact mode's compiled loop",
    "jobs": "each job's run state, lifecycle, iteration cycle and streams; its protocols to the rest",
    "decide": "asking the policy and applying its decisions; domains and components",
    "rates": "where a component's rates are solved",
    "fast": "the fast mode: where it decides to skip, and how it jumps",
    "results": "records, counters and samples, the summary and derived figures",
    "reference": "the references the engine is held to",
}
#: modules at the root of ``sim/``: its face and the engine that wires the rooms
ROOT_MODULES = ["__init__.py", "engine.py"]


def test_every_sim_module_is_in_a_room() -> None:
    assert sorted(p.name for p in SIM.glob("*.py")) == ROOT_MODULES, "put it in the room of its concern"
    rooms = sorted(p.parent.name for p in SIM.glob("*/__init__.py"))
    assert rooms == sorted(ROOMS), "a room not in ROOMS (or one gone)"
    assert not list(SIM.glob("*/*/*.py")), "rooms are one level deep"


def test_the_engine_docstring_names_every_room_and_its_modules() -> None:
    doc = ast.get_docstring(ast.parse((SIM / "engine.py").read_text())) or ""
    missing = [f"sim/{room}/" for room in ROOMS if f"``sim/{room}/``" not in doc]
    for room in ROOMS:
        for p in sorted((SIM / room).glob("*.py")):
            if p.name != "__init__.py" and f"commsched.sim.{room}.{p.stem}" not in doc:
                missing.append(f"sim/{room}/{p.name}")
    assert not missing, f"the engine's docstring does not name: {missing}"


def test_each_room_lists_its_modules_and_imports_nothing() -> None:
    bad = []
    for room in ROOMS:
        init = SIM / room / "__init__.py"
        tree = ast.parse(init.read_text())
        doc = ast.get_docstring(tree) or ""
        if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)):
            bad.append(f"{room}/__init__.py imports (a room's face is its docstring)")
        bad += [
            f"{room}/{p.name} not listed"
            for p in (SIM / room).glob("*.py")
            if f":mod:`.{p.stem}`" not in doc and p.name != "__init__.py"
        ]
    assert not bad, bad


def _calls(name: str) -> set[str]:
    """The ``sim`` modules (as ``room/module.py``) that call a function or method ``name``."""
    out = set()
    for path, tree in _trees():
        for node in ast.walk(tree):
            if isinstance(node, ast.Call):
                f = node.func
                called = f.attr if isinstance(f, ast.Attribute) else f.id if isinstance(f, ast.Name) else ""
                if called == name:
                    out.add(path.relative_to(SIM).as_posix())
    return out


def test_rates_are_solved_in_one_room_and_the_fast_mode_skips_in_one() -> None:
    """The water-filling (``flowfill.solve``) and the compiled step change are called in ``rates/`` (and
    by the compiled loop, which runs the same step change); the jumps (``move``, ``apply_jump``) in
    ``fast/`` only."""
    solvers = _calls("solve") | _calls("step_change")
    assert {p.split("/")[0] for p in solvers} <= {"rates", "loop"}, solvers
    assert {p for p in solvers if p.startswith("loop/")} <= {"loop/flatloop.py"}, solvers
    jumps = _calls("move") | _calls("apply_jump")
    assert jumps and {p.split("/")[0] for p in jumps} == {"fast"}, jumps


#: room -> the rooms its modules may import (``engine``: the root's ``engine.py``), one way between any two:
#: bottom up, ``jobs`` (the run state; it reaches the kernel, the counters and the pacing through the
#: protocols of ``jobs/hooks.py``), ``results`` (reads the run state), ``rates`` (paces the steps),
#: ``loop`` (the kernel: its compiled helpers are ``rates/flowlayout.py``'s; the compiled loop runs the
#: cycle and the step change), then ``decide`` and ``fast`` side by side, and the engine that wires them all
ROOM_IMPORTS: dict[str, set[str]] = {
    "engine": {"decide", "fast", "jobs", "loop", "rates", "results"},
    "fast": {"jobs", "loop", "rates", "results"},
    "decide": {"jobs", "loop", "rates", "results"},
    "loop": {"jobs", "rates", "results"},
    "rates": {"jobs", "results"},
    "results": {"jobs"},
    "jobs": set(),
    "reference": set(),
}


def room_edges() -> dict[tuple[str, str], list[str]]:
    """(room, room it imports) -> the imports, ``a -> b`` by module, between two rooms."""
    out: dict[tuple[str, str], list[str]] = {}
    for a, targets in sim_graph().items():
        for b in targets:
            ra, rb = a.split(".")[2], b.split(".")[2]
            if ra != rb:
                out.setdefault((ra, rb), []).append(f"{a} -> {b}")
    return out


def test_each_room_imports_the_rooms_it_may() -> None:
    edges = room_edges()
    assert set(ROOM_IMPORTS) == {*ROOMS, "engine"}
    bad = [e for (a, b), es in sorted(edges.items()) if b not in ROOM_IMPORTS[a] for e in es]
    assert not bad, f"imports against the rooms' direction: {bad}"


def test_no_two_rooms_import_each_other() -> None:
    both = [(a, b) for a, bs in ROOM_IMPORTS.items() for b in bs if a in ROOM_IMPORTS[b]]
    assert not both, f"ROOM_IMPORTS lets rooms import each other: {both}"
    edges = room_edges()
    two_way = sorted({tuple(sorted((a, b))) for a, b in edges if (b, a) in edges})
    assert not two_way, f"rooms importing each other: {two_way}"
