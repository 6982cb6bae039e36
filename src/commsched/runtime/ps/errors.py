"""Errors of the parameter-server runtime (all in :mod:`commsched.errors`' hierarchy)."""

from __future__ import annotations

from commsched.errors import CommschedError


class PSError(CommschedError):
    """The parameter-server runtime failed: a peer vanished, a role did not appear, a sum is incomplete."""


class PSTimeoutError(PSError):
    """A role or a result did not arrive within the timeout."""


class ProtocolError(PSError):
    """A malformed or truncated message on the data path; the message is rejected, nothing is summed."""
