"""A job start request checked against the cluster and turned into a :class:`JobRecord`.

Profile: a zoo ``model`` (``commsched models``), optionally overridden by ``compute_s`` /
``comm_bytes`` / ``overlap``, or those numbers alone. Placement, in this order: explicit ``gpu_ids``
(rank order), ``hosts`` (all GPUs of each host, or ``gpus_per_host`` of them), or a GPU count placed by
the cluster's placement policy (the same registry as scenario files) on the GPUs no running job holds.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass, replace

from commsched.errors import InputError
from commsched.runtime.daemon.decide import placed_job
from commsched.runtime.daemon.records import ClusterConfig, JobRecord
from commsched.runtime.daemon.shapes import ParallelJSON
from commsched.topology import NodeId, Topology

__all__ = ["JobRequest", "StateConflictError", "UnknownJobError", "resolve_job"]


class UnknownJobError(InputError):
    """A request names a job (or host, or decision) the daemon does not have (HTTP 404)."""


class StateConflictError(InputError):
    """A request is well formed but conflicts with the daemon's state (HTTP 409)."""


@dataclass(frozen=True, slots=True, kw_only=True)
class JobRequest:
    """What a client asks for when a job starts (the body of ``POST /v1/jobs``)."""

    id: str
    gpus: int | None = None
    gpu_ids: tuple[str, ...] | None = None
    hosts: tuple[str, ...] | None = None
    gpus_per_host: int | None = None
    model: str | None = None
    compute_s: float | None = None
    comm_bytes: float | None = None
    overlap: float | None = None
    collective: str = "ring"
    parallel: ParallelJSON | None = None  # ParallelSpec fields (docs/llm-jobs.md)
    priority: int | None = None  # the class written on the job (the static policy's)


def _grouped(req: JobRequest, n_gpus: int, compute: float, comm: float) -> float:
    """Check a job's parallel groups against its GPUs and model; its per-GPU compute (split, 1F1B bubble)."""
    from commsched.errors import ValidationError
    from commsched.workload import ModelProfile
    from commsched.workload.grouped import grouped_profile
    from commsched.workload.grouped_jobs import grouped_workload
    from commsched.workload.parallel import ParallelSpec

    assert req.parallel is not None
    profile = ModelProfile(name=req.model or f"job:{req.id}", gpu="-", compute_s=compute, sync_bytes=comm,
                           overlap=1.0, source="declared")  # fmt: skip
    try:
        work = grouped_workload(profile, ParallelSpec(**req.parallel), gpus=n_gpus, where="parallel")
    except ValidationError as exc:
        first = exc.problems[0] if exc.problems else str(exc)
        raise InputError(first, where="parallel", expected="tp * pp * dp == gpus, ep dividing dp") from None
    return grouped_profile(profile, work).compute_s


def _profile(req: JobRequest) -> tuple[float, float, float]:
    from commsched.workload.grouped_jobs import resolve_model

    if req.model is not None:
        base = resolve_model(req.model, where="model")
        compute = base.compute_s if req.compute_s is None else req.compute_s
        comm = base.sync_bytes if req.comm_bytes is None else req.comm_bytes
        overlap = base.overlap if req.overlap is None else req.overlap
        return compute, comm, overlap
    for name in ("compute_s", "comm_bytes"):
        if getattr(req, name) is None:
            raise InputError(
                f"job {req.id!r} has no model and no {name}", where=name, expected="model or both numbers"
            )
    assert req.compute_s is not None and req.comm_bytes is not None
    return req.compute_s, req.comm_bytes, 1.0 if req.overlap is None else req.overlap


def _host_gpus(topology: Topology, req: JobRequest, names: Sequence[str]) -> tuple[str, ...]:
    """All GPUs (or the first ``gpus_per_host``) of each named host, in order."""
    hosts = {str(h.id): h for h in topology.hosts}
    out: list[str] = []
    for k, name in enumerate(names):
        host = hosts.get(name)
        if host is None:
            raise InputError(f"unknown host {name!r}", where=f"hosts[{k}]", expected="a host of the topology")
        per = req.gpus_per_host or len(host.gpus)
        if per > len(host.gpus):
            raise InputError(
                f"{per} GPUs asked of host {name!r}",
                where="gpus_per_host",
                expected=f"at most {len(host.gpus)}",
            )
        out.extend(map(str, host.gpus[:per]))
    return tuple(out)


