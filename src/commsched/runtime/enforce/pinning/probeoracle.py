"""The probing path oracle of an enforcing agent: the paths of this host's tuples, from the host alone.

:class:`ProbeOracle` answers the enforcer's two questions (:mod:`.pinning.oracle`) with probes
(:mod:`.probe`, :mod:`.pathprobe`): which links a tuple leaving this host takes, and which source
ports put a connection ``src -> dst:dport`` on its decided path. It never asks a router for
anything but the ICMP answers every router gives, and changes no router.

What it cannot see: the reverse direction of a connection (``dst:dport -> src:p``) is hashed by
the *peer's* routers, and their answers go to the peer. The ports it installs are probed for the
forward path; the peer's agent probes the reverse and chooses its replies' port (:mod:`.replies`,
set up by the enforcer's maker); without it the reverse is the routers' choice. The report's
per-direction counts (from the routers' own routes on the testbed) show where each direction went.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from typing_extensions import TypedDict  # pydantic reads these on Python 3.11 (the agent's answers)

from commsched.runtime.enforce.pinning.oracle import FoundPorts, PortSearch
from commsched.runtime.enforce.pinning.pathprobe import FabricMap, PathProbing, ProbeSettings, SendRound
from commsched.runtime.enforce.pinning.probe import RawProber

__all__ = ["OracleStatsJSON", "ProbeOracle"]


class OracleStatsJSON(TypedDict):
    """:meth:`ProbeOracle.stats`: probes sent and answered (``None``: not by a raw prober of its own)."""

    sent: int
    answered: int | None
    silent: list[str]  # the routers judged silent


Flow = tuple[str, str, int, int]


class ProbeRecorder(Protocol):
    """Where an agent counts its probes (its metrics): probes sent and answered, searches' times."""

    def probe_sent(self, n: int = 1) -> None: ...

    def probe_answered(self, n: int = 1) -> None: ...

    def search_took(self, seconds: float) -> None: ...


class ProbeOracle:
    """Paths and ports by TTL probes from this host (see the module docstring).

    ``send_round``: how a round of probes is sent (default: a :class:`~.probe.RawProber`, which
    needs ``CAP_NET_RAW``). ``recorder``: counts every search's probes and time (the agent's metrics).
    """

    def __init__(
        self,
        fabric: FabricMap,
        *,
        settings: ProbeSettings | None = None,
        send_round: SendRound | None = None,
        recorder: ProbeRecorder | None = None,
    ) -> None:
        self.fabric = fabric
        self.recorder = recorder
        #: the accepting hosts' agents choose their replies' ports (:mod:`.replies`)
        self.replies_by_peer = False
        self._raw: RawProber | None = None
        if send_round is None:
            self._raw = RawProber()
            send_round = self._raw.send_round
        self.probing = PathProbing(fabric, send_round, settings)

    def close(self) -> None:
        if self._raw is not None:
            self._raw.close()

    def knows(self, ip: str) -> bool:
        return ip in self.fabric.nics

    def n_paths(self, src: str, dst: str) -> int:
        return max(1, len(self.fabric.routes(src, dst)))

    def trace(self, flows: Sequence[Flow]) -> list[tuple[int, ...]]:
        """The links of each flow leaving this host (``()`` where it was not found)."""
        return [t.links for t in self.probing.trace(flows)]

    def find(self, s: PortSearch) -> FoundPorts:
        """Ports for ``s``'s forward path (the reverse is the peer's routers' to choose)."""
        if s.forward is None:
            return FoundPorts(
                ports=(),
                pinned=False,
                reason="only the reverse direction is decided: the peer's routers hash it, out of sight",
            )
        answered0 = self._answered()
        got = self.probing.find((s.src, s.dst, s.dport), s.forward, want=s.want, exclude=s.exclude)
        if self.recorder is not None:
            self.recorder.probe_sent(got.probes)
            self.recorder.probe_answered(max(0, self._answered() - answered0))
            self.recorder.search_took(got.elapsed_s)
        if not got.ports:
            return FoundPorts(
                ports=(), pinned=False, reason=f"{got.reason} ({got.probes} probes, {got.elapsed_s:.1f} s)"
            )
        why = f"ports probed for the forward path ({got.probes} probes, {got.elapsed_s:.2f} s)"
        if s.reverse is not None and self.n_paths(s.dst, s.src) > 1:
            why += (
                "; the reverse: the peer's agent probes and chooses its replies' port"
                if self.replies_by_peer
                else "; the reverse path is the peer's routers' choice (not observable from this host)"
            )
        return FoundPorts(ports=got.ports, pinned=True, reason=why)

    def _answered(self) -> int:
        """Probes answered so far (0 where the rounds are not sent by a raw prober of this oracle)."""
        return self._raw.stats.answered if self._raw is not None else 0

    def stats(self) -> OracleStatsJSON:
        """Probes sent and answered, and the routers judged silent (for the agent's health)."""
        answered = self._raw.stats.answered if self._raw is not None else None
        return {"sent": self.probing.sent, "answered": answered, "silent": self.probing.silent_routers()}
