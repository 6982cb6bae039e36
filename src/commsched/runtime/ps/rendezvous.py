"""The scheduler role: servers and workers meet here, in any start order, within a timeout.

Protocol (one JSON line each way over TCP, version 1): a server sends
``{"v": 1, "role": "server", "host": H, "port": P}`` (optionally ``"index"``), a worker
``{"v": 1, "role": "worker", "rank": R}`` (``R`` may be ``null``: ranks are then given in arrival
order). When ``num_servers`` servers and
``num_workers`` workers have registered, every worker gets ``{"servers": [[H, P], ...], "rank": R}``
and every server ``{"ok": true}``. If they are not all in within ``timeout_s``, everyone registered
gets ``{"error": ...}`` naming what is missing, and the scheduler raises :class:`PSTimeoutError`.
"""

from __future__ import annotations

import json
import socket
import time
from dataclasses import dataclass
from typing import Any

from commsched.runtime.ps.client import connect
from commsched.runtime.ps.errors import PSError, PSTimeoutError

VERSION = 1


@dataclass(frozen=True, slots=True, kw_only=True)
class Assignment:
    """What the scheduler tells a worker: the servers in index order and the worker's rank."""

    servers: tuple[tuple[str, int], ...]
    rank: int


def _send(sock: socket.socket, obj: dict[str, Any]) -> None:
    sock.sendall((json.dumps(obj) + "\n").encode())


def _recv(sock: socket.socket) -> dict[str, Any]:
    data = b""
    while not data.endswith(b"\n"):
        chunk = sock.recv(4096)
        if not chunk:
            raise PSError("the scheduler closed the connection")
        data += chunk
    out: dict[str, Any] = json.loads(data)
    return out


def serve_scheduler(listener: socket.socket, *, num_servers: int, num_workers: int, timeout_s: float) -> None:
    """Run the scheduler on ``listener`` until everyone registered (or the timeout passed)."""
    deadline = time.monotonic() + timeout_s
    servers: list[tuple[socket.socket, tuple[str, int]]] = []
    workers: list[tuple[socket.socket, int | None]] = []
    order: list[int] = []  # a server may ask for its index (mixed mode: CPU servers first)
    try:
        while len(servers) < num_servers or len(workers) < num_workers:
            left = deadline - time.monotonic()
            if left <= 0:
                missing = f"{len(servers)}/{num_servers} servers and {len(workers)}/{num_workers} workers"
                reason = f"only {missing} registered with the scheduler within {timeout_s} s"
                for s, _ in [*servers, *workers]:
                    _send(s, {"error": reason})
                raise PSTimeoutError(reason)
            listener.settimeout(left)
            try:
                sock, _ = listener.accept()
            except TimeoutError:
                continue
            sock.settimeout(max(1.0, left))
            try:
                msg = _recv(sock)
            except (PSError, OSError, ValueError):
                sock.close()  # an address probe or a peer that gave up: not a registration
                continue
            if msg.get("role") == "server":
                servers.append((sock, (str(msg["host"]), int(msg["port"]))))
                order.append(int(msg.get("index", num_servers + len(order))))
            else:
                workers.append((sock, msg.get("rank")))
        addrs = [list(a) for _, (_, a) in sorted(zip(order, servers, strict=True), key=lambda x: x[0])]
        taken = {r for _, r in workers if r is not None}
        free = iter(r for r in range(num_workers) if r not in taken)
        for sock, rank in workers:
            _send(sock, {"servers": addrs, "rank": rank if rank is not None else next(free)})
        for sock, _ in servers:
            _send(sock, {"ok": True})
    finally:
        for s, _ in [*servers, *workers]:
            s.close()


def register(root: tuple[str, int], msg: dict[str, Any], *, timeout_s: float) -> tuple[dict[str, Any], str]:
    """Register with the scheduler at ``root`` (retrying until it appears); return its answer and the
    local address this host used to reach it (the address a server announces)."""
    sock = connect(root, timeout_s=timeout_s)
    try:
        local = str(sock.getsockname()[0])
        _send(sock, {"v": VERSION, **msg})
        sock.settimeout(timeout_s + 5.0)
        try:
            answer = _recv(sock)
        except TimeoutError:
            raise PSTimeoutError(
                f"the scheduler at {root[0]}:{root[1]} gave no answer within {timeout_s} s"
            ) from None
    finally:
        sock.close()
    if "error" in answer:
        raise PSTimeoutError(str(answer["error"]))
    return answer, local


def worker_assignment(root: tuple[str, int], *, rank: int | None, timeout_s: float) -> Assignment:
    """A worker's registration: the servers and its rank."""
    answer, _ = register(root, {"role": "worker", "rank": rank}, timeout_s=timeout_s)
    return Assignment(servers=tuple((str(h), int(p)) for h, p in answer["servers"]), rank=int(answer["rank"]))
