"""One stdlib-only HTTP client for the local agent and daemon sockets, and no other in ``src/``."""

from __future__ import annotations

import ast
import http.server
import json
import socketserver
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from commsched.runtime.http.localclient import LocalClient, LocalHTTPError
from tests.paths import REPO

SRC = REPO / "src" / "commsched"
HOME = SRC / "runtime" / "http" / "localclient.py"
#: the services' listener binds its Unix socket (a server, not a client)
LISTENER = SRC / "runtime" / "http" / "serving.py"
CLIENT_MODULES = ("httpx", "http.client", "urllib.request", "requests", "aiohttp")


def _offences(path: Path) -> list[str]:
    tree = ast.parse(path.read_text(), filename=str(path))
    out = []
    for node in ast.walk(tree):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module:
            names = [node.module] + [f"{node.module}.{a.name}" for a in node.names]
        for n in names:
            if n in CLIENT_MODULES or n.startswith(("httpx.", "requests.", "aiohttp.")):
                out.append(f"{path.relative_to(SRC)}:{node.lineno}: imports {n}")
        if isinstance(node, ast.Attribute) and node.attr == "AF_UNIX" and path != LISTENER:
            out.append(f"{path.relative_to(SRC)}:{node.lineno}: a raw Unix socket")
    return out


def test_no_other_module_opens_local_http_connections() -> None:
    found = [o for p in sorted(SRC.rglob("*.py")) if p != HOME for o in _offences(p)]
    assert found == []


def test_the_client_uses_the_standard_library_only() -> None:
    tree = ast.parse(HOME.read_text())
    mods = {a.name.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.Import) for a in n.names}
    mods |= {n.module.split(".")[0] for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) and n.module}
    assert mods - {"__future__"} <= set(sys.stdlib_module_names)


class _Echo(http.server.BaseHTTPRequestHandler):
    """Answers every request with what it received (method, path, authorization, JSON body)."""

    def _answer(self) -> None:
        n = int(self.headers.get("Content-Length") or 0)
        body = json.loads(self.rfile.read(n)) if n else None
        data = json.dumps(
            {
                "method": self.command,
                "path": self.path,
                "auth": self.headers.get("Authorization"),
                "body": body,
            }
        ).encode()
        self.send_response(404 if self.path.startswith("/missing") else 200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    do_GET = do_POST = do_PUT = do_DELETE = _answer  # noqa: N815 (the names http.server calls)

    def log_message(self, *args: Any) -> None:
        pass

    def address_string(self) -> str:
        return "local"


class _UnixServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture(params=["unix", "tcp"])
def address(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "unix":
        sock = tmp_path / "s.sock"
        srv: socketserver.BaseServer = _UnixServer(str(sock), _Echo)
        addr = f"unix:{sock}"
    else:
        srv = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Echo)
        addr = f"http://127.0.0.1:{srv.server_address[1]}"  # type: ignore[attr-defined]
    t = threading.Thread(target=srv.serve_forever, daemon=True)
    t.start()
    try:
        yield addr
    finally:
        srv.shutdown()
        srv.server_close()


def test_requests_reach_the_peer_with_token_body_and_query(address: str) -> None:
    with LocalClient(address, token="s3cret", timeout=5.0) as c:
        r = c.put("/v1/jobs/a%2Fb/profile", json={"compute_s": 0.5})
        assert r.status_code == 200
        want = {"method": "PUT", "path": "/v1/jobs/a%2Fb/profile", "auth": "Bearer s3cret"}
        assert r.json() == want | {"body": {"compute_s": 0.5}}
        q = c.get("/v1/port", params={"job": "j 1", "src_rank": 0}).json()
        assert q["path"] == "/v1/port?job=j+1&src_rank=0" and q["body"] is None
        missing = c.delete("/missing")
        assert missing.status_code == 404
        with pytest.raises(LocalHTTPError, match="404"):
            missing.raise_for_status()


def test_an_absent_peer_is_one_error(tmp_path: Path) -> None:
    with pytest.raises(LocalHTTPError):
        LocalClient(f"unix:{tmp_path / 'none.sock'}", timeout=1.0).get("/v1/decision")
    with pytest.raises(ValueError, match="unix:PATH or http://HOST:PORT"):
        LocalClient("ftp://host")
