"""Size limits of the package, checked by ``make lint``.

Three rules over ``src/commsched``:

- no module over :data:`MAX_MODULE_LINES` lines;
- no function body over :data:`MAX_FUNCTION_LINES` lines (its docstring excluded), unless the function
  is in :data:`EXCEPTIONS` with its reason; together with ruff's size and complexity ``noqa`` comments
  (``PLR0911``, ``PLR0912``, ``PLR0913``, ``PLR0915``, ``PLR0917``, ``C901``) these are at most
  :data:`MAX_EXCEPTIONS`;
- imports of another module's private (``_underscored``) names are counted and may not grow beyond
  :data:`MAX_PRIVATE_IMPORTS` (a name used by another module is part of an interface: make it public).

Run ``python tools/check_sizes.py`` (exit 1 with the list of violations) or ``--report`` (also prints the
private imports left).
"""

from __future__ import annotations

import argparse
import ast
import re
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SRC = ROOT / "src"

MAX_MODULE_LINES = 400
MAX_FUNCTION_LINES = 60
#: per-function exceptions, this list and ruff's size/complexity ``noqa`` comments together
MAX_EXCEPTIONS = 10
#: cross-module imports of private names left (a ratchet: lower it as they go, never raise it)
MAX_PRIVATE_IMPORTS = 3

#: ``path relative to src/ :: function qualname`` -> why its body may exceed the limit
EXCEPTIONS: dict[str, str] = {}

_NOQA = re.compile(r"#\s*noqa:[^#\n]*\b(PLR0911|PLR0912|PLR0913|PLR0915|PLR0917|C901)\b")
#: the reason a size/complexity noqa must give after its codes: `` -- why``
_REASON = re.compile(r"\s--\s*\S")


@dataclass(frozen=True, slots=True, kw_only=True)
class Function:
    """A function's place and the length of its body."""

    path: str
    qualname: str
    line: int
    body_lines: int

    @property
    def key(self) -> str:
        return f"{self.path}::{self.qualname}"


@dataclass(frozen=True, slots=True, kw_only=True)
class PrivateImport:
    """``from <module> import _name`` in another module of the package."""

    path: str
    line: int
    module: str
    name: str


def body_lines(node: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    """Lines from the first statement after the docstring to the end of the last one."""
    body = node.body
    first = body[0]
    value = first.value if isinstance(first, ast.Expr) else None
    if isinstance(value, ast.Constant) and isinstance(value.value, str):
        body = body[1:]
    if not body:
        return 0
    end = body[-1].end_lineno or body[-1].lineno
    return end - body[0].lineno + 1


def functions(tree: ast.AST, path: str) -> Iterator[Function]:
    """Every function and method of a module, nested ones too, with a dotted qualname."""

    def walk(node: ast.AST, prefix: str) -> Iterator[Function]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = f"{prefix}{child.name}"
                yield Function(path=path, qualname=name, line=child.lineno, body_lines=body_lines(child))
                yield from walk(child, f"{name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")
            else:
                yield from walk(child, prefix)

    yield from walk(tree, "")


def module_name(path: Path, src: Path) -> str:
    parts = list(path.relative_to(src).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def private_imports(tree: ast.AST, path: Path, src: Path) -> Iterator[PrivateImport]:
    """Imports of ``_private`` names (not dunders) from other ``commsched`` modules."""
    here = module_name(path, src)
    for node in ast.walk(tree):
        if not isinstance(node, ast.ImportFrom):
            continue
        base = node.module or ""
        if node.level:
            anchor = here.split(".")
            if path.name != "__init__.py":
                anchor = anchor[:-1]
            anchor = anchor[: len(anchor) - (node.level - 1)]
            base = ".".join([*anchor, base] if base else anchor)
        if base.split(".")[0] != "commsched" or base == here:
            continue
        for alias in node.names:
            if alias.name.startswith("_") and not alias.name.startswith("__"):
                rel = str(path.relative_to(src))
                yield PrivateImport(path=rel, line=node.lineno, module=base, name=alias.name)


@dataclass(frozen=True, slots=True, kw_only=True)
class Findings:
    """What the checker found; :attr:`errors` is empty when the package is within its limits."""

    errors: tuple[str, ...]
    private: tuple[PrivateImport, ...]
    exceptions_used: int


def check(
    src: Path = SRC,
    *,
    exceptions: dict[str, str] | None = None,
    max_private: int = MAX_PRIVATE_IMPORTS,
) -> Findings:
    """Check every module under ``src`` (the folder that holds the ``commsched`` package)."""
    allowed = EXCEPTIONS if exceptions is None else exceptions
    errors: list[str] = []
    private: list[PrivateImport] = []
    noqa = 0
    seen: set[str] = set()
    for path in sorted(src.rglob("*.py")):
        rel = str(path.relative_to(src))
        text = path.read_text()
        lines = len(text.splitlines())
        if lines > MAX_MODULE_LINES:
            errors.append(f"{rel}: module of {lines} lines (limit {MAX_MODULE_LINES})")
        for lineno, line in enumerate(text.splitlines(), start=1):
            found = _NOQA.findall(line)
            noqa += len(found)
            if found and not _REASON.search(line[line.index("noqa") :]):
                errors.append(f"{rel}:{lineno}: a size/complexity noqa without its reason (`-- why`)")
        tree = ast.parse(text, filename=str(path))
        for fn in functions(tree, rel):
            if fn.body_lines <= MAX_FUNCTION_LINES:
                continue
            if fn.key in allowed:
                seen.add(fn.key)
                continue
            errors.append(
                f"{rel}:{fn.line}: {fn.qualname} has a body of {fn.body_lines} lines "
                f"(limit {MAX_FUNCTION_LINES}, docstring excluded)"
            )
        private.extend(private_imports(tree, path, src))
    stale = (key for key in allowed if key not in seen)
    errors.extend(f"{key}: listed in EXCEPTIONS but within the limit (remove it)" for key in stale)
    if noqa + len(allowed) > MAX_EXCEPTIONS:
        errors.append(
            f"{noqa} size/complexity noqa comments + {len(allowed)} EXCEPTIONS "
            f"> {MAX_EXCEPTIONS} per-function exceptions"
        )
    if len(private) > max_private:
        errors.append(
            f"{len(private)} imports of private names across modules (limit {max_private}): make them public"
        )
    return Findings(errors=tuple(errors), private=tuple(private), exceptions_used=noqa + len(allowed))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--report", action="store_true", help="also list the private imports left")
    args = parser.parse_args(argv)
    found = check()
    if args.report:
        for p in found.private:
            print(f"private import: {p.path}:{p.line}: {p.module}.{p.name}")
    print(
        f"check_sizes: {len(found.private)} private imports (limit {MAX_PRIVATE_IMPORTS}), "
        f"{found.exceptions_used} per-function exceptions (limit {MAX_EXCEPTIONS})"
    )
    for e in found.errors:
        print(e, file=sys.stderr)
    return 1 if found.errors else 0


if __name__ == "__main__":
    sys.exit(main())
