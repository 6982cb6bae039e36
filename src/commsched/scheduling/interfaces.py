"""The interfaces through which decisions enter the simulator: communication policy and placement."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from commsched.scheduling.state import ClusterState, Decisions
from commsched.topology import NodeId, Topology
from commsched.workload import JobSpec


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyContext:
    """What a communication policy may know besides the cluster state.

    ``seed`` is the simulation's seed; ``epoch`` counts the decisions taken so far (a policy that draws
    random numbers derives its generator from both, so runs are reproducible).
    """

    seed: int
    now_s: float
    epoch: int


#: A communication policy: paths, ranking, classes (and time shifts) for the running jobs.
PolicyFn = Callable[[ClusterState, PolicyContext], Decisions]


@dataclass(frozen=True, slots=True, kw_only=True)
class PlacementRequest:
    """A job asking for GPUs, and the GPUs that are free now."""

    topology: Topology
    job: JobSpec
    free_gpus: frozenset[NodeId]


#: A placement policy: the job's GPUs in rank order, or ``None`` when it does not fit now.
PlacementFn = Callable[[PlacementRequest], tuple[NodeId, ...] | None]
