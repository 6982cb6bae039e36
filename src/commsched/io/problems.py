"""Problems of a scenario file, each with its line: ``file:line: field.path: what (expected ...)``."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import TypeVar

import yaml
from pydantic import BaseModel
from pydantic import ValidationError as PydanticError

from commsched.io import yamlio


def line_index(text: str) -> dict[tuple[str | int, ...], int]:
    """Map each field path of a YAML document to its 1-based line (an aliased node under its first path)."""
    out: dict[tuple[str | int, ...], int] = {}
    try:
        root = yamlio.compose(text)
    except yaml.YAMLError:
        return out
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[str | int, ...]]] = [(root, ())] if root is not None else []
    while stack:
        node, path = stack.pop()
        out.setdefault(path, node.start_mark.line + 1)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value
                out.setdefault((*path, key), k.start_mark.line + 1)
                stack.append((v, (*path, key)))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                stack.append((v, (*path, i)))
    return out


def did_you_mean(name: str, valid: Sequence[str]) -> str:
    """``"; did you mean 'X'?"`` for the valid name closest to ``name`` (case ignored), else ``""``.

    Examples
    --------
    >>> did_you_mean("llama-7b@h20", ["llama-7b@h200", "resnet50"])
    "; did you mean 'llama-7b@h200'?"
    >>> did_you_mean("horizon", ["horizon_s", "seed"])
    "; did you mean 'horizon_s'?"
    >>> did_you_mean("zzz", ["horizon_s", "seed"])
    ''
    """
    import difflib

    lowered = {v.lower(): v for v in valid}
    close = difflib.get_close_matches(name.lower(), list(lowered), n=1, cutoff=0.6)
    return f"; did you mean {lowered[close[0]]!r}?" if close else ""


def _fmt_path(path: Sequence[str | int]) -> str:
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else str(p))
    return s or "(top level)"


class Problems:
    """Collects every problem of a file, each with its line."""

    def __init__(self, source: str, lines: Mapping[tuple[str | int, ...], int]) -> None:
        self.source = source
        self.lines = lines
        self._items: list[tuple[int, int, str]] = []

    @property
    def items(self) -> list[str]:
        """The problems in file order (by line, then in the order found)."""
        return [text for _, _, text in sorted(self._items)]

    def add(self, path: Sequence[str | int], what: str, expected: str = "") -> None:
        p = tuple(path)
        line = None
        while line is None:
            line = self.lines.get(p)
            if not p:
                break
            p = p[:-1]
        loc = f"{self.source}:{line}" if line else self.source
        text = f"{loc}: {_fmt_path(path)}: {what}"
        if expected:
            text += f" (expected {expected})"
        self._items.append((line or 0, len(self._items), text))


PYDANTIC_EXPECT = {
    "missing": "a value",
    "extra_forbidden": "no such field",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "finite_number": "a finite number",
    "float_parsing": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "literal_error": "",
    "greater_than": "",
    "greater_than_equal": "",
    "less_than_equal": "",
    "too_short": "",
}


M = TypeVar("M", bound=BaseModel)


def validated(model: type[M], data: object, prefix: tuple[str | int, ...], probs: Problems) -> M | None:
    """Validate with pydantic; every error becomes one problem line with its field path."""
    try:
        return model.model_validate(data)
    except PydanticError as exc:
        for err in exc.errors():
            loc = prefix + tuple(err["loc"])
            expected = PYDANTIC_EXPECT.get(err["type"], "")
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                fields = sorted(model.model_fields)
                msg = "unknown field" + did_you_mean(str(loc[-1]), fields)
                expected = "one of " + ", ".join(fields)
            probs.add(loc, msg[0].lower() + msg[1:], expected)
        return None
