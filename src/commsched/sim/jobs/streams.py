"""A grouped job's two streams in the engine: the blocking steps on the critical path, the others beside.

A grouped job's traffic lists its blocking steps (TP, PP, EP) first, then its data-parallel ones
(:mod:`commsched.scheduling.groups`). The engine runs them as two streams, each a slot of its own on its
arrays, in flight at the same time (docs/llm-jobs.md, "Engine semantics"):

* the **blocking stream**, the job's own slot: after the compute ``c_b`` (the profile's, 1F1B bubble
  included), its TP and EP steps and the pipeline sends of the fill and the drain (the first and the
  last ``pp - 1`` of the 1F1B sends), one after another; the GPUs wait for them;
* the **overlapped stream**, the job's companion slot: from the iteration's start, the 1F1B sends of
  the steady state (they overlap the other micro-batches' compute), then, from the overlap fraction
  ``o`` into the last micro-batch's compute, ``B - (1 - o) x / m`` (``B = c_b + T_b``, ``x`` one
  micro-batch's compute and blocking collectives times ``m``), the DP steps (gradient reduce-scatter
  and all-gather, or all-reduce) beside the blocking stream, as Megatron-LM overlaps them with the last
  micro-batch's backward (``o B`` without micro-batches).

The iteration ends when the compute and both streams are done. Where the two streams meet on a link,
the blocking one goes first (the critical path; the companion is a sub-class just below its job's
class, :data:`DP_SUBCLASS`, still above every lower class), so that the DP steps only take what the
blocking ones leave. 1F1B puts ``m + pp - 1`` micro-batch slots of the stage's TP and EP collectives on
the critical path (``m + (pp - 1) / vpp`` interleaved): those steps are *stretched* by
``k = (vpp m + pp - 1) / (vpp m)`` (``k`` times their
repetitions at ``1 / k`` of their bytes each: their bytes on the links unchanged, their links held
``k`` times as long). Alone, the job then takes the closed form
:func:`commsched.workload.grouped.grouped_iteration_s`::

    B = c_b + k (T_tp + T_ep) + 2 (pp - 1) T_send
    T = max(B, D),  D = the DP steps from max(B - (1 - o) x / m, T_steady), paused while W runs

with ``T_send`` the mean fill or drain step, ``T_steady`` the steady-state sends, and ``W`` the blocking
steps that saturate a network link of the DP steps when those are still running at the end of the
compute (they wait for them), else 0 (:meth:`StreamPlan.alone_s`).
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.grouped_time import stream_steps
from commsched.scheduling.traffic import JobTraffic, StepLoad
from commsched.workload.grouped import paused_end_s
from commsched.workload.parallel import ParallelSpec

__all__ = ["DP_SUBCLASS", "StreamPlan", "stream_plan"]

#: the overlapped stream's class on the engine's arrays: its job's plus this, below its blocking stream
#: and above the next class (strict priority orders the classes by value)
DP_SUBCLASS = 0.5


@dataclass(frozen=True, slots=True, kw_only=True, eq=False)
class StreamPlan:
    """How the engine runs a grouped job's traffic as two streams.

    Attributes
    ----------
    traffic
        The job's traffic, its steps in stream order: ``[0, blocking_steps)`` the blocking stream,
        ``[blocking_steps, steady_end)`` the steady-state pipeline sends, then the DP steps.
    blocking_steps, steady_end
        The bounds of the streams in ``traffic.steps``.
    stretch
        Per step of ``traffic``, the factor its repetitions are stretched by (1 but for TP and EP).
    blocking_s
        The blocking stream's communication alone, stretched (``B - c_b``).
    steady_s
        The steady-state pipeline sends alone (``T_steady``).
    dp_s
        The DP steps alone (``T_dp``).
    shared_s
        The blocking steps that saturate a network link of the DP steps, stretched (``W``).
    bubble, sends_s, micro_batches
        The 1F1B stretch ``k`` of the TP and EP steps, the fill and drain sends alone (in
        ``blocking_s``) and ``m``: the DP steps start ``(1 - o) x / m`` before the blocking stream's
        end, ``x = (c_b + blocking_s - sends_s) / k`` (:meth:`dp_start_s`).
    shared_spans
        Where those steps run: ``(from, to)`` offsets after the compute's end, in stream order (empty:
        one span ``(0, shared_s)``).
    """

    traffic: JobTraffic
    blocking_steps: int
    steady_end: int
    stretch: NDArray[np.float64]
    blocking_s: float
    steady_s: float = 0.0
    dp_s: float = 0.0
    shared_s: float = 0.0
    shared_spans: tuple[tuple[float, float], ...] = ()
    bubble: float = 1.0
    sends_s: float = 0.0
    micro_batches: int = 1

    def dp_start_s(self, compute_s: float, overlap: float) -> float:
        """When the DP steps are released, after the iteration's start: the fraction ``overlap`` into
        the last micro-batch's compute, gradients being final only in its backward
        (:func:`~commsched.workload.grouped.grouped_iteration_s`); ``overlap x B`` without micro-batches.
        """
        b = compute_s + self.blocking_s
        x = (b - self.sends_s) / self.bubble
        return b - (1.0 - overlap) * x / self.micro_batches

    def alone_s(self, compute_s: float, overlap: float) -> float:
        """The iteration alone: ``max(B, D)``, the DP steps from ``max(o B, T_steady)`` needing ``T_dp``
        outside the spans where the blocking steps hold their links (``W``, after the compute
        ``compute_s``, bubble included; :func:`~commsched.workload.grouped.paused_end_s`).

        Examples
        --------
        >>> from commsched.scheduling.traffic import JobTraffic
        >>> t = JobTraffic(steps=(), link_ids=np.zeros(0, np.int64), link_bytes=np.zeros(0))
        >>> p = StreamPlan(traffic=t, blocking_steps=0, steady_end=0, stretch=np.ones(0), blocking_s=1.0,
        ...                dp_s=2.0, shared_s=0.5)
        >>> p.alone_s(2.0, 0.5), p.alone_s(2.0, 0.0)
        (4.0, 3.0)
        """
        b = compute_s + self.blocking_s
        start = max(self.dp_start_s(compute_s, overlap), self.steady_s)
        if self.dp_s <= 0:
            return max(b, start)
        spans = self.shared_spans or ((0.0, self.shared_s),)
        return max(b, paused_end_s(start, self.dp_s, tuple((compute_s + x, compute_s + y) for x, y in spans)))


def _alone_s(s: StepLoad, capacity_bytes_per_s: NDArray[np.float64]) -> float:
    """One repetition of a step alone: its latency plus its largest transfer at its tightest link's pace."""
    pace = float(np.min(capacity_bytes_per_s[s.links] / s.share))
    return s.latency_s + s.max_flow_bytes / pace


