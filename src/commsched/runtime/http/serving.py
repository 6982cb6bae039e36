"""Running an ASGI application under uvicorn on a TCP address or a Unix socket (the process edge).

The socket is bound here, before uvicorn starts, so a port 0 listener knows its port and can print
it (``listening on http://127.0.0.1:PORT``) for whoever started the process. uvicorn handles SIGTERM
and SIGINT: it stops accepting, finishes the requests in flight and runs the application's shutdown.
"""

from __future__ import annotations

import ipaddress
import os
import secrets
import signal
import socket
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from commsched.errors import InputError

__all__ = ["Listen", "bind", "load_token", "parse_listen", "serve"]


@dataclass(frozen=True, slots=True, kw_only=True)
class Listen:
    """Where to listen: ``host`` and ``port`` for TCP, or ``path`` of a Unix socket."""

    host: str = "127.0.0.1"
    port: int = 0
    path: str | None = None

    def url(self, port: int | None = None) -> str:
        if self.path is not None:
            return f"unix:{self.path}"
        host = f"[{self.host}]" if ":" in self.host else self.host
        return f"http://{host}:{self.port if port is None else port}"

    @property
    def loopback(self) -> bool:
        if self.path is not None:
            return True
        try:
            return ipaddress.ip_address(self.host).is_loopback
        except ValueError:
            return self.host == "localhost"


def parse_listen(text: str, *, where: str = "--listen") -> Listen:
    """``HOST:PORT``, ``[V6]:PORT`` or ``unix:PATH``.

    Examples
    --------
    >>> parse_listen("127.0.0.1:0")
    Listen(host='127.0.0.1', port=0, path=None)
    >>> parse_listen("unix:/tmp/a.sock").path
    '/tmp/a.sock'
    """
    if text.startswith("unix:"):
        path = text[5:]
        if not path:
            raise InputError("empty socket path", where=where, expected="unix:PATH")
        return Listen(path=path)
    host, sep, port = text.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isdigit() or int(port) > 65535:
        raise InputError(
            f"bad address {text!r}", where=where, expected="HOST:PORT (port 0-65535) or unix:PATH"
        )
    return Listen(host=host, port=int(port))


def load_token(token_file: Path | None, *, fallback: Path) -> tuple[str, Path]:
    """The bearer token: the first line of ``token_file``, or one kept in ``fallback`` (made on first use)."""
    path = token_file or fallback
    if token_file is None and not path.exists():
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
        with os.fdopen(fd, "w") as fh:
            fh.write(secrets.token_urlsafe(32) + "\n")
    try:
        token = path.read_text().strip()
    except OSError as exc:
        raise InputError(f"cannot read the token file: {exc.strerror}", where=str(path)) from None
    if not token or len(token) < 8:
        raise InputError("token too short", where=str(path), expected="a token of at least 8 characters")
    return token, path


def bind(listen: Listen) -> socket.socket:
    """A listening socket for ``listen``."""
    try:
        if listen.path is not None:
            with_path = Path(listen.path)
            if with_path.is_socket():
                with_path.unlink()
            sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
            sock.bind(listen.path)
        else:
            family = socket.AF_INET6 if ":" in listen.host else socket.AF_INET
            sock = socket.socket(family, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind((listen.host, listen.port))
    except OSError as exc:
        raise InputError(f"cannot listen: {exc.strerror}", where=listen.url()) from None
    sock.listen(1024)
    return sock


def serve(app: Any, sock: socket.socket) -> None:
    """Serve ``app`` on the bound socket until SIGTERM or SIGINT."""
    import uvicorn

    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", timeout_graceful_shutdown=3
    )
    # uvicorn restores the handlers it found and re-raises the stop signal once it has shut down; with
    # these no-op handlers in place the process then returns from here and exits 0 after a clean stop.
    previous = {sig: signal.signal(sig, _ignore) for sig in (signal.SIGTERM, signal.SIGINT)}
    try:
        uvicorn.Server(config).run(sockets=[sock])
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)


def _ignore(signum: int, frame: FrameType | None) -> None:
    """A stop signal after uvicorn's shutdown: nothing left to do."""
