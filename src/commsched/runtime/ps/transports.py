"""The per-job transports: which piece of which tensor a worker sends next.

* ``fifo`` — BytePS's default order: parts in the order their tensors became ready, no priority.
* ``p3`` — P3-style message-level priority (ps-lite's ``p3`` van): whole parts, most urgent first.
* ``bytescheduler`` — ByteScheduler: tensors cut into ``partition_bytes`` partitions sent most urgent
  first while the unacknowledged bytes stay within ``credit_bytes`` (one partition is always allowed
  when nothing is outstanding), as :func:`commsched.intrajob.partitioned.partitioned_push` models it.
* ``mercury`` — Mercury: ~30 KB packets, one FIFO per tensor, always the highest-priority non-empty
  queue (a newly ready front tensor preempts a back one at the next packet; the client sends
  packets in batches of up to 256 KB, so on the wire at the next batch), push and pull fused.

Each transport is a :class:`TransportKind` in :func:`transport_registry` (name -> what it does, with
its description); the sender, the client and the model read the kind's fields, never the name, so a new
transport is one :func:`register_transport` call. Priority 0 is the most urgent (the layer closest to
the input). A :class:`SendQueue` is plain state;
the client keeps one per server connection, each driven by its own sender thread under the client's
lock; ByteScheduler's credit is the worker's, one :class:`Credit` shared by all its queues.
"""

from __future__ import annotations

import functools
import heapq
from collections import deque
from dataclasses import dataclass, field

from commsched.errors import InputError
from commsched.registry import Registry
from commsched.runtime.protocol.marks import Mark
from commsched.runtime.ps.keys import PART_BYTES

#: Mercury's packet size as implemented ("~30 KB", Mercury §VI-C), bytes
PACKET_BYTES = 30_000
#: ByteScheduler defaults: 4 MB partitions and 20 MB credit (Mercury §III-A, Fig. 4), bytes
BS_PARTITION_BYTES = 4_000_000
BS_CREDIT_BYTES = 20_000_000


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportKind:
    """What a transport does: the fields the sender, the client and the model act on.

    Attributes
    ----------
    name, description
        The registered name and one line for listings.
    prioritized
        Most urgent tensor first (a priority heap); ``False``: in the order tensors became ready.
    packets
        Mercury's packets: ``packet_bytes`` units, push and pull fused in one message; else parts.
    credit
        ByteScheduler's credit: the unacknowledged bytes stay within ``credit_bytes``.
    partition_bytes
        The transport's default part size (``None``: the server-sharding part size).
    """

    name: str
    description: str
    prioritized: bool = True
    packets: bool = False
    credit: bool = False
    partition_bytes: int | None = None


@functools.cache
def transport_registry() -> Registry[TransportKind]:
    """The PS transports by name (one registry per process; a name registered twice raises).

    Examples
    --------
    >>> transport_registry().names()
    ('fifo', 'bytescheduler', 'p3', 'mercury')
    >>> transport_registry().get("mercury").packets
    True
    """
    reg: Registry[TransportKind] = Registry("PS transport")
    for kind in (
        TransportKind(name="fifo", description="BytePS's default: parts in ready order, no priority",
                      prioritized=False),
        TransportKind(name="bytescheduler", description="ByteScheduler: priority partitions within a credit",
                      credit=True, partition_bytes=BS_PARTITION_BYTES),
        TransportKind(name="p3", description="P3: whole parts, most urgent first"),
        TransportKind(name="mercury", description="Mercury: ~30 KB packets, highest priority first, "
                      "push and pull fused", packets=True),
    ):  # fmt: skip
        reg.register(kind.name, kind)
    return reg


def register_transport(kind: TransportKind) -> None:
    """Add a transport; a name already registered raises ``ValueError``."""
    transport_registry().register(kind.name, kind)


