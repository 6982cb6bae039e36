"""Constructors of grouped jobs: a model (zoo or named LLM) with a parallel spec, or an AICB log.

References
----------
.. [1] D. Narayanan et al., SC 2021 (Megatron-LM's parallel groups).
"""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from commsched.errors import InputError, ValidationError
from commsched.workload.grouped import LLM_MODELS, REFERENCE_PROFILE, grouped_profile, llm_profile
from commsched.workload.jobs import validate_job
from commsched.workload.llm import llm_shape, llm_workload, shape_problems
from commsched.workload.parallel import GroupedWorkload, ParallelSpec, parallel_problems
from commsched.workload.records import JobId, JobSpec, ModelProfile
from commsched.workload.zoo import get_model

__all__ = [
    "flattened",
    "grouped_job",
    "grouped_workload",
    "job_from_aicb",
    "llm_models",
    "read_log",
    "resolve_model",
]


def resolve_model(name: str, *, where: str = "model") -> ModelProfile:
    """A zoo model by name or alias, or a named LLM profile (``gpt-13b@h200``, ``mixtral-8x7b@h200`` ...).

    Examples
    --------
    >>> resolve_model("mixtral-8x7b@h200").family
    'moe'
    """
    derived = llm_profile(name, get_model(REFERENCE_PROFILE))
    return derived if derived is not None else get_model(name, where=where)


def llm_models() -> tuple[ModelProfile, ...]:
    """The named LLM profiles (``NAME@h200``), scaled from the measured H200 profile by FLOPs.

    Examples
    --------
    >>> [p.name for p in llm_models()][:2]
    ['gpt-13b@h200', 'gpt-22b@h200']
    """
    reference = get_model(REFERENCE_PROFILE)
    return tuple(p for name in LLM_MODELS if (p := llm_profile(f"{name}@h200", reference)) is not None)


def grouped_workload(
    profile: ModelProfile, parallel: ParallelSpec, *, gpus: int, where: str = "job"
) -> GroupedWorkload:
    """The group collectives of ``profile``'s model under ``parallel`` (checked against ``gpus``).

    Raises
    ------
    ValidationError
        The parallel spec does not fit the job (product, ``ep``), or the model has no transformer shape
        while it needs one (``tp``, ``pp`` or ``ep`` above 1).
    """
    shape = llm_shape(profile.name)
    for alias in profile.aliases:
        shape = shape or llm_shape(alias)
    problems = [
        f"parallel.{f}: {what} (expected {exp})"
        for f, what, exp in parallel_problems(
            parallel, gpus=gpus, moe_layers=shape.moe_layers if shape else None
        )
    ]
    if shape is not None and not problems:
        problems += [
            f"parallel.{f}: {what} (expected {exp})" for f, what, exp in shape_problems(shape, parallel)
        ]
    if shape is None and (parallel.tp > 1 or parallel.pp > 1 or parallel.ep > 1):
        problems.append(
            f"parallel: model {profile.name!r} has no transformer shape for tp/pp/ep "
            "(expected a transformer of the zoo or a named LLM, or tp = pp = ep = 1)"
        )
    if problems:
        raise ValidationError(problems, where=where)
    if shape is None:
        from commsched.workload.llm import LlmShape

        shape = LlmShape(
            name=profile.name, layers=1, hidden=1, seq_len=1, ffn_hidden=1, vocab=0, batch=1, source="-"
        )
    return llm_workload(shape, parallel, sync_bytes=profile.sync_bytes)


def grouped_job(
    id: str,
    model: str | ModelProfile,
    *,
    gpus: int,
    parallel: ParallelSpec,
    arrival_s: float = 0.0,
    iterations: int | None = None,
) -> JobSpec:
    """A validated grouped job of a model (zoo, named LLM or profile) under ``parallel``.

    Examples
    --------
    >>> j = grouped_job("g", "gpt3-crux", gpus=64, parallel=ParallelSpec(tp=8, pp=2, dp=4))
    >>> j.parallel.parallel.tp, round(j.profile.compute_s / (0.7806645 / 16 * 2), 6)
    (8, 1.0)
    """
    profile = resolve_model(model, where=f"job {id}: model") if isinstance(model, str) else model
    work = grouped_workload(profile, parallel, gpus=gpus, where=f"job {id}")
    job = JobSpec(
        id=JobId(id),
        profile=grouped_profile(profile, work),
        gpus=gpus,
        model=model if isinstance(model, str) else profile.name,
        arrival_s=arrival_s,
        iterations=iterations,
        parallel=work,
    )
    validate_job(job, where=f"job {id}")
    return job


