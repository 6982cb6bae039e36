"""The examples in docstrings follow the layer order too: an example imports nothing above its module.

A docstring example is code a reader copies; one that imports a higher layer (say ``commsched.testing``
from a ``scheduling`` module) shows a dependency the module itself may not have, and ties its doctest to
code the import-graph test (:mod:`tests.test_layers`) does not see. The package's face (``import
commsched``, ``from commsched import ...``), where a user starts, is the one exception.
"""

from __future__ import annotations

import ast
import doctest
from collections.abc import Iterator
from pathlib import Path

from tests.test_layers import LAYER_OF, SRC, _resolve, all_modules, top


def docstrings(path: Path) -> Iterator[tuple[int, str]]:
    """``(line, text)`` of the module's, its classes' and its functions' docstrings."""
    tree = ast.parse(path.read_text(), filename=str(path))
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            text = ast.get_docstring(node, clean=False)
            if text:
                yield (getattr(node, "lineno", 1), text)


def example_imports(text: str) -> Iterator[str]:
    """Every ``commsched`` name the examples of one docstring import."""
    for ex in doctest.DocTestParser().get_examples(text):
        try:
            tree = ast.parse(ex.source)
        except SyntaxError:
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.Import):
                yield from (a.name for a in node.names)
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                yield from (f"{node.module}.{a.name}" for a in node.names)


def upward_example_imports() -> list[str]:
    modules = all_modules()
    bad = []
    for name, path in modules.items():
        here = top(name)
        for line, text in docstrings(path):
            for target in example_imports(text):
                hit = _resolve(target, modules) if target.split(".")[0] == "commsched" else None
                if hit is None or hit == "commsched" or top(hit) == here:
                    continue
                if LAYER_OF[top(hit)] >= LAYER_OF[here]:
                    bad.append(f"{path.relative_to(SRC)}:{line}: an example imports {hit}")
    return bad


def test_no_docstring_example_imports_a_higher_layer() -> None:
    bad = upward_example_imports()
    assert not bad, "examples against the layer order:\n" + "\n".join(bad)


def test_the_reader_sees_an_upward_example_import() -> None:
    text = "Examples\n--------\n>>> from commsched.testing import toy_job\n>>> import commsched.cli\n"
    assert list(example_imports(text)) == ["commsched.testing.toy_job", "commsched.cli"]
