"""The ``trace:`` section of scenario files: jobs from a trace file or from the synthetic generator.

Examples::

    trace: {kind: synthetic, jobs: 300, days: 0.5, seed: 1}
    trace: {kind: tiresias, path: ../shared/data/tiresias/60_job.csv}
    trace: {kind: lingjun, job_path: job.csv, worker_path: worker.csv, topo_path: topo.csv}
    trace: {kind: helios_like, tasks: 5000, mean_gap_s: 120, seed: 0}
    trace: {kind: slurm, path: history.txt}   # sacct --parsable2 output (docs/slurm.md)

Relative paths are taken from the scenario file's folder. ``max_jobs`` keeps the first jobs by arrival.
"""

from __future__ import annotations

import inspect
import math
import os
import stat
from collections.abc import Callable, Mapping
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from commsched.errors import InputError
from commsched.io.limits import MAX_JOBS, non_finite
from commsched.registry import Registry
from commsched.topology import Topology
from commsched.workload import JobSpec, ModelProfile
from commsched.workload.traces import (
    SyntheticParams,
    Trace,
    load_gavel_trace,
    load_lingjun_trace,
    load_philly_csv,
    load_pollux_workload,
    load_tiresias_trace,
    synthetic_trace,
    to_job_specs,
)
from commsched.workload.traces.helios import HeliosParams, helios_like_trace, helios_params
from commsched.workload.traces.slurm import load_slurm_trace

#: the largest trace file read (the public traces in ../shared/data are below 4 MiB)
MAX_TRACE_BYTES = 32 * 1024 * 1024

#: keys every trace section may have besides ``kind`` and the loader's own parameters
COMMON_KEYS = ("max_jobs", "collective", "compute_scale", "comm_scale")
PATH_KEYS = ("path", "job_path", "worker_path", "topo_path", "throughputs_path", "traces_dir")


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceJobs:
    """The jobs a trace section yields, and notes on what was dropped or assumed."""

    jobs: tuple[JobSpec, ...]
    notes: tuple[str, ...]


def _synthetic(topology: Topology, **params: Any) -> Trace:
    params.setdefault("cluster_gpus", topology.n_gpus)
    return synthetic_trace(SyntheticParams(**params))


def _helios_like(**params: Any) -> Trace:
    return helios_like_trace(helios_params(**params))


def trace_loaders() -> Registry[Callable[..., Trace]]:
    reg: Registry[Callable[..., Trace]] = Registry("trace kind")
    reg.register("synthetic", _synthetic)
    reg.register("lingjun", load_lingjun_trace)
    reg.register("tiresias", load_tiresias_trace)
    reg.register("gavel", load_gavel_trace)
    reg.register("pollux", load_pollux_workload)
    reg.register("philly", load_philly_csv)
    reg.register("helios_like", _helios_like)
    reg.register("slurm", load_slurm_trace)  # sacct --parsable2 output (docs/slurm.md)
    return reg


def trace_kinds() -> tuple[str, ...]:
    return trace_loaders().names()


def valid_params(kind: str, loader: Callable[..., Trace]) -> list[str]:
    """The parameters a trace section of ``kind`` may give its loader (besides :data:`COMMON_KEYS`)."""
    if kind == "synthetic":
        return [f.name for f in fields(SyntheticParams) if f.name not in ("sizes",)]
    if kind == "helios_like":
        return [f.name for f in fields(HeliosParams)]
    names = list(inspect.signature(loader).parameters)
    return ["path" if n in ("workload_path", "trace_path") else n for n in names]


def trace_jobs(spec: Mapping[str, Any], topology: Topology, *, base_dir: Path) -> TraceJobs:
    """Load the jobs of a ``trace:`` section (raises ``InputError`` naming the field)."""
    kind = spec.get("kind")
    if not isinstance(kind, str):
        raise InputError(
            "missing or not a string", where="trace.kind", expected="one of " + ", ".join(trace_kinds())
        )
    loader = trace_loaders().get(kind, where="trace.kind")
    params = _loader_params(spec, kind, loader, base_dir=base_dir)
    args = _arguments(kind, loader, params)
    trace = loader(topology, **args) if kind == "synthetic" else loader(**args)
    kept, notes = _kept(trace, spec, topology)
    host_ids = {h.label: str(h.id) for h in topology.hosts if h.label}
    specs = to_job_specs(kept, collective=str(spec.get("collective", "ring")), host_ids=host_ids or None)
    compute_scale = _positive(spec, "compute_scale")
    comm_scale = _positive(spec, "comm_scale")
    if compute_scale != 1.0 or comm_scale != 1.0:
        scaled: dict[int, ModelProfile] = {}  # one scaled profile per profile: jobs of a model share it
        specs = tuple(
            replace(s, profile=_scaled_profile(s.profile, compute_scale, comm_scale, scaled)) for s in specs
        )
        notes.append(f"profiles scaled: compute x{compute_scale:g}, synchronised bytes x{comm_scale:g}")
    return TraceJobs(jobs=specs, notes=tuple(notes))


