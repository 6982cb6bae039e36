"""The host agent's client: a connection policy that asks the local agent for ports and marks.

A job process passes :class:`AgentPolicy` to the transport (``Options(policy=AgentPolicy(...))``, also
through :func:`commsched.runtime.torch.install`), and every connection it opens then binds the source
port and carries the mark (DSCP, ``dscp << 2`` on the socket) that the host agent answers from the
daemon's decision (``GET /v1/port``, a :class:`~commsched.runtime.protocol.control.PortAnswer`), over
the agent's Unix socket (``commsched agent --listen unix:PATH``).

Examples
--------
>>> policy = AgentPolicy(socket_path=None, job="job-7")    # no agent: unmarked, any port
>>> policy.marking("job-7", 0, 1)
Marking(source_port=None, dscp=0)
"""

from __future__ import annotations

import threading
import urllib.parse
from collections.abc import Sequence

from commsched.errors import InputError
from commsched.runtime.http.localclient import LocalClient, LocalHTTPError
from commsched.runtime.protocol.control import PortAnswer
from commsched.runtime.protocol.control_json import PortAnswerJSON
from commsched.runtime.transport.policy import Marking

__all__ = ["AgentPolicy"]

_UNMARKED = Marking(source_port=None, dscp=0)


class AgentPolicy:
    """Connection policy that asks the host agent (Unix socket) for the job's source port and mark.

    Parameters
    ----------
    socket_path
        The agent's Unix socket; ``None``: no agent (every connection unmarked, any port).
    job
        The job's id in the daemon.
    rail, rails
        For a transport whose ranks are those of one rail ring (host indices): rail rank ``k`` of rail
        ``r`` is job rank ``k * rails + r``. A transport over every rank of the job (a flat ring, DDP)
        keeps the defaults ``rail=0, rails=1``.
    dports
        ``dports[k]``: the port rank ``k`` listens on (the ECMP hash includes it, so a probed port may
        depend on it); ``None``: not known, the agent answers its port for any destination port.
    refresh_s
        Re-ask the agent this often in the background (a class change reaches open connections).

    Notes
    -----
    The data path never waits for the control path: a connection's first question is asked at once
    (its source port is needed to open it); after that the cached answer is returned and a background
    thread asks the agent again every ``refresh_s`` seconds, so the transport's periodic re-marking
    picks up a new class without an HTTP round trip inside a collective. When the agent does not
    answer, or answers something that is not a port answer of its protocol version, the last answer
    is kept (unmarked, any port before the first one).
    """

    def __init__(
        self,
        *,
        socket_path: str | None,
        job: str,
        rail: int = 0,
        rails: int = 1,
        dports: Sequence[int] | None = None,
        refresh_s: float | None = None,
    ) -> None:
        self.socket_path = socket_path
        self.job = job
        self.rail = rail
        self.rails = rails
        self.dports = None if dports is None else list(dports)
        self.refresh_s = refresh_s
        #: the last answer per ``(src, dst)`` (as the agent sent it)
        self.answers: dict[tuple[int, int], PortAnswerJSON] = {}
        self._last: dict[tuple[int, int], Marking] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def marking(self, job: str, src: int, dst: int) -> Marking:
        """The marking of ``src -> dst`` (transport ranks), from the agent's last answer."""
        key = (src, dst)
        if self.socket_path is None:
            return _UNMARKED
        with self._lock:
            known = self._last.get(key)
        if known is None:
            self._ask(key)
            if self.refresh_s and self._thread is None:
                self._thread = threading.Thread(target=self._follow, name="agent-policy", daemon=True)
                self._thread.start()
        with self._lock:
            return self._last.get(key, _UNMARKED)

    def close(self) -> None:
        """Stop the background refresh."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=10.0)

    def _follow(self) -> None:
        period = self.refresh_s or 1.0
        while not self._stop.wait(period):
            with self._lock:
                keys = list(self._last)
            for key in keys:
                self._ask(key)

    def query(self, src: int, dst: int) -> str:
        """The ``GET /v1/port`` query of transport ranks ``src -> dst``."""
        params: dict[str, str | int] = {
            "job": self.job,
            "src_rank": src * self.rails + self.rail,
            "dst_rank": dst * self.rails + self.rail,
        }
        if self.dports is not None:
            params["dport"] = self.dports[dst]
        return "/v1/port?" + urllib.parse.urlencode(params)

    def _ask(self, key: tuple[int, int]) -> None:
        if self.socket_path is None:
            return
        try:
            resp = LocalClient(f"unix:{self.socket_path}", timeout=5.0).get(self.query(*key))
            body = resp.json() if resp.content else {}
            if resp.status_code == 200:
                ans = PortAnswer.from_json(body, where="agent answer")
                with self._lock:
                    self._last[key] = Marking(source_port=ans.src_port, dscp=ans.mark.dscp)
                    self.answers[key] = ans.to_json()
        except (LocalHTTPError, ValueError, InputError):
            pass
