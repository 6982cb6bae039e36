"""A parameter server: accepts workers, runs the summation service on byte-balanced threads.

One receive thread per worker connection reads framed messages (:mod:`commsched.runtime.ps.frame`)
and hands them to the summation thread that owns the key. Pushes are acknowledged at once, pulls are
answered when the part is complete, Mercury packets come back summed to every worker as soon as all
copies are in. A part-mode connection has its own writer thread: summation threads only queue their
replies, acknowledgements go ahead of queued pull data (which leaves in slices of
:data:`DATA_SLICE_BYTES` through a bounded socket buffer), so a worker's credit comes back when its
push arrives, not after the megabytes of pull replies queued before it, and a slow downlink to one
worker never holds up another worker's pushes.

A malformed message whose framing is intact is answered with an ``ERROR`` naming the key and dropped
(no state changes); a lost framing, a truncated message or a worker that vanishes without saying
goodbye fails the job: every other worker gets an ``ERROR`` naming the worker, so no one waits
forever and no partial sum is ever returned.
"""

from __future__ import annotations

import queue
import socket
import threading
from collections import deque
from collections.abc import Mapping
from dataclasses import dataclass, field

from commsched.runtime.protocol.marks import Mark, mark_socket
from commsched.runtime.ps import frame
from commsched.runtime.ps.client import MERCURY_SNDBUF_BYTES
from commsched.runtime.ps.errors import ProtocolError, PSError
from commsched.runtime.ps.frame import Header, Kind
from commsched.runtime.ps.pacing import pace_socket
from commsched.runtime.ps.summation import Summation

_STOP = None
#: pull data leaves a part-mode connection in slices of this size, so an acknowledgement waits
#: behind at most one slice plus the socket buffer
DATA_SLICE_BYTES = 256 << 10
#: send buffer of a part-mode connection (the kernel doubles it): what an acknowledgement waits
#: behind in the kernel, a few milliseconds at 1 Gb/s
PART_SNDBUF_BYTES = 256 << 10
#: how long :meth:`Server.stop` lets writer threads flush what is queued (an ERROR, last replies)
FLUSH_S = 2.0
#: summed Mercury packets a receive thread holds before it sends them (it also sends before it waits)
OUTBOX_BYTES = 256 << 10


@dataclass(slots=True)
class _Conn:
    """A worker's connection; part-mode ones send through a writer thread (``urgent`` first)."""

    sock: socket.socket
    lock: threading.Lock
    cv: threading.Condition | None = None
    urgent: deque[tuple[bytes, bytes | memoryview | None]] = field(default_factory=deque)
    data: deque[tuple[bytes, bytes | memoryview | None]] = field(default_factory=deque)
    closing: bool = False
    writer: threading.Thread | None = None


class _Outbox:
    """Summed Mercury packets one receive thread owes the workers, sent in one batch per worker."""

    __slots__ = ("messages", "nbytes")

    def __init__(self) -> None:
        self.messages: dict[int, tuple[_Conn, list[tuple[bytes, bytes | memoryview | None]]]] = {}
        self.nbytes = 0

    def add(self, conns: list[_Conn], header: bytes, payload: bytes) -> None:
        for c in conns:
            self.messages.setdefault(id(c), (c, []))[1].append((header, payload))
        self.nbytes += len(payload)

    def flush(self) -> None:
        batches, self.messages, self.nbytes = list(self.messages.values()), {}, 0
        for conn, msgs in batches:
            try:
                with conn.lock:
                    frame.send_messages(conn.sock, msgs)
            except OSError:
                pass  # the peer is gone; its own receive thread reports it