@dataclass(frozen=True, slots=True, kw_only=True)
class TransportConfig:
    """A job's transport and its knobs.

    Attributes
    ----------
    name
        A name of :func:`transport_registry`.
    partition_bytes
        Part size (the server-sharding unit; ByteScheduler's partition size).
    credit_bytes
        ByteScheduler's credit (most unacknowledged bytes).
    packet_bytes
        Mercury's packet size.
    mark
        The mark (DSCP; :attr:`~commsched.runtime.protocol.marks.Mark.tos` is the byte) set on both ends
        of every connection of the job (:func:`commsched.runtime.protocol.marks.mark_socket`), or ``None``:
        unmarked.
    """

    name: str = "fifo"
    partition_bytes: int = PART_BYTES
    credit_bytes: int = BS_CREDIT_BYTES
    packet_bytes: int = PACKET_BYTES
    mark: Mark | None = None

    def __post_init__(self) -> None:
        transport_registry().get(self.name, where="transport")
        for f in ("partition_bytes", "credit_bytes", "packet_bytes"):
            if getattr(self, f) < 8:
                raise InputError(f"{getattr(self, f)} bytes", where=f, expected=">= 8")
        if self.mark is not None and not isinstance(self.mark, Mark):
            raise InputError(f"{self.mark!r}", where="mark", expected="a commsched.runtime.Mark")

    @property
    def tos(self) -> int | None:
        """The TOS byte of :attr:`mark` (``dscp << 2``), or ``None`` when unmarked."""
        return None if self.mark is None else self.mark.tos

    @property
    def kind(self) -> TransportKind:
        """What this transport does (its registry entry)."""
        return transport_registry().get(self.name, where="transport")

    @classmethod
    def named(cls, name: str, *, mark: Mark | None = None) -> TransportConfig:
        """The defaults of ``name`` (ByteScheduler: 4 MB partitions, 20 MB credit)."""
        part = transport_registry().get(name, where="transport").partition_bytes
        return cls(name=name, mark=mark) if part is None else cls(name=name, partition_bytes=part, mark=mark)


@dataclass(slots=True)
class Chunk:
    """One unit to send: ``nbytes`` bytes at ``offset`` of tensor ``tensor`` (an opaque id)."""

    tensor: int
    offset: int
    nbytes: int
    priority: int


@dataclass(slots=True)
class _Stream:
    priority: int
    seq: int
    tensor: int
    size: int
    unit: int
    sent: int = 0


@dataclass(slots=True)
class Credit:
    """Unacknowledged bytes of one worker (ByteScheduler's credit in use), shared by its queues."""

    outstanding: int = 0


@dataclass(slots=True)
class SendQueue:
    """What to send next under a transport's rule (not thread-safe; the caller holds a lock).

    Examples
    --------
    Mercury: a front tensor that becomes ready preempts a back one at the next packet.

    >>> q = SendQueue(TransportConfig(name="mercury", packet_bytes=8))
    >>> q.add(tensor=1, size=24, priority=5)
    >>> q.pop().tensor
    1
    >>> q.add(tensor=0, size=8, priority=0)
    >>> [q.pop().tensor for _ in range(3)]
    [0, 1, 1]
    """

    config: TransportConfig
    credit: Credit = field(default_factory=Credit)
    _heap: list[tuple[int, int, _Stream]] = field(default_factory=list)
    _fifo: deque[_Stream] = field(default_factory=deque)
    _seq: int = 0

    def add(self, *, tensor: int, size: int, priority: int) -> None:
        """Queue a tensor of ``size`` bytes (its parts must be multiples of the packet size)."""
        kind = self.config.kind
        unit = self.config.packet_bytes if kind.packets else self.config.partition_bytes
        s = _Stream(priority=priority, seq=self._seq, tensor=tensor, size=size, unit=unit)
        self._seq += 1
        if not kind.prioritized:
            self._fifo.append(s)
        else:
            heapq.heappush(self._heap, (priority, s.seq, s))

    def __len__(self) -> int:
        return len(self._fifo) + len(self._heap)

    def _head(self) -> _Stream | None:
        if self._fifo:
            return self._fifo[0]
        return self._heap[0][2] if self._heap else None

    def ready(self) -> bool:
        """Whether :meth:`pop` may be called now (ByteScheduler: the credit allows the next partition)."""
        head = self._head()
        if head is None:
            return False
        if not self.config.kind.credit or self.credit.outstanding == 0:
            return True
        nbytes = min(head.unit - head.sent % head.unit, head.size - head.sent)
        return self.credit.outstanding + nbytes <= self.config.credit_bytes

    def pop(self) -> Chunk:
        """The next chunk: up to the end of the current unit (part, partition or packet)."""
        head = self._head()
        if head is None:
            raise IndexError("empty send queue")
        nbytes = min(head.unit - head.sent % head.unit, head.size - head.sent)
        chunk = Chunk(tensor=head.tensor, offset=head.sent, nbytes=nbytes, priority=head.priority)
        head.sent += nbytes
        if head.sent >= head.size:
            if self._fifo:
                self._fifo.popleft()
            else:
                heapq.heappop(self._heap)
        if self.config.kind.credit:
            self.credit.outstanding += nbytes
        return chunk
