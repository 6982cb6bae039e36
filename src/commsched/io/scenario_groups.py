"""The parallel groups of a scenario job: ``parallel: {tp, pp, dp, ep, ...}`` or ``aicb: FILE.csv``.

Both give the job a :class:`~commsched.workload.parallel.GroupedWorkload` and the per-GPU profile of
:func:`~commsched.workload.grouped.grouped_profile`; every problem is recorded where it is (``jobs[i].
parallel.dp: ...``).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from commsched.errors import InputError
from commsched.io.problems import Problems
from commsched.io.schema import JobEntry
from commsched.topology import Topology
from commsched.workload import JobSpec, ModelProfile
from commsched.workload.grouped import grouped_profile
from commsched.workload.llm import LlmShape, llm_shape, llm_workload, shape_problems
from commsched.workload.parallel import GroupedWorkload, ParallelSpec, parallel_problems

__all__ = ["aicb_profile", "grouped_spec", "scenario_path"]


def scenario_path(name: str, probs: Problems) -> Path:
    """A path given in a scenario file, relative to the file's folder."""
    path = Path(name)
    if path.is_absolute():
        return path
    return (Path(probs.source).parent if Path(probs.source).exists() else Path.cwd()) / path


def aicb_profile(entry: JobEntry, i: int, probs: Problems) -> ModelProfile | None:
    """The profile of an ``aicb`` job without a model: its ``compute_s`` (one DP replica on one GPU)."""
    if entry.compute_s is None:
        probs.add(
            ("jobs", i),
            f"job {entry.id!r} has an aicb log but no model and no compute_s",
            "model: NAME or compute_s",
        )
        return None
    return ModelProfile(
        name=f"aicb:{entry.id}",
        gpu="abstract",
        compute_s=entry.compute_s,
        sync_bytes=0.0,
        overlap=1.0 if entry.overlap is None else entry.overlap,
        source="compute_s given in the scenario file",
    )


def _shape(profile: ModelProfile) -> LlmShape | None:
    for name in (profile.name, *profile.aliases):
        if (s := llm_shape(name)) is not None:
            return s
    return None


def _from_parallel(
    entry: JobEntry, i: int, profile: ModelProfile, gpus: int, probs: Problems
) -> GroupedWorkload | None:
    assert entry.parallel is not None
    par = ParallelSpec(**entry.parallel.model_dump())
    shape = _shape(profile)
    bad = parallel_problems(par, gpus=gpus, moe_layers=shape.moe_layers if shape is not None else 0)
    if shape is not None and not bad:
        bad = shape_problems(shape, par)
    for field, what, expected in bad:
        probs.add(("jobs", i, "parallel", field), what, expected)
    if shape is None and (par.tp > 1 or par.pp > 1 or par.ep > 1) and not any(f == "ep" for f, _, _ in bad):
        probs.add(
            ("jobs", i, "parallel"),
            f"model {profile.name!r} has no transformer shape for tp, pp or ep above 1",
            "a transformer of the zoo (gpt3-crux, bert-*) or a named LLM (gpt-13b@h200, ...), or dp only",
        )
        return None
    if bad:
        return None
    if shape is None:  # data parallel only: the layers do not matter
        shape = LlmShape(
            name=profile.name, layers=1, hidden=1, seq_len=1, ffn_hidden=1, vocab=0, batch=1, source="-"
        )
    return llm_workload(shape, par, sync_bytes=profile.sync_bytes)


def _from_aicb(entry: JobEntry, i: int, gpus: int | None, probs: Problems) -> GroupedWorkload | None:
    from commsched.workload.grouped_jobs import read_log

    assert entry.aicb is not None
    if entry.parallel is not None:
        probs.add(
            ("jobs", i, "parallel"),
            "given with an aicb log",
            "one of parallel, aicb (the log gives the groups)",
        )
        return None
    try:
        work = read_log(scenario_path(entry.aicb, probs), gpus=gpus)
    except InputError as exc:
        probs.add(("jobs", i, "aicb"), f"{exc.where}: {exc.what}", exc.expected)
        return None
    if gpus is not None and gpus != work.parallel.ranks:
        probs.add(
            ("jobs", i, "gpus"),
            f"gpus: {gpus} but the log's world has {work.parallel.ranks}",
            "matching counts",
        )
        return None
    return work


def grouped_spec(entry: JobEntry, i: int, spec: JobSpec, topo: Topology, probs: Problems) -> JobSpec | None:
    """``spec`` with its parallel groups (unchanged without ``parallel``/``aicb``; ``None`` on a problem)."""
    if entry.parallel is None and entry.aicb is None:
        return spec
    if not topo.hosts:
        probs.add(
            ("jobs", i, "parallel"), "parallel groups on a topology without hosts", "a topology with hosts"
        )
        return None
    if entry.aicb is not None:
        work = _from_aicb(entry, i, entry.gpus if not spec.gpu_ids else spec.gpus, probs)
    else:
        work = _from_parallel(entry, i, spec.profile, spec.gpus, probs)
    if work is None:
        return None
    profile = grouped_profile(spec.profile, work)
    return replace(spec, profile=profile, gpus=work.parallel.ranks, parallel=work)
