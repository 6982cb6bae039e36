"""Transformer shapes, and the group collectives of a TP/PP/DP/EP job built from them.

A :class:`LlmShape` gives what the traffic of a hybrid-parallel transformer depends on: layers, hidden
size, sequence length, FFN size, vocabulary, the DP replica's batch per iteration, and for a
mixture-of-experts model its MoE layers, experts and top-k. :func:`llm_workload` turns a shape and a
:class:`~commsched.workload.parallel.ParallelSpec` into one iteration's group collectives (Megatron-LM,
without sequence parallelism), with ``b = batch / m`` sequences per micro-batch and ``a = b s h e``
bytes of one micro-batch's activations (``e`` bytes per element, 2 in bf16):

====  ==========================================================================================
kind  per iteration, per stage ``s`` holding ``L_s`` layers (``Lm_s`` of them MoE), blocking or not
====  ==========================================================================================
tp    ``4 L_s m`` all-reduces of ``a`` over ``tp`` ranks (2 forward, 2 backward per layer); blocking
pp    1F1B sends of ``a`` between adjacent stages, ``m`` forward and ``m`` backward per boundary;
      blocking
ep    ``4 Lm_s m`` all-to-alls of ``a k / tp`` per rank over ``ep`` ranks (dispatch and combine,
      forward and backward; tokens split over the TP ranks); blocking
dp    the rank's gradient shard ``G = M (1 - f_e) / (tp pp)`` over ``dp`` ranks and its expert shard
      ``M f_e / (tp pp ep)`` over ``dp / ep`` ranks (``M`` the model's fp32 gradient bytes, ``f_e`` the
      experts' share of the parameters): ZeRO 0 one all-reduce; 1-2 reduce-scatter + all-gather;
      3 adds ``2 m`` all-gathers; gradients reduced and parameters gathered in the dtypes of
      :mod:`commsched.workload.precision` (fp32 and bf16 by default: ``G`` and ``G / 2``); overlapped
      with the compute
====  ==========================================================================================

References
----------
.. [1] D. Narayanan et al., SC 2021, §3 (communication of TP, PP and DP; FLOPs per iteration, eq. 3).
.. [2] AICB ``Workload_spec_v1.1.csv`` (shapes of GPT-13B, LLaMA-7B/65B, Mistral 8x7B).
"""

from __future__ import annotations

from dataclasses import dataclass

from commsched.workload.parallel import GroupCollective, GroupedWorkload, GroupKind, ParallelSpec
from commsched.workload.precision import DTYPE_BYTES, SYNC_DTYPE_BYTES, dp_dtypes

__all__ = ["LlmShape", "llm_shape", "llm_workload", "shape_flops", "shape_params", "shape_problems"]


@dataclass(frozen=True, slots=True, kw_only=True)
class LlmShape:
    """The shape of a transformer, as its traffic and FLOPs need it.

    ``ffn_matrices``: 2 (GPT: up, down) or 3 (LLaMA's SwiGLU: gate, up, down). ``experts`` and ``top_k``
    apply to the ``moe_layers`` MoE layers (1 and 1 for a dense model). ``batch``: sequences one DP
    replica trains per iteration.
    """

    name: str
    layers: int
    hidden: int
    seq_len: int
    ffn_hidden: int
    vocab: int
    batch: int
    source: str
    ffn_matrices: int = 2
    moe_layers: int = 0
    experts: int = 1
    top_k: int = 1
    act_bytes: int = 2


