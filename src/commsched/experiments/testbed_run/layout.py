"""Where a scenario's jobs run on a testbed: per job, its hosts, rails, listening addresses, ports.

A job of ``n`` GPUs on ``h`` hosts has ``g = n / h`` GPUs per host (its ranks ``k*g .. k*g+g-1`` on
host ``k``, as in the hierarchical ring), and one process per host (:mod:`commsched.runtime.jobside.jobproc`).
Hierarchical ring: rail ``r`` is the ring of the ``r``-th GPU of every host; on host ``k`` it listens
on the NIC of GPU ``k*g + r``. Flat ring (``ring`` with several GPUs per host): one ring over all
``n`` ranks in GPU order, each rank listening on its GPU's NIC; the hops between two GPUs of one host
go over the host's loopback (:func:`commsched.runtime.launch.fabric.shape_intra_host`). Listeners that
share a NIC address get consecutive ports from :data:`DPORT_BASE`; the ECMP hash includes the
destination port, so the prober runs once per port in use.

Collectives the job library does not run on the testbed are refused with the reason
(:data:`NOT_RUN`); a command job (an unmodified program, :mod:`.commands`) may declare any.
"""

from __future__ import annotations

from collections import defaultdict

from commsched.errors import InputError
from commsched.io.scenario import Scenario
from commsched.runtime.launch.jobs import DPORT_BASE, JobLayout, Listener
from commsched.topology import NodeId, Topology

__all__ = ["NOT_RUN", "job_layouts"]

#: why the job library does not run a collective of the simulator on the testbed
NOT_RUN = {
    "halving_doubling": "the job library (commsched.runtime.transport) has no halving-doubling all-reduce",
    "double_binary_tree": "the job library (commsched.runtime.transport) has no double binary tree",
    "alltoall": (
        "the job library's all-to-all sends to every rank at once, while the simulator's pairwise "
        "schedule runs its n-1 steps one after another: the twin would not model the same traffic"
    ),
    "alltoall_grouped": "the job process of a testbed run runs all-reduce iterations, not all-to-all",
    "pipeline": "the job process runs data-parallel all-reduce iterations, not pipeline stages",
    "ps": "parameter-server jobs run with `commsched ps` (docs/runtime-ps.md), not in a testbed run",
    "reduce_scatter": "the job process runs whole all-reduce iterations, not a reduce-scatter alone",
    "all_gather": "the job process runs whole all-reduce iterations, not an all-gather alone",
    "broadcast": "the job process runs all-reduce iterations, not broadcasts",
    "pipeline_1f1b": "the job process runs data-parallel all-reduce iterations, not pipeline stages",
}


def job_layouts(scenario: Scenario, topology: Topology, nic_ip: dict[str, str]) -> list[JobLayout]:
    """The layout of every job of ``scenario`` (explicit placements only)."""
    used: dict[str, int] = defaultdict(int)
    out: list[JobLayout] = []
    for job in scenario.jobs:
        where = f"{scenario.source}: jobs.{job.spec.id}"
        if not job.gpu_ids:
            raise InputError("the job has no explicit placement", where=where, expected="hosts or gpu_ids")
        if job.spec.collective not in ("hierarchical_ring", "ring"):
            why = NOT_RUN.get(job.spec.collective, "the job library has no such collective")
            raise InputError(
                f"collective {job.spec.collective!r} is not run on the testbed: {why}",
                where=f"{where}.collective",
                expected="ring or hierarchical_ring, or a command job (command: [...]) for any other",
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
                flat=job.spec.collective == "ring" and rails > 1,
                priority=job.spec.priority,
            )
        )
    return out
