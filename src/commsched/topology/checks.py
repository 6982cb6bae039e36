"""Checks of builder parameters; each failure is an :class:`InputError` naming the ``topology.<param>``."""

from __future__ import annotations

from commsched.errors import InputError


def _where(name: str) -> str:
    return f"topology.{name}"


def count(name: str, value: object, *, minimum: int = 1) -> int:
    """An integer parameter ``>= minimum`` (bools are rejected).

    Examples
    --------
    >>> count("tors", 4)
    4
    >>> count("tors", 0)
    Traceback (most recent call last):
    ...
    commsched.errors.InputError: topology.tors: bad value 0 (expected an integer >= 1)
    """
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise InputError(f"bad value {value!r}", where=_where(name), expected=f"an integer >= {minimum}")
    return value


def rate(name: str, value: object) -> float:
    """A strictly positive number (a capacity in bits/s)."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value > 0:
        raise InputError(f"bad value {value!r}", where=_where(name), expected="a positive number (bits/s)")
    return float(value)


def seconds(name: str, value: object) -> float:
    """A non-negative number of seconds."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not value >= 0:
        raise InputError(f"bad value {value!r}", where=_where(name), expected="a number of seconds >= 0")
    return float(value)


def multiple(name: str, value: int, of: int, what: str) -> int:
    """``value`` must be a positive multiple of ``of``; returns ``value // of``."""
    if value % of:
        raise InputError(
            f"{value} is not a multiple of {of}", where=_where(name), expected=f"a multiple of {what}"
        )
    return value // of
