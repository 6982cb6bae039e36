"""The closed-form iteration time of a placed grouped job alone, from its projected traffic.

Each step alone moves at the pace of its most loaded link: ``repeat x (latency + max_e bytes_e / B_e)``
(the engine's standalone pace of a step). The TP, EP and DP times are the sums over their steps, one
pipeline send is the longest PP step; :func:`~commsched.workload.grouped.grouped_iteration_s` combines
them with the 1F1B bubble and the overlap (docs/llm-jobs.md).
"""

from __future__ import annotations

from collections.abc import Mapping

from commsched.scheduling.state import ConnectionKey, PlacedJob
from commsched.scheduling.traffic import JobTraffic, StepLoad, job_traffic
from commsched.topology import Topology
from commsched.workload.grouped import GroupedTimes, grouped_iteration_s

__all__ = ["grouped_standalone_s", "grouped_times"]


def _step_s(topology: Topology, s: StepLoad) -> float:
    """One repetition of a step alone: latency plus its most loaded link's bytes over its capacity."""
    cap = topology.capacity_bps[s.links] / 8.0  # bits/s -> bytes/s
    return s.latency_s + float((s.bytes_per_rep / cap).max())


def grouped_times(topology: Topology, job: PlacedJob, traffic: JobTraffic) -> GroupedTimes:
    """The times of a grouped job's iteration alone (a flat job: all its steps are its ``dp`` stream).

    Examples
    --------
    >>> from commsched.topology.builders import two_layer_clos
    >>> from commsched.workload.grouped_jobs import grouped_job
    >>> from commsched.workload.parallel import ParallelSpec
    >>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)
    >>> j = PlacedJob(spec=grouped_job("g", "gpt3-crux", gpus=16, parallel=ParallelSpec(tp=8, pp=2)),
    ...               gpus=topo.gpus[:16])
    >>> t = grouped_times(topo, j, job_traffic(topo, j))
    >>> (t.stages, t.micro_batches, t.dp_s, t.tp_s > 0, t.pp_send_s > 0)
    (2, 1, 0.0, True, True)
    """
    par = job.spec.parallel
    pp, m = (par.parallel.pp, par.parallel.micro_batches) if par is not None else (1, 1)
    sums = {"tp": 0.0, "ep": 0.0, "dp": 0.0}
    send = 0.0
    for s in traffic.steps:
        one = _step_s(topology, s)
        if s.group == "pp":
            send = max(send, one)
        else:
            sums[s.group] += s.repeat * one
    return GroupedTimes(
        compute_s=job.spec.profile.compute_s * m / (m + pp - 1),  # the profile holds the bubble
        stages=pp,
        micro_batches=m,
        tp_s=sums["tp"],
        ep_s=sums["ep"],
        pp_send_s=send,
        dp_s=sums["dp"],
        overlap=job.spec.profile.overlap,
    )


def grouped_standalone_s(
    topology: Topology, job: PlacedJob, routes: Mapping[ConnectionKey, int] | None = None
) -> float:
    """Iteration time of a placed (grouped) job alone under ``routes``, in closed form.

    References
    ----------
    Narayanan et al., SC 2021, §2.2 (1F1B); docs/llm-jobs.md (the closed form).
    """
    return grouped_iteration_s(grouped_times(topology, job, job_traffic(topology, job, routes)))
