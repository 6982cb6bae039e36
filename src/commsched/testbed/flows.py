"""Real TCP flows on a built testbed, from one process: sockets are made inside host namespaces.

A socket belongs to the namespace it was created in, so the checker creates each socket with the
thread switched into the right host namespace (:func:`commsched.testbed.netns.inside`) and then drives
all of them from ordinary threads. Blocking ``sendall``/``recv_into`` release the GIL, so a few flows
of up to ~1 Gbit/s each run side by side. DSCP is set with ``IP_TOS``
(:func:`commsched.scheduling.dscp.tos_byte`).
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import struct
import threading
import time
from dataclasses import dataclass, field
from typing import cast

from commsched.scheduling.dscp import tos_byte
from commsched.testbed import netns

CHUNK = 256 * 1024
_LINGER_RESET = struct.pack("ii", 1, 0)  # close with a reset: no TIME_WAIT, so a 4-tuple can be reused


def _close(sock: socket.socket) -> None:
    """Close without TIME_WAIT (the checker reuses source ports of earlier connections)."""
    with contextlib.suppress(OSError):
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, _LINGER_RESET)
    sock.close()


def listener(ns: str, port: int = 0) -> socket.socket:
    """A listening TCP socket on all addresses of host namespace ``ns`` (port 0: any free port)."""
    with netns.inside(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("0.0.0.0", port))
    s.listen(64)
    return s


def connect(ns: str, src_ip: str, sport: int, dst_ip: str, dport: int, *, dscp: int = 0) -> socket.socket:
    """A TCP connection from ``src_ip:sport`` in namespace ``ns`` to ``dst_ip:dport``, marked ``dscp``."""
    with netns.inside(ns):
        s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.setsockopt(socket.IPPROTO_IP, socket.IP_TOS, tos_byte(dscp))
    s.settimeout(5.0)
    s.bind((src_ip, sport))
    s.connect((dst_ip, dport))
    return s


@dataclass(slots=True)
class Receiver:
    """Accepts and drains connections on some listeners in a background thread; counts bytes."""

    listeners: list[socket.socket]
    received: int = 0
    closed: int = 0
    _stop: threading.Event = field(default_factory=threading.Event)
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    def start(self) -> Receiver:
        self._thread = threading.Thread(target=self._loop, name="testbed-receiver", daemon=True)
        self._thread.start()
        return self

    def _loop(self) -> None:
        sel = selectors.DefaultSelector()
        for s in self.listeners:
            s.setblocking(False)
            sel.register(s, selectors.EVENT_READ, "listen")
        buf = bytearray(CHUNK)
        try:
            while not self._stop.is_set():
                for key, _ in sel.select(0.05):
                    sock = cast(socket.socket, key.fileobj)
                    if key.data == "listen":
                        conn, _ = sock.accept()
                        conn.setblocking(False)
                        sel.register(conn, selectors.EVENT_READ, "conn")
                        continue
                    try:
                        n = sock.recv_into(buf)
                    except (BlockingIOError, InterruptedError):
                        continue
                    except OSError:
                        n = 0
                    if n == 0:
                        sel.unregister(sock)
                        sock.close()
                        with self._lock:
                            self.closed += 1
                    else:
                        with self._lock:
                            self.received += n
        finally:
            for key in list(sel.get_map().values()):
                if key.data == "conn":
                    cast(socket.socket, key.fileobj).close()
            sel.close()

    def wait_closed(self, count: int, timeout_s: float = 5.0) -> bool:
        """Wait until ``count`` connections have been closed by their senders."""
        end = time.monotonic() + timeout_s
        while time.monotonic() < end:
            with self._lock:
                if self.closed >= count:
                    return True
            time.sleep(0.002)
        return False

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=5.0)
        for s in self.listeners:
            s.close()


def send_bytes(sock: socket.socket, size_bytes: int) -> None:
    """Send ``size_bytes``, wait until the receiver has read all of it and closed, then close."""
    chunk = bytes(min(CHUNK, size_bytes))
    left = size_bytes
    try:
        while left > 0:
            n = min(left, len(chunk))
            sock.sendall(memoryview(chunk)[:n])
            left -= n
        sock.shutdown(socket.SHUT_WR)
        while sock.recv(4096):
            pass
    finally:
        _close(sock)


class TimedSender(threading.Thread):
    """Sends as fast as the fabric allows until ``duration_s`` has passed, then closes."""

    def __init__(self, sock: socket.socket, duration_s: float) -> None:
        super().__init__(name="testbed-sender", daemon=True)
        self.sock = sock
        self.duration_s = duration_s
        self.sent = 0
        self.error: str | None = None

    def run(self) -> None:
        chunk = bytes(CHUNK)
        end = time.monotonic() + self.duration_s
        try:
            while time.monotonic() < end:
                self.sock.sendall(chunk)
                self.sent += len(chunk)
        except OSError as exc:
            self.error = str(exc)
        finally:
            _close(self.sock)
