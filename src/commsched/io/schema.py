"""The schema of scenario files (pydantic models) and the validated scenario they build."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator
from pydantic_core import PydanticCustomError

from commsched.io.limits import MAX_HORIZON_S
from commsched.topology import NodeId, Topology
from commsched.workload import JobSpec

# ---------------------------------------------------------------------------------------------- schema


#: an integer field: booleans and quoted numbers are refused
SInt = Annotated[int, Strict()]
#: a number field: integers are accepted, booleans and quoted numbers are refused
SFloat = Annotated[float, Strict()]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class ProfileRef(_Strict):
    """``model: {profile: FILE}``: a profile file written by ``commsched profile`` (path relative to the
    scenario file)."""

    profile: str = Field(min_length=1)


def _model_ref(v: object) -> object:
    """A zoo name, ``{profile: FILE}`` or nothing; anything else is one clear problem."""
    if v is None or isinstance(v, str | ProfileRef):
        return v
    expected = "a zoo model name or {profile: FILE.json}"
    if not isinstance(v, dict):
        raise PydanticCustomError("model_ref", f"{v!r} (expected {expected})")
    if set(v) != {"profile"}:
        keys = ", ".join(sorted(map(str, v))) or "none"
        raise PydanticCustomError("model_ref", f"a mapping with keys {keys} (expected {expected})")
    path = v["profile"]
    if not isinstance(path, str) or not path.strip():
        raise PydanticCustomError("model_ref", f"profile {path!r} (expected a file name)")
    return ProfileRef(profile=path)


class ParallelEntry(_Strict):
    """``parallel:`` of a job: its TP/PP/DP/EP groups (``tp * pp * dp`` = its GPUs), see docs/llm-jobs.md."""

    tp: SInt = Field(default=1, ge=1)
    pp: SInt = Field(default=1, ge=1)
    dp: SInt = Field(default=1, ge=1)
    ep: SInt = Field(default=1, ge=1)
    zero: SInt = Field(default=1, ge=0, le=3)
    micro_batches: SInt = Field(default=1, ge=1)
    schedule: Literal["1f1b"] = "1f1b"
    order: Literal["tp-dp-pp", "tp-pp-dp"] = "tp-dp-pp"
    vpp: SInt = Field(default=1, ge=1)  # virtual stages per GPU: interleaved 1F1B where above 1
    alltoall: Literal["grouped", "pairwise"] = "grouped"  # EP all-to-all: NCCL's grouped p2p, or rounds
    grad_dtype: Literal["", "fp32", "bf16", "fp16", "fp8"] = ""  # "": the framework's default for zero
    param_dtype: Literal["", "fp32", "bf16", "fp16", "fp8"] = ""
    sp: Annotated[bool, Strict()] | None = None  # sequence parallelism (None: Megatron's rule)


class JobEntry(_Strict):
    """One job of a scenario file."""

    id: str = Field(min_length=1)
    model: str | ProfileRef | None = None
    gpus: SInt | None = Field(default=None, ge=1)
    hosts: list[str] | None = None
    gpus_per_host: SInt | None = Field(default=None, ge=1)
    gpu_ids: list[str] | None = None
    compute_s: SFloat | None = Field(default=None, gt=0)
    comm_bytes: SFloat | None = Field(default=None, ge=0)
    overlap: SFloat | None = Field(default=None, ge=0, le=1)
    arrival_s: SFloat = Field(default=0.0, ge=0)
    iterations: SInt | None = Field(default=None, ge=1)
    duration_s: SFloat | None = Field(default=None, gt=0)
    collective: str = "ring"
    priority: SInt | None = Field(default=None, ge=0)
    sync: Literal["allreduce", "ps", "byteps"] = "allreduce"
    cpu_machines: SInt = Field(default=0, ge=0)
    intrajob: str | None = None
    #: an unmodified program run as the job's ranks by ``testbed run`` (argv), see docs/real-jobs.md
    command: list[Annotated[str, Field(min_length=1)]] | None = Field(default=None, min_length=1)
    #: ``rebind``: the job's connections follow new routes at once; ``persistent``: they keep the routes
    #: of the first decision (the default of a command job: an unmodified program's TCP connections)
    transport: Literal["rebind", "persistent"] | None = None
    #: one process per host (``per_host``) or per GPU slot (``per_gpu``) of a command job
    processes: Literal["per_host", "per_gpu"] = "per_host"
    #: regex over a command job's output whose one group is a time in seconds (its own iteration log)
    iteration_log: str | None = None
    #: tensor/pipeline/data/expert parallel groups of the job (docs/llm-jobs.md)
    parallel: ParallelEntry | None = None
    #: an AICB per-collective log (CSV, relative to the scenario file) giving the job's groups and bytes
    aicb: str | None = Field(default=None, min_length=1)

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, v: object) -> object:
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v

    @field_validator("model", mode="before")
    @classmethod
    def _model(cls, v: object) -> object:
        return _model_ref(v)


class ScenarioFile(_Strict):
    """The top level of a scenario file."""

    name: str | None = None
    description: str | None = None
    topology: dict[str, Any]
    priority_levels: SInt = Field(default=8, ge=1, le=64)
    policy: str = "static"
    placement: str = "pack"
    queue: str = "fifo"
    backfill: Annotated[bool, Strict()] = False
    horizon_s: SFloat = Field(gt=0, le=MAX_HORIZON_S)
    warmup_s: SFloat = Field(default=0.0, ge=0)
    seed: SInt = Field(default=0, ge=0, lt=2**63)
    mode: Literal["exact", "fast"] = "exact"
    fluid_min_jobs: SInt | None = Field(default=None, ge=0)
    trace: dict[str, Any] | None = None
    jobs: list[Any] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------- result


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioJob:
    """A validated job: its spec and its explicit placement (empty when placed by policy).

    Examples
    --------
    >>> from commsched.io.shipped import resolve_scenario
    >>> job = resolve_scenario("crux-fig19").jobs[1]
    >>> (job.spec.id, len(job.gpu_ids))
    ('bert1', 8)
    """

    spec: JobSpec
    gpu_ids: tuple[NodeId, ...]
    #: the program of a command job (empty: the job runs the project's job library on a testbed)
    command: tuple[str, ...] = ()
    processes: str = "per_host"
    iteration_log: str | None = None
    #: whether the profile is the file's (``False``: a command job that declares nothing)
    declared: bool = True


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A validated scenario, ready to simulate.

    Examples
    --------
    >>> from commsched.io.scenario import scenario_from_data
    >>> sc = scenario_from_data({"topology": {"kind": "single_link"}, "horizon_s": 10,
    ...                          "jobs": [{"id": "a", "gpus": 2, "compute_s": 1, "comm_bytes": 1e9}]},
    ...                         source="inline")
    >>> (sc.topology.name, len(sc.jobs), sc.policy, sc.mode)
    ('single_link', 1, 'static', 'exact')
    """

    name: str
    source: str
    topology: Topology
    jobs: tuple[ScenarioJob, ...]
    priority_levels: int
    policy: str
    placement: str
    queue: str
    backfill: bool
    horizon_s: float
    warmup_s: float
    seed: int
    mode: str
    notes: tuple[str, ...] = ()
    #: fast mode: components of at least this many jobs run as fluids (0 never; ``None``: the engine's
    #: default, :attr:`commsched.sim.results.records.SimConfig.fluid_min_jobs`)
    fluid_min_jobs: int | None = None
