"""Socket-level pieces of the data path: listeners, marked connections, exact reads, framed writes.

Each directed connection ``src -> dst`` is opened by the sender: it binds the source port its policy
gives (``SO_REUSEADDR`` so a port in ``TIME_WAIT`` can be bound again, ``SO_REUSEPORT`` so one port can
serve connections to several peers, as a path's port does), sets ``IP_TOS`` before
``connect`` so that the SYN is marked, and sends a HELLO frame naming the job and both ranks. The
listener is marked before ``listen`` so that SYN-ACKs are marked too, and every accepted socket is
marked again with its own connection's DSCP (an accepted socket does not inherit a later change).
"""

from __future__ import annotations

import errno
import json
import socket
import time

from commsched.errors import PeerError, ProtocolError
from commsched.runtime.transport.frame import (
    HEADER_BYTES,
    FrameHeader,
    FrameKind,
    decode_header,
    encode_header,
)
from commsched.runtime.transport.policy import Marking, set_dscp


def family_of(host: str) -> socket.AddressFamily:
    """``AF_INET6`` for an IPv6 literal, else ``AF_INET``."""
    return socket.AF_INET6 if ":" in host else socket.AF_INET


def make_listener(address: tuple[str, int], *, dscp: int, backlog: int = 64) -> socket.socket:
    """A listening TCP socket on ``address`` (port 0: any free port), marked with ``dscp`` before listen."""
    sock = socket.socket(family_of(address[0]), socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        set_dscp(sock, dscp)
        sock.bind(address)
        sock.listen(backlog)
    except OSError:
        sock.close()
        raise
    return sock


def open_connection(
    address: tuple[str, int],
    *,
    marking: Marking,
    timeout_s: float,
    hello: dict[str, object],
    source_host: str | None = None,
) -> socket.socket:
    """Connect to ``address`` from ``marking.source_port`` with ``marking.dscp``; send ``hello``.

    ``source_host``: the local address to send from (the sender's own listening address, so that a
    rank on a multi-NIC host sends through its own NIC); ``None`` or a wildcard lets the kernel pick
    (the address of the route it finds, on a host with several NICs usually the first one).
    Refused connections are retried (the peer may not listen yet) until ``timeout_s`` has passed.
    """
    wildcard = source_host in (None, "", "0.0.0.0", "::")
    deadline = time.monotonic() + timeout_s
    delay = 0.01
    while True:
        sock = socket.socket(family_of(address[0]), socket.SOCK_STREAM)
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEPORT, 1)  # one port, several peers
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            set_dscp(sock, marking.dscp)
            _bind_source(sock, None if wildcard else source_host, marking.source_port)
            sock.settimeout(max(deadline - time.monotonic(), 0.01))
            sock.connect(address)
            sock.settimeout(timeout_s)
            payload = json.dumps(hello).encode()
            sock.sendall(encode_header(FrameHeader(kind=FrameKind.HELLO, length=len(payload))) + payload)
            return sock
        except (ConnectionRefusedError, ConnectionResetError) as exc:
            sock.close()
            if time.monotonic() + delay > deadline:
                raise PeerError(
                    f"cannot connect to {address[0]}:{address[1]} within {timeout_s} s: {exc}"
                ) from exc
            time.sleep(delay)
            delay = min(delay * 2, 0.5)
        except OSError as exc:
            sock.close()
            port = "ephemeral" if marking.source_port is None else marking.source_port
            raise PeerError(f"cannot connect to {address[0]}:{address[1]} from port {port}: {exc}") from exc


def _bind_source(sock: socket.socket, host: str | None, port: int | None) -> None:
    """Bind the sending end: ``host`` (when it is a local address, else any) and ``port`` (else any)."""
    any_host = "::" if sock.family == socket.AF_INET6 else "0.0.0.0"
    if host is not None:
        try:
            sock.bind((host, port or 0))
            return
        except socket.gaierror:  # a name this host cannot resolve: any local address
            pass
        except OSError as exc:  # not an address of this host (e.g. a name seen from elsewhere)
            if exc.errno not in (errno.EADDRNOTAVAIL, errno.EAFNOSUPPORT):
                raise
    if port is not None:
        sock.bind((any_host, port))


def recv_exact(sock: socket.socket, view: memoryview, *, who: str) -> None:
    """Fill ``view`` from ``sock``; raise :class:`~commsched.errors.PeerError` on EOF, reset or timeout."""
    got, n = 0, len(view)
    try:
        while got < n:
            k = sock.recv_into(view[got:])
            if k == 0:
                raise PeerError(f"{who} closed the connection")
            got += k
    except TimeoutError as exc:
        raise PeerError(f"{who} sent nothing within {sock.gettimeout()} s") from exc
    except OSError as exc:
        raise PeerError(f"{who}: {exc}") from exc


def recv_header(sock: socket.socket, *, who: str) -> FrameHeader:
    """Read and validate one frame header."""
    raw = bytearray(HEADER_BYTES)
    recv_exact(sock, memoryview(raw), who=who)
    return decode_header(raw, where=f"frame from {who}")


def send_all(sock: socket.socket, data: bytes | memoryview, *, who: str) -> None:
    """``sendall`` with :class:`~commsched.errors.PeerError` for a closed, reset or silent peer."""
    try:
        sock.sendall(data)
    except TimeoutError as exc:
        raise PeerError(f"{who} accepted nothing within {sock.gettimeout()} s") from exc
    except OSError as exc:
        raise PeerError(f"{who}: {exc}") from exc


def read_hello(sock: socket.socket, *, who: str) -> dict[str, object]:
    """Read the HELLO frame that opens an accepted connection."""
    header = recv_header(sock, who=who)
    if header.kind is not FrameKind.HELLO:
        raise ProtocolError(f"frame from {who}: {header.kind.name} before HELLO (expected HELLO)")
    raw = bytearray(header.length)
    recv_exact(sock, memoryview(raw), who=who)
    try:
        hello = json.loads(raw)
    except ValueError as exc:
        raise ProtocolError(f"HELLO from {who}: not JSON ({exc})") from exc
    if not isinstance(hello, dict) or not all(k in hello for k in ("job", "src", "dst", "world")):
        raise ProtocolError(f"HELLO from {who}: missing fields (expected job, src, dst, world)")
    return hello
