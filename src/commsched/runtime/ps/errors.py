"""Errors of the parameter-server runtime (all in :mod:`commsched.errors`' hierarchy).

A malformed or truncated message on the data path raises :class:`commsched.errors.ProtocolError`, the
one protocol error of every data path (the transport's frames and the parameter server's messages),
which this module re-exports for the parameter server's modules.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

from commsched.errors import CommschedError, InputError, ProtocolError

__all__ = ["PSError", "PSTimeoutError", "ProtocolError", "error_exit_code", "process_exit_code"]


class PSError(CommschedError):
    """The parameter-server runtime failed: a peer vanished, a role did not appear, a sum is incomplete."""


class PSTimeoutError(PSError):
    """A role or a result did not arrive within the timeout."""


def process_exit_code(body: Callable[[], None]) -> int:
    """Run a runtime process's ``body``; an error prints one line on stderr (exit 2 for bad input, else 1)."""
    try:
        body()
    except InputError as exc:
        print(f"error: {exc.line()}", file=sys.stderr)
        return 2
    except CommschedError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 1
    return 0


def error_exit_code(exc: CommschedError) -> int:
    """Print ``exc`` as one line on stderr; the exit status of a process it ends (2 for bad input, else 1).

    For a process whose own entry point catches the package's errors (no callback handed down).
    """
    if isinstance(exc, InputError):
        print(f"error: {exc.line()}", file=sys.stderr)
        return 2
    print(f"error: {exc}", file=sys.stderr)
    return 1
