"""Errors of the parameter-server runtime (all in :mod:`commsched.errors`' hierarchy)."""

from __future__ import annotations

import sys
from collections.abc import Callable

from commsched.errors import CommschedError, InputError


class PSError(CommschedError):
    """The parameter-server runtime failed: a peer vanished, a role did not appear, a sum is incomplete."""


class PSTimeoutError(PSError):
    """A role or a result did not arrive within the timeout."""


class ProtocolError(PSError):
    """A malformed or truncated message on the data path; the message is rejected, nothing is summed."""


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
