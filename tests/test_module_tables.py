"""No module-level mutable table is read by another module: a table has one owner, others ask it.

A table is a name a module binds at its top level to a mutable container and then changes (an item set
or deleted, a mutating method called on it); a constant literal that nothing changes is not one.
"""

from __future__ import annotations

import ast
from pathlib import Path

from tests.paths import REPO

SRC = REPO / "src"
#: calls that build a mutable container
MUTABLE_CALLS = {"dict", "list", "set", "defaultdict", "OrderedDict", "Counter", "deque", "bytearray"}
MUTABLE_NODES = (ast.Dict, ast.List, ast.Set, ast.DictComp, ast.ListComp, ast.SetComp)


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _is_mutable(value: ast.expr | None) -> bool:
    if isinstance(value, MUTABLE_NODES):
        return True
    if isinstance(value, ast.Call):
        f = value.func
        name = f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else ""
        return name in MUTABLE_CALLS
    return False


MUTATORS = {"append", "extend", "insert", "remove", "pop", "popitem", "clear", "update", "setdefault", "add"}
MUTATORS |= {"discard", "appendleft", "extendleft"}


def _changed(tree: ast.Module) -> set[str]:
    """The names the module changes in place anywhere (items set or deleted, mutating methods)."""
    out: set[str] = set()
    for node in ast.walk(tree):
        targets: list[ast.expr] = []
        if isinstance(node, ast.Assign | ast.Delete):
            targets = list(node.targets)
        elif isinstance(node, ast.AugAssign | ast.AnnAssign):
            targets = [node.target]
        for t in targets:
            if isinstance(t, ast.Subscript) and isinstance(t.value, ast.Name):
                out.add(t.value.id)
        f = node.func if isinstance(node, ast.Call) else None
        if isinstance(f, ast.Attribute) and f.attr in MUTATORS and isinstance(f.value, ast.Name):
            out.add(f.value.id)
    return out


def mutable_tables(tree: ast.Module) -> set[str]:
    """The names a module binds at its top level to a mutable container and changes in place."""
    out: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Assign) and _is_mutable(node.value):
            out.update(t.id for t in node.targets if isinstance(t, ast.Name))
        elif (
            isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name) and _is_mutable(node.value)
        ):
            out.add(node.target.id)
    return out & _changed(tree)


def test_the_finder_sees_tables_and_only_tables() -> None:
    text = """
A: dict[str, int] = {}
B = [1]
C = set()
D = (1, 2)
E = {1: 2}
F = []
def f():
    x = {}
    A["k"] = 1
    B.append(2)
    C.add(3)
    x["y"] = D[0] + E[1] + len(F)
"""
    assert mutable_tables(ast.parse(text)) == {"A", "B", "C"}


def test_no_module_reads_another_modules_mutable_table() -> None:
    trees = {_module_name(p): ast.parse(p.read_text(), filename=str(p)) for p in sorted(SRC.rglob("*.py"))}
    tables = {mod: mutable_tables(tree) for mod, tree in trees.items()}
    found = []
    for mod, tree in trees.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom) and node.module in tables and node.module != mod:
                found += [
                    f"{mod} reads {node.module}.{a.name}" for a in node.names if a.name in tables[node.module]
                ]
    assert not found, found