class Server:
    """One summation server for ``num_workers`` workers.

    Parameters
    ----------
    num_workers
        Workers of the job; every part completes when all of them pushed it.
    host, port
        Where to listen (port 0: an ephemeral port, see :attr:`address`).
    threads
        Summation threads (BytePS's ``BYTEPS_SERVER_ENGINE_THREAD``).
    mark
        The job's mark, set on the listener before ``listen`` (the handshake is marked) and on every
        accepted socket (:func:`commsched.runtime.protocol.marks.mark_socket`: ``IP_TOS`` or ``IPV6_TCLASS``);
        ``None``: unmarked. ``tos`` (a TOS byte) is the older spelling of the same, for callers not
        yet moved to ``mark``.
    pacing_bytes_s
        Worker rank -> the rate (bytes/s) the connection to that worker is paced to after its
        ``HELLO`` (``SO_MAX_PACING_RATE``, :mod:`commsched.runtime.ps.pacing`); absent: not paced.
    """

    def __init__(
        self,
        *,
        num_workers: int,
        host: str = "127.0.0.1",
        port: int = 0,
        threads: int = 2,
        mark: Mark | None = None,
        tos: int | None = None,
        pacing_bytes_s: Mapping[int, float | None] | None = None,
    ) -> None:
        self.num_workers = num_workers
        self._mark = Mark.from_tos(tos) if mark is None and tos is not None else mark
        self._pacing = dict(pacing_bytes_s or {})
        with socket.socket() as probe:  # a refused rate fails here, not in a connection's thread
            for rate in self._pacing.values():
                pace_socket(probe, rate)
        self._listener = socket.create_server(
            (host, port), family=socket.AF_INET6 if ":" in host else socket.AF_INET
        )
        if self._mark is not None:
            mark_socket(self._listener, self._mark)
        self._conns: dict[int, _Conn] = {}
        self._lock = threading.Lock()
        self._queues: list[queue.SimpleQueue[tuple[int, Header, memoryview] | None]] = [
            queue.SimpleQueue() for _ in range(max(1, threads))
        ]
        self._thread_bytes = [0] * len(self._queues)
        self._key_thread: dict[int, int] = {}
        self._sums = [Summation(num_workers=num_workers, reply=self._reply) for _ in self._queues]
        self._sum_locks = [threading.Lock() for _ in self._queues]
        self._byes: set[int] = set()
        self.failure: str | None = None
        self.done = threading.Event()
        self._threads: list[threading.Thread] = []

    @property
    def address(self) -> tuple[str, int]:
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    @property
    def thread_bytes(self) -> list[int]:
        """Bytes of the keys assigned to each summation thread (the byte balance)."""
        return list(self._thread_bytes)

    def summed_bytes(self) -> int:
        return sum(s.summed_bytes for s in self._sums)

    def start(self) -> Server:
        if self._threads:
            raise PSError("the server is already started")
        for i, q in enumerate(self._queues):
            self._spawn(self._engine, i, q)
        self._spawn(self._accept)
        return self

    def _spawn(self, target: object, *args: object) -> None:
        t = threading.Thread(target=target, args=args, daemon=True)  # type: ignore[arg-type]
        t.start()
        self._threads.append(t)

    def stop(self) -> None:
        self.done.set()
        try:
            self._listener.close()
        finally:
            for q in self._queues:
                q.put(_STOP)
            with self._lock:
                conns = list(self._conns.values())
            for c in conns:  # writers flush what is queued (an ERROR above all), then end
                if c.cv is not None:
                    with c.cv:
                        c.closing = True
                        c.cv.notify()
            for c in conns:
                if c.writer is not None and c.writer.is_alive():
                    c.writer.join(FLUSH_S)
            for c in conns:
                c.sock.close()

    # -- connections --------------------------------------------------------------------------
    def _accept(self) -> None:
        while not self.done.is_set():
            try:
                sock, _ = self._listener.accept()
            except OSError:
                return
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            if self._mark is not None:
                mark_socket(sock, self._mark)
            self._spawn(self._serve, sock)

    def _hello(self, reader: frame.Reader) -> int:
        sock = reader.sock
        hdr = reader.header()
        reader.payload(hdr.length)
        rank, n = hdr.key, hdr.offset
        if hdr.kind != Kind.HELLO or n != self.num_workers or not 0 <= rank < n:
            reason = f"expected HELLO from one of {self.num_workers} workers, got {hdr.kind.name} {rank}/{n}"
            raise ProtocolError(reason)
        packets = hdr.priority == 1
        # a Mercury worker: a bounded reply queue, so that summed packets leave in completion
        # (priority) order rather than behind megabytes of earlier ones; a part-mode worker: a
        # bounded kernel queue behind which acknowledgements wait
        sock.setsockopt(
            socket.SOL_SOCKET, socket.SO_SNDBUF, MERCURY_SNDBUF_BYTES if packets else PART_SNDBUF_BYTES
        )
        pace_socket(sock, self._pacing.get(rank))
        conn = _Conn(sock=sock, lock=threading.Lock())
        if not packets:
            conn.cv = threading.Condition(conn.lock)
            conn.writer = threading.Thread(target=self._writer, args=(conn,), daemon=True)
        with self._lock:
            if rank in self._conns:
                raise ProtocolError(f"worker {rank} connected twice")
            self._conns[rank] = conn
        if conn.writer is not None:
            conn.writer.start()
        return rank

    def _serve(self, sock: socket.socket) -> None:
        rank = -1
        outbox = _Outbox()
        try:
            reader = frame.Reader(sock)
            rank = self._hello(reader)
            # summed Mercury packets leave in batches: before this thread blocks for more input, or
            # when a batch is full (one sendmsg per worker instead of one per packet and worker)
            reader.before_recv = outbox.flush
            while True:
                hdr = reader.header()
                if hdr.kind == Kind.PUSHPULL and hdr.length <= reader.size:
                    # a Mercury packet is summed straight from the receive buffer, on arrival
                    self._apply_checked(self._thread_of(hdr), rank, hdr, reader.take(hdr.length), outbox)
                    if outbox.nbytes >= OUTBOX_BYTES:
                        outbox.flush()
                    continue
                payload = reader.payload(hdr.length)
                if hdr.kind == Kind.BYE:
                    outbox.flush()
                    self._bye(rank)
                    return
                if hdr.kind not in (Kind.INIT, Kind.PUSH, Kind.PULL, Kind.PUSHPULL):
                    raise ProtocolError(f"unexpected {hdr.kind.name} from a worker")
                t = self._thread_of(hdr)
                if hdr.kind in (Kind.INIT, Kind.PUSHPULL):
                    # declarations and Mercury packets are summed as they arrive (no thread hand-off)
                    self._apply_checked(t, rank, hdr, payload, outbox)
                else:
                    self._queues[t].put((rank, hdr, payload))
        except (ProtocolError, OSError) as exc:
            if not self.done.is_set():
                who = f"worker {rank}" if rank >= 0 else "a connecting peer"
                self._fail(rank, f"{who} failed: {exc}")
        finally:
            outbox.messages.clear()

    def _thread_of(self, hdr: Header) -> int:
        with self._lock:
            t = self._key_thread.get(hdr.key)
            if t is None:
                t = min(range(len(self._queues)), key=self._thread_bytes.__getitem__)
                self._key_thread[hdr.key] = t
                self._thread_bytes[t] += hdr.offset if hdr.kind == Kind.INIT else 0
            return t

    def _bye(self, rank: int) -> None:
        with self._lock:
            self._byes.add(rank)
            finished = len(self._byes) == self.num_workers
        if finished:
            self.done.set()

    def _fail(self, rank: int, reason: str) -> None:
        with self._lock:
            if self.failure is None:
                self.failure = reason
            conns = [(r, c) for r, c in self._conns.items() if r != rank and r not in self._byes]
        for _, c in conns:
            self._send(c, frame.encode(Kind.ERROR, length=len(reason.encode())), reason.encode())
        self.done.set()

    def _send(
        self, conn: _Conn, header: bytes, payload: bytes | memoryview | None = None, *, urgent: bool = True
    ) -> None:
        """Send now (Mercury connection) or queue for the writer (``urgent``: ahead of pull data)."""
        if conn.cv is not None:
            with conn.cv:
                (conn.urgent if urgent else conn.data).append((header, payload))
                conn.cv.notify()
            return
        try:
            with conn.lock:
                frame.send_message(conn.sock, header, payload)
        except OSError:
            pass  # the peer is gone; its own receive thread reports it

    def _writer(self, conn: _Conn) -> None:
        """Drain a part-mode connection's queues: every urgent message before each data slice."""
        assert conn.cv is not None
        try:
            while True:
                with conn.cv:
                    while not (conn.urgent or conn.data or conn.closing):
                        conn.cv.wait()
                    if conn.urgent:
                        header, payload = conn.urgent.popleft()
                    elif conn.data:
                        header, payload = conn.data.popleft()
                    else:
                        return
                frame.send_message(conn.sock, header, payload)
        except OSError:
            pass  # the peer is gone; its own receive thread reports it

    # -- summation threads --------------------------------------------------------------------
    def _reply(self, worker: int, key: int, offset: int, dtype: int, data: bytes) -> None:
        conn = self._conns.get(worker)
        if conn is None:
            return
        view = memoryview(data)
        for lo in range(0, len(data), DATA_SLICE_BYTES):
            piece = view[lo : lo + DATA_SLICE_BYTES]
            hdr = frame.encode(Kind.DATA, key=key, offset=offset + lo, length=len(piece), dtype=dtype)
            self._send(conn, hdr, piece, urgent=False)

    def _engine(self, index: int, q: queue.SimpleQueue[tuple[int, Header, memoryview] | None]) -> None:
        while (item := q.get()) is not None:
            self._apply_checked(index, *item)

    def _apply_checked(
        self,
        index: int,
        rank: int,
        hdr: Header,
        payload: memoryview,
        outbox: _Outbox | None = None,
    ) -> None:
        try:
            with self._sum_locks[index]:
                self._apply(self._sums[index], rank, hdr, payload, outbox)
        except ProtocolError as exc:
            reason = f"rejected {hdr.kind.name} of key {hdr.key} from worker {rank}: {exc}".encode()
            conn = self._conns.get(rank)
            if conn is not None:
                self._send(conn, frame.encode(Kind.ERROR, key=hdr.key, length=len(reason)), reason)

    def _apply(
        self,
        summ: Summation,
        rank: int,
        hdr: Header,
        payload: memoryview,
        outbox: _Outbox | None = None,
    ) -> None:
        if hdr.kind == Kind.INIT:
            summ.declare(key=hdr.key, nbytes=hdr.offset, dtype=hdr.dtype)
        elif hdr.kind == Kind.PUSH:
            summ.push(worker=rank, key=hdr.key, offset=hdr.offset, payload=payload)
            conn = self._conns[rank]
            self._send(conn, frame.encode(Kind.ACK, key=hdr.key, length=0, priority=hdr.priority))
        elif hdr.kind == Kind.PULL:
            summ.pull(worker=rank, key=hdr.key)
        else:
            done = summ.packet(worker=rank, key=hdr.key, offset=hdr.offset, payload=payload)
            if done is not None:
                out = frame.encode(
                    Kind.DATA, key=hdr.key, offset=hdr.offset, length=len(payload), dtype=hdr.dtype
                )
                with self._lock:
                    conns = list(self._conns.values())
                if outbox is None or any(c.cv is not None for c in conns):
                    for c in conns:
                        self._send(c, out, done)
                else:  # a snapshot: the accumulator may take the next round before the batch leaves
                    outbox.add(conns, out, bytes(done))


def run_server(server: Server, *, timeout_s: float | None = None) -> None:
    """Serve (``server`` started) until every worker said goodbye; raise :class:`PSError` on failure."""
    try:
        server.done.wait(timeout_s)
    finally:
        server.stop()
    if server.failure is not None:
        raise PSError(server.failure)
