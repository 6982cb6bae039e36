"""The worker side: ``push_pull`` of named tensors through a job's transport to the servers.

A tensor is declared once (``declared_key`` in declaration order, as BytePS does; every worker must
declare the same names in the same order), cut into parts keyed ``declared_key << 16 | part``, each
part sent to the server the :class:`~commsched.runtime.ps.keys.ServerMap` gives. Each server
connection has its own :class:`~commsched.runtime.ps.transports.SendQueue` and sender thread (a
congested server never holds up the parts bound for another, as ps-lite's per-peer queues behave;
ByteScheduler's credit is shared by all of them), and its own receiver thread collecting
acknowledgements (credit) and summed data. Part transports push a part (acknowledged at
once) and then pull it (answered when all workers pushed); Mercury sends fused push-pull packets.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
import numpy.typing as npt

from commsched.runtime.protocol.marks import Mark, mark_socket
from commsched.runtime.ps import frame
from commsched.runtime.ps.errors import ProtocolError, PSError, PSTimeoutError
from commsched.runtime.ps.frame import DTYPES, Kind
from commsched.runtime.ps.keys import ServerMap, part_bounds, part_key
from commsched.runtime.ps.pacing import pace_socket
from commsched.runtime.ps.transports import Credit, SendQueue, TransportConfig

Array = npt.NDArray[np.floating]
#: send buffer of a Mercury socket (the kernel doubles it): what a newly ready front tensor waits
#: behind at most; small enough to preempt within milliseconds at 1 Gb/s, large enough that the
#: sender is woken once per batch of packets rather than once per packet (a bounded
#: TCP_NOTSENT_LOWAT wakes it per packet, which a CPU-starved host cannot afford)
MERCURY_SNDBUF_BYTES = 512 << 10
#: Mercury packets a sender pops and sends at once (one ``sendmsg``)
MERCURY_BATCH_BYTES = 256 << 10


class Handle:
    """A ``push_pull`` in flight; :meth:`wait` returns the summed (or averaged) array."""

    def __init__(self, name: str, out: Array) -> None:
        self.name = name
        self.out = out
        self.error: str | None = None
        self.event = threading.Event()
        self.t_enqueue = time.perf_counter()
        self.t_first_send: float | None = None
        self.t_done = 0.0

    def done(self) -> bool:
        return self.event.is_set()

    def wait(self, timeout_s: float | None = None) -> Array:
        if not self.event.wait(timeout_s):
            raise PSTimeoutError(f"push_pull of {self.name!r} not complete within {timeout_s} s")
        if self.error is not None:
            raise PSError(self.error)
        return self.out


@dataclass(slots=True)
class _Part:
    key: int
    server: int
    src: memoryview  # bytes of the worker's tensor for this part
    dst: memoryview  # where the sum lands
    tensor: _Tensor


@dataclass(slots=True)
class _Tensor:
    name: str
    handle: Handle
    dtype: int
    average: bool
    remaining: int
    parts: list[_Part] = field(default_factory=list)


def connect(
    address: tuple[str, int], *, timeout_s: float, mark: Mark | None = None, source: str | None = None
) -> socket.socket:
    """Connect to ``address`` (from ``source``), marked, retrying until ``timeout_s`` (any start order)."""
    deadline = time.monotonic() + timeout_s
    bind = (source, 0) if source else None
    while True:
        try:
            sock = socket.create_connection(
                address, timeout=max(0.1, deadline - time.monotonic()), source_address=bind
            )
            break
        except OSError as exc:
            if time.monotonic() >= deadline:
                raise PSTimeoutError(
                    f"{address[0]}:{address[1]} did not answer within {timeout_s} s: {exc}"
                ) from None
            time.sleep(0.05)
    sock.settimeout(None)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    if mark is not None:
        mark_socket(sock, mark)  # IP_TOS or IPV6_TCLASS, dscp << 2
    return sock


class PSClient:
    """A worker's connection to every server of the job.

    Parameters
    ----------
    servers
        ``(host, port)`` of each server, in server-index order.
    rank, num_workers
        This worker and the job size.
    transport
        The job's transport.
    server_map
        Part -> server assignment (default: BytePS's djb2 hash over ``len(servers)``).
    timeout_s
        Connection timeout.
    source
        This worker's own address (``DMLC_NODE_HOST``): its connections leave from it.
    pacing_bytes_s
        Per server index, the rate (bytes/s) its connection is paced to (``SO_MAX_PACING_RATE``,
        :mod:`commsched.runtime.ps.pacing`); ``None`` (or an entry ``None``): not paced.
    """

    def __init__(
        self,
        *,
        servers: Sequence[tuple[str, int]],
        rank: int,
        num_workers: int,
        transport: TransportConfig,
        server_map: ServerMap | None = None,
        timeout_s: float = 30.0,
        source: str | None = None,
        pacing_bytes_s: Sequence[float | None] | None = None,
    ) -> None:
        if pacing_bytes_s is not None and len(pacing_bytes_s) != len(servers):
            raise PSError(f"{len(pacing_bytes_s)} pacing rates for {len(servers)} servers")
        self.rank = rank
        self.num_workers = num_workers
        self.transport = transport
        self.server_map = server_map or ServerMap(num_servers=len(servers))
        self._cv = threading.Condition()
        self._credit = Credit()
        self._queues = [SendQueue(transport, credit=self._credit) for _ in servers]
        self._parts: list[_Part] = []  # index = chunk.tensor id in the send queue
        self._by_key: dict[int, _Part] = {}
        self._inited: set[int] = set()
        self._declared: dict[str, int] = {}
        self._inflight: dict[str, _Tensor] = {}
        self.failure: str | None = None
        self._closing = False
        self.events: list[dict[str, object]] = []
        self._socks = [connect(a, timeout_s=timeout_s, mark=transport.mark, source=source) for a in servers]
        for s, rate in zip(self._socks, pacing_bytes_s or [None] * len(servers), strict=True):
            pace_socket(s, rate)
            if transport.kind.packets:
                s.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, MERCURY_SNDBUF_BYTES)
            packets = int(transport.kind.packets)  # the server bounds its reply queue for packets
            s.sendall(frame.encode(Kind.HELLO, key=rank, offset=num_workers, priority=packets))
        self._senders = [
            threading.Thread(target=self._sender, args=(i,), daemon=True) for i in range(len(servers))
        ]
        self._threads = [*self._senders]
        self._threads += [
            threading.Thread(target=self._receiver, args=(i,), daemon=True) for i in range(len(servers))
        ]
        for t in self._threads:
            t.start()

    # -- API ----------------------------------------------------------------------------------
    def declare(self, name: str) -> int:
        """``declared_key`` of ``name`` (a new one in declaration order)."""
        with self._cv:
            return self._declared.setdefault(name, len(self._declared))

    def push_pull_async(
        self, array: Array, *, name: str, priority: int = 0, average: bool = False, out: Array | None = None
    ) -> Handle:
        """Start summing ``array`` (float32 or float16, any shape) over all workers.

        ``out`` (contiguous, the shape and dtype of ``array``, not overlapping it: the array is read
        while sums arrive) receives the result; by default a new array. A caller that reuses its
        result buffers every iteration saves the page faults of fresh memory, which can cost more
        than the transfer itself (on this project's virtual machines they did).
        """
        src = np.ascontiguousarray(array)
        if src.dtype not in DTYPES:
            raise PSError(f"push_pull of {name!r}: dtype {src.dtype} (expected float32 or float16)")
        if out is None:
            out = np.empty_like(src)
        elif out.shape != src.shape or out.dtype != src.dtype or not out.flags.c_contiguous:
            raise PSError(
                f"push_pull of {name!r}: out must be a contiguous {src.dtype} array of shape {src.shape}"
            )
        elif np.shares_memory(out, src):
            raise PSError(f"push_pull of {name!r}: out overlaps the tensor (it is read while sums arrive)")
        handle = Handle(name, out)
        key = self.declare(name)
        tensor = _Tensor(
            name=name, handle=handle, dtype=DTYPES.index(src.dtype), average=average, remaining=src.nbytes
        )
        sbytes, obytes = src.reshape(-1).view(np.uint8).data, out.reshape(-1).view(np.uint8).data
        bounds = part_bounds(src.nbytes, self.transport.partition_bytes, src.itemsize)
        with self._cv:
            if self.failure is not None:
                raise PSError(self.failure)
            if name in self._inflight:
                raise PSError(f"push_pull of {name!r} is already in flight")
            self._inflight[name] = tensor
            if src.nbytes == 0:
                self._finish(tensor)
                return handle
            for i, (lo, hi) in enumerate(bounds):
                k = part_key(key, i)
                part = _Part(
                    key=k,
                    server=self.server_map.server_of(k),
                    src=sbytes[lo:hi],
                    dst=obytes[lo:hi],
                    tensor=tensor,
                )
                tensor.parts.append(part)
                self._by_key[k] = part
                self._queues[part.server].add(tensor=len(self._parts), size=hi - lo, priority=priority)
                self._parts.append(part)
            self._cv.notify_all()
        return handle

    def push_pull(
        self,
        array: Array,
        *,
        name: str,
        priority: int = 0,
        average: bool = False,
        timeout_s: float = 60.0,
        out: Array | None = None,
    ) -> Array:
        handle = self.push_pull_async(array, name=name, priority=priority, average=average, out=out)
        return handle.wait(timeout_s)

    def close(self) -> None:
        """Say goodbye to every server and stop the threads."""
        with self._cv:
            self._closing = True
            self._cv.notify_all()
        for s in self._socks:
            try:
                s.sendall(frame.encode(Kind.BYE))
                s.shutdown(socket.SHUT_WR)
            except OSError:
                pass
        for t in self._senders:
            t.join(timeout=5)
        for s in self._socks:
            s.close()

    def __enter__(self) -> PSClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- threads ------------------------------------------------------------------------------
    def _fail(self, reason: str) -> None:
        with self._cv:
            if self.failure is None:
                self.failure = reason
            tensors = list(self._inflight.values())
            self._inflight.clear()
            self._cv.notify_all()
        for t in tensors:
            t.handle.error = self.failure
            t.handle.event.set()

    def _finish(self, tensor: _Tensor) -> None:
        h = tensor.handle
        if tensor.average and self.num_workers > 1:
            np.divide(h.out, self.num_workers, out=h.out)
        h.t_done = time.perf_counter()
        start = h.t_first_send or h.t_done
        tid = int(tensor.parts[0].key >> 16) if tensor.parts else 0
        self.events.append(
            {
                "name": h.name,
                "ph": "X",
                "cat": "queue",
                "ts": h.t_enqueue * 1e6,
                "dur": (start - h.t_enqueue) * 1e6,
                "pid": self.rank,
                "tid": tid,
            }
        )
        self.events.append(
            {
                "name": h.name,
                "ph": "X",
                "cat": "transfer",
                "ts": start * 1e6,
                "dur": (h.t_done - start) * 1e6,
                "pid": self.rank,
                "tid": tid,
            }
        )
        for p in tensor.parts:
            self._by_key.pop(p.key, None)
        self._inflight.pop(tensor.name, None)
        h.event.set()

    def _sender(self, index: int) -> None:
        mercury = self.transport.kind.packets
        # Mercury packets leave in batches of up to MERCURY_BATCH_BYTES (one sendmsg), popped in
        # priority order: a newly ready front tensor waits behind at most one batch more
        limit = MERCURY_BATCH_BYTES if mercury else 1
        kind = Kind.PUSHPULL if mercury else Kind.PUSH
        queue = self._queues[index]
        sock = self._socks[index]
        try:
            while True:
                batch: list[tuple[bytes, bytes | memoryview | None]] = []
                with self._cv:
                    while not self._closing and self.failure is None and not queue.ready():
                        self._cv.wait()
                    if self._closing or self.failure is not None:
                        return
                    nbytes = 0
                    while nbytes < limit and queue.ready():
                        chunk = queue.pop()
                        nbytes += chunk.nbytes
                        part = self._parts[chunk.tensor]
                        if part.tensor.handle.t_first_send is None:
                            part.tensor.handle.t_first_send = time.perf_counter()
                        dtype = part.tensor.dtype
                        if part.key not in self._inited:
                            self._inited.add(part.key)
                            batch.append(
                                (
                                    frame.encode(Kind.INIT, key=part.key, offset=len(part.src), dtype=dtype),
                                    None,
                                )
                            )
                        hdr = frame.encode(
                            kind,
                            key=part.key,
                            offset=chunk.offset,
                            length=chunk.nbytes,
                            priority=chunk.priority,
                            dtype=dtype,
                        )
                        batch.append((hdr, part.src[chunk.offset : chunk.offset + chunk.nbytes]))
                        if not mercury:
                            pull = frame.encode(Kind.PULL, key=part.key, priority=chunk.priority, dtype=dtype)
                            batch.append((pull, None))
                frame.send_messages(sock, batch)
        except OSError as exc:
            self._fail(f"worker {self.rank}: sending failed: {exc}")

    def _receiver(self, index: int) -> None:
        reader = frame.Reader(self._socks[index])
        try:
            while True:
                hdr = reader.header()
                if hdr.kind == Kind.DATA:
                    self._data(index, reader, hdr)
                    continue
                payload = reader.payload(hdr.length)
                if hdr.kind == Kind.ERROR:
                    self._fail(f"server {index}: {bytes(payload).decode(errors='replace')}")
                    if hdr.key == 0:
                        return
                elif hdr.kind == Kind.ACK:
                    with self._cv:
                        part = self._by_key.get(hdr.key)
                        if part is not None and self.transport.kind.credit:
                            self._credit.outstanding -= len(part.src)
                        self._cv.notify_all()
                else:
                    raise ProtocolError(f"unexpected {hdr.kind.name} from server {index}")
        except (ProtocolError, OSError) as exc:
            if not self._closing:
                self._fail(f"worker {self.rank}: server {index} connection lost: {exc}")

    def _data(self, index: int, reader: frame.Reader, hdr: frame.Header) -> None:
        """Receive a summed slice into its place in the output (what is not buffered yet: no copy)."""
        part = self._by_key.get(hdr.key)
        if part is None or hdr.offset + hdr.length > len(part.dst):
            raise ProtocolError(f"DATA for unknown key {hdr.key} or out of bounds from server {index}")
        reader.read_into(part.dst[hdr.offset : hdr.offset + hdr.length])
        tensor = part.tensor
        with self._cv:  # parts of one tensor may come from several servers' receivers
            tensor.remaining -= hdr.length
            if tensor.remaining == 0:
                self._finish(tensor)
