"""Command jobs on the testbed: an unmodified program run as the job's ranks, through the host agents.

A scenario job with ``command: [PROGRAM, ARG, ...]`` runs that program, unchanged, once per rank,
with torchrun's environment: ``RANK``, ``LOCAL_RANK``, ``WORLD_SIZE``, ``LOCAL_WORLD_SIZE``,
``MASTER_ADDR`` (rank 0's NIC address), ``MASTER_PORT``, plus what the host agent hands out for the
job's class and rails (``NCCL_IB_TC``, ``NCCL_SOCKET_IFNAME``, ...) with the rank's own interface in
``GLOO_SOCKET_IFNAME`` / ``NCCL_SOCKET_IFNAME``. Ranks are one process per host (``processes:
per_host``, the default: rank ``k`` on the ``k``-th host, on the GPU of its first slot) or one per GPU
slot (``per_gpu``: ranks in GPU order, ``LOCAL_RANK`` the slot). The job is scheduled and simulated
on the GPUs of its ranks. Each rank's host agent starts the process inside the job's cgroup
(``POST /v1/jobs/{job}/processes``) and enforces the decision on its connections (docs/real-jobs.md).
"""

from __future__ import annotations

from commsched.errors import InputError
from commsched.io.scenario import Scenario
from commsched.runtime.launch.jobs import MASTER_PORT_BASE, CommandJob, Rank
from commsched.testbed import Testbed
from commsched.topology import NodeId

__all__ = ["command_jobs"]


def command_jobs(scenario: Scenario, tb: Testbed) -> list[CommandJob]:
    """The command jobs of ``scenario`` (explicit placements only) laid out on ``tb``."""
    out: list[CommandJob] = []
    topo = tb.topology
    for i, job in enumerate(j for j in scenario.jobs if j.command):
        where = f"{scenario.source}: jobs.{job.spec.id}"
        if not job.gpu_ids:
            raise InputError(
                "a command job needs an explicit placement", where=where, expected="hosts or gpu_ids"
            )
        by_host: dict[str, list[NodeId]] = {}
        for g in job.gpu_ids:
            by_host.setdefault(str(topo.host_of(g).id), []).append(NodeId(g))
        slots = by_host.values() if job.processes == "per_gpu" else [[gs[0]] for gs in by_host.values()]
        ranks: list[Rank] = []
        for gs in slots:
            for local, gpu in enumerate(gs):
                nic = topo.nic_of(gpu)
                host = str(topo.host_of(gpu).id)
                iface = tb.layout.nic_cable(nic).a.iface
                ranks.append(
                    Rank(
                        rank=len(ranks),
                        local_rank=local,
                        host=host,
                        gpu=gpu,
                        ip=tb.nic_address(nic),
                        iface=iface,
                    )
                )
        p = job.spec.profile
        out.append(
            CommandJob(
                id=str(job.spec.id),
                argv=job.command,
                ranks=tuple(ranks),
                local_world=max(len(gs) for gs in slots),
                master_port=MASTER_PORT_BASE + i,
                iteration_log=job.iteration_log,
                compute_s=float(p.compute_s),
                sync_bytes=float(p.sync_bytes),
                overlap=float(p.overlap),
                collective=job.spec.collective,
                declared=job.declared,
                priority=job.spec.priority,
            )
        )
    return out
