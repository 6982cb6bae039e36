"""Where a scenario's jobs run on a testbed: per job, its hosts, rails, listening addresses, ports.

A job of ``n`` GPUs on ``h`` hosts has ``g = n / h`` GPUs per host (its ranks ``k*g .. k*g+g-1`` on
host ``k``, as in the hierarchical ring), and one process per host (:mod:`commsched.runtime.jobproc`).
Rail ``r`` is the ring of the ``r``-th GPU of every host; on host ``k`` it listens on the NIC of GPU
``k*g + r``. Listeners that share a NIC address get consecutive ports from :data:`DPORT_BASE`; the
ECMP hash includes the destination port, so the prober runs once per port in use.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass

from commsched.errors import InputError
from commsched.io.scenario import Scenario
from commsched.topology import NodeId, Topology

__all__ = ["DPORT_BASE", "JobLayout", "Listener", "job_layouts"]

#: first listening port of the job processes (below the probe's source ports, 20000 and up)
DPORT_BASE = 15201


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

    def listener(self, rail: int, host_index: int) -> Listener:
        return self.listeners[host_index * self.rails + rail]

    def ring(self) -> list[tuple[Listener, Listener]]:
        """Every directed inter-host connection (sender's listener, receiver's listener)."""
        h = len(self.hosts)
        if h < 2:
            return []
        out = []
        for r in range(self.rails):
            for k in range(h):
                out.append((self.listener(r, k), self.listener(r, (k + 1) % h)))
        return out


def job_layouts(scenario: Scenario, topology: Topology, nic_ip: dict[str, str]) -> list[JobLayout]:
    """The layout of every job of ``scenario`` (explicit placements only)."""
    used: dict[str, int] = defaultdict(int)
    out: list[JobLayout] = []
    for job in scenario.jobs:
        where = f"{scenario.source}: jobs.{job.spec.id}"
        if not job.gpu_ids:
            raise InputError("the job has no explicit placement", where=where, expected="hosts or gpu_ids")
        if job.spec.collective not in ("hierarchical_ring", "ring"):
            raise InputError(
                f"collective {job.spec.collective!r} is not run on the testbed",
                where=f"{where}.collective",
                expected="hierarchical_ring or ring",
            )
        gpus = tuple(NodeId(g) for g in job.gpu_ids)
        hosts: list[str] = []
        for g in gpus:
            name = str(topology.host_of(g).id)
            if not hosts or hosts[-1] != name:
                hosts.append(name)
        if len(set(hosts)) != len(hosts) or len(gpus) % len(hosts):
            raise InputError(
                "GPUs are not grouped by host with the same count on each",
                where=f"{where}.gpu_ids",
                expected="consecutive equal groups per host",
            )
        rails = len(gpus) // len(hosts)
        if job.spec.collective == "ring" and rails != 1 and len(hosts) > 1:
            raise InputError(
                "a flat ring over several GPUs per host is not run on the testbed",
                where=f"{where}.collective",
                expected="hierarchical_ring, or one GPU per host",
            )
        listeners = []
        for k in range(len(hosts)):
            for r in range(rails):
                gpu = gpus[k * rails + r]
                nic = topology.nic_of(gpu)
                ip = nic_ip[str(nic)]
                listeners.append(
                    Listener(rail=r, host_index=k, gpu=gpu, nic=nic, ip=ip, port=DPORT_BASE + used[ip])
                )
                used[ip] += 1
        p = job.spec.profile
        out.append(
            JobLayout(
                id=str(job.spec.id),
                hosts=tuple(hosts),
                rails=rails,
                gpus=gpus,
                compute_s=float(p.compute_s),
                overlap=float(p.overlap),
                sync_bytes=float(p.sync_bytes),
                model=job.spec.model,
                listeners=tuple(listeners),
            )
        )
    return out
