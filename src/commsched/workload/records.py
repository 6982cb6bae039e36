"""Typed frozen records of the workload: model profiles, collective schedules, jobs.

Units are in the names: ``*_s`` seconds, ``*_bytes`` bytes (never bits here).
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Literal, NewType

from commsched.workload.parallel import GroupedWorkload

JobId = NewType("JobId", str)


@dataclass(frozen=True, slots=True, kw_only=True)
class LayerProfile:
    """One layer of a model, as measured: forward/backward time on the profile's GPU, gradient bytes."""

    name: str
    forward_s: float
    backward_s: float
    param_bytes: float  # bytes of gradients this layer synchronises per iteration


#: Precisions a zoo profile may state: ``fp32`` (compute and gradients fp32), ``bf16`` (bf16 autocast
#: compute, fp32 gradients), ``fp32-grads`` (gradients fp32 as the source states; the precision of the
#: compute is not recorded by the source), ``unrecorded`` (the source records neither).
PRECISIONS: tuple[str, ...] = ("fp32", "bf16", "fp32-grads", "unrecorded")
#: Kinds of provenance: ``measured`` (timings measured on a GPU), ``analytic`` (FLOP and parameter counts
#: at a measured FLOP rate), ``derived`` (a measured profile edited by architecture), ``simulator-workload``
#: (numbers of a simulator's input file, not measured on a named GPU).
PROVENANCE_KINDS: tuple[str, ...] = ("measured", "analytic", "derived", "simulator-workload")


@dataclass(frozen=True, slots=True, kw_only=True)
class ProfileProvenance:
    """Structured provenance of a model profile (the prose stays in :attr:`ModelProfile.source`).

    Attributes
    ----------
    kind
        One of :data:`PROVENANCE_KINDS`.
    reference
        The file(s), repository at commit, or paper the numbers come from.
    assumptions
        What was assumed rather than read from the reference, one statement each.

    Examples
    --------
    >>> ProfileProvenance(kind="measured", reference="a.txt", assumptions=("1 GHz",)).kind
    'measured'
    """

    kind: str
    reference: str
    assumptions: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class ModelProfile:
    """What a model costs per training iteration on one GPU, with the provenance of every number.

    Attributes
    ----------
    compute_s
        Per-iteration compute time of one data-parallel worker on ``gpu`` (forward + backward).
    sync_bytes
        Bytes of gradients synchronised per iteration (the all-reduce size ``M``).
    overlap
        Fraction ``o`` of the compute after which the iteration's communication is released
        (``o = 1``: no overlap, communication after compute).
    layers
        Per-layer profile in forward order, where a real per-layer profile exists (else empty).
    flops_per_iteration
        Floating-point operations of one iteration on one GPU, where known (else ``None``).
    source
        Where every number comes from (file, repository, paper section) and how it was derived.
    precision
        The arithmetic the compute was measured in; zoo entries use one of :data:`PRECISIONS`
        (``""``: not stated, as in profiles read from traces that do not record it).
    provenance
        Structured provenance (kind, reference, assumptions), where known.

    Examples
    --------
    >>> p = ModelProfile(name="toy", gpu="A100", compute_s=0.2, sync_bytes=1e9, overlap=1.0, source="doc")
    >>> (p.compute_s, p.sync_bytes)
    (0.2, 1000000000.0)
    """

    name: str
    gpu: str
    compute_s: float
    sync_bytes: float
    overlap: float
    source: str
    family: str = ""
    batch_size: int | None = None
    flops_per_iteration: float | None = None
    layers: tuple[LayerProfile, ...] = ()
    aliases: tuple[str, ...] = ()
    notes: str = ""
    precision: str = ""
    provenance: ProfileProvenance | None = None


@dataclass(frozen=True, slots=True, kw_only=True)
class Transfer:
    """One point-to-point transfer of a collective step between ranks (or PS servers)."""

    src: int
    dst: int
    size_bytes: float


@dataclass(frozen=True, slots=True, kw_only=True)
class Step:
    """A synchronous step: all ``transfers`` run concurrently; the step ends when the last one ends.

    ``repeat`` identical steps run back to back (a ring all-reduce is one step repeated 2(n-1) times);
    expanding the repetitions gives the exact per-step schedule.
    """

    transfers: tuple[Transfer, ...]
    repeat: int = 1
    label: str = ""