def _explicit_gpus(topology: Topology, req: JobRequest) -> tuple[str, ...] | None:
    if req.gpu_ids is not None and req.hosts is not None:
        raise InputError("both hosts and gpu_ids given", where="hosts", expected="one of hosts, gpu_ids")
    if req.gpu_ids is not None:
        known = set(map(str, topology.gpus))
        bad = [g for g in req.gpu_ids if g not in known]
        if bad:
            raise InputError(
                f"unknown GPU(s) {', '.join(bad[:3])}", where="gpu_ids", expected="GPU ids of the topology"
            )
        gpus = tuple(req.gpu_ids)
    elif req.hosts is not None:
        gpus = _host_gpus(topology, req, req.hosts)
    else:
        return None
    if not gpus:
        raise InputError("no GPUs given", where="gpu_ids", expected="at least one GPU")
    if len(set(gpus)) != len(gpus):
        raise InputError(
            "a GPU is listed twice", where="gpu_ids" if req.gpu_ids else "hosts", expected="distinct GPUs"
        )
    if req.gpus is not None and req.gpus != len(gpus):
        raise InputError(
            f"gpus: {req.gpus} but the placement gives {len(gpus)}", where="gpus", expected="matching counts"
        )
    return gpus


def resolve_job(
    topology: Topology, cfg: ClusterConfig, req: JobRequest, running: Sequence[JobRecord], now_s: float
) -> JobRecord:
    """Check ``req`` against the topology and the running jobs and build the job's record.

    Raises
    ------
    InputError
        A field is wrong (the message names it).
    StateConflictError
        The id is taken, a GPU is held by a running job, or the job does not fit now.
    """
    from commsched.catalog import placement_registry
    from commsched.workload.collectives import collective_registry

    if any(j.id == req.id for j in running):
        raise StateConflictError(f"job {req.id!r} is already running", where="id", expected="a new job id")
    if req.collective not in collective_registry():
        names = ", ".join(sorted(collective_registry().names()))
        raise InputError(
            f"unknown collective {req.collective!r}", where="collective", expected=f"one of {names}"
        )
    compute, comm, overlap = _profile(req)
    if not (math.isfinite(compute) and compute > 0):
        raise InputError(f"compute_s must be finite and > 0, got {compute!r}", where="compute_s")
    held = {g: j.id for j in running for g in j.gpus}
    gpus = _explicit_gpus(topology, req)
    if req.parallel is not None:
        compute = _grouped(req, len(gpus) if gpus is not None else (req.gpus or 0), compute, comm)
    record = JobRecord(
        id=req.id,
        gpus=(),
        compute_s=compute,
        comm_bytes=comm,
        overlap=overlap,
        collective=req.collective,
        model=req.model,
        started_s=now_s,
        profiling=cfg.profiling_window_s > 0,
        profiling_until_s=now_s + cfg.profiling_window_s,
        parallel=ParallelJSON(**req.parallel) if req.parallel is not None else None,
        priority=req.priority,
    )
    if gpus is not None:
        taken = [g for g in gpus if g in held]
        if taken:
            raise StateConflictError(f"GPU {taken[0]} is held by job {held[taken[0]]!r}", where="gpu_ids")
        return replace(record, gpus=gpus)
    if req.gpus is None:
        raise InputError(
            f"job {req.id!r} has neither gpus nor gpu_ids nor hosts", where="gpus", expected="one of them"
        )
    if req.gpus > topology.n_gpus:
        raise InputError(f"{req.gpus} GPUs asked, the cluster has {topology.n_gpus}", where="gpus")
    from commsched.scheduling.interfaces import PlacementRequest

    place = placement_registry().get(cfg.placement, where="placement")
    spec = placed_job(replace(record, gpus=("",) * req.gpus)).spec
    spec = replace(spec, gpu_ids=())
    free = frozenset(g for g in topology.gpus if str(g) not in held)
    alloc = place(
        PlacementRequest(
            topology=topology,
            job=spec,
            free_gpus=free,
            running=tuple(placed_job(j) for j in running),
            now_s=now_s,
        )
    )
    if alloc is None:
        raise StateConflictError(f"{req.gpus} GPUs do not fit now ({len(free)} free)", where="gpus")
    return replace(record, gpus=tuple(str(NodeId(g)) for g in alloc.gpus))