def _loader_params(
    spec: Mapping[str, Any], kind: str, loader: Callable[..., Trace], *, base_dir: Path
) -> dict[str, Any]:
    """The section's parameters for its loader: known names, finite numbers, sizes and files in bounds."""
    valid = valid_params(kind, loader)
    params = {k: v for k, v in spec.items() if k not in ("kind", *COMMON_KEYS)}
    for k in params:
        if k not in valid:
            raise InputError(
                f"unknown parameter {k!r} for trace kind {kind!r}",
                where=f"trace.{k}",
                expected="one of " + ", ".join([*valid, *COMMON_KEYS]),
            )
    for path in non_finite(dict(spec)):
        raise InputError(
            "not a finite number", where="trace." + ".".join(map(str, path)), expected="a finite number"
        )
    for k in ("jobs", "tasks"):
        n = params.get(k)
        if isinstance(n, int) and not isinstance(n, bool) and n > MAX_JOBS:
            raise InputError(
                f"{n:,} jobs asked of the generator", where=f"trace.{k}", expected=f"at most {MAX_JOBS:,}"
            )
    for k in PATH_KEYS:
        if k in params and params[k] is not None:
            p = Path(str(params[k]))
            params[k] = p if p.is_absolute() else base_dir / p
            _check_trace_path(params[k], k)
    return params


def _kept(trace: Trace, spec: Mapping[str, Any], topology: Topology) -> tuple[Trace, list[str]]:
    """The trace's jobs by arrival, the first ``max_jobs`` of them that fit the cluster, with notes."""
    jobs = sorted(trace.jobs, key=lambda j: (j.arrival_s, j.id))
    max_jobs = spec.get("max_jobs")
    if max_jobs is not None:
        if isinstance(max_jobs, bool) or not isinstance(max_jobs, int) or max_jobs < 1:
            raise InputError(
                f"max_jobs = {max_jobs!r}", where="trace.max_jobs", expected="a positive integer"
            )
        jobs = jobs[:max_jobs]
    notes = list(trace.notes)
    too_big = [j for j in jobs if j.gpus > topology.n_gpus > 0]
    if too_big:
        notes.append(f"{len(too_big)} job(s) larger than the cluster ({topology.n_gpus} GPUs) dropped")
        jobs = [j for j in jobs if j not in too_big]
    return Trace(name=trace.name, source=trace.source, jobs=tuple(jobs), notes=trace.notes), notes


def _check_trace_path(path: Path, key: str) -> None:
    """A trace file (or folder) must exist; a file must be a regular file within the size limit."""
    try:
        st = os.stat(path)
    except OSError:
        raise InputError(
            f"no such file {str(path)!r}", where=f"trace.{key}", expected="an existing file"
        ) from None
    if stat.S_ISDIR(st.st_mode):
        return  # folders of traces (traces_dir); their files are read by the loader
    if not stat.S_ISREG(st.st_mode):
        raise InputError(
            f"{str(path)!r} is not a regular file (a device, FIFO or socket)",
            where=f"trace.{key}",
            expected="a trace file",
        )
    if st.st_size > MAX_TRACE_BYTES:
        raise InputError(
            f"{str(path)!r} has {st.st_size:,} bytes",
            where=f"trace.{key}",
            expected=f"<= {MAX_TRACE_BYTES:,} bytes",
        )


def _positive(spec: Mapping[str, Any], key: str) -> float:
    value = spec.get(key, 1.0)
    if isinstance(value, bool) or not isinstance(value, int | float) or not 0 < value < math.inf:
        raise InputError(f"{key} = {value!r}", where=f"trace.{key}", expected="a positive finite number")
    return float(value)


def _scaled_profile(
    p: ModelProfile, compute_scale: float, comm_scale: float, done: dict[int, ModelProfile]
) -> ModelProfile:
    """The profile with its compute time and bytes scaled (smaller per-GPU batches, other precisions);
    a job's ``duration_s`` keeps its meaning (standalone run time), so it runs more or fewer iterations.
    ``done`` holds the profiles scaled so far (by the id of the original)."""
    hit = done.get(id(p))
    if hit is not None:
        return hit
    prof = done[id(p)] = replace(
        p,
        compute_s=p.compute_s * compute_scale,
        sync_bytes=p.sync_bytes * comm_scale,
        layers=tuple(
            replace(
                layer,
                forward_s=layer.forward_s * compute_scale,
                backward_s=layer.backward_s * compute_scale,
                param_bytes=layer.param_bytes * comm_scale,
            )
            for layer in p.layers
        ),
        notes=(p.notes + f" [scaled: compute x{compute_scale:g}, bytes x{comm_scale:g}]").strip(),
    )
    return prof


def _arguments(kind: str, loader: Callable[..., Trace], params: dict[str, Any]) -> dict[str, Any]:
    if kind == "synthetic":
        return params
    sig = list(inspect.signature(loader).parameters)
    out = dict(params)
    if "path" in out and "path" not in sig:
        first = sig[0]
        out[first] = out.pop("path")
    return out
