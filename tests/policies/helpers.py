"""Builders shared by the policy tests."""

from __future__ import annotations

from collections.abc import Sequence

from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.state import ClusterState, PlacedJob
from commsched.topology import NodeId, Topology
from commsched.workload import JobId, JobSpec, ModelProfile

CTX = PolicyContext(seed=0, now_s=0.0, epoch=0)


def spec(jid: str, *, compute_s: float, comm_bytes: float, gpus: int, overlap: float = 1.0) -> JobSpec:
    prof = ModelProfile(
        name=jid, gpu="test", compute_s=compute_s, sync_bytes=comm_bytes, overlap=overlap, source="test"
    )
    return JobSpec(id=JobId(jid), profile=prof, gpus=gpus)


def host_gpus(topo: Topology, hosts: Sequence[int], per_host: int = 8) -> tuple[NodeId, ...]:
    return tuple(g for h in hosts for g in topo.hosts[h].gpus[:per_host])


def state(topo: Topology, jobs: Sequence[PlacedJob], levels: int = 8) -> ClusterState:
    return ClusterState(topology=topo, jobs=tuple(jobs), priority_levels=levels)


def abstract(job: JobSpec) -> PlacedJob:
    return PlacedJob(spec=job, gpus=())