_AICB = "AICB Workload_spec_v1.1.csv (aliyun/aicb@23eec3c)"
_SHAPES: tuple[LlmShape, ...] = (
    LlmShape(
        name="gpt3-crux", layers=24, hidden=1024, seq_len=2048, ffn_hidden=4096, vocab=50304, batch=16,
        source="h200-profiles: gpt3-24l-1024, batch 16, seq 2048, 24 layers, hidden 1024, vocab 50304",
    ),
    LlmShape(
        name="bert-large", layers=24, hidden=1024, seq_len=512, ffn_hidden=4096, vocab=30522, batch=32,
        source="h200-profiles: bert-large, batch 32, seq 512 (BERT-large: 24 layers, hidden 1024)",
    ),
    LlmShape(
        name="bert-base", layers=12, hidden=768, seq_len=512, ffn_hidden=3072, vocab=30522, batch=32,
        source="h200-profiles: bert-base, batch 32, seq 512 (BERT-base: 12 layers, hidden 768)",
    ),
    LlmShape(
        name="gpt-13b", layers=40, hidden=5120, seq_len=2048, ffn_hidden=20480, vocab=50257, batch=8,
        source=f"{_AICB} row GPT_13B; batch 8 sequences per DP replica",
    ),
    LlmShape(
        name="gpt-22b", layers=48, hidden=6144, seq_len=2048, ffn_hidden=24576, vocab=50257, batch=8,
        source=f"{_AICB} row GPT_22B; batch 8 sequences per DP replica",
    ),
    LlmShape(
        name="gpt-175b", layers=96, hidden=12288, seq_len=2048, ffn_hidden=49152, vocab=50257, batch=8,
        source=f"{_AICB} row GPT_175B; batch 8 sequences per DP replica",
    ),
    LlmShape(
        name="llama-7b", layers=32, hidden=4096, seq_len=4096, ffn_hidden=11008, vocab=32000, batch=8,
        ffn_matrices=3, source=f"{_AICB} row LLaMA_7B (DeepSpeed); batch 8 sequences per DP replica",
    ),
    LlmShape(
        name="llama-65b", layers=80, hidden=8192, seq_len=4096, ffn_hidden=28672, vocab=32000, batch=8,
        ffn_matrices=3, source=f"{_AICB} row LLaMA_65B; batch 8 sequences per DP replica",
    ),
    LlmShape(
        name="mixtral-8x7b", layers=32, hidden=4096, seq_len=2048, ffn_hidden=14336, vocab=32000, batch=8,
        ffn_matrices=3, moe_layers=32, experts=8, top_k=2,
        source=f"{_AICB} row Mistral_8*7B (8 experts, top-2); batch 8 sequences per DP replica",
    ),
)  # fmt: skip


def llm_shape(model: str) -> LlmShape | None:
    """The shape of a model by name (a zoo variant ``NAME@...`` has the shape of ``NAME``), else ``None``.

    Examples
    --------
    >>> llm_shape("gpt3-crux@h200-bf16").layers, llm_shape("resnet50")
    (24, None)
    """
    base = model.split("@", 1)[0].lower()
    return next((s for s in _SHAPES if s.name == base), None)


def shape_params(shape: LlmShape) -> tuple[float, float]:
    """``(all parameters, expert parameters)``: ``4h^2`` attention and ``f h F`` per FFN (per expert in
    MoE layers) in each layer, plus the ``V h`` embedding.

    Examples
    --------
    >>> shape_params(llm_shape("gpt3-crux"))  # 24 x 12 x 1024^2 + 50304 x 1024
    (353501184.0, 0.0)
    """
    h, ffn = float(shape.hidden), float(shape.ffn_matrices * shape.hidden * shape.ffn_hidden)
    dense_layers = shape.layers - shape.moe_layers
    expert = shape.moe_layers * shape.experts * ffn
    total = shape.layers * 4 * h * h + dense_layers * ffn + expert + shape.vocab * h
    return total, expert


