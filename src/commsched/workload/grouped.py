"""Grouped jobs: the profile a TP/PP/DP/EP job runs with, and its iteration time alone in closed form.

Compute of a grouped job (stated source, recorded in the profile's ``source``): the model profile's
``compute_s`` is one DP replica's iteration on one GPU (forward + backward of its whole batch); split
over ``tp x pp`` GPUs each GPU computes ``c = compute_s / (tp pp)``, and the 1F1B pipeline stretches it
by its bubble to ``c (m + pp - 1) / m`` (Narayanan et al., SC 2021, §2.2: bubble fraction
``(p - 1) / m``). The named LLM profiles (``gpt-13b@h200``, ``llama-7b@h200``, ``llama-65b@h200``,
``mixtral-8x7b@h200``) scale the measured ``gpt3-crux@h200-bf16`` profile by training FLOPs per
iteration (:func:`commsched.workload.llm.shape_flops`); their gradient bytes are 4 per parameter (fp32
gradients, as the AICB Megatron logs reduce-scatter them).

:func:`grouped_iteration_s` is the closed form of a grouped job's iteration alone: blocking stream
(compute with bubble, TP and EP collectives in every micro-batch, pipeline sends of the fill and the
drain) and the DP stream released at the overlap fraction of it.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from commsched.workload.llm import LlmShape, llm_shape, shape_flops, shape_params
from commsched.workload.parallel import GroupedWorkload
from commsched.workload.records import ModelProfile, ProfileProvenance

__all__ = [
    "LLM_MODELS",
    "GroupedTimes",
    "grouped_iteration_s",
    "grouped_profile",
    "llm_profile",
    "paused_end_s",
]

#: named LLM profiles derived from the measured H200 profile (``NAME@h200``)
LLM_MODELS = ("gpt-13b", "gpt-22b", "gpt-175b", "llama-7b", "llama-65b", "mixtral-8x7b")
REFERENCE_PROFILE = "gpt3-crux@h200-bf16"


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupedTimes:
    """The times a grouped job's iteration is made of, each alone on the network.

    Attributes
    ----------
    compute_s
        One GPU's compute per iteration without the bubble (``compute_s / (tp pp)``).
    stages, micro_batches, chunks
        ``pp``, ``m`` and ``vpp`` (the model chunks per stage of interleaved 1F1B).
    tp_s, ep_s
        Total time of the stage's TP collectives and EP all-to-alls per iteration (blocking).
    pp_send_s
        Time of one pipeline send of the fill or the drain (the mean of their ``2 (pp - 1)`` steps).
    pp_steady_s
        The steady state's pipeline sends, overlapped with the compute from the iteration's start (the
        DP synchronisation follows them).
    dp_s
        Time of the DP synchronisation (reduce-scatter/all-gather or all-reduce) per iteration.
    overlap
        Fraction of the blocking stream after which the DP stream is released (``o``).
    dp_wait_s
        The blocking collectives on the critical path that saturate a network link of the DP stream:
        a DP stream running while they do waits for them (they go first).
    wait_spans
        Where those collectives run, as ``(from, to)`` offsets after the compute's end (in the blocking
        stream's order); empty: one span ``(0, dp_wait_s)``, right after the compute.
    """

    compute_s: float
    stages: int = 1
    micro_batches: int = 1
    chunks: int = 1
    tp_s: float = 0.0
    ep_s: float = 0.0
    pp_send_s: float = 0.0
    pp_steady_s: float = 0.0
    dp_s: float = 0.0
    overlap: float = 1.0
    dp_wait_s: float = 0.0
    wait_spans: tuple[tuple[float, float], ...] = ()


def paused_end_s(start_s: float, work_s: float, spans: tuple[tuple[float, float], ...]) -> float:
    """When a stream that needs ``work_s`` seconds of its links from ``start_s`` ends, paused during
    ``spans`` (sorted, disjoint ``(from, to)`` times where a higher-priority stream holds them).

    Examples
    --------
    >>> paused_end_s(0.0, 2.0, ((1.0, 3.0),)), paused_end_s(2.0, 1.0, ((1.0, 3.0),))
    (4.0, 4.0)
    >>> paused_end_s(0.0, 1.0, ((1.0, 3.0),)), paused_end_s(5.0, 1.0, ((1.0, 3.0),))
    (1.0, 6.0)
    """
    t, left = start_s, work_s
    for a, b in spans:
        if left <= 0.0:
            break
        if b <= t:
            continue
        if a > t:
            run = min(left, a - t)
            t, left = t + run, left - run
            if left <= 0.0:
                break
        t = b
    return t + left


def grouped_iteration_s(t: GroupedTimes) -> float:
    """Iteration time of a grouped job alone.

    Each micro-batch slot holds ``x / m`` with ``x = c + T_tp + T_ep`` (the TP and EP collectives block
    the compute of their layer); 1F1B runs ``m + p - 1`` slots on the critical path (the bubble;
    interleaved over ``v`` chunks, ``m + (p - 1) / v``), plus the pipeline sends of the first
    micro-batch's forward and the last one's backward, ``2 (p - 1)`` sends (the sends of the steady
    state overlap the other micro-batch's compute). Gradients are final only in the last micro-batch's
    backward: the DP stream starts after the fraction ``o`` of the last micro-batch's compute, ``(1 - o)
    x / m`` before the blocking stream's end (Megatron-LM's ``--overlap-grad-reduce``: the buckets'
    reduce launches during the last micro-batch's backward), once the steady state's sends
    (``T_steady``, from the iteration's start) are done. It makes no progress while the blocking
    collectives that saturate one of its network links run (``W``, :attr:`GroupedTimes.dp_wait_s`, in the
    spans :attr:`GroupedTimes.wait_spans` after the compute's end ``c_b = k c``): it needs ``T_dp`` of
    time outside them (:func:`paused_end_s`)::

        k = (v m + p - 1) / (v m)
        B = k x + 2 (p - 1) T_send
        D = paused_end_s(max(B - (1 - o) x / m, T_steady), T_dp, spans of W)
        T = max(B, D)

    With ``m = p = 1`` the DP stream starts at ``o B``. With one span right after the compute: ``D = S +
    T_dp`` if the DP stream ends before the compute does, ``S + T_dp + W`` if it is running when the
    span starts, and less where it starts inside the span (a TP group across hosts).

    Examples
    --------
    No pipeline, DP fully hidden: ``T = c + T_tp``:

    >>> grouped_iteration_s(GroupedTimes(compute_s=1.0, tp_s=0.2, dp_s=0.5, overlap=0.5))
    1.2
    >>> grouped_iteration_s(GroupedTimes(compute_s=1.0, stages=4, micro_batches=8, pp_send_s=0.01))
    1.435
    >>> grouped_iteration_s(GroupedTimes(compute_s=1.0, stages=4, micro_batches=8, chunks=3))
    1.125

    References
    ----------
    Narayanan et al., SC 2021, §2.2 (1F1B, bubble ``(p - 1) / m``; interleaved, ``(p - 1) / (v m)``);
    Megatron-LM core_r0.6.0 ``distributed/distributed_data_parallel.py`` (``overlap_grad_reduce``: no
    gradient sync before the last micro-batch); Crux §3 (communication released after a fraction of the
    compute).
    """
    p, m = t.stages, t.micro_batches
    vm = t.chunks * m
    x = t.compute_s + t.tp_s + t.ep_s
    blocking = (vm + p - 1) * x / vm + 2 * (p - 1) * t.pp_send_s
    start = max(blocking - (1.0 - t.overlap) * x / m, t.pp_steady_s)
    if t.dp_s <= 0:
        return max(blocking, start)
    c_b = (vm + p - 1) * t.compute_s / vm
    spans = t.wait_spans or ((0.0, t.dp_wait_s),)
    return max(blocking, paused_end_s(start, t.dp_s, tuple((c_b + a, c_b + b) for a, b in spans)))


def grouped_profile(profile: ModelProfile, workload: GroupedWorkload) -> ModelProfile:
    """The per-GPU profile of a grouped job: ``compute_s / (tp pp)`` stretched by the 1F1B bubble.

    Examples
    --------
    >>> from commsched.workload.parallel import ParallelSpec
    >>> prof = ModelProfile(name="x", gpu="g", compute_s=8.0, sync_bytes=1e9, overlap=0.5, source="s")
    >>> w = GroupedWorkload(parallel=ParallelSpec(tp=2, pp=2, dp=1, micro_batches=4), collectives=(),
    ...                     source="w")
    >>> grouped_profile(prof, w).compute_s  # 8 / 4 x (4 + 1) / 4
    2.5
    """
    p = workload.parallel
    m = p.micro_batches
    vm = p.vpp * m  # interleaved 1F1B divides the bubble by vpp
    compute = profile.compute_s / (p.tp * p.pp) * (vm + p.pp - 1) / vm
    return replace(
        profile,
        compute_s=compute,
        source=(
            f"{profile.source}; per GPU: compute_s / (tp {p.tp} x pp {p.pp}) x 1F1B bubble "
            f"(m + pp - 1) / m with m = {m}"
            + (f", bubble / vpp {p.vpp} (interleaved)" if p.vpp > 1 else "")
            + f"; traffic: {workload.source}"
        ),
    )


def llm_profile(name: str, reference: ModelProfile) -> ModelProfile | None:
    """The profile of a named LLM (``gpt-13b@h200`` ...) scaled from ``reference`` by FLOPs, else ``None``.

    ``reference`` is the measured ``gpt3-crux@h200-bf16`` profile (its shape is ``gpt3-crux``'s).

    Examples
    --------
    >>> ref = ModelProfile(name="r", gpu="H200", compute_s=0.4, sync_bytes=1.0, overlap=0.4, source="m")
    >>> p = llm_profile("gpt-13b@h200", ref)
    >>> round(p.compute_s / 0.4, 3), p.sync_bytes / 4 / 1e9
    (15.06, 12.84022784)
    """
    base, _, variant = name.lower().partition("@")
    if base not in LLM_MODELS or variant != "h200":
        return None
    shape = llm_shape(base)
    ref_shape = llm_shape("gpt3-crux")
    assert shape is not None and ref_shape is not None
    return _scaled(shape, ref_shape, reference)


def _scaled(shape: LlmShape, ref_shape: LlmShape, reference: ModelProfile) -> ModelProfile:
    ratio = shape_flops(shape) / shape_flops(ref_shape)
    params, _ = shape_params(shape)
    return ModelProfile(
        name=f"{shape.name}@h200",
        gpu=reference.gpu,
        compute_s=reference.compute_s * ratio,
        sync_bytes=4.0 * params,  # fp32 gradients: 4 bytes per parameter
        overlap=reference.overlap,
        source=(
            f"{REFERENCE_PROFILE} ({reference.source}) scaled by training FLOPs per iteration "
            f"x {ratio:.4g}; shape: {shape.source}; gradients 4 bytes per parameter"
        ),
        family="moe" if shape.moe_layers else "transformer",
        batch_size=shape.batch,
        flops_per_iteration=shape_flops(shape),
        precision="bf16",
        provenance=ProfileProvenance(
            kind="derived",
            reference=f"{REFERENCE_PROFILE} (measured); transformer shape: {shape.source}",
            assumptions=(
                f"compute scales with training FLOPs per iteration (x {ratio:.4g} of gpt3-crux's)",
                "gradients synchronised in fp32: 4 bytes per parameter",
                f"overlap as measured for {REFERENCE_PROFILE}",
            ),
        ),
    )
