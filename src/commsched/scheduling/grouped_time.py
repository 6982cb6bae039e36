"""The closed-form iteration time of a placed grouped job alone, from its projected traffic.

Each step alone moves at the pace of its most loaded link: ``repeat x (latency + max_e bytes_e / B_e)``
(the engine's standalone pace of a step). The TP, EP and DP times are the sums over their steps; the
PP steps split into the fill and the drain (the first and the last ``pp - 1``, on the critical path)
and the steady state (overlapped with the compute) as the engine runs them
(:mod:`commsched.sim.jobs.streams`); :func:`~commsched.workload.grouped.grouped_iteration_s` combines them
with the 1F1B bubble and the overlap (docs/llm-jobs.md).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import replace

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.state import ConnectionKey, PlacedJob
from commsched.scheduling.traffic import JobTraffic, StepLoad, job_traffic
from commsched.topology import Topology
from commsched.workload.grouped import GroupedTimes, grouped_iteration_s

__all__ = ["grouped_standalone_s", "grouped_times", "stream_steps"]


def _step_s(topology: Topology, s: StepLoad) -> float:
    """One repetition of a step alone: latency plus its most loaded link's bytes over its capacity."""
    cap = topology.capacity_bps[s.links] / 8.0  # bits/s -> bytes/s
    return s.latency_s + float((s.bytes_per_rep / cap).max())


def stream_steps(
    steps: Sequence[StepLoad], stages: int
) -> tuple[tuple[StepLoad, ...], tuple[StepLoad, ...], tuple[StepLoad, ...]]:
    """A grouped job's steps as its streams run them: the blocking steps (TP, EP and the pipeline sends
    of the fill and the drain: the first and the last ``stages - 1`` PP sends, a PP step repeated
    split where needed), the steady state's PP sends, and the DP steps, each in the traffic's order.

    Examples
    --------
    >>> one = np.ones(1)
    >>> steps = [StepLoad(links=np.zeros(1, np.int64), bytes_per_rep=one, max_flow_bytes=1.0, repeat=r,
    ...                   latency_s=0.0, share=one, group=g, blocking=g != "dp")
    ...          for g, r in (("tp", 1), ("pp", 3), ("pp", 1), ("dp", 2))]
    >>> [[(x.group, x.repeat) for x in part] for part in stream_steps(steps, 2)]
    [[('tp', 1), ('pp', 1), ('pp', 1)], [('pp', 2)], [('dp', 2)]]
    """
    total = sum(s.repeat for s in steps if s.group == "pp")
    edge = max(stages - 1, 0)
    blocking: list[StepLoad] = []
    steady: list[StepLoad] = []
    done = 0  # PP sends before this step
    for s in steps:
        if s.group != "pp":
            if s.blocking:
                blocking.append(s)
            continue
        head = max(0, min(s.repeat, edge - done))
        tail = max(0, min(s.repeat - head, done + s.repeat - (total - edge)))
        mid = s.repeat - head - tail
        done += s.repeat
        blocking += [_part(s, n) for n in (head,) if n]
        steady += [_part(s, n) for n in (mid,) if n]
        blocking += [_part(s, n) for n in (tail,) if n]
    return tuple(blocking), tuple(steady), tuple(s for s in steps if not s.blocking)


def _part(s: StepLoad, repeat: int) -> StepLoad:
    return s if repeat == s.repeat else replace(s, repeat=repeat)


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
    v = par.parallel.vpp if par is not None else 1
    blocking, steady, dp = stream_steps(traffic.steps, pp)
    sums = {"tp": 0.0, "ep": 0.0, "pp": 0.0}
    waits = {"tp": 0.0, "ep": 0.0, "pp": 0.0}  # the blocking steps saturating a network link of the DP
    dp_net = _dp_network_links(topology, traffic)
    bubble = (v * m + pp - 1) / (v * m)  # 1F1B: m + (pp - 1) / v micro-batch slots of TP and EP
    spans: list[tuple[float, float]] = []  # where the shared steps run, after the compute's end
    at = 0.0
    for s in blocking:
        sums[s.group] += s.repeat * _step_s(topology, s)
        d = s.repeat * _step_s(topology, s) * (1.0 if s.group == "pp" else bubble)
        if np.isin(_saturated(topology, s), dp_net).any():
            waits[s.group] += s.repeat * _step_s(topology, s)
            spans.append((at, at + d) if not spans or spans[-1][1] < at else (spans.pop()[0], at + d))
        at += d
    return GroupedTimes(
        compute_s=job.spec.busy_s,  # the profile holds the bubble
        stages=pp,
        micro_batches=m,
        chunks=v,
        tp_s=sums["tp"],
        ep_s=sums["ep"],
        pp_send_s=sums["pp"] / (2 * (pp - 1)) if pp > 1 else 0.0,
        pp_steady_s=float(sum(s.repeat * _step_s(topology, s) for s in steady)),
        dp_s=float(sum(s.repeat * _step_s(topology, s) for s in dp)),
        overlap=job.spec.profile.overlap,
        dp_wait_s=bubble * (waits["tp"] + waits["ep"]) + waits["pp"],
        wait_spans=tuple(spans),
    )


def _saturated(topology: Topology, s: StepLoad) -> NDArray[np.int64]:
    """The links a step alone saturates (its most loaded ones)."""
    load = s.bytes_per_rep / topology.capacity_bps[s.links]
    out: NDArray[np.int64] = s.links[load >= load.max() * (1.0 - 1e-9)]
    return out


def _dp_network_links(topology: Topology, traffic: JobTraffic) -> NDArray[np.int64]:
    """The links of the job's DP steps (NVLink included: a blocking step holding a GPU's NVLink pauses
    a DP ring through it as much as one holding a NIC)."""
    del topology
    dp = [s.links for s in traffic.steps if not s.blocking]
    return np.unique(np.concatenate(dp)) if dp else np.zeros(0, np.int64)


def grouped_standalone_s(
    topology: Topology, job: PlacedJob, routes: Mapping[ConnectionKey, int] | None = None
) -> float:
    """Iteration time of a placed (grouped) job alone under ``routes``, in closed form.

    References
    ----------
    Narayanan et al., SC 2021, §2.2 (1F1B); docs/llm-jobs.md (the closed form).
    """
    return grouped_iteration_s(grouped_times(topology, job, job_traffic(topology, job, routes)))
