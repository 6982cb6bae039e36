"""What the launcher starts: a job's layout on the testbed (library jobs) and a command job's ranks.

The records are built from a scenario by the experiment (:mod:`commsched.experiments.testbed_run`)
and consumed by the launcher (:mod:`.session`): one job process per (job, host) listening on the
:class:`Listener` addresses, or one unmodified program per :class:`Rank` of a :class:`CommandJob`
started through the host agents.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsched.topology import NodeId

__all__ = ["DPORT_BASE", "MASTER_PORT_BASE", "CommandJob", "JobLayout", "Listener", "Rank"]

#: first listening port of the job processes (below the probe's source ports, 20000 and up)
DPORT_BASE = 15201

#: rank 0 of the ``i``-th command job listens here (below the translated source ports, 20000 and up)
MASTER_PORT_BASE = 14000


@dataclass(frozen=True, slots=True, kw_only=True)
class Rank:
    """One process of a command job: its rank, host, GPU slot, NIC address and interface."""

    rank: int
    local_rank: int
    host: str
    gpu: NodeId
    ip: str
    iface: str


@dataclass(frozen=True, slots=True, kw_only=True)
class CommandJob:
    """A command job on the testbed (declared numbers: what the daemon gets until it measures)."""

    id: str
    argv: tuple[str, ...]
    ranks: tuple[Rank, ...]
    local_world: int
    master_port: int
    iteration_log: str | None
    compute_s: float
    sync_bytes: float
    overlap: float
    collective: str
    declared: bool
    #: the priority class written on the job in the scenario (the static policy's class), if any
    priority: int | None = None

    @property
    def gpus(self) -> tuple[NodeId, ...]:
        return tuple(r.gpu for r in self.ranks)

    @property
    def hosts(self) -> tuple[str, ...]:
        return tuple(dict.fromkeys(r.host for r in self.ranks))

    def env(self, rank: Rank) -> dict[str, str]:
        """torchrun's variables for ``rank``, and its interface for gloo and NCCL's sockets."""
        return {
            "RANK": str(rank.rank),
            "LOCAL_RANK": str(rank.local_rank),
            "WORLD_SIZE": str(len(self.ranks)),
            "LOCAL_WORLD_SIZE": str(self.local_world),
            "MASTER_ADDR": self.ranks[0].ip,
            "MASTER_PORT": str(self.master_port),
            "GLOO_SOCKET_IFNAME": rank.iface,
            "NCCL_SOCKET_IFNAME": "=" + rank.iface,
            # torchrun's default with several processes per machine: one thread each (CPU ops)
            "OMP_NUM_THREADS": "1",
        }


@dataclass(frozen=True, slots=True, kw_only=True)
class Listener:
    """Where rail ``rail`` of a job listens on host index ``host_index``."""

    rail: int
    host_index: int
    gpu: NodeId
    nic: NodeId
    ip: str
    port: int


@dataclass(frozen=True, slots=True, kw_only=True)
class JobLayout:
    """One job on the testbed (profile numbers are the scenario's, unscaled)."""

    id: str
    hosts: tuple[str, ...]
    rails: int
    gpus: tuple[NodeId, ...]
    compute_s: float
    overlap: float
    sync_bytes: float
    model: str | None
    listeners: tuple[Listener, ...]
    #: one ring over every GPU (``ring`` with several GPUs per host), else one ring per rail
    flat: bool = False
    #: the priority class written on the job in the scenario (the static policy's class), if any
    priority: int | None = None

    def listener(self, rail: int, host_index: int) -> Listener:
        return self.listeners[host_index * self.rails + rail]

    def ring(self) -> list[tuple[Listener, Listener]]:
        """Every directed connection of the collective (sender's listener, receiver's listener)."""
        h = len(self.hosts)
        if self.flat:
            n = len(self.listeners)
            return [(self.listeners[i], self.listeners[(i + 1) % n]) for i in range(n)] if n > 1 else []
        if h < 2:
            return []
        out = []
        for r in range(self.rails):
            for k in range(h):
                out.append((self.listener(r, k), self.listener(r, (k + 1) % h)))
        return out
