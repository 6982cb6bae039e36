"""The one HTTP client for the local agent and daemon sockets, on the standard library only.

Job processes ask the host agent for ports and marks and post their profiles to the daemon, the agent
follows the daemon, and the launcher and ``commsched launch`` talk to both: all of it goes through
:class:`LocalClient`. It runs inside users' training jobs, so it needs nothing beyond the standard
library (the HTTP framework of the daemon and agent is the optional ``runtime`` extra). An address is
``unix:PATH`` (a Unix socket, reachable from any network namespace) or ``http://HOST:PORT``; every
request opens its own connection (the peers are local) and any failure to reach the peer or to read its
answer is one :class:`LocalHTTPError`.

Examples
--------
>>> c = LocalClient("unix:/nonexistent/agent.sock", timeout=1.0)
>>> try:
...     c.get("/v1/decision")
... except LocalHTTPError as exc:
...     print(type(exc).__name__)
LocalHTTPError
"""

from __future__ import annotations

import http.client
import json as jsonlib
import socket
import urllib.parse
from dataclasses import dataclass
from typing import Any

__all__ = ["LocalClient", "LocalHTTPError", "Response"]


class LocalHTTPError(Exception):
    """The peer could not be reached, or its answer could not be read (or, from
    :meth:`Response.raise_for_status`, it answered with an error status)."""


class _UnixConnection(http.client.HTTPConnection):
    """HTTP over a Unix socket."""

    def __init__(self, path: str, timeout: float) -> None:
        super().__init__("localhost", timeout=timeout)
        self._path = path

    def connect(self) -> None:
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.settimeout(self.timeout)
            sock.connect(self._path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


@dataclass(frozen=True, slots=True, kw_only=True)
class Response:
    """An answer: status code and body."""

    status_code: int
    content: bytes

    @property
    def text(self) -> str:
        """The body as text (UTF-8, undecodable bytes replaced)."""
        return self.content.decode("utf-8", "replace")

    def json(self) -> Any:
        """The body as JSON (``ValueError`` where it is not)."""
        return jsonlib.loads(self.content or b"null")

    def raise_for_status(self) -> None:
        """Raise :class:`LocalHTTPError` for a status of 400 or more."""
        if self.status_code >= 400:
            raise LocalHTTPError(f"{self.status_code}: {self.text[:200]}")


class LocalClient:
    """A client of one local peer (``unix:PATH`` or ``http://HOST:PORT``).

    Parameters
    ----------
    address
        ``unix:PATH`` or ``http://HOST[:PORT]`` (a base path after the port is kept).
    token
        Sent as ``Authorization: Bearer TOKEN`` where given.
    timeout
        Seconds for connecting and for each read (a request may give its own).
    """

    def __init__(self, address: str, *, token: str | None = None, timeout: float = 30.0) -> None:
        self.address = address
        self.timeout = timeout
        self._headers = {"Authorization": f"Bearer {token}"} if token else {}
        if address.startswith("unix:"):
            self._unix: str | None = address[5:]
            self._host, self._port, self._base = "", None, ""
        else:
            url = urllib.parse.urlsplit(address)
            if url.scheme != "http" or not url.hostname:
                raise ValueError(f"address {address!r}: expected unix:PATH or http://HOST:PORT")
            self._unix, self._host, self._port = None, url.hostname, url.port
            self._base = url.path.rstrip("/")

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._unix is not None:
            return _UnixConnection(self._unix, timeout)
        return http.client.HTTPConnection(self._host, self._port, timeout=timeout)

    def request(
        self,
        method: str,
        path: str,
        *,
        json: Any = None,
        params: dict[str, Any] | None = None,
        timeout: float | None = None,
    ) -> Response:
        """Send one request and read the whole answer.

        Raises
        ------
        LocalHTTPError
            The peer is not reachable, or the connection broke or timed out.
        """
        target = (
            self._base
            + path
            + (("&" if "?" in path else "?") + urllib.parse.urlencode(params) if params else "")
        )
        headers = dict(self._headers)
        body = None
        if json is not None:
            body = jsonlib.dumps(json).encode()
            headers["Content-Type"] = "application/json"
        conn = self._connection(self.timeout if timeout is None else timeout)
        try:
            conn.request(method, target, body=body, headers=headers)
            resp = conn.getresponse()
            return Response(status_code=resp.status, content=resp.read())
        except (OSError, http.client.HTTPException) as exc:
            raise LocalHTTPError(f"{self.address}: {type(exc).__name__}: {exc}") from None
        finally:
            conn.close()

    def get(self, path: str, **kw: Any) -> Response:
        """``GET path`` (see :meth:`request`)."""
        return self.request("GET", path, **kw)

    def post(self, path: str, **kw: Any) -> Response:
        """``POST path`` (see :meth:`request`)."""
        return self.request("POST", path, **kw)

    def put(self, path: str, **kw: Any) -> Response:
        """``PUT path`` (see :meth:`request`)."""
        return self.request("PUT", path, **kw)

    def delete(self, path: str, **kw: Any) -> Response:
        """``DELETE path`` (see :meth:`request`)."""
        return self.request("DELETE", path, **kw)

    def close(self) -> None:
        """Nothing held between requests: kept for ``with`` blocks."""

    def __enter__(self) -> LocalClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
