"""A process group: one rank's directed, marked TCP connections to the other ranks of its job.

A :class:`Group` owns a listener, one outgoing connection per destination rank (opened lazily on the
first send, from the source port and with the DSCP the connection policy gives) and one incoming
connection per source rank. Sends run on one background thread so that a rank can send to one peer
while it receives from another (a ring step does both); every socket operation has a timeout, so a dead
peer turns into a :class:`~commsched.errors.PeerError` naming it instead of a hang.
"""

from __future__ import annotations

import contextlib
import queue
import socket
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from commsched.errors import InputError, PeerError, ProtocolError, TransportError
from commsched.runtime.transport.frame import FrameHeader, FrameKind, encode_header
from commsched.runtime.transport.policy import (
    DEFAULT_POLICY,
    ConnectionPolicy,
    Marking,
    get_dscp,
    set_dscp,
)
from commsched.runtime.transport.sockets import (
    make_listener,
    open_connection,
    read_hello,
    recv_exact,
    recv_header,
    send_all,
)

ByteObserver = Callable[[float, float, int], None]
"""Called with ``(start, end, bytes)`` (``time.monotonic()``) for every chunk a group sends (the
profiler's input)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupConfig:
    """Everything a job process is given to join its group.

    Attributes
    ----------
    job
        Job id, carried in every connection's HELLO (a connection from another job is refused).
    rank, world_size
        This process's rank and the number of ranks.
    peers
        Listening address ``(host, port)`` of every rank, in rank order. This rank listens on
        ``peers[rank]`` unless a listener is handed to :class:`Group`.
    policy
        Source port and DSCP of each directed connection (default: ephemeral port, DSCP 0).
    timeout_s
        Longest wait for any single socket operation or connection.
    chunk_bytes
        Piece size of sends and of incremental reductions.
    ranks_per_host
        Ranks ``j*g .. j*g+g-1`` share host ``j`` (hierarchical ring); ``None``: one rank per host.
    policy_refresh_s
        If set, the policy is asked again (:meth:`Group.refresh_policy`) at the start of the first
        collective or send after this many seconds, so a new class or path reaches open connections
        without the job doing anything; ``None``: only when the job calls ``refresh_policy``.
    """

    job: str
    rank: int
    world_size: int
    peers: tuple[tuple[str, int], ...]
    policy: ConnectionPolicy = DEFAULT_POLICY
    timeout_s: float = 30.0
    chunk_bytes: int = 4 << 20
    ranks_per_host: int | None = None
    policy_refresh_s: float | None = None

    def __post_init__(self) -> None:
        if self.world_size < 1:
            raise InputError(f"world size {self.world_size}", where="world_size", expected="at least 1")
        if not 0 <= self.rank < self.world_size:
            raise InputError(f"rank {self.rank}", where="rank", expected=f"0..{self.world_size - 1}")
        if len(self.peers) != self.world_size:
            raise InputError(
                f"{len(self.peers)} peer addresses",
                where="peers",
                expected=f"{self.world_size}, one per rank",
            )
        if self.chunk_bytes < 1 or self.timeout_s <= 0:
            raise InputError("chunk_bytes and timeout_s must be positive", where="GroupConfig")


@dataclass(frozen=True, slots=True, kw_only=True)
class ConnectionInfo:
    """One open connection as the kernel sees it (for checks and for the testbed's path report)."""

    direction: str  # "out" (this rank sends) or "in" (this rank receives)
    peer: int
    local: tuple[str, int]
    remote: tuple[str, int]
    dscp: int


class Group:
    """The connections of one rank; see the module docstring. Close it (or use ``with``)."""

    def __init__(
        self,
        config: GroupConfig,
        *,
        listener: socket.socket | None = None,
        observer: ByteObserver | None = None,
    ) -> None:
        self.config = config
        self.observer = observer
        self._seq = 0
        self._refreshed = time.monotonic()
        self._p2p_sent: dict[int, int] = {}
        self._p2p_recv: dict[int, int] = {}
        self._closed = False
        self._out: dict[int, tuple[socket.socket, Marking]] = {}
        self._in: dict[int, socket.socket] = {}
        self._pending: dict[int, queue.Queue[socket.socket]] = {
            r: queue.Queue() for r in range(config.world_size)
        }
        self.rejected: list[str] = []
        """One line per incoming connection refused (malformed HELLO, wrong job or rank)."""
        self._listener = listener or make_listener(config.peers[config.rank], dscp=self._listen_dscp())
        if listener is not None:
            set_dscp(self._listener, self._listen_dscp())
        self._listener.settimeout(0.1)
        self._sender = ThreadPoolExecutor(max_workers=1, thread_name_prefix=f"commsched-send-{config.rank}")
        self._acceptor = threading.Thread(target=self._accept_loop, name="commsched-accept", daemon=True)
        self._acceptor.start()

    @property
    def rank(self) -> int:
        """This process's rank."""
        return self.config.rank

    @property
    def world_size(self) -> int:
        """Number of ranks."""
        return self.config.world_size

    @property
    def listen_address(self) -> tuple[str, int]:
        """The address this rank accepts connections on."""
        host, port = self._listener.getsockname()[:2]
        return str(host), int(port)

    def next_seq(self) -> int:
        """The sequence number of the next collective (every rank calls collectives in the same order).

        Also the point where a due policy refresh happens: no send is in flight between collectives.
        """
        self._maybe_refresh()
        self._seq += 1
        return self._seq

    def next_p2p(self, peer: int, *, sending: bool) -> int:
        """The sequence number of the next point-to-point message to (or from) ``peer``."""
        if sending:
            self._maybe_refresh()
        table = self._p2p_sent if sending else self._p2p_recv
        table[peer] = table.get(peer, 0) + 1
        return table[peer]

    def __enter__(self) -> Group:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _who(self, peer: int) -> str:
        host, port = self.config.peers[peer]
        return f"rank {peer} of job {self.config.job} ({host}:{port})"

    def _listen_dscp(self) -> int:
        c = self.config
        return c.policy.marking(c.job, (c.rank - 1) % c.world_size, c.rank).dscp

    # -- accepting -----------------------------------------------------------------------------------
    def _accept_loop(self) -> None:
        while not self._closed:
            try:
                sock, addr = self._listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            try:
                self._admit(sock, f"{addr[0]}:{addr[1]}")
            except TransportError as exc:
                self.rejected.append(str(exc))
                sock.close()

    def _admit(self, sock: socket.socket, who: str) -> None:
        c = self.config
        sock.settimeout(c.timeout_s)
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        hello = read_hello(sock, who=who)
        src = hello["src"]
        if hello["job"] != c.job or hello["dst"] != c.rank or hello["world"] != c.world_size:
            raise ProtocolError(
                f"HELLO from {who}: job {hello['job']!r} dst {hello['dst']} world {hello['world']} "
                f"(expected job {c.job!r} dst {c.rank} world {c.world_size})"
            )
        if not isinstance(src, int) or not 0 <= src < c.world_size or src == c.rank:
            raise ProtocolError(
                f"HELLO from {who}: src {src!r} (expected another rank of 0..{c.world_size - 1})"
            )
        set_dscp(sock, c.policy.marking(c.job, src, c.rank).dscp)
        self._pending[src].put(sock)

    def _incoming(self, src: int) -> socket.socket:
        sock = self._in.get(src)
        if sock is None:
            try:
                sock = self._pending[src].get(timeout=self.config.timeout_s)
            except queue.Empty:
                raise PeerError(
                    f"{self._who(src)} did not connect within {self.config.timeout_s} s"
                ) from None
            self._in[src] = sock
        return sock

    # -- sending -------------------------------------------------------------------------------------
    def _outgoing(self, dst: int) -> socket.socket:
        entry = self._out.get(dst)
        if entry is None:
            c = self.config
            marking = c.policy.marking(c.job, c.rank, dst)
            hello: dict[str, object] = {"job": c.job, "src": c.rank, "dst": dst, "world": c.world_size}
            sock = open_connection(
                c.peers[dst],
                marking=marking,
                timeout_s=c.timeout_s,
                hello=hello,
                source_host=c.peers[c.rank][0],  # send from the address (NIC) this rank listens on
            )
            entry = self._out[dst] = (sock, marking)
        return entry[0]

    def _send_now(self, dst: int, data: memoryview, seq: int, step: int) -> None:
        who = self._who(dst)
        sock = self._outgoing(dst)
        send_all(
            sock,
            encode_header(FrameHeader(kind=FrameKind.DATA, seq=seq, step=step, length=len(data))),
            who=who,
        )
        chunk = self.config.chunk_bytes
        for start in range(0, len(data), chunk):
            piece = data[start : start + chunk]
            t0 = time.monotonic()
            send_all(sock, piece, who=who)
            if self.observer is not None:
                self.observer(t0, time.monotonic(), len(piece))

    def send_async(self, dst: int, data: memoryview, *, seq: int, step: int) -> Future[None]:
        """Queue ``data`` (bytes) for ``dst`` as one DATA frame; sends happen in order on one thread."""
        if self._closed:
            raise TransportError(f"group of rank {self.rank} is closed")
        if not 0 <= dst < self.world_size or dst == self.rank:
            raise InputError(f"destination rank {dst}", where="dst", expected="another rank of the group")
        return self._sender.submit(self._send_now, dst, data, seq, step)

    def wait(self, fut: Future[None]) -> None:
        """Wait for a queued send; its error, if any, is raised here."""
        fut.result()

    # -- receiving -----------------------------------------------------------------------------------
    def _data_header(self, src: int, seq: int, step: int, nbytes: int) -> socket.socket:
        who = self._who(src)
        while True:
            sock = self._incoming(src)
            header = recv_header(sock, who=who)
            if header.kind is FrameKind.DATA:
                break
            if header.kind is FrameKind.REBIND:  # the sender reconnects from a new source port
                sock.close()
                del self._in[src]
                continue
            raise PeerError(f"{who} closed its connection ({header.kind.name})")
        expected = (seq & 0xFFFFFFFF, step, nbytes)
        if (header.seq, header.step, header.length) != expected:
            raise ProtocolError(
                f"frame from {who}: seq {header.seq} step {header.step} length {header.length} "
                f"(expected seq {expected[0]} step {step} length {nbytes})"
            )
        return sock

    def recv_into(self, src: int, out: memoryview, *, seq: int, step: int) -> None:
        """Receive one DATA frame from ``src`` into ``out`` (its length must match exactly)."""
        sock = self._data_header(src, seq, step, len(out))
        recv_exact(sock, out, who=self._who(src))

    def recv_reduce(self, src: int, target: np.ndarray, op: np.ufunc, *, seq: int, step: int) -> None:
        """Receive a DATA frame of ``target``'s size from ``src`` and fold it in: ``target = op(target, x)``.

        The frame is read in pieces of ``chunk_bytes`` and each piece is reduced as it arrives.
        """
        sock = self._data_header(src, seq, step, target.nbytes)
        per = max(self.config.chunk_bytes // max(target.itemsize, 1), 1)
        scratch = np.empty(min(per, target.size), dtype=target.dtype)
        who = self._who(src)
        for start in range(0, target.size, per):
            part = target[start : start + per]
            buf = scratch[: part.size]
            recv_exact(sock, buf.view(np.uint8).data, who=who)
            op(part, buf, out=part)

    # -- policy --------------------------------------------------------------------------------------
    def _maybe_refresh(self) -> None:
        every = self.config.policy_refresh_s
        if every is not None and time.monotonic() - self._refreshed >= every:
            self.refresh_policy()

    def refresh_policy(self) -> None:
        """Ask the policy again and apply changes to open connections.

        A changed DSCP is set on the live sockets of both directions (``setsockopt`` takes effect on
        the next segment); a changed source port closes the outgoing connection after a REBIND frame,
        and the next send reopens it from the new port. Call between collectives.
        """
        c = self.config
        self._refreshed = time.monotonic()
        set_dscp(self._listener, self._listen_dscp())
        for dst, (sock, old) in list(self._out.items()):
            new = c.policy.marking(c.job, c.rank, dst)
            if new.source_port != old.source_port:
                with contextlib.suppress(OSError):
                    sock.sendall(encode_header(FrameHeader(kind=FrameKind.REBIND)))
                sock.close()
                del self._out[dst]
            elif new.dscp != old.dscp:
                set_dscp(sock, new.dscp)
                self._out[dst] = (sock, new)
        for src, sock in self._in.items():
            set_dscp(sock, c.policy.marking(c.job, src, c.rank).dscp)

    def connections(self) -> list[ConnectionInfo]:
        """Every open connection with its local/remote address and the DSCP read back from the socket."""
        rows = []
        for kind, table in (("out", {d: s for d, (s, _) in self._out.items()}), ("in", self._in)):
            for peer, sock in sorted(table.items()):
                local, remote = sock.getsockname()[:2], sock.getpeername()[:2]
                rows.append(
                    ConnectionInfo(
                        direction=kind,
                        peer=peer,
                        local=(str(local[0]), int(local[1])),
                        remote=(str(remote[0]), int(remote[1])),
                        dscp=get_dscp(sock),
                    )
                )
        return rows

    def close(self) -> None:
        """Say BYE on every outgoing connection and close everything (idempotent)."""
        if self._closed:
            return
        self._closed = True
        self._sender.shutdown(wait=True, cancel_futures=True)
        for sock, _ in self._out.values():
            with contextlib.suppress(OSError):
                sock.settimeout(1.0)
                sock.sendall(encode_header(FrameHeader(kind=FrameKind.BYE)))
            sock.close()
        self._acceptor.join()
        self._listener.close()
        for sock in self._in.values():
            sock.close()
        for q in self._pending.values():
            while not q.empty():
                q.get_nowait().close()
        self._out.clear()
        self._in.clear()
