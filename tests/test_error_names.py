"""One error hierarchy: no two error classes of the package share a name.

Two classes of one name (a ``ProtocolError`` of the transport and another of the parameter server) make
``except ProtocolError`` mean whichever one the reader imported; the design guide asks for one hierarchy.
"""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "src" / "commsched"


def error_classes(root: Path = PACKAGE) -> dict[str, list[str]]:
    """Class name -> the files defining it, for every class whose name ends in ``Error``."""
    where: dict[str, list[str]] = defaultdict(list)
    for path in sorted(root.rglob("*.py")):
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.ClassDef) and node.name.endswith("Error"):
                where[node.name].append(str(path.relative_to(root)))
    return dict(where)


def test_no_two_error_classes_share_a_name() -> None:
    twice = {name: files for name, files in error_classes().items() if len(files) > 1}
    assert not twice, f"error classes defined more than once: {twice}"


def test_the_scan_sees_a_duplicate(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("class ProtocolError(Exception):\n    pass\n")
    (tmp_path / "b.py").write_text("class Outer:\n    class ProtocolError(ValueError):\n        pass\n")
    assert error_classes(tmp_path) == {"ProtocolError": ["a.py", "b.py"]}
