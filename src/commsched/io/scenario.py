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

from pathlib import Path
from typing import Any

import yaml

from commsched.errors import CommschedError, InputError, TopologyError, ValidationError
from commsched.io import yamlio
from commsched.io.limits import MAX_JOBS, non_finite, slow_rates, topology_size
from commsched.io.problems import Problems, line_index, validated
from commsched.io.scenario_jobs import build_job, check_capacity, check_job_numbers
from commsched.io.schema import JobEntry, Scenario, ScenarioFile, ScenarioJob
from commsched.topology import NodeId, Topology

__all__ = [
    "JobEntry",
    "Scenario",
    "ScenarioFile",
    "ScenarioJob",
    "load_scenario",
    "scenario_from_data",
    "scenario_from_text",
]


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


def scenario_from_text(text: str, *, source: str = "<scenario>", measured_commands: bool = False) -> Scenario:
    """Validate and build a scenario from YAML text (embedded scenarios)."""
    try:
        data = yamlio.load(text)
    except yaml.YAMLError as exc:
        raise yamlio.input_error(exc, source) from None
    return scenario_from_data(data, source=source, text=text, measured_commands=measured_commands)


def scenario_from_data(
    data: object, *, source: str, text: str = "", measured_commands: bool = False
) -> Scenario:
    """Validate parsed YAML data and build the scenario.

    ``measured_commands``: a job with a ``command`` may leave out ``compute_s`` and ``comm_bytes``
    (``testbed run`` measures them from its traffic); the simulator alone needs them.
    """
    probs = Problems(source, line_index(text) if text else {})
    if not isinstance(data, dict):
        probs.add(
            (), f"the file holds {type(data).__name__}, not a mapping", "a mapping with topology, jobs, ..."
        )
        raise ValidationError(probs.items)
    jobs_field = data.get("jobs")
    if isinstance(jobs_field, list) and len(jobs_field) > MAX_JOBS:
        probs.add(("jobs",), f"{len(jobs_field):,} jobs", f"at most {MAX_JOBS:,}")
        raise ValidationError(probs.items)
    raw = validated(ScenarioFile, data, (), probs)
    entries: list[JobEntry | None] = []
    for i, item in enumerate(data.get("jobs") or []) if isinstance(data.get("jobs"), list) else []:
        if not isinstance(item, dict):
            probs.add(("jobs", i), f"a job must be a mapping, not {type(item).__name__}", "{id: ..., ...}")
            entries.append(None)
            continue
        entries.append(validated(JobEntry, item, ("jobs", i), probs))
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
    return _build(raw, entries, probs, measured_commands)


def _build(
    raw: ScenarioFile, entries: list[JobEntry | None], probs: Problems, measured_commands: bool = False
) -> Scenario:
    topo = _build_topology(raw.topology, probs)
    _check_names(raw, probs)
    jobs, seen = _explicit_jobs(raw, entries, topo, probs, measured_commands=measured_commands)
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
        fluid_min_jobs=raw.fluid_min_jobs,
    )


def _check_names(raw: ScenarioFile, probs: Problems) -> None:
    """The policy, placement and queue names the catalogue knows, and a warm-up before the horizon."""
    from commsched.catalog import placement_names, policy_names, queue_registry

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


def _explicit_jobs(
    raw: ScenarioFile,
    entries: list[JobEntry | None],
    topo: Topology | None,
    probs: Problems,
    *,
    measured_commands: bool,
) -> tuple[list[ScenarioJob], dict[str, int]]:
    """The jobs of the ``jobs`` list (checked), and the entry index of each id's first use."""
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
        check_job_numbers(entry, i, raw, probs)
        job = build_job(entry, i, topo, probs, measured_commands=measured_commands)
        if job is not None:
            jobs.append(job)
            index.append(i)
    check_capacity(jobs, index, topo, probs)
    return jobs, seen


def _trace_jobs(
    spec: dict[str, Any], topo: Topology, probs: Problems, *, taken: set[str]
) -> tuple[list[ScenarioJob], tuple[str, ...]]:
    from commsched.io.traces import trace_jobs

    base = Path(probs.source).parent if Path(probs.source).exists() else Path.cwd()
    try:
        tj = trace_jobs(spec, topo, base_dir=base)
    except InputError as exc:
        field = exc.where.split(".", 1)[1] if exc.where.startswith("trace.") else ""
        # a place in the trace file itself (FILE:LINE: FIELD) stays in the line
        what = exc.what if field or not exc.where or exc.where == "trace" else f"{exc.where}: {exc.what}"
        probs.add(("trace", field) if field else ("trace",), what, exc.expected)
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


def _build_topology(spec: dict[str, Any], probs: Problems) -> Topology | None:
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
    slow = list(slow_rates(params))
    for k in slow:
        probs.add(("topology", k), f"{params[k]!r} bit/s", "at least 1 bit/s")
    if bad or size is not None or slow:
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
