"""Constructors and validation of :class:`~commsched.workload.records.JobSpec`.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §3 (a job: GPUs, per-iteration compute and traffic).
"""

from __future__ import annotations

import math

from commsched.errors import InputError, ValidationError
from commsched.workload.parallel import parallel_problems
from commsched.workload.records import JobId, JobSpec, ModelProfile, SyncKind
from commsched.workload.zoo import get_model


def validate_profile(profile: ModelProfile, *, where: str = "profile") -> None:
    """Check a profile's numbers; raise :class:`ValidationError` listing every problem.

    Examples
    --------
    >>> validate_profile(get_model("bert"))
    """
    problems = []
    if not (math.isfinite(profile.compute_s) and profile.compute_s > 0):
        problems.append(f"compute_s must be finite and > 0, got {profile.compute_s!r}")
    if not (math.isfinite(profile.sync_bytes) and profile.sync_bytes >= 0):
        problems.append(f"sync_bytes must be finite and >= 0, got {profile.sync_bytes!r}")
    if not (0.0 <= profile.overlap <= 1.0):
        problems.append(f"overlap must be in [0, 1], got {profile.overlap!r}")
    if not profile.source.strip():
        problems.append("source (provenance) must not be empty")
    if problems:
        raise ValidationError(problems, where=where)


def validate_job(job: JobSpec, *, where: str = "job") -> None:
    """Check a job spec; raise :class:`ValidationError` listing every problem.

    Examples
    --------
    >>> validate_job(job_from_model("j1", "resnet50", gpus=8))
    """
    problems = []
    if not str(job.id):
        problems.append("id must not be empty")
    if job.gpus < 1:
        problems.append(f"gpus must be >= 1, got {job.gpus}")
    if job.gpu_ids and len(job.gpu_ids) != job.gpus:
        problems.append(f"{len(job.gpu_ids)} gpu_ids for gpus={job.gpus}")
    if not (math.isfinite(job.arrival_s) and job.arrival_s >= 0):
        problems.append(f"arrival_s must be finite and >= 0, got {job.arrival_s!r}")
    if job.iterations is not None and job.iterations < 1:
        problems.append(f"iterations must be >= 1, got {job.iterations}")
    if job.duration_s is not None and not (math.isfinite(job.duration_s) and job.duration_s > 0):
        problems.append(f"duration_s must be finite and > 0, got {job.duration_s!r}")
    if job.sync is SyncKind.PS and job.ps_servers < 1:
        problems.append("a parameter-server job needs ps_servers >= 1")
    if job.ps_servers < 0:
        problems.append(f"ps_servers must be >= 0, got {job.ps_servers}")
    problems += _parallel_problems(job)
    if problems:
        raise ValidationError(problems, where=where)
    validate_profile(job.profile, where=f"{where}.profile")


def _parallel_problems(job: JobSpec) -> list[str]:
    if job.parallel is None:
        return []
    par = job.parallel
    found = parallel_problems(par.parallel, gpus=job.gpus, moe_layers=par.moe_layers)
    return [f"parallel.{f}: {what} (expected {exp})" for f, what, exp in found]


def job_from_model(
    id: str,
    model: str | ModelProfile,
    *,
    gpus: int,
    arrival_s: float = 0.0,
    iterations: int | None = None,
    collective: str = "ring",
) -> JobSpec:
    """A validated data-parallel all-reduce job of a zoo model (by name or alias) or an explicit profile.

    Other fields (placement, PS, priority) can be set afterwards with :func:`dataclasses.replace`.

    Raises
    ------
    UnknownNameError
        ``model`` names no zoo profile.
    ValidationError
        A field is out of range.

    Examples
    --------
    >>> j = job_from_model("gpt-1", "GPT", gpus=64, iterations=100)
    >>> j.profile.name, j.model, j.gpus
    ('gpt3-crux', 'GPT', 64)
    """
    if not isinstance(gpus, int) or isinstance(gpus, bool):
        raise InputError(
            f"gpus must be an integer, got {gpus!r}", where=f"job {id}: gpus", expected="int >= 1"
        )
    profile = get_model(model, where=f"job {id}: model") if isinstance(model, str) else model
    job = JobSpec(
        id=JobId(id),
        profile=profile,
        gpus=gpus,
        model=model if isinstance(model, str) else profile.name,
        arrival_s=arrival_s,
        iterations=iterations,
        collective=collective,
    )
    validate_job(job, where=f"job {id}")
    return job
