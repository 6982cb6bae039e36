"""Scenario files (YAML): a topology, jobs and a policy, validated with messages that say where.

Shape (the Crux paper's Example 1)::

    topology: {kind: single_link, capacity_bps: 8.0e9}
    priority_levels: 8
    policy: static          # static: use the priorities written on the jobs (0 = highest)
    horizon_s: 120
    jobs:
      - {id: a, gpus: 10, compute_s: 2.0, comm_bytes: 2.0e9, overlap: 1.0, priority: 0}
      - {id: b, gpus: 10, compute_s: 1.0, comm_bytes: 1.0e9, overlap: 1.0, priority: 1}

On real fabrics, jobs name a ``model`` from the zoo and give either ``gpus: N`` (placed by the
placement policy) or ``hosts: [...]`` (explicit placement, all GPUs of those hosts or ``gpus_per_host``
of each). Every problem is reported as ``file:line: field.path: what (expected ...)``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, Literal, TypeVar

import yaml
from pydantic import BaseModel, ConfigDict, Field, Strict, field_validator
from pydantic import ValidationError as PydanticError

from commsched.errors import CommschedError, InputError, TopologyError, ValidationError
from commsched.io import yamlio
from commsched.io.limits import MAX_HORIZON_S, MAX_JOBS, non_finite, topology_size
from commsched.topology import NodeId, Topology
from commsched.workload import JobId, JobSpec, ModelProfile, SyncKind

# ---------------------------------------------------------------------------------------------- schema


#: an integer field: booleans and quoted numbers are refused
SInt = Annotated[int, Strict()]
#: a number field: integers are accepted, booleans and quoted numbers are refused
SFloat = Annotated[float, Strict()]


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, allow_inf_nan=False)


class JobEntry(_Strict):
    """One job of a scenario file."""

    id: str = Field(min_length=1)
    model: str | None = None
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

    @field_validator("id", mode="before")
    @classmethod
    def _id_to_str(cls, v: object) -> object:
        return str(v) if isinstance(v, int | float) and not isinstance(v, bool) else v


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
    trace: dict[str, Any] | None = None
    jobs: list[Any] = Field(default_factory=list)


# ---------------------------------------------------------------------------------------------- result


@dataclass(frozen=True, slots=True, kw_only=True)
class ScenarioJob:
    """A validated job: its spec and its explicit placement (empty when placed by policy)."""

    spec: JobSpec
    gpu_ids: tuple[NodeId, ...]


@dataclass(frozen=True, slots=True, kw_only=True)
class Scenario:
    """A validated scenario, ready to simulate."""

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


# ---------------------------------------------------------------------------------------------- loading


def _line_index(text: str) -> dict[tuple[str | int, ...], int]:
    """Map each field path of a YAML document to its 1-based line (an aliased node under its first path)."""
    out: dict[tuple[str | int, ...], int] = {}
    try:
        root = yamlio.compose(text)
    except yaml.YAMLError:
        return out
    seen: set[int] = set()
    stack: list[tuple[yaml.Node, tuple[str | int, ...]]] = [(root, ())] if root is not None else []
    while stack:
        node, path = stack.pop()
        out.setdefault(path, node.start_mark.line + 1)
        if id(node) in seen:
            continue
        seen.add(id(node))
        if isinstance(node, yaml.MappingNode):
            for k, v in node.value:
                key = k.value
                out.setdefault((*path, key), k.start_mark.line + 1)
                stack.append((v, (*path, key)))
        elif isinstance(node, yaml.SequenceNode):
            for i, v in enumerate(node.value):
                stack.append((v, (*path, i)))
    return out


def _fmt_path(path: Sequence[str | int]) -> str:
    s = ""
    for p in path:
        s += f"[{p}]" if isinstance(p, int) else (f".{p}" if s else str(p))
    return s or "(top level)"


class _Problems:
    """Collects every problem of a file, each with its line."""

    def __init__(self, source: str, lines: Mapping[tuple[str | int, ...], int]) -> None:
        self.source = source
        self.lines = lines
        self._items: list[tuple[int, int, str]] = []

    @property
    def items(self) -> list[str]:
        """The problems in file order (by line, then in the order found)."""
        return [text for _, _, text in sorted(self._items)]

    def add(self, path: Sequence[str | int], what: str, expected: str = "") -> None:
        p = tuple(path)
        line = None
        while line is None:
            line = self.lines.get(p)
            if not p:
                break
            p = p[:-1]
        loc = f"{self.source}:{line}" if line else self.source
        text = f"{loc}: {_fmt_path(path)}: {what}"
        if expected:
            text += f" (expected {expected})"
        self._items.append((line or 0, len(self._items), text))


_PYDANTIC_EXPECT = {
    "missing": "a value",
    "extra_forbidden": "no such field",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "int_type": "an integer",
    "float_type": "a number",
    "bool_type": "true or false",
    "finite_number": "a finite number",
    "float_parsing": "a number",
    "string_type": "a string",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "literal_error": "",
    "greater_than": "",
    "greater_than_equal": "",
    "less_than_equal": "",
    "too_short": "",
}


def _read_yaml(path: Path) -> tuple[object, str]:
    text = yamlio.read_text(path, what="a scenario YAML file")
    try:
        data = yamlio.load(text)
    except yaml.YAMLError as exc:
        raise yamlio.input_error(exc, str(path)) from None
    return data, text


def load_scenario(path: str | Path) -> Scenario:
    """Read, validate and build a scenario file; raise ``ValidationError`` listing every problem."""
    p = Path(path)
    data, text = _read_yaml(p)
    return scenario_from_data(data, source=str(p), text=text)


def scenario_from_text(text: str, *, source: str = "<scenario>") -> Scenario:
    """Validate and build a scenario from YAML text (embedded scenarios)."""
    try:
        data = yamlio.load(text)
    except yaml.YAMLError as exc:
        raise yamlio.input_error(exc, source) from None
    return scenario_from_data(data, source=source, text=text)


def scenario_from_data(data: object, *, source: str, text: str = "") -> Scenario:
    """Validate parsed YAML data and build the scenario."""
    probs = _Problems(source, _line_index(text) if text else {})
    if not isinstance(data, dict):
        probs.add(
            (), f"the file holds {type(data).__name__}, not a mapping", "a mapping with topology, jobs, ..."
        )
        raise ValidationError(probs.items)
    jobs_field = data.get("jobs")
    if isinstance(jobs_field, list) and len(jobs_field) > MAX_JOBS:
        probs.add(("jobs",), f"{len(jobs_field):,} jobs", f"at most {MAX_JOBS:,}")
        raise ValidationError(probs.items)
    raw = _validated(ScenarioFile, data, (), probs)
    entries: list[JobEntry | None] = []
    for i, item in enumerate(data.get("jobs") or []) if isinstance(data.get("jobs"), list) else []:
        if not isinstance(item, dict):
            probs.add(("jobs", i), f"a job must be a mapping, not {type(item).__name__}", "{id: ..., ...}")
            entries.append(None)
            continue
        entries.append(_validated(JobEntry, item, ("jobs", i), probs))
    if raw is None:
        # keep checking what can be checked (topology, names, jobs) so every problem is listed at once
        raw = ScenarioFile.model_construct(
            topology=data["topology"] if isinstance(data.get("topology"), dict) else {"kind": None},
            policy=str(data.get("policy", "static")),
            placement=str(data.get("placement", "pack")),
            queue=str(data.get("queue", "fifo")),
            horizon_s=float("inf"),
            warmup_s=0.0,
            jobs=[],
        )
    return _build(raw, entries, probs)


M = TypeVar("M", bound=BaseModel)


def _validated(model: type[M], data: object, prefix: tuple[str | int, ...], probs: _Problems) -> M | None:
    """Validate with pydantic; every error becomes one problem line with its field path."""
    try:
        return model.model_validate(data)
    except PydanticError as exc:
        for err in exc.errors():
            loc = prefix + tuple(err["loc"])
            expected = _PYDANTIC_EXPECT.get(err["type"], "")
            msg = err["msg"]
            if err["type"] == "extra_forbidden":
                msg, expected = "unknown field", "one of " + ", ".join(sorted(model.model_fields))
            probs.add(loc, msg[0].lower() + msg[1:], expected)
        return None


def _build(raw: ScenarioFile, entries: list[JobEntry | None], probs: _Problems) -> Scenario:
    from commsched.catalog import placement_names, policy_names, queue_registry

    topo = _build_topology(raw.topology, probs)
    if raw.policy not in policy_names():
        probs.add(
            ("policy",), f"unknown policy {raw.policy!r}", "one of " + ", ".join(sorted(policy_names()))
        )
    if raw.placement not in placement_names():
        probs.add(
            ("placement",),
            f"unknown placement {raw.placement!r}",
            "one of " + ", ".join(sorted(placement_names())),
        )
    if raw.queue not in queue_registry():
        probs.add(
            ("queue",), f"unknown queue order {raw.queue!r}", "one of " + ", ".join(queue_registry().names())
        )
    if raw.warmup_s >= raw.horizon_s:
        probs.add(("warmup_s",), f"warm-up {raw.warmup_s} s is not before the horizon", f"< {raw.horizon_s}")
    jobs: list[ScenarioJob] = []
    index: list[int] = []  # entry index of each explicit job
    seen: dict[str, int] = {}
    for i, entry in enumerate(entries):
        if entry is None:
            continue
        if entry.id in seen:
            probs.add(
                ("jobs", i, "id"),
                f"duplicate job id {entry.id!r} (first at jobs[{seen[entry.id]}])",
                "unique ids",
            )
        seen.setdefault(entry.id, i)
        _check_job_numbers(entry, i, raw, probs)
        job = _build_job(entry, i, topo, probs)
        if job is not None:
            jobs.append(job)
            index.append(i)
    _check_capacity(jobs, index, topo, probs)
    notes: tuple[str, ...] = ()
    if raw.trace is not None and topo is not None:
        traced, notes = _trace_jobs(raw.trace, topo, probs, taken=set(seen))
        jobs.extend(traced)
    if not jobs and not probs.items:
        probs.add(("jobs",), "no jobs", "a non-empty jobs list or a trace section")
    if probs.items or topo is None:
        raise ValidationError(probs.items)
    return Scenario(
        name=raw.name or Path(probs.source).stem,
        source=probs.source,
        topology=topo,
        jobs=tuple(jobs),
        priority_levels=raw.priority_levels,
        policy=raw.policy,
        placement=raw.placement,
        queue=raw.queue,
        backfill=raw.backfill,
        horizon_s=raw.horizon_s,
        warmup_s=raw.warmup_s,
        seed=raw.seed,
        mode=raw.mode,
        notes=notes,
    )


def _check_job_numbers(entry: JobEntry, i: int, raw: ScenarioFile, probs: _Problems) -> None:
    """Rules between a job and the whole file: a priority class that exists, an arrival that lets it run."""
    levels = raw.priority_levels
    if entry.priority is not None and entry.priority >= levels:
        probs.add(
            ("jobs", i, "priority"),
            f"priority {entry.priority} with {levels} priority levels",
            f"0 .. {levels - 1} (0 = highest)",
        )
    if entry.arrival_s >= raw.horizon_s:
        probs.add(
            ("jobs", i, "arrival_s"),
            f"job {entry.id!r} arrives at {entry.arrival_s:g} s, not before the horizon: it can never run",
            f"< horizon_s = {raw.horizon_s:g}",
        )


def _trace_jobs(
    spec: dict[str, Any], topo: Topology, probs: _Problems, *, taken: set[str]
) -> tuple[list[ScenarioJob], tuple[str, ...]]:
    from commsched.io.traces import trace_jobs

    base = Path(probs.source).parent if Path(probs.source).exists() else Path.cwd()
    try:
        tj = trace_jobs(spec, topo, base_dir=base)
    except InputError as exc:
        field = exc.where.split(".", 1)[1] if exc.where.startswith("trace.") else ""
        probs.add(("trace", field) if field else ("trace",), exc.what, exc.expected)
        return [], ()
    out: list[ScenarioJob] = []
    for spec_j in tj.jobs:
        if spec_j.id in taken:
            probs.add(("trace",), f"trace job id {spec_j.id!r} is also a job of the file", "distinct ids")
            continue
        gpu_ids: tuple[NodeId, ...] = ()
        if spec_j.hosts:
            per = max(1, spec_j.gpus // len(spec_j.hosts))
            gpu_ids = tuple(g for h in spec_j.hosts for g in topo.host(h).gpus[:per])[: spec_j.gpus]
            if len(gpu_ids) != spec_j.gpus:
                gpu_ids = ()
        out.append(ScenarioJob(spec=spec_j, gpu_ids=gpu_ids))
    return out, tj.notes


def _build_topology(spec: dict[str, Any], probs: _Problems) -> Topology | None:
    from commsched.topology.builders import build_topology

    kind = spec.get("kind")
    if not isinstance(kind, str):
        probs.add(("topology", "kind"), "missing or not a string", "a topology kind such as single_link")
        return None
    params = {k: v for k, v in spec.items() if k != "kind"}
    bad = list(non_finite(params))
    for path in bad:
        probs.add(("topology", *path), "not a finite number", "a finite number")
    size = topology_size(params, kind)
    if size is not None:
        probs.add(("topology", size[0]), size[1], size[2])
    if bad or size is not None:
        return None
    try:
        return build_topology(kind, params)
    except InputError as exc:
        field = exc.where.split(".")[-1] if exc.where else "kind"
        path = ("topology", field) if field in spec else ("topology",)
        probs.add(path, exc.what, exc.expected)
    except (TopologyError, CommschedError) as exc:
        probs.add(("topology",), str(exc))
    return None


def _profile(entry: JobEntry, i: int, probs: _Problems) -> ModelProfile | None:
    from commsched.workload.zoo import get_model

    explicit = {"compute_s": entry.compute_s, "comm_bytes": entry.comm_bytes, "overlap": entry.overlap}
    if entry.model is None:
        missing = [k for k in ("compute_s", "comm_bytes") if explicit[k] is None]
        for k in missing:
            probs.add(("jobs", i), f"job {entry.id!r} has no model and no {k}", f"model: NAME or {k}: VALUE")
        if missing:
            return None
        assert entry.compute_s is not None and entry.comm_bytes is not None
        return ModelProfile(
            name=f"explicit:{entry.id}",
            gpu="abstract",
            compute_s=entry.compute_s,
            sync_bytes=entry.comm_bytes,
            overlap=1.0 if entry.overlap is None else entry.overlap,
            source="given in the scenario file",
        )
    try:
        base = get_model(entry.model)
    except InputError as exc:
        probs.add(("jobs", i, "model"), exc.what, exc.expected)
        return None
    from dataclasses import replace

    return replace(
        base,
        compute_s=entry.compute_s if entry.compute_s is not None else base.compute_s,
        sync_bytes=entry.comm_bytes if entry.comm_bytes is not None else base.sync_bytes,
        overlap=entry.overlap if entry.overlap is not None else base.overlap,
    )


def _placement(entry: JobEntry, i: int, topo: Topology, probs: _Problems) -> tuple[NodeId, ...] | None:
    if entry.gpu_ids is not None and entry.hosts is not None:
        probs.add(("jobs", i), "both hosts and gpu_ids given", "one of hosts, gpu_ids")
        return None
    if entry.gpu_ids is not None:
        known_gpus = set(map(str, topo.gpus))
        bad = [g for g in entry.gpu_ids if g not in known_gpus]
        if bad:
            probs.add(
                ("jobs", i, "gpu_ids"), f"unknown GPU(s) {', '.join(bad[:3])}", "GPU ids of the topology"
            )
            return None
        return tuple(NodeId(g) for g in entry.gpu_ids)
    if entry.hosts is None:
        if entry.gpus_per_host is not None:
            probs.add(("jobs", i, "gpus_per_host"), "given without hosts", "hosts: [...] with it")
        return ()
    gpus: list[NodeId] = []
    known = {str(h.id): h for h in topo.hosts}
    for k, name in enumerate(entry.hosts):
        host = known.get(str(name))
        if host is None:
            sample = ", ".join(list(known)[:4])
            probs.add(
                ("jobs", i, "hosts", k), f"unknown host {name!r}", f"a host of the topology, e.g. {sample}"
            )
            return None
        per = entry.gpus_per_host or len(host.gpus)
        if per > len(host.gpus):
            probs.add(
                ("jobs", i, "gpus_per_host"),
                f"{per} GPUs asked of host {name!r}",
                f"at most {len(host.gpus)}",
            )
            return None
        gpus.extend(host.gpus[:per])
    if len(set(gpus)) != len(gpus):
        probs.add(("jobs", i, "hosts"), "a host is listed twice", "distinct hosts")
        return None
    return tuple(gpus)


def _build_job(entry: JobEntry, i: int, topo: Topology | None, probs: _Problems) -> ScenarioJob | None:
    profile = _profile(entry, i, probs)
    if entry.iterations is not None and entry.duration_s is not None:
        probs.add(("jobs", i), "both iterations and duration_s given", "at most one of them")
    if topo is None or profile is None:
        return None
    gpu_ids: tuple[NodeId, ...] = ()
    if topo.hosts:
        placed = _placement(entry, i, topo, probs)
        if placed is None:
            return None
        gpu_ids = placed
        if not gpu_ids and entry.gpus is None:
            probs.add(("jobs", i), f"job {entry.id!r} has neither gpus nor hosts", "gpus: N or hosts: [...]")
            return None
        if gpu_ids and entry.gpus is not None and entry.gpus != len(gpu_ids):
            probs.add(
                ("jobs", i, "gpus"),
                f"gpus: {entry.gpus} but hosts give {len(gpu_ids)} GPUs",
                "matching counts",
            )
            return None
    else:
        if entry.hosts or entry.gpu_ids:
            probs.add(("jobs", i, "hosts"), "explicit placement on a topology without hosts", "gpus: N only")
            return None
        if entry.gpus is None:
            probs.add(("jobs", i, "gpus"), "missing", "the job's GPU count")
            return None
    n = len(gpu_ids) if gpu_ids else entry.gpus
    assert n is not None
    spec = JobSpec(
        id=JobId(entry.id),
        profile=profile,
        gpus=n,
        model=entry.model,
        hosts=tuple(entry.hosts or ()),
        gpu_ids=tuple(entry.gpu_ids or ()),
        arrival_s=entry.arrival_s,
        iterations=entry.iterations,
        duration_s=entry.duration_s,
        collective=entry.collective,
        priority=entry.priority,
        sync=SyncKind(entry.sync),
        ps_servers=entry.cpu_machines,
        intrajob=entry.intrajob,
    )
    _check_collective(entry, i, probs)
    _check_sync(entry, i, profile, probs)
    return ScenarioJob(spec=spec, gpu_ids=gpu_ids)


def _check_sync(entry: JobEntry, i: int, profile: ModelProfile, probs: _Problems) -> None:
    from commsched.intrajob.sweep import policy_registry as intrajob_policies

    if entry.sync == "ps" and entry.cpu_machines < 1:
        probs.add(
            ("jobs", i, "cpu_machines"), "a parameter-server job without CPU machines", "cpu_machines >= 1"
        )
    if entry.sync == "allreduce" and entry.cpu_machines:
        probs.add(
            ("jobs", i, "cpu_machines"), "CPU machines given to an all-reduce job", "sync: ps or byteps"
        )
    if entry.intrajob is not None:
        names = intrajob_policies().names()
        if entry.intrajob not in names:
            probs.add(
                ("jobs", i, "intrajob"),
                f"unknown intra-job policy {entry.intrajob!r}",
                "one of " + ", ".join(names),
            )
        elif not profile.layers:
            probs.add(
                ("jobs", i, "intrajob"),
                f"model {profile.name!r} has no per-layer profile",
                "a model with layers (see `commsched models`)",
            )


def _check_collective(entry: JobEntry, i: int, probs: _Problems) -> None:
    from commsched.workload.collectives import collective_registry

    reg = collective_registry()
    if entry.collective not in reg:
        probs.add(
            ("jobs", i, "collective"),
            f"unknown collective {entry.collective!r}",
            "one of " + ", ".join(sorted(reg.names())),
        )


def _check_capacity(
    jobs: list[ScenarioJob], index: list[int], topo: Topology | None, probs: _Problems
) -> None:
    if topo is None or not topo.hosts:
        return
    total = topo.n_gpus
    owner: dict[NodeId, str] = {}
    for k, j in zip(index, jobs, strict=True):
        if j.spec.gpus > total:
            probs.add(
                ("jobs", k, "gpus"), f"{j.spec.gpus} GPUs asked, the cluster has {total}", f"at most {total}"
            )
        for g in j.gpu_ids:
            if g in owner and j.spec.arrival_s == 0:
                probs.add(
                    ("jobs", k, "hosts"), f"GPU {g} is also given to job {owner[g]!r}", "disjoint placements"
                )
                break
            owner[g] = j.spec.id
