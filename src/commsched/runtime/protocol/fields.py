"""Typed reading of one JSON object's fields, with errors that name the field (for :mod:`.control`).

Examples
--------
>>> r = Fields({"version": 3, "host": "h0", "share": 1}, where="view")
>>> r.integer("version"), r.text("host"), r.number("share"), r.opt_integer("rank")
(3, 'h0', 1.0, None)
>>> Fields({"version": True}, where="view").integer("version")
Traceback (most recent call last):
...
commsched.errors.InputError: view.version: True (expected an integer)
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from commsched.errors import InputError
from commsched.runtime.protocol.marks import Mark

__all__ = ["Fields"]

_MISSING = object()
T = TypeVar("T")


class Fields:
    """The fields of the JSON object ``data`` found at ``where``; a missing or mistyped one raises.

    Unknown keys are ignored (a newer writer may add fields; it may not rename or retype them).
    """

    __slots__ = ("data", "where")

    def __init__(self, data: object, *, where: str) -> None:
        if not isinstance(data, Mapping):
            raise InputError(f"{type(data).__name__}", where=where, expected="a JSON object")
        self.data: Mapping[str, Any] = data
        self.where = where

    def at(self, key: str) -> str:
        """The path of field ``key``."""
        return f"{self.where}.{key}" if self.where else key

    def raw(self, key: str, *, required: bool = True) -> Any:
        value = self.data.get(key, _MISSING)
        if value is _MISSING:
            if required:
                raise InputError("missing", where=self.at(key), expected="the field")
            return None
        return value

    def _bad(self, key: str, value: object, expected: str) -> InputError:
        return InputError(f"{value!r}", where=self.at(key), expected=expected)

    def integer(self, key: str) -> int:
        value = self.raw(key)
        if isinstance(value, bool) or not isinstance(value, int):
            raise self._bad(key, value, "an integer")
        return value

    def opt_integer(self, key: str) -> int | None:
        return None if self.raw(key, required=False) is None else self.integer(key)

    def number(self, key: str) -> float:
        value = self.raw(key)
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise self._bad(key, value, "a finite number")
        return float(value)

    def opt_number(self, key: str) -> float | None:
        return None if self.raw(key, required=False) is None else self.number(key)

    def text(self, key: str) -> str:
        value = self.raw(key)
        if not isinstance(value, str):
            raise self._bad(key, value, "a string")
        return value

    def opt_text(self, key: str) -> str | None:
        return None if self.raw(key, required=False) is None else self.text(key)

    def flag(self, key: str, default: bool = False) -> bool:
        value = self.raw(key, required=False)
        if value is None:
            return default
        if not isinstance(value, bool):
            raise self._bad(key, value, "true or false")
        return value

    def texts(self, key: str) -> tuple[str, ...]:
        value = self.raw(key)
        if not isinstance(value, list) or not all(isinstance(x, str) for x in value):
            raise self._bad(key, value, "a list of strings")
        return tuple(value)

    def integers(self, key: str) -> tuple[int, ...]:
        value = self.raw(key)
        if not isinstance(value, list) or not all(
            isinstance(x, int) and not isinstance(x, bool) for x in value
        ):
            raise self._bad(key, value, "a list of integers")
        return tuple(value)

    def each(self, key: str, parse: Callable[[object, str], T], *, required: bool = True) -> tuple[T, ...]:
        """``parse(item, where)`` of each item of the list under ``key`` (``()``: optional and absent)."""
        value = self.raw(key, required=required)
        if value is None and not required:
            return ()
        if not isinstance(value, list):
            raise self._bad(key, type(value).__name__, "a list of objects")
        return tuple(parse(x, f"{self.at(key)}[{i}]") for i, x in enumerate(value))

    def opt_port(self, key: str) -> int | None:
        """A TCP/UDP port (1..65535) or ``None``."""
        port = self.opt_integer(key)
        if port is not None and not 0 < port < 65536:
            raise self._bad(key, port, "a port in 1..65535")
        return port

    def mark(self) -> Mark:
        """The mark of an object with ``dscp`` and ``tos`` (a TOS byte that is not ``dscp << 2``: refused)."""
        try:
            mark = Mark(dscp=self.integer("dscp"))
        except InputError as exc:
            raise InputError(exc.what, where=self.at("dscp"), expected=exc.expected) from None
        tos = self.integer("tos")
        if tos != mark.tos:
            raise InputError(
                f"{tos} with DSCP {mark.dscp}", where=self.at("tos"), expected=f"{mark.tos} (dscp << 2)"
            )
        return mark

    def mapping(self, key: str, *, required: bool = True) -> dict[str, Any]:
        value = self.raw(key, required=required)
        if value is None and not required:
            return {}
        if not isinstance(value, Mapping):
            raise self._bad(key, type(value).__name__, "a JSON object")
        return dict(value)

    def version(self, key: str, expected: int) -> int:
        """The layout version under ``key``, which must be ``expected`` (a reader knows one layout)."""
        value = self.integer(key)
        if value != expected:
            raise InputError(
                f"{key} {value} is not understood",
                where=self.at(key),
                expected=f"{key} {expected} (upgrade the reader, or the writer's version)",
            )
        return value