def shape_flops(shape: LlmShape) -> float:
    """Training FLOPs of one iteration of one DP replica (``batch`` sequences), forward x 3.

    Forward per token and layer ``2 (4h^2 + k f h F) + 4 s h`` (``k = top_k`` in MoE layers, 1 else),
    plus ``2 h V`` for the logits (Narayanan et al., SC 2021, eq. 3 for ``f = 2``, ``F = 4h``).

    Examples
    --------
    >>> shape_flops(llm_shape("gpt3-crux"))  # the zoo's flops_per_iteration of gpt3-crux
    89292370083840.0
    """
    h, s = float(shape.hidden), float(shape.seq_len)
    ffn = shape.ffn_matrices * h * shape.ffn_hidden
    dense = shape.layers - shape.moe_layers
    per_token = (
        dense * 2 * (4 * h * h + ffn)
        + shape.moe_layers * 2 * (4 * h * h + shape.top_k * ffn)
        + shape.layers * 4 * s * h
        + 2 * h * shape.vocab
    )
    return 3.0 * per_token * shape.batch * s


def shape_problems(shape: LlmShape, p: ParallelSpec) -> list[tuple[str, str, str]]:
    """What no framework runs of ``shape`` under ``p``: ``(field, what, expected)`` triples.

    More pipeline stages (times ``vpp`` virtual stages) than transformer layers, and micro-batches that
    do not divide the DP replica's batch (Megatron-LM and DeepSpeed train whole sequences per
    micro-batch: ``global_batch = micro_batch x micro_batches x dp``).

    Examples
    --------
    >>> shape_problems(llm_shape("gpt3-crux"), ParallelSpec(pp=32, micro_batches=4))[0][1]
    'pp = 32 stages for a model of 24 transformer layers'
    >>> shape_problems(llm_shape("gpt3-crux"), ParallelSpec(dp=4, micro_batches=3))[0][1]
    '3 micro-batches do not divide the batch of 16 sequences'
    >>> shape_problems(llm_shape("gpt3-crux"), ParallelSpec(pp=4, micro_batches=8))
    []
    """
    out: list[tuple[str, str, str]] = []
    if p.pp * p.vpp > shape.layers:
        what = f"pp = {p.pp} stages" if p.vpp == 1 else f"pp x vpp = {p.pp} x {p.vpp} virtual stages"
        out.append(
            ("pp", f"{what} for a model of {shape.layers} transformer layers", "at least one layer per stage")
        )
    elif p.vpp > 1 and shape.layers % (p.pp * p.vpp):
        out.append(
            (
                "vpp",
                f"{shape.layers} layers do not split into pp x vpp = {p.pp} x {p.vpp} equal chunks",
                "pp * vpp dividing the layers (Megatron-LM's interleaved schedule)",
            )
        )
    if shape.batch % p.micro_batches:
        out.append(
            (
                "micro_batches",
                f"{p.micro_batches} micro-batches do not divide the batch of {shape.batch} sequences",
                f"a divisor of {shape.batch}",
            )
        )
    return out


