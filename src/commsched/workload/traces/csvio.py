"""CSV reading shared by the trace loaders: header check, rows with line numbers, typed fields.

Every error is an :class:`~commsched.errors.InputError` naming ``file:line`` and what was expected.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from commsched.errors import InputError


@dataclass(frozen=True, slots=True, kw_only=True)
class CsvRow:
    """One data row: its fields by column name and where it is (``file:line``)."""

    fields: dict[str, str]
    where: str

    def get(self, column: str) -> str:
        return self.fields.get(column, "").strip()


def read_text(path: str | Path, what: str) -> str:
    """The file's text; unreadable files raise :class:`InputError`."""
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8-sig")
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(f"cannot read {what}: {exc}", where=str(p)) from None


def read_csv(path: str | Path, *, required: Iterable[str], what: str) -> list[CsvRow]:
    """Rows of a CSV file with a header that has at least the ``required`` columns.

    Blank lines are skipped; a row with more fields than the header is an error.

    Examples
    --------
    >>> import pathlib, tempfile
    >>> f = pathlib.Path(tempfile.mkdtemp()) / "a.csv"
    >>> _ = f.write_text("x,y\\n1,2\\n")
    >>> [r.fields for r in read_csv(f, required=("x",), what="demo")]
    [{'x': '1', 'y': '2'}]
    >>> read_csv(f, required=("z",), what="demo")  # doctest: +ELLIPSIS
    Traceback (most recent call last):
    ...
    commsched.errors.InputError: ...a.csv:1: demo header lacks column(s) z (expected columns z)
    """
    p = Path(path)
    reader = csv.reader(read_text(p, what).splitlines())
    header = [c.strip() for c in next(reader, [])]
    need = tuple(required)
    missing = [c for c in need if c not in header]
    if missing:
        raise InputError(
            f"{what} header lacks column(s) {', '.join(missing)}",
            where=f"{p}:1",
            expected="columns " + ",".join(need),
        )
    rows = []
    for line, rec in enumerate(reader, start=2):
        if not rec or not any(v.strip() for v in rec):
            continue
        if len(rec) > len(header):
            raise InputError(
                f"{len(rec)} fields for {len(header)} columns", where=f"{p}:{line}", expected="one per column"
            )
        rows.append(CsvRow(fields=dict(zip(header, rec, strict=False)), where=f"{p}:{line}"))
    return rows


def number(row: CsvRow, column: str, *, minimum: float = 0.0) -> float:
    """Field ``column`` as a finite float ``>= minimum``."""
    text = row.get(column)
    try:
        value = float(text)
    except ValueError:
        value = math.nan
    if not (math.isfinite(value) and value >= minimum):
        raise InputError(
            f"{column} = {text!r}", where=f"{row.where}: {column}", expected=f"a number >= {minimum:g}"
        )
    return value


def count(row: CsvRow, column: str) -> int:
    """Field ``column`` as an integer ``>= 1`` (``"8"`` or ``"8.0"``)."""
    value = number(row, column, minimum=1.0)
    if value != int(value):
        raise InputError(
            f"{column} = {row.get(column)!r}", where=f"{row.where}: {column}", expected="an integer"
        )
    return int(value)
