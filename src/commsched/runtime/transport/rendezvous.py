"""Rendezvous: a small TCP key-value store through which the ranks of a job find each other.

One process runs a :class:`StoreServer` (typically the launcher or rank 0); every rank publishes the
address it listens on under ``"<job>/addr/<rank>"`` and waits for the others' (see
:func:`rendezvous`). The protocol is a 4-byte big-endian length followed by a JSON object, one request
and one answer per message: ``{"op": "set", "key", "value"}`` and ``{"op": "get", "key", "timeout_s"}``
(blocks until the key exists or the timeout passes), each answered ``{"ok": true, ...}`` or
``{"ok": false, "error": "..."}``.
"""

from __future__ import annotations

import json
import socket
import struct
import threading
from typing import Any

from commsched.errors import PeerError, ProtocolError

_LEN = struct.Struct(">I")
_MAX_MESSAGE = 1 << 20


def _recv_exact(sock: socket.socket, n: int) -> bytes:
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:])
        if k == 0:
            raise PeerError("store connection closed by the other end")
        got += k
    return bytes(buf)


def _send_message(sock: socket.socket, obj: dict[str, Any]) -> None:
    data = json.dumps(obj).encode()
    sock.sendall(_LEN.pack(len(data)) + data)


def _recv_message(sock: socket.socket) -> dict[str, Any]:
    (n,) = _LEN.unpack(_recv_exact(sock, _LEN.size))
    if n > _MAX_MESSAGE:
        raise ProtocolError(f"store message of {n} bytes (expected at most {_MAX_MESSAGE})")
    obj = json.loads(_recv_exact(sock, n))
    if not isinstance(obj, dict):
        raise ProtocolError("store message is not a JSON object")
    return obj


class StoreServer:
    """A threaded key-value store served on ``(host, port)``; port 0 picks a free one.

    Use as a context manager, or call :meth:`close`. :attr:`address` is the address clients use.
    """

    def __init__(self, host: str = "127.0.0.1", port: int = 0) -> None:
        self._data: dict[str, str] = {}
        self._cond = threading.Condition()
        self._closed = False
        self._sock = socket.create_server((host, port), family=_family(host))
        self._sock.settimeout(0.2)
        self.address: tuple[str, int] = (host, self._sock.getsockname()[1])
        self._clients: list[socket.socket] = []
        self._thread = threading.Thread(target=self._serve, name="commsched-store", daemon=True)
        self._thread.start()

    def __enter__(self) -> StoreServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stop serving and close every client connection."""
        with self._cond:
            self._closed = True
            self._cond.notify_all()
        self._thread.join()
        self._sock.close()
        for c in list(self._clients):
            c.close()

    def _serve(self) -> None:
        while not self._closed:
            try:
                conn, _ = self._sock.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            self._clients.append(conn)
            threading.Thread(target=self._client, args=(conn,), daemon=True).start()

    def _client(self, conn: socket.socket) -> None:
        try:
            while True:
                _send_message(conn, self._answer(_recv_message(conn)))
        except (OSError, PeerError, ProtocolError, ValueError):
            conn.close()

    def _answer(self, req: dict[str, Any]) -> dict[str, Any]:
        op, key = req.get("op"), req.get("key")
        if not isinstance(key, str):
            return {"ok": False, "error": "field 'key' must be a string"}
        if op == "set":
            with self._cond:
                self._data[key] = str(req.get("value", ""))
                self._cond.notify_all()
            return {"ok": True}
        if op == "get":
            timeout = float(req.get("timeout_s", 30.0))
            with self._cond:
                found = self._cond.wait_for(lambda: key in self._data or self._closed, timeout)
                if found and key in self._data:
                    return {"ok": True, "value": self._data[key]}
            return {"ok": False, "error": f"key {key!r} not set within {timeout} s"}
        return {"ok": False, "error": f"unknown op {op!r} (expected set or get)"}


class StoreClient:
    """A client of :class:`StoreServer`; one connection, requests one at a time."""

    def __init__(self, address: tuple[str, int], *, timeout_s: float = 30.0) -> None:
        self.timeout_s = timeout_s
        try:
            self._sock = socket.create_connection(address, timeout=timeout_s)
        except OSError as exc:
            raise PeerError(f"cannot reach the rendezvous store at {address[0]}:{address[1]}: {exc}") from exc
        self._lock = threading.Lock()

    def close(self) -> None:
        """Close the connection."""
        self._sock.close()

    def _call(self, req: dict[str, Any], timeout_s: float) -> dict[str, Any]:
        with self._lock:
            self._sock.settimeout(timeout_s + 5.0)
            try:
                _send_message(self._sock, req)
                ans = _recv_message(self._sock)
            except OSError as exc:
                raise PeerError(f"rendezvous store failed: {exc}") from exc
        if not ans.get("ok"):
            raise PeerError(f"rendezvous store: {ans.get('error', 'unknown error')}")
        return ans

    def set(self, key: str, value: str) -> None:
        """Store ``value`` under ``key``."""
        self._call({"op": "set", "key": key, "value": value}, self.timeout_s)

    def get(self, key: str, *, timeout_s: float | None = None) -> str:
        """The value of ``key``, waiting up to ``timeout_s`` for it to be set."""
        t = self.timeout_s if timeout_s is None else timeout_s
        return str(self._call({"op": "get", "key": key, "timeout_s": t}, t)["value"])


def rendezvous(
    store: StoreClient, *, job: str, rank: int, world_size: int, address: tuple[str, int]
) -> list[tuple[str, int]]:
    """Publish this rank's listening ``address`` and return every rank's, in rank order."""
    store.set(f"{job}/addr/{rank}", json.dumps(list(address)))
    peers: list[tuple[str, int]] = []
    for r in range(world_size):
        host, port = json.loads(store.get(f"{job}/addr/{r}"))
        peers.append((str(host), int(port)))
    return peers


def _family(host: str) -> socket.AddressFamily:
    return socket.AF_INET6 if ":" in host else socket.AF_INET
