"""The one error hierarchy of commsched.

User-facing errors carry *what* was wrong, *where* (file, line, field path) and *what was expected*,
so that the command line can print them as one line without a traceback.
"""

from __future__ import annotations


class CommschedError(Exception):
    """Base class of every error commsched raises on purpose.

    Examples
    --------
    >>> issubclass(InputError, CommschedError) and issubclass(TopologyError, CommschedError)
    True
    """


class InputError(CommschedError):
    """Bad user input: a file, a field, a command-line value.

    Parameters
    ----------
    what
        What is wrong, in a few words.
    where
        Where it is: a file name, ``file:line``, a field path such as ``jobs[1].gpus``, or an option.
    expected
        What would have been accepted.

    Examples
    --------
    >>> str(InputError("unknown topology kind 'foo'", where="s.yaml: topology.kind",
    ...                expected="one of single_link, two_layer_clos"))
    "s.yaml: topology.kind: unknown topology kind 'foo' (expected one of single_link, two_layer_clos)"
    """

    def __init__(self, what: str, *, where: str = "", expected: str = "") -> None:
        self.what = what
        self.where = where
        self.expected = expected
        super().__init__(self.line())

    def line(self) -> str:
        """The error as one human-readable line."""
        text = f"{self.where}: {self.what}" if self.where else self.what
        if self.expected:
            text += f" (expected {self.expected})"
        return text


class ValidationError(InputError):
    """A scenario or data file failed validation; ``problems`` lists every problem, one line each.

    Examples
    --------
    >>> err = ValidationError(["s.yaml:3: jobs[0].gpus: missing", "s.yaml:5: policy: unknown policy 'x'"])
    >>> len(err.problems)
    2
    """

    def __init__(self, problems: list[str], *, where: str = "") -> None:
        self.problems = list(problems)
        what = f"{len(self.problems)} problem(s): " + "; ".join(self.problems)
        super().__init__(what, where=where)


class UnknownNameError(InputError):
    """A name that is not in a registry; the message lists the valid names.

    Examples
    --------
    >>> err = UnknownNameError("policy", "crux", ["crux-full", "ecmp-fair"], where="--policy")
    >>> err.line()
    "--policy: unknown policy 'crux' (expected one of crux-full, ecmp-fair)"
    """

    def __init__(
        self, family: str, name: str, valid: list[str] | tuple[str, ...], *, where: str = ""
    ) -> None:
        self.family = family
        self.name = name
        self.valid = tuple(sorted(valid))
        super().__init__(
            f"unknown {family} {name!r}", where=where, expected="one of " + ", ".join(self.valid)
        )


class TopologyError(CommschedError):
    """A topology is inconsistent or a query on it cannot be answered (no path, unknown node)."""


class InfeasibleError(CommschedError):
    """A decision problem has no solution (for example, a placement that cannot fit)."""


class TestbedError(CommschedError):
    """A system command of the emulated fabric testbed failed (the message names the command)."""

    __test__ = False  # not a pytest test class


class CapabilityError(InputError):
    """The process lacks a capability it needs (for example root / CAP_NET_ADMIN for the testbed)."""


class TransportError(CommschedError):
    """The job library's data path failed: a peer died or timed out, or sent a malformed frame."""


class PeerError(TransportError):
    """A peer closed its connection, reset it, or did not answer within the timeout."""


class ProtocolError(TransportError):
    """A message on a data path broke its wire format: a transport frame (magic, version, kind, sequence
    or length), or a parameter-server message (kind, dtype, length, key, a truncated read); the message
    is rejected, nothing is summed."""
