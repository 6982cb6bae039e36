"""Builders shared by the policy tests."""

from __future__ import annotations

from collections.abc import Sequence

from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.state import ClusterState, PlacedJob
from commsched.testing import toy_job
from commsched.topology import NodeId, Topology
from commsched.workload import JobSpec

CTX = PolicyContext(seed=0, now_s=0.0, epoch=0)

#: the public builder of test jobs (``commsched.testing.toy_job``)
spec = toy_job


def host_gpus(topo: Topology, hosts: Sequence[int], per_host: int = 8) -> tuple[NodeId, ...]:
    return tuple(g for h in hosts for g in topo.hosts[h].gpus[:per_host])


def state(topo: Topology, jobs: Sequence[PlacedJob], levels: int = 8) -> ClusterState:
    return ClusterState(topology=topo, jobs=tuple(jobs), priority_levels=levels)


def abstract(job: JobSpec) -> PlacedJob:
    return PlacedJob(spec=job, gpus=())
