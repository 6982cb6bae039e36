"""Trace records: :class:`TraceJob` (one job as the trace saw it) and :class:`Trace` (jobs + metadata).

A trace is data, not a simulation input yet: :func:`to_job_specs` turns it into
:class:`~commsched.workload.records.JobSpec` records with zoo profiles.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §6.5 (trace-driven evaluation: arrival, size, model).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from commsched.workload.records import JobId, JobSpec
from commsched.workload.zoo import get_model


@dataclass(frozen=True, slots=True, kw_only=True)
class TraceJob:
    """One job of a trace.

    Attributes
    ----------
    id
        Job id, unique within the trace.
    arrival_s
        Submission time, seconds from the trace start (the earliest submission is 0 for real traces).
    duration_s
        Standalone run time from the trace (seconds, > 0): how long the job ran, or would run alone.
    gpus
        GPUs the job holds.
    model
        Zoo model name after label mapping (:func:`commsched.workload.get_model` accepts it).
    source
        The trace's own label for the job's model, before mapping (provenance).
    hosts
        Explicit placement as the trace recorded it: host labels (e.g. Lingjun ``ip`` hashes), one per
        distinct host in first-use order; empty when the trace has no placement.
    """

    id: JobId
    arrival_s: float
    duration_s: float
    gpus: int
    model: str
    source: str = ""
    hosts: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True, kw_only=True)
class Trace:
    """A job trace: jobs sorted by arrival, plus where it came from.

    ``notes`` holds one line per remark of the loader (skipped rows and why, default-mapped labels with
    counts, derivations), so a run's provenance can be printed with its results.
    """

    name: str
    source: str
    jobs: tuple[TraceJob, ...]
    notes: tuple[str, ...] = ()

    def __len__(self) -> int:
        return len(self.jobs)


def to_job_specs(
    trace: Trace, *, collective: str = "ring", host_ids: Mapping[str, str] | None = None
) -> tuple[JobSpec, ...]:
    """The trace's jobs as :class:`JobSpec` records (profile from the zoo, ``duration_s`` kept).

    Parameters
    ----------
    trace
        The trace.
    collective
        Collective algorithm name of every job (see :func:`commsched.workload.collective_registry`).
    host_ids
        Host label -> host id of the topology (``{h.label: h.id for h in topology.hosts}``). When given,
        a job whose hosts are all known keeps its trace placement as ``JobSpec.hosts``; otherwise jobs
        carry only a GPU count and a placement policy decides.

    Examples
    --------
    >>> t = Trace(name="t", source="doc", jobs=(TraceJob(id=JobId("a"), arrival_s=0.0, duration_s=60.0,
    ...           gpus=8, model="resnet50", hosts=("x",)),))
    >>> [(s.id, s.profile.name, s.gpus, s.hosts) for s in to_job_specs(t, host_ids={"x": "h0"})]
    [('a', 'resnet50', 8, ('h0',))]
    """
    out = []
    for j in trace.jobs:
        hosts: tuple[str, ...] = ()
        if host_ids is not None and j.hosts and all(h in host_ids for h in j.hosts):
            hosts = tuple(host_ids[h] for h in j.hosts)
        out.append(
            JobSpec(
                id=j.id,
                profile=get_model(j.model, where=f"trace {trace.name}: job {j.id}"),
                gpus=j.gpus,
                model=j.model,
                hosts=hosts,
                arrival_s=j.arrival_s,
                duration_s=j.duration_s,
                collective=collective,
            )
        )
    return tuple(out)