def _split(total: int, parts: int) -> list[int]:
    """``total`` items over ``parts`` stages, the first stages taking one more where it does not divide."""
    return [total // parts + (1 if k < total % parts else 0) for k in range(parts)]


def _tp(p: ParallelSpec, a: float, layers: int, s: int) -> list[GroupCollective]:
    """The TP collectives of stage ``s`` (``layers`` layers) per iteration: 4 all-reduces of ``a`` per
    layer and micro-batch, or under sequence parallelism 6 all-gathers and 4 reduce-scatters of ``a``
    (forward: 2 + 2; backward: the all-gathers of the row-parallel outputs' gradients and, again, of the
    column-parallel inputs for the weight gradients, and the reduce-scatters of their input gradients:
    Megatron-LM core_r0.6.0 ``tensor_parallel/layers.py``; AICB's ``..._sp.csv`` log lists the same)."""
    m = p.micro_batches

    def one(op: str, per_layer: int) -> GroupCollective:
        return GroupCollective(
            kind=GroupKind.TP, op=op, group_size=p.tp, size_bytes=a, count=per_layer * layers * m, stage=s
        )

    if p.tp < 2 or not layers:
        return []
    return [one("all_gather", 6), one("reduce_scatter", 4)] if p.sequence_parallel else [one("all_reduce", 4)]


def _blocking(shape: LlmShape, p: ParallelSpec) -> list[GroupCollective]:
    m = p.micro_batches
    a = shape.batch / m * shape.seq_len * shape.hidden * shape.act_bytes  # bytes of one micro-batch
    out: list[GroupCollective] = []
    layers, moe = _split(shape.layers, p.pp), _split(shape.moe_layers, p.pp)
    for s in range(p.pp):
        out += _tp(p, a, layers[s], s)
        if p.ep > 1 and moe[s]:
            out.append(
                GroupCollective(
                    kind=GroupKind.EP, op="all_to_all", group_size=p.ep, size_bytes=a * shape.top_k / p.tp,
                    count=4 * moe[s] * m, stage=s,
                )
            )  # fmt: skip
    if p.pp > 1:  # under SP each TP rank sends its sequence slice (Megatron core p2p tensor shape)
        size = a / p.tp if p.sequence_parallel else a
        out.append(
            GroupCollective(
                kind=GroupKind.PP, op="pipeline_1f1b", group_size=p.pp, size_bytes=size, count=m, vpp=p.vpp
            )
        )
    return out


def _dp(p: ParallelSpec, shard_bytes: float, group: int, expert: bool) -> list[GroupCollective]:
    """The DP collectives of a shard of ``shard_bytes`` fp32 gradient bytes, each in its dtype."""
    if group < 2 or shard_bytes <= 0:
        return []
    grad, param = dp_dtypes(p.zero, p.grad_dtype, p.param_dtype)

    def one(op: str, dtype: str, count: int = 1) -> GroupCollective:
        size = shard_bytes * DTYPE_BYTES[dtype] / SYNC_DTYPE_BYTES  # parameters x bytes per element
        return GroupCollective(
            kind=GroupKind.DP, op=op, group_size=group, size_bytes=size, count=count, blocking=False,
            expert=expert,
        )  # fmt: skip

    if p.zero == 0:
        return [one("all_reduce", grad)]
    out = [one("reduce_scatter", grad), one("all_gather", param)]
    if p.zero == 3:
        out.append(one("all_gather", param, 2 * p.micro_batches))
    return out


def llm_workload(shape: LlmShape, p: ParallelSpec, *, sync_bytes: float) -> GroupedWorkload:
    """One iteration's group collectives of a transformer of ``shape`` under ``p`` (table above).

    ``sync_bytes`` are the model's gradient bytes ``M`` (the profile's), split into a dense and an expert
    share by the parameter counts of :func:`shape_params`.

    Examples
    --------
    >>> w = llm_workload(llm_shape("gpt3-crux"), ParallelSpec(tp=8, pp=2, dp=4, micro_batches=4),
    ...                  sync_bytes=1.6e9)
    >>> [(c.kind.value, c.op, c.count) for c in w.collectives][:3]
    [('tp', 'all_reduce', 192), ('tp', 'all_reduce', 192), ('pp', 'pipeline_1f1b', 4)]
    >>> w.message_bytes(GroupKind.DP) == 1.5 * 1.6e9 / 16  # fp32 gradients, bf16 parameters
    True
    """
    total, expert = shape_params(shape)
    f_e = expert / total if (p.ep > 1 or shape.moe_layers) and total > 0 else 0.0
    shard = sync_bytes / (p.tp * p.pp)
    dp = _dp(p, shard * (1.0 - f_e), p.dp, False) + _dp(p, shard * f_e / p.ep, p.dp // p.ep, True)
    src = (
        f"{shape.name} ({shape.source}) under tp {p.tp}, pp {p.pp}, dp {p.dp}, ep {p.ep}, zero {p.zero}, "
        f"{p.micro_batches} micro-batches ({p.schedule}"
        + (f", interleaved over vpp {p.vpp}" if p.vpp > 1 else "")
        + (", sequence parallel" if p.sequence_parallel else "")
        + ")"
    )
    return GroupedWorkload(
        parallel=p, collectives=tuple(_blocking(shape, p) + dp), source=src, moe_layers=shape.moe_layers
    )
