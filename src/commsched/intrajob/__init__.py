"""Per-layer iteration-time models inside one job (WFBP, ByteScheduler, Mercury) and BytePS.

* :mod:`~commsched.intrajob.problem` — the model inputs (Mercury Table I) and per-layer timelines.
* :mod:`~commsched.intrajob.iteration` — Eq. (3)-(9) and the fluid policies (WFBP, Mercury, oracle).
* :mod:`~commsched.intrajob.partitioned` — ByteScheduler and packet-level Mercury (one engine).
* :mod:`~commsched.intrajob.sweep` — bandwidth sweeps, least bandwidth, the policy registry.
* :mod:`~commsched.intrajob.byteps` / :mod:`~commsched.intrajob.byteps_intra` — BytePS §4.1 / §4.2.
"""

from commsched.intrajob.byteps import (
    BytePSAssignment,
    BytePSTimes,
    PartShares,
    byteps_assignment,
    byteps_times,
    hash_parts,
)
from commsched.intrajob.iteration import (
    CommPolicy,
    iteration_time,
    layers_iteration_time,
    mercury,
    mercury_no_preemption,
    oracle_schedule,
    oracle_time,
    simulate_iteration,
    wfbp,
)
from commsched.intrajob.partitioned import PartitionConfig, bytescheduler, mercury_packets
from commsched.intrajob.problem import (
    CommSchedule,
    IterationProblem,
    IterationTimeline,
    LayerTimeline,
    make_problem,
    problem_from_layers,
)
from commsched.intrajob.sweep import (
    POLICY_NAMES,
    BandwidthSearch,
    PolicyOptions,
    SweepResult,
    bandwidth_reduction,
    bandwidth_sweep,
    min_bandwidth,
    paper_target,
    policy_registry,
)

__all__ = [
    "POLICY_NAMES",
    "BandwidthSearch",
    "BytePSAssignment",
    "BytePSTimes",
    "CommPolicy",
    "CommSchedule",
    "IterationProblem",
    "IterationTimeline",
    "LayerTimeline",
    "PartShares",
    "PartitionConfig",
    "PolicyOptions",
    "SweepResult",
    "bandwidth_reduction",
    "bandwidth_sweep",
    "byteps_assignment",
    "byteps_times",
    "bytescheduler",
    "hash_parts",
    "iteration_time",
    "layers_iteration_time",
    "make_problem",
    "mercury",
    "mercury_no_preemption",
    "mercury_packets",
    "min_bandwidth",
    "oracle_schedule",
    "oracle_time",
    "paper_target",
    "policy_registry",
    "problem_from_layers",
    "simulate_iteration",
    "wfbp",
]
