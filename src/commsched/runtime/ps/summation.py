"""The summation service of a server (BytePS §3.2 and §4.2; Mercury's immediate aggregation, §IV-C).

State per part key: an fp32 accumulator. A push (whole part) or a Mercury packet (a slice) is summed
into it: the first copy of a round copies, later ones add (fp16 payloads are accumulated in fp32).
A region completes when all ``num_workers`` copies are in; the result is then snapshot in the wire
dtype, so the accumulator can start the next round at once (per-iteration reset). Part mode answers
pulls (deferred until complete); packet mode hands each completed packet to ``on_packet``.

Keys go to summation threads by accumulated bytes (BytePS's ``GetThreadID``): a new key goes to the
thread with the fewest bytes so far. This module is pure state; :mod:`commsched.runtime.ps.server`
runs it on threads.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from commsched.errors import ProtocolError
from commsched.runtime.ps.frame import DTYPES

F32 = npt.NDArray[np.float32]
#: called with (worker, key, offset, dtype code, result bytes) when a result is due to a worker
Reply = Callable[[int, int, int, int, bytes], None]


@dataclass(slots=True)
class _Part:
    nbytes: int
    dtype: int
    acc: F32
    pushed: set[int] = field(default_factory=set)
    completed: int = 0
    result: bytes = b""
    pulls_done: dict[int, int] = field(default_factory=dict)
    pending: list[int] = field(default_factory=list)
    packets: dict[int, set[int]] = field(default_factory=dict)


class Summation:
    """Sums of every part key of one server (not thread-safe: one thread per key, see module doc).

    Examples
    --------
    >>> import numpy as np
    >>> out = []
    >>> s = Summation(num_workers=2, reply=lambda *a: out.append(a))
    >>> s.declare(key=1, nbytes=8, dtype=0)
    >>> s.push(worker=0, key=1, offset=0, payload=np.array([1, 2], np.float32).tobytes())
    >>> s.pull(worker=0, key=1)
    >>> out
    []
    >>> s.push(worker=1, key=1, offset=0, payload=np.array([3, 4], np.float32).tobytes())
    >>> np.frombuffer(out[0][4], np.float32).tolist()
    [4.0, 6.0]
    """

    def __init__(self, *, num_workers: int, reply: Reply) -> None:
        self.num_workers = num_workers
        self._reply = reply
        self._parts: dict[int, _Part] = {}
        self.summed_bytes = 0

    def declare(self, *, key: int, nbytes: int, dtype: int) -> None:
        """Create ``key``'s accumulator, or check that a repeated declaration agrees."""
        part = self._parts.get(key)
        if part is None:
            itemsize = DTYPES[dtype].itemsize
            if nbytes % itemsize:
                raise ProtocolError(f"key {key}: {nbytes} bytes is not a whole number of elements")
            self._parts[key] = _Part(nbytes=nbytes, dtype=dtype, acc=np.zeros(nbytes // itemsize, np.float32))
        elif part.nbytes != nbytes or part.dtype != dtype:
            raise ProtocolError(
                f"key {key} declared with {nbytes} bytes/dtype {dtype}, earlier {part.nbytes}/{part.dtype}"
            )

    def has(self, key: int) -> bool:
        return key in self._parts

    def _get(self, key: int) -> _Part:
        part = self._parts.get(key)
        if part is None:
            raise ProtocolError(f"key {key} was never declared")
        return part

    def _add(self, part: _Part, offset: int, payload: bytes | bytearray | memoryview, first: bool) -> None:
        itemsize = DTYPES[part.dtype].itemsize
        if offset % itemsize or len(payload) % itemsize or offset + len(payload) > part.nbytes:
            raise ProtocolError(
                f"slice [{offset}, {offset + len(payload)}) outside a {part.nbytes}-byte part"
            )
        src = np.frombuffer(payload, dtype=DTYPES[part.dtype])
        dst = part.acc[offset // itemsize : offset // itemsize + src.size]
        if first:
            np.copyto(dst, src)
        else:
            np.add(dst, src, out=dst)
        self.summed_bytes += len(payload)

    def _snapshot(self, part: _Part, lo: int, hi: int) -> bytes:
        itemsize = DTYPES[part.dtype].itemsize
        acc = part.acc[lo // itemsize : hi // itemsize]
        return acc.tobytes() if part.dtype == 0 else acc.astype(DTYPES[part.dtype]).tobytes()

    def push(self, *, worker: int, key: int, offset: int, payload: bytes | bytearray | memoryview) -> None:
        """Sum a whole-part push (BytePS); the caller acknowledges it at once."""
        part = self._get(key)
        if offset != 0 or len(payload) != part.nbytes:
            raise ProtocolError(f"key {key}: a push must carry the whole {part.nbytes}-byte part")
        if worker in part.pushed:
            raise ProtocolError(f"key {key}: worker {worker} pushed twice in one round")
        self._add(part, 0, payload, first=not part.pushed)
        part.pushed.add(worker)
        if len(part.pushed) == self.num_workers:
            part.result = self._snapshot(part, 0, part.nbytes)
            part.completed += 1
            part.pushed.clear()
            waiting, part.pending = part.pending, []
            for w in waiting:
                self._answer(part, key, w)

    def pull(self, *, worker: int, key: int) -> None:
        """Answer ``worker``'s pull of ``key`` now if its round is complete, else when it completes."""
        part = self._get(key)
        want = part.pulls_done.get(worker, 0) + 1
        if part.completed >= want:
            self._answer(part, key, worker)
        elif worker not in part.pending:
            part.pending.append(worker)

    def _answer(self, part: _Part, key: int, worker: int) -> None:
        part.pulls_done[worker] = part.pulls_done.get(worker, 0) + 1
        self._reply(worker, key, 0, part.dtype, part.result)

    def packet(
        self, *, worker: int, key: int, offset: int, payload: bytes | bytearray | memoryview
    ) -> bytes | memoryview | None:
        """Add one Mercury packet; return the summed packet when all workers' copies are in.

        A float32 result is a view of the accumulator: send it before the next packet of this key.
        """
        part = self._get(key)
        seen = part.packets.setdefault(offset, set())
        if worker in seen:
            raise ProtocolError(f"key {key} offset {offset}: worker {worker} sent the packet twice")
        self._add(part, offset, payload, first=not seen)
        seen.add(worker)
        if len(seen) < self.num_workers:
            return None
        del part.packets[offset]
        if part.dtype == 0:
            lo = offset // 4
            return part.acc[lo : lo + len(payload) // 4].data
        return self._snapshot(part, offset, offset + len(payload))