@dataclass(frozen=True, slots=True, kw_only=True)
class CollectiveSchedule:
    """An exact per-step transfer schedule of one collective operation.

    Ranks are ``0..ranks-1``; parameter servers, when present, are ``ranks..ranks+servers-1``.
    """

    algorithm: str
    ranks: int
    size_bytes: float
    steps: tuple[Step, ...]
    servers: int = 0

    @property
    def endpoints(self) -> int:
        return self.ranks + self.servers

    @property
    def n_steps(self) -> int:
        """Number of steps once repetitions are expanded."""
        return sum(s.repeat for s in self.steps)

    def sent_bytes(self) -> tuple[float, ...]:
        """Bytes sent by each endpoint over the whole collective."""
        out = [0.0] * self.endpoints
        for s in self.steps:
            for t in s.transfers:
                out[t.src] += t.size_bytes * s.repeat
        return tuple(out)

    def received_bytes(self) -> tuple[float, ...]:
        """Bytes received by each endpoint over the whole collective."""
        out = [0.0] * self.endpoints
        for s in self.steps:
            for t in s.transfers:
                out[t.dst] += t.size_bytes * s.repeat
        return tuple(out)


class SyncKind(StrEnum):
    """How a job synchronises its gradients."""

    ALLREDUCE = "allreduce"
    PS = "ps"
    BYTEPS = "byteps"


@dataclass(frozen=True, slots=True, kw_only=True)
class JobSpec:
    """A training job as the user describes it (before placement).

    Either ``model`` names a zoo profile or ``profile`` gives one explicitly. Either ``gpus`` (a count,
    placed by a placement policy) or ``hosts``/``gpu_ids`` (explicit placement) is given. The job runs
    ``iterations`` iterations, or for ``duration_s`` of standalone time; with neither it runs until the
    horizon.

    Examples
    --------
    >>> p = ModelProfile(name="toy", gpu="A100", compute_s=0.2, sync_bytes=1e9, overlap=1.0, source="doc")
    >>> j = JobSpec(id=JobId("a"), profile=p, gpus=16, iterations=100)
    >>> (j.id, j.gpus, j.arrival_s, j.collective)
    ('a', 16, 0.0, 'ring')
    """

    id: JobId
    profile: ModelProfile
    gpus: int
    model: str | None = None
    hosts: tuple[str, ...] = ()
    gpu_ids: tuple[str, ...] = ()
    arrival_s: float = 0.0
    iterations: int | None = None
    duration_s: float | None = None
    collective: str = "ring"
    priority: int | None = None
    sync: SyncKind = SyncKind.ALLREDUCE
    ps_servers: int = 0  # CPU machines of a PS / BytePS job
    intrajob: str | None = None  # intra-job scheduling policy (wfbp, mercury, ...) using the layers
    #: tensor/pipeline/data/expert parallel groups and their collectives (None: one DP collective)
    parallel: GroupedWorkload | None = None
    #: whether the job's connections move to new routes at once (``rebind``: commsched's transport, RoCE
    #: QPs re-pointed with ``ibv_modify_qp``) or keep the routes of their first decision (``persistent``:
    #: an unmodified program over TCP connections it opened once)
    transport: Literal["rebind", "persistent"] = "rebind"

    @property
    def busy_s(self) -> float:
        """One GPU's busy seconds per iteration: its computation, without the pipeline bubble.

        A grouped job's profile holds its compute stretched by the bubble (the critical path of its
        blocking stream, :func:`~commsched.workload.grouped.grouped_profile`); a GPU waiting in the
        bubble computes nothing, so its busy time is ``compute_s / bubble_factor``.

        Examples
        --------
        >>> p = ModelProfile(name="toy", gpu="A100", compute_s=0.2, sync_bytes=1e9, overlap=1.0, source="doc")
        >>> JobSpec(id=JobId("a"), profile=p, gpus=16).busy_s
        0.2
        """
        if self.parallel is None:
            return self.profile.compute_s
        return self.profile.compute_s / self.parallel.bubble_factor
