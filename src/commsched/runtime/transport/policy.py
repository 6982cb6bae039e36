"""Connection policies: which source port and DSCP a job's connection uses.

A connection policy answers, for a directed connection ``(job, src rank, dst rank)``, the local source
port the sender binds (which pins the ECMP path, as Crux does with the RoCEv2 UDP source port) and the
DSCP both ends mark their packets with (which selects the switch queue of the job's priority class).
The host agent is one such policy; :class:`StaticPolicy` is the plain in-process one.

References
----------
Crux (SIGCOMM'24) §5.3: the transport sets the source port and traffic class of every connection.
"""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol, runtime_checkable

from commsched.errors import InputError
from commsched.runtime.protocol.marks import Mark, mark_socket, socket_mark

MAX_DSCP = 63


@dataclass(frozen=True, slots=True, kw_only=True)
class Marking:
    """How one directed connection is marked.

    Attributes
    ----------
    source_port
        Local TCP port the sender binds before connecting, or ``None`` for an ephemeral one.
    dscp
        Differentiated-services code point (0..63); the IP TOS byte is ``dscp << 2``.
    """

    source_port: int | None = None
    dscp: int = 0

    def __post_init__(self) -> None:
        if self.source_port is not None and not 1 <= self.source_port <= 65535:
            raise InputError(
                f"source port {self.source_port} out of range", where="source_port", expected="1..65535"
            )
        if not 0 <= self.dscp <= MAX_DSCP:
            raise InputError(f"DSCP {self.dscp} out of range", where="dscp", expected=f"0..{MAX_DSCP}")


@runtime_checkable
class ConnectionPolicy(Protocol):
    """Anything that answers ``marking(job, src, dst)`` for a directed connection."""

    def marking(self, job: str, src: int, dst: int) -> Marking:
        """The marking of the connection from rank ``src`` to rank ``dst`` of ``job``."""
        ...


@dataclass(frozen=True, slots=True, kw_only=True)
class StaticPolicy:
    """A fixed policy: one DSCP for the job, optional source ports per ``(src, dst)``.

    Examples
    --------
    >>> p = StaticPolicy(dscp=46, source_ports={(0, 1): 40001})
    >>> p.marking("j", 0, 1), p.marking("j", 1, 0).source_port
    (Marking(source_port=40001, dscp=46), None)
    """

    dscp: int = 0
    source_ports: Mapping[tuple[int, int], int] = field(default_factory=dict)

    def marking(self, job: str, src: int, dst: int) -> Marking:
        """The marking of ``src -> dst``: the fixed DSCP and the configured port, if any."""
        return Marking(source_port=self.source_ports.get((src, dst)), dscp=self.dscp)


DEFAULT_POLICY = StaticPolicy()

PolicyFunction = Callable[[str, int, int], "Marking | tuple[int | None, int]"]
"""A plain function ``(job, src, dst) -> Marking`` or ``-> (source_port or None, dscp)``."""


@dataclass(frozen=True, slots=True, kw_only=True)
class FunctionPolicy:
    """A :class:`ConnectionPolicy` around a plain function (see :data:`PolicyFunction`).

    Examples
    --------
    >>> FunctionPolicy(fn=lambda job, s, d: (40000 + d, 26)).marking("j", 0, 3)
    Marking(source_port=40003, dscp=26)
    """

    fn: PolicyFunction

    def marking(self, job: str, src: int, dst: int) -> Marking:
        """The function's answer as a :class:`Marking`."""
        ans = self.fn(job, src, dst)
        if isinstance(ans, Marking):
            return ans
        port, dscp = ans
        return Marking(source_port=port, dscp=dscp)


def as_policy(policy: ConnectionPolicy | PolicyFunction) -> ConnectionPolicy:
    """``policy`` itself if it has ``marking``, else a :class:`FunctionPolicy` around the callable."""
    if isinstance(policy, ConnectionPolicy):
        return policy
    if callable(policy):
        return FunctionPolicy(fn=policy)
    raise InputError(
        f"connection policy of type {type(policy).__name__}",
        where="policy",
        expected="an object with marking(job, src, dst) or a function (job, src, dst) -> (port, dscp)",
    )


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfilingWindowPolicy:
    """A new job's policy: the top class until its profiling window ends, then ``inner``'s class.

    Crux profiles a new job at a unique top priority so that it sees no contention (§5); source ports
    always come from ``inner``. With ``policy_refresh_s`` set on the group, open connections drop to
    the job's own class by themselves once ``until`` has passed.

    Examples
    --------
    >>> now = [0.0]
    >>> p = ProfilingWindowPolicy(inner=StaticPolicy(dscp=10), top_dscp=46, until=30.0, clock=lambda: now[0])
    >>> p.marking("j", 0, 1).dscp
    46
    >>> now[0] = 30.0
    >>> p.marking("j", 0, 1).dscp
    10
    """

    inner: ConnectionPolicy
    top_dscp: int
    until: float
    clock: Callable[[], float] = time.monotonic

    def marking(self, job: str, src: int, dst: int) -> Marking:
        """``inner``'s marking, with the DSCP replaced by ``top_dscp`` before ``until``."""
        m = self.inner.marking(job, src, dst)
        return m if self.clock() >= self.until else Marking(source_port=m.source_port, dscp=self.top_dscp)


def set_dscp(sock: socket.socket, dscp: int) -> None:
    """Mark ``sock`` (open, listening or connected) with ``dscp``: ``IP_TOS`` or ``IPV6_TCLASS``.

    The byte is :attr:`commsched.runtime.protocol.marks.Mark.tos` (``dscp << 2``: the low two bits are ECN,
    which the kernel manages for TCP).
    """
    mark_socket(sock, Mark(dscp=dscp))


def get_dscp(sock: socket.socket) -> int:
    """The DSCP ``sock`` currently marks its packets with (read back with ``getsockopt``)."""
    return socket_mark(sock).dscp
