"""The agent's link to the daemon: register the host, follow decisions, keep the last one on disk.

A :class:`Follower` thread long-polls ``GET /v1/decisions/latest?after=V&wait_s=S&host=H`` and keeps
the newest host view in memory and in a state file (written to a temporary file and renamed, so a
killed agent leaves either the old or the new file). When the daemon is away the follower retries
with back-off and the agent keeps answering from its last decision; a restarted agent starts from
the state file before the daemon answers.
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import TypedDict

from commsched.errors import InputError
from commsched.runtime.http.localclient import LocalClient, LocalHTTPError
from commsched.runtime.protocol.control import HostView
from commsched.runtime.protocol.control_json import RegistrationJSON

__all__ = ["Follower", "PostedProfileJSON", "read_state", "write_state"]


class PostedProfileJSON(TypedDict):
    """What posting a profile to the daemon gave: its HTTP status and its answer (JSON, else text)."""

    status: int
    answer: object


def write_state(path: Path, view: HostView) -> None:
    """Write ``view`` to ``path`` atomically (temporary file, fsync, rename)."""
    tmp = path.with_name(path.name + f".tmp{os.getpid()}")
    with open(tmp, "w") as fh:
        json.dump(view.to_json(), fh, separators=(",", ":"))
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)


def read_state(path: Path) -> HostView | None:
    """The last stored view, or ``None`` when there is none (or it cannot be read, or is no host view)."""
    try:
        return HostView.from_json(json.loads(path.read_text()), where=str(path))
    except (OSError, json.JSONDecodeError, InputError):
        return None


class Follower:
    """Follows the daemon's decisions for one host.

    Parameters
    ----------
    daemon
        Base URL of the daemon, e.g. ``http://127.0.0.1:8080``, or ``unix:PATH`` (its Unix socket).
    host
        This host's name in the topology.
    token
        Bearer token for the mutating calls (host registration, counters); ``None``: do not register.
    state_path
        Where the last decision is kept.
    registration
        Body of ``POST /v1/hosts`` (name, NICs, where the agent serves).
    wait_s
        Long-poll duration of one request.
    """

    def __init__(
        self,
        *,
        daemon: str,
        host: str,
        token: str | None,
        state_path: Path,
        registration: RegistrationJSON,
        wait_s: float = 20.0,
    ) -> None:
        self.daemon = daemon.rstrip("/")
        # ``unix:PATH``: a daemon on a Unix socket (reachable from any network namespace)
        self.host = host
        self.state_path = state_path
        self.registration = registration
        self.wait_s = wait_s
        self._client = LocalClient(self.daemon, token=token, timeout=wait_s + 10.0)
        self._token = token
        self._stop = threading.Event()
        self._lock = threading.Lock()
        stored = read_state(state_path)
        #: whether a view is held (from the state file or the daemon), not the empty one of version 0
        self._held = stored is not None
        self._host_view = stored or HostView(version=0, policy="", host=host)
        self.connected = False
        self.registered = False
        self.last_error = ""
        #: called with each new host view, typed (the enforcer's ``apply_safely``, the metrics' counter)
        self.listeners: list[Callable[[HostView], None]] = []
        self._thread = threading.Thread(target=self._run, name=f"follower-{host}", daemon=True)

    @property
    def host_view(self) -> HostView:
        """The last host view, typed (:class:`~commsched.runtime.protocol.control.HostView`)."""
        with self._lock:
            return self._host_view

    @property
    def version(self) -> int:
        return self.host_view.version

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        self._stop.set()
        self._thread.join(timeout=self.wait_s + 12.0)
        self._client.close()

    def report_counters(self, counters: dict[str, float]) -> bool:
        """Send link counters to the daemon; ``False`` when it is away or refuses."""
        if not self._token:
            return False
        try:
            r = self._client.post(f"/v1/hosts/{self.host}/counters", json={"counters": counters}, timeout=5.0)
        except LocalHTTPError:
            return False
        return r.status_code == 200

    def heartbeat(self, job: str) -> bool:
        """``POST /v1/jobs/{job}/heartbeat`` for a job this host runs; ``False``: away or refused."""
        import urllib.parse

        if not self._token:
            return False
        try:
            r = self._client.post(f"/v1/jobs/{urllib.parse.quote(job, safe='')}/heartbeat", timeout=5.0)
        except LocalHTTPError:
            return False
        return r.status_code == 200

    def post_profile(self, job: str, body: dict[str, float]) -> PostedProfileJSON:
        """``PUT /v1/jobs/{job}/profile`` (a job's profile measured from outside); the daemon's answer."""
        import urllib.parse

        r = self._client.put(f"/v1/jobs/{urllib.parse.quote(job, safe='')}/profile", json=body, timeout=10.0)
        try:
            answer = r.json()
        except ValueError:
            answer = r.text[:200]
        return {"status": r.status_code, "answer": answer}

    def _register(self) -> None:
        if self._token:
            r = self._client.post("/v1/hosts", json=self.registration, timeout=5.0)
            r.raise_for_status()
            self.registered = True

    def _poll(self) -> None:
        params: dict[str, str | int | float] = {
            "after": self.version,
            "wait_s": self.wait_s,
            "host": self.host,
        }
        r = self._client.get("/v1/decisions/latest", params=params)
        r.raise_for_status()
        typed = HostView.from_json(r.json(), where="GET /v1/decisions/latest")  # refuses a malformed view
        self.connected = True
        if typed.version != self.version or not self._held:
            write_state(self.state_path, typed)
            with self._lock:
                self._host_view, self._held = typed, True
            for fn in self.listeners:
                fn(typed)

    def _run(self) -> None:
        backoff = 0.1
        while not self._stop.is_set():
            try:
                if not self.registered:
                    self._register()
                self._poll()
                backoff = 0.1
            except (LocalHTTPError, ValueError, InputError) as exc:
                self.connected = False
                self.registered = False  # a restarted daemon gets the host again
                self.last_error = f"{type(exc).__name__}: {exc}"
                self._stop.wait(backoff)
                backoff = min(backoff * 2, 2.0)
