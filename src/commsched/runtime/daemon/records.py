"""Records the daemon keeps: the cluster it decides for, and the jobs running on it.

They are plain frozen dataclasses with a JSON form (``to_json`` / ``from_json``) so the SQLite store
keeps them as text and a restarted daemon reads back exactly what it wrote.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from commsched.runtime.daemon.shapes import ClusterConfigJSON, JobJSON, ParallelJSON, ProfileJSON

__all__ = ["ClusterConfig", "JobRecord", "ProfileRecord"]


@dataclass(frozen=True, slots=True, kw_only=True)
class ClusterConfig:
    """The cluster the daemon decides for and how.

    Attributes
    ----------
    topology
        A scenario file's ``topology`` section: ``{"kind": NAME, PARAM: VALUE, ...}``; empty when no
        topology is set yet (jobs are refused until one is).
    priority_levels
        Hardware priority classes available to the policy (Crux compresses to these).
    policy
        Communication policy name (``commsched policies``), e.g. ``crux-full``.
    placement
        Placement policy for jobs that give a GPU count instead of explicit GPUs.
    hash_name
        ECMP hash the model source ports are computed for (as ``commsched plan --hash``).
    seed
        Seed of the policy's random choices (with the decision version as epoch).
    profiling_window_s
        How long a new job runs at the temporary top class waiting for its profile; 0 disables it.
    heartbeat_timeout_s
        A job with no heartbeat for this long is removed and the others recomputed.
    """

    topology: dict[str, Any] = field(default_factory=dict)
    priority_levels: int = 8
    policy: str = "crux-full"
    placement: str = "pack"
    hash_name: str = "murmur3"
    seed: int = 0
    profiling_window_s: float = 30.0
    heartbeat_timeout_s: float = 10.0

    def to_json(self) -> ClusterConfigJSON:
        return {
            "topology": dict(self.topology),
            "priority_levels": self.priority_levels,
            "policy": self.policy,
            "placement": self.placement,
            "hash_name": self.hash_name,
            "seed": self.seed,
            "profiling_window_s": self.profiling_window_s,
            "heartbeat_timeout_s": self.heartbeat_timeout_s,
        }

    @staticmethod
    def from_json(data: ClusterConfigJSON) -> ClusterConfig:
        return ClusterConfig(**data)


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileRecord:
    """What the job's profiler measured (Crux §5.4): ``W_j``, ``t_j`` and the iteration period.

    ``compute_s`` is the GPU compute time of one iteration on one GPU (``W_j`` per GPU, seconds),
    ``comm_bytes`` the bytes synchronised per iteration (``t_j``'s traffic, the all-reduce size),
    ``period_s`` the iteration period recovered from the traffic's spectrum.
    """

    compute_s: float
    comm_bytes: float
    period_s: float
    overlap: float | None = None

    def to_json(self) -> ProfileJSON:
        """The record as stored (not a body to post: :mod:`commsched.runtime.profiling.body` builds that)."""
        return ProfileJSON(
            compute_s=self.compute_s, comm_bytes=self.comm_bytes, period_s=self.period_s, overlap=self.overlap
        )


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRecord:
    """A running job: its GPUs in rank order and the profile the policy uses.

    ``compute_s`` / ``comm_bytes`` / ``overlap`` start as the declared (or zoo) profile and are
    replaced by the measured one when the profile arrives. ``profiling`` is true from the start until
    the profile is posted or the profiling window ends.
    """

    id: str
    gpus: tuple[str, ...]
    compute_s: float
    comm_bytes: float
    overlap: float
    collective: str = "ring"
    model: str | None = None
    started_s: float = 0.0
    profiling: bool = True
    profiling_until_s: float = 0.0
    profile: ProfileRecord | None = None
    #: TP/PP/DP/EP groups (``ParallelSpec`` fields; None: one data-parallel collective)
    parallel: ParallelJSON | None = None
    #: the priority class written on the job (0 = highest; the static policy's class), if any
    priority: int | None = None

    @property
    def hosts(self) -> tuple[str, ...]:
        """Hosts of the job's GPUs, in first-use order (GPU ids are ``HOST/gpuN``)."""
        seen: dict[str, None] = {}
        for g in self.gpus:
            seen.setdefault(g.split("/", 1)[0], None)
        return tuple(seen)

    def to_json(self) -> JobJSON:
        return {
            "id": self.id,
            "gpus": list(self.gpus),
            "compute_s": self.compute_s,
            "comm_bytes": self.comm_bytes,
            "overlap": self.overlap,
            "collective": self.collective,
            "model": self.model,
            "started_s": self.started_s,
            "profiling": self.profiling,
            "profiling_until_s": self.profiling_until_s,
            "profile": None if self.profile is None else self.profile.to_json(),
            "parallel": None if self.parallel is None else ParallelJSON(**self.parallel),
            "priority": self.priority,
        }

    @staticmethod
    def from_json(data: JobJSON) -> JobRecord:
        """A stored job (rows written before ``parallel`` and ``priority`` existed lack them)."""
        prof = data.get("profile")
        return JobRecord(
            id=data["id"],
            gpus=tuple(data["gpus"]),
            compute_s=data["compute_s"],
            comm_bytes=data["comm_bytes"],
            overlap=data["overlap"],
            collective=data.get("collective", "ring"),
            model=data.get("model"),
            started_s=data.get("started_s", 0.0),
            profiling=data.get("profiling", True),
            profiling_until_s=data.get("profiling_until_s", 0.0),
            profile=ProfileRecord(**prof) if prof else None,
            parallel=data.get("parallel"),
            priority=data.get("priority"),
        )
