"""Fixtures of the daemon/agent tests: services on temporary SQLite files, live servers on port 0."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi")
pytest.importorskip("uvicorn")
pytest.importorskip("httpx")

TOKEN = "csd-test-token-0123456789"
AUTH = {"Authorization": f"Bearer {TOKEN}"}


class FakeClock:
    """A settable wall clock."""

    def __init__(self, t: float = 1_000_000.0) -> None:
        self.t = t

    def __call__(self) -> float:
        return self.t


@dataclass
class LiveServer:
    """A uvicorn server running an app in a thread, on an ephemeral loopback port."""

    url: str
    server: Any
    thread: threading.Thread

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)


def serve_in_thread(app: Any) -> LiveServer:
    import uvicorn

    from commsched.runtime.http.serving import Listen, bind

    sock = bind(Listen(host="127.0.0.1", port=0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning", access_log=False, lifespan="on"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    deadline = time.monotonic() + 10
    while not server.started:
        if time.monotonic() > deadline:
            raise RuntimeError("server did not start")
        time.sleep(0.01)
    return LiveServer(url=f"http://127.0.0.1:{port}", server=server, thread=thread)


@pytest.fixture
def live() -> Iterator[Callable[[Any], LiveServer]]:
    """Start apps on live servers; every one is stopped after the test."""
    started: list[LiveServer] = []

    def start(app: Any) -> LiveServer:
        s = serve_in_thread(app)
        started.append(s)
        return s

    yield start
    for s in started:
        s.stop()


@dataclass
class Proc:
    """A commsched process started by a test, with the URL it announced."""

    popen: subprocess.Popen[str]
    url: str

    def kill(self) -> None:
        if self.popen.poll() is None:
            self.popen.kill()
        self.popen.wait(timeout=10)

    def terminate(self) -> int:
        if self.popen.poll() is None:
            self.popen.terminate()
        return self.popen.wait(timeout=15)


def start_process(args: list[str], cwd: Path) -> Proc:
    """Run ``python -m commsched.cli.app ARGS`` and wait for its ``listening on URL`` line."""
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    code = "import sys; from commsched.cli.app import main; sys.argv[0] = 'commsched'; main()"
    p = subprocess.Popen(
        [sys.executable, "-c", code, *args],
        cwd=cwd,
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert p.stdout is not None
    line = p.stdout.readline()
    m = re.match(r"listening on (\S+)", line)
    if m is None:
        p.kill()
        _, err = p.communicate(timeout=10)
        raise RuntimeError(f"{args[0]} did not start: {line!r} {err[-2000:]}")
    return Proc(popen=p, url=m.group(1))


@pytest.fixture
def procs() -> Iterator[list[Proc]]:
    """Processes a test starts; each is killed (by its own pid) after the test, even after a failure."""
    out: list[Proc] = []
    yield out
    for p in out:
        p.kill()
        for stream in (p.popen.stdout, p.popen.stderr):
            if stream is not None:
                stream.close()


def wait_until(cond: Callable[[], bool], timeout_s: float = 10.0, what: str = "condition") -> None:
    deadline = time.monotonic() + timeout_s
    while not cond():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        time.sleep(0.02)
