"""The import graph follows the layer order of the design guide: no import up, no cycle.

Every ``import`` of a ``commsched`` module counts, wherever it stands: at the top of a module, under
``if TYPE_CHECKING:`` or inside a function. The order (each line may import only the lines below it;
two packages of one line never import each other):

======  =============================================================================
line    packages
======  =============================================================================
10      the package root (``commsched/__init__.py``: the lazy facade), ``_docgen``
9       ``cli``
8       ``api``
7       ``experiments``
6       ``io`` · ``runtime`` · ``testing``
5       ``sim`` · ``catalog`` · ``testbed``
4       ``scheduling``
3       ``intrajob``
2       ``workload`` · ``topology``
1       ``registry``
0       ``errors`` · ``_lazy`` · ``_version``
======  =============================================================================

The guide puts ``registry`` and ``errors`` on one ground line; the registry raises the errors'
:class:`~commsched.errors.UnknownNameError`, so ``errors`` is drawn under it, with the two helpers
every layer may use: ``_lazy`` (the lazy exports of a package's ``__init__``) and ``_version``.
``testing`` (a policy's invariants, for authors of policies) runs policies through the catalogue and
the simulator, so it sits above both, beside ``io``. ``_docgen`` writes the reference pages of every
layer.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[1] / "src"
PACKAGE = SRC / "commsched"

#: top-level name (package or module under ``commsched``; "" = the package root) -> line of the order
LAYER_OF: dict[str, int] = {
    "": 10,
    "_docgen": 10,
    "cli": 9,
    "api": 8,
    "experiments": 7,
    "io": 6,
    "runtime": 6,
    "sim": 5,
    "catalog": 5,
    "testbed": 5,
    "testing": 6,
    "scheduling": 4,
    "intrajob": 3,
    "workload": 2,
    "topology": 2,
    "registry": 1,
    "errors": 0,
    "_lazy": 0,
    "_version": 0,
}


def module_name(path: Path) -> str:
    """``src/commsched/io/scenario.py`` -> ``commsched.io.scenario`` (a package is its ``__init__``)."""
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(name: str, modules: dict[str, Path]) -> str | None:
    """The module that ``name`` (a module, or a name inside one) lives in, or ``None`` outside."""
    while name and name not in modules:
        name = name.rpartition(".")[0]
    return name or None


def imports_of(name: str, path: Path, modules: dict[str, Path]) -> Iterator[tuple[int, str]]:
    """``(line, module)`` for every commsched module imported anywhere in ``path``."""
    is_package = path.name == "__init__.py"
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = name.split(".")
                if not is_package:
                    anchor = anchor[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            # ``from pkg import mod`` imports the submodule ``pkg.mod`` when there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in modules else base for a in node.names]
        else:
            continue
        for t in targets:
            if t.split(".")[0] == "commsched":
                hit = _resolve(t, modules)
                if hit is not None and hit != name:
                    yield node.lineno, hit


def top(module: str) -> str:
    parts = module.split(".")
    return parts[1] if len(parts) > 1 else ""


def graph() -> dict[str, set[str]]:
    modules = all_modules()
    return {m: {t for _, t in imports_of(m, p, modules)} for m, p in modules.items()}


def test_every_package_has_a_line() -> None:
    missing = sorted({top(m) for m in all_modules()} - set(LAYER_OF))
    assert not missing, f"place these in LAYER_OF (and in the design guide's order): {missing}"


def test_no_import_goes_up_or_sideways() -> None:
    modules = all_modules()
    bad = []
    for name, path in modules.items():
        here = top(name)
        for line, target in imports_of(name, path, modules):
            there = top(target)
            if there == here:
                continue
            if LAYER_OF[there] >= LAYER_OF[here]:
                bad.append(f"{path.relative_to(SRC)}:{line}: {name} -> {target}")
    assert not bad, "imports against the layer order:\n" + "\n".join(bad)


def _reach(g: dict[str, set[str]], start: str) -> set[str]:
    """The modules ``start`` imports, directly or through others."""
    seen: set[str] = set()
    todo = [start]
    while todo:
        for w in g.get(todo.pop(), ()):
            if w not in seen:
                seen.add(w)
                todo.append(w)
    return seen


def _cycles(g: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (modules that reach each other)."""
    reach = {v: _reach(g, v) for v in g}
    out: list[list[str]] = []
    done: set[str] = set()
    for v in sorted(g):
        if v in done or v not in reach[v]:
            continue
        comp = sorted(w for w in reach[v] if v in reach.get(w, set()))
        done.update(comp)
        if len(comp) > 1:
            out.append(comp)
    return out


def _without_package_faces(g: dict[str, set[str]]) -> dict[str, set[str]]:
    """The graph without the arrows from a package's ``__init__`` to its own modules.

    A package's ``__init__`` that hands on its modules' names (eagerly or lazily) and a module that
    imports a sibling through the package are one concept, not a cycle between concepts.
    """
    modules = all_modules()
    faces = {m for m, p in modules.items() if p.name == "__init__.py"}
    return {m: {t for t in ts if not (m in faces and t.startswith(m + "."))} for m, ts in g.items()}


def test_no_cycle_between_modules() -> None:
    cycles = _cycles(_without_package_faces(graph()))
    assert not cycles, "modules that import each other: " + "; ".join(" <-> ".join(c) for c in cycles)


@pytest.mark.parametrize(
    ("source", "expected"),
    [
        ("import commsched.io.results\n", {"commsched.io.results"}),
        ("from commsched.io import results\n", {"commsched.io.results"}),
        ("from commsched.io import Scenario\n", {"commsched.io"}),
        ("def f():\n    from commsched import cli\n", {"commsched.cli"}),
        (
            "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from commsched.sim import x\n",
            {"commsched.sim"},
        ),
        ("from .results import write_outputs\n", {"commsched.io.results"}),
        ("import numpy\n", set()),
    ],
)
def test_the_reader_counts_every_kind_of_import(tmp_path: Path, source: str, expected: set[str]) -> None:
    path = tmp_path / "probe.py"
    path.write_text(source)
    modules = {**all_modules(), "commsched.io.probe": path}
    assert {t for _, t in imports_of("commsched.io.probe", path, modules)} == expected


def test_a_planted_upward_import_and_cycle_are_caught() -> None:
    g = {"commsched.io.a": {"commsched.io.b"}, "commsched.io.b": {"commsched.io.a"}, "commsched.io.c": set()}
    assert _cycles(g) == [["commsched.io.a", "commsched.io.b"]]
    assert LAYER_OF[top("commsched.cli.app")] > LAYER_OF[top("commsched.io.results")]