def read_log(path: str | Path, *, gpus: int | None = None) -> GroupedWorkload:
    """A job's groups from a log: a SimAI workload file (first line ``HYBRID_TRANSFORMER...``) or an
    AICB per-collective CSV. ``gpus``: the world size where a SimAI header does not name it."""
    from commsched.workload.traces.aicb import read_aicb
    from commsched.workload.traces.simai import read_simai

    try:
        with Path(path).open(encoding="utf-8") as fh:
            first = fh.readline()
    except (OSError, UnicodeDecodeError) as exc:
        raise InputError(
            f"cannot read: {exc}", where=str(path), expected="an AICB or SimAI workload"
        ) from None
    return read_simai(path, gpus=gpus) if first.startswith("HYBRID_TRANSFORMER") else read_aicb(path)


def job_from_aicb(
    id: str,
    path: str | Path,
    model: str | ModelProfile,
    *,
    arrival_s: float = 0.0,
    iterations: int | None = None,
) -> JobSpec:
    r"""A grouped job whose groups and bytes come from an AICB log (or a SimAI workload file naming its
    GPUs, :func:`read_log`) and whose compute from ``model``.

    The job has the log's world size of GPUs; its per-GPU compute is ``model``'s, split and stretched as
    :func:`~commsched.workload.grouped.grouped_profile` says.

    Examples
    --------
    A two-rank log with one TP all-reduce of 8 MB per iteration:

    >>> import pathlib, tempfile
    >>> log = pathlib.Path(tempfile.mkdtemp()) / "tiny.csv"
    >>> _ = log.write_text(
    ...     "[rank0 ~ rank1]\ncomm_type,comm_group,comm_group_size,msg_size,stage,dst,src,additional,"
    ...     "_elapsed_time,algbw,busbw,count\nCommType.epoch_end,None,None,0,,None,None,,None,None,None,1\n"
    ...     "CommType.all_reduce,CommGroup.tp_group,2,8000000,forward.x,None,None,,None,None,None,1\n"
    ...     "CommType.epoch_end,None,None,0,,None,None,,None,None,None,1\n")
    >>> j = job_from_aicb("a", log, "gpt3-crux")
    >>> j.gpus, j.parallel.parallel.tp, j.parallel.collectives[0].size_bytes
    (2, 2, 8000000.0)
    """
    work = read_log(path)
    profile = resolve_model(model, where=f"job {id}: model") if isinstance(model, str) else model
    if work.parallel.ranks < 1:  # pragma: no cover - read_aicb checks the world size
        raise InputError("no ranks", where=str(path), expected="a world size >= 1")
    job = JobSpec(
        id=JobId(id),
        profile=replace(grouped_profile(profile, work), sync_bytes=profile.sync_bytes),
        gpus=work.parallel.ranks,
        model=model if isinstance(model, str) else profile.name,
        arrival_s=arrival_s,
        iterations=iterations,
        parallel=work,
    )
    validate_job(job, where=f"job {id}")
    return job


def flattened(job: JobSpec) -> JobSpec:
    """The same job flattened to data parallelism, as the zoo describes hybrid-parallel models: one ring
    all-reduce of the model's gradient bytes over all its GPUs, each GPU computing its share of the work
    without the pipeline bubble (``compute_s m / (m + pp - 1)`` of the grouped profile).

    Examples
    --------
    >>> j = grouped_job("g", "gpt3-crux", gpus=16, parallel=ParallelSpec(tp=8, pp=2, micro_batches=4))
    >>> f = flattened(j)
    >>> f.parallel is None, f.collective, round(f.profile.compute_s / j.profile.compute_s, 6)
    (True, 'ring', 0.8)
    """
    if job.parallel is None:
        return job
    p = job.parallel.parallel
    vm = p.vpp * p.micro_batches  # interleaved 1F1B: the bubble divided by vpp
    profile = replace(job.profile, compute_s=job.profile.compute_s * vm / (vm + p.pp - 1))
    return replace(job, profile=profile, parallel=None, collective="ring")