def _saturated(s: StepLoad, capacity_bytes_per_s: NDArray[np.float64]) -> NDArray[np.int64]:
    """The links a step alone saturates: its most loaded ones (bytes over capacity)."""
    load = s.bytes_per_rep / capacity_bytes_per_s[s.links]
    out: NDArray[np.int64] = s.links[load >= load.max() * (1.0 - 1e-9)]
    return out


def stream_plan(
    traffic: JobTraffic,
    capacity_bytes_per_s: NDArray[np.float64],
    parallel: ParallelSpec,
    network: NDArray[np.int64] | None = None,
) -> StreamPlan:
    """Order a grouped job's steps into its two streams and stretch the blocking TP and EP steps.

    ``capacity_bytes_per_s`` are the link capacities in bytes/s; ``shared_s`` counts the blocking steps
    that saturate a link of the DP steps (any link: NVLink too; ``network``, the network links, is
    accepted and unused).

    Examples
    --------
    >>> from commsched.topology.builders import two_layer_clos
    >>> from commsched.scheduling.state import PlacedJob
    >>> from commsched.scheduling.traffic import job_traffic
    >>> from commsched.workload.grouped_jobs import grouped_job
    >>> topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)
    >>> par = ParallelSpec(tp=8, pp=2, micro_batches=4)
    >>> j = PlacedJob(spec=grouped_job("g", "gpt3-crux", gpus=16, parallel=par), gpus=topo.gpus[:16])
    >>> plan = stream_plan(job_traffic(topo, j), topo.capacity_bps / 8.0, par)
    >>> plan.dp_s, plan.steady_end == len(plan.traffic.steps), plan.steady_s > 0, plan.blocking_s > 0
    (0.0, True, True, True)
    """
    blocking, steady, dp = stream_steps(traffic.steps, parallel.pp)
    steps = blocking + steady + dp
    alone = [s.repeat * _alone_s(s, capacity_bytes_per_s) for s in steps]
    nb, ns = len(blocking), len(blocking) + len(steady)
    stretch = np.ones(len(steps))
    vm = parallel.vpp * parallel.micro_batches
    bubble = (vm + parallel.pp - 1) / vm  # interleaved 1F1B divides the bubble by vpp
    for k in range(nb):
        if steps[k].group != "pp":
            stretch[k] = bubble
    dp_links = np.unique(np.concatenate([s.links for s in steps[ns:]] or [np.zeros(0, np.int64)]))
    # every link of the DP steps counts, NVLink included: a TP ring holding a GPU's NVLink at full rate
    # pauses the DP ring through it as much as one holding a NIC (strict priority, ring in lockstep);
    # ``network`` is kept for the callers and no longer narrows them
    del network
    shared = [k for k in range(nb) if np.isin(_saturated(steps[k], capacity_bytes_per_s), dp_links).any()]
    spans: list[tuple[float, float]] = []
    at = 0.0
    for k in range(nb):  # the blocking stream's steps one after another from the compute's end
        d = float(stretch[k] * alone[k])
        if k in shared:
            spans.append((at, at + d) if not spans or spans[-1][1] < at else (spans.pop()[0], at + d))
        at += d
    return StreamPlan(
        traffic=replace(traffic, steps=steps),
        blocking_steps=nb,
        steady_end=ns,
        stretch=stretch,
        blocking_s=float(sum(stretch[k] * alone[k] for k in range(nb))),
        steady_s=float(sum(alone[nb:ns])),
        dp_s=float(sum(alone[ns:])),
        shared_s=float(sum(stretch[k] * alone[k] for k in shared)),
        shared_spans=tuple(spans),
        bubble=bubble,
        sends_s=float(sum(alone[k] for k in range(nb) if steps[k].group == "pp")),
        micro_batches=parallel.micro_batches,
    )
