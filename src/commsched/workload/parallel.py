"""Parallel groups of a training job: tensor (TP), pipeline (PP), data (DP) and expert (EP) parallelism.

A grouped job's ``tp x pp x dp`` ranks are laid out as Megatron-LM lays them out (``order="tp-dp-pp"``):
TP innermost, then DP, PP outermost::

    rank(t, d, s) = t + tp * (d + dp * s)        t < tp, d < dp, s < pp

so that, with the job's GPUs in placement order (host by host), a TP group fills consecutive GPUs of one
host whenever ``tp`` divides the GPUs per host. ``order="tp-pp-dp"`` puts PP inside DP instead. EP groups
are ``ep`` consecutive DP ranks of one stage and one TP index (``ep`` divides ``dp``); the experts'
gradients are synchronised over the ``dp / ep`` ranks holding the same experts (expert data parallelism).

A :class:`GroupedWorkload` lists the collectives one rank's groups run per iteration
(:class:`GroupCollective`: kind, operation, group size, bytes, count, stage, whether it blocks the
compute). They come from a model's shape (:mod:`commsched.workload.llm`) or from a real log
(:mod:`commsched.workload.traces.aicb`).

References
----------
.. [1] D. Narayanan et al., "Efficient large-scale language model training on GPU clusters using
   Megatron-LM", SC 2021, §2-3 (TP, PP with 1F1B, DP; rank order).
.. [2] vClos paper (``papers/vclos-paper.txt``), §2: the traffic of DP, PP, TP and EP.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

__all__ = [
    "GROUP_OPS",
    "GroupCollective",
    "GroupKind",
    "GroupedWorkload",
    "ParallelSpec",
    "group_ranks",
    "parallel_problems",
    "rank_of",
]

#: operations a group collective may run (``send_forward``/``send_backward``: pipeline point-to-point)
GROUP_OPS = (
    "all_reduce",
    "reduce_scatter",
    "all_gather",
    "broadcast",
    "all_to_all",
    "pipeline_1f1b",
    "send_forward",
    "send_backward",
)
ORDERS = ("tp-dp-pp", "tp-pp-dp")
#: how the EP all-to-alls run: ``grouped`` (NCCL's grouped send/recv, every peer at once) or ``pairwise``
ALLTOALLS = ("grouped", "pairwise")
SCHEDULES = ("1f1b",)


class GroupKind(StrEnum):
    """The parallel group a collective runs in."""

    TP = "tp"
    PP = "pp"
    DP = "dp"
    EP = "ep"


@dataclass(frozen=True, slots=True, kw_only=True)
class ParallelSpec:
    """How a job splits its model and batch over its GPUs.

    Attributes
    ----------
    tp, pp, dp, ep
        Tensor-, pipeline-, data- and expert-parallel degrees (``tp*pp*dp`` = GPUs, ``ep`` divides ``dp``).
    zero
        ZeRO stage of the data-parallel synchronisation: 0 all-reduce; 1 and 2 reduce-scatter of the
        gradients and all-gather of the parameters (Megatron's distributed optimizer); 3 adds an
        all-gather of the parameters in every micro-batch's forward and backward pass.
    micro_batches
        Micro-batches ``m`` per iteration (the DP replica's batch is split into ``m``).
    schedule
        Pipeline schedule (``1f1b``).
    vpp
        Virtual pipeline stages per GPU: ``vpp > 1`` is Megatron-LM's interleaved 1F1B (each GPU holds
        ``vpp`` chunks of ``layers / (pp vpp)`` layers; ``--num-layers-per-virtual-pipeline-stage``).
    alltoall
        How the all-to-alls run: ``grouped`` (default: NCCL's grouped send/recv to every peer at once, as
        ``all_to_all_single`` runs) or ``pairwise`` (``n - 1`` rounds one after another).
    sp
        Sequence parallelism (Megatron-LM's ``--sequence-parallel``): the TP all-reduces become
        reduce-scatters and all-gathers, the pipeline sends carry ``1 / tp`` of the activations per rank.
        ``None``: on for MoE with ``tp > 1`` and ``ep > 1`` (Megatron-LM refuses EP with TP without it),
        off otherwise.
    grad_dtype, param_dtype
        The dtypes the DP collectives reduce gradients and gather parameters in (``fp32``, ``bf16``,
        ``fp16``, ``fp8``; empty: the framework's default for the ZeRO stage,
        :mod:`commsched.workload.precision`).
    order
        Rank order, innermost first (``tp-dp-pp``: Megatron's default; ``tp-pp-dp``).

    Examples
    --------
    >>> ParallelSpec(tp=8, pp=2, dp=4).ranks
    64
    """

    tp: int = 1
    pp: int = 1
    dp: int = 1
    ep: int = 1
    zero: int = 1
    micro_batches: int = 1
    schedule: str = "1f1b"
    order: str = "tp-dp-pp"
    vpp: int = 1
    alltoall: str = "grouped"
    grad_dtype: str = ""
    param_dtype: str = ""
    sp: bool | None = None

    @property
    def ranks(self) -> int:
        return self.tp * self.pp * self.dp

    @property
    def sequence_parallel(self) -> bool:
        """Whether the job runs sequence parallelism: ``sp``, or where unset, Megatron-LM's rule (on for
        MoE with TP and EP, which Megatron requires; off otherwise)."""
        return self.sp if self.sp is not None else (self.tp > 1 and self.ep > 1)


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupCollective:
    """``count`` collectives of one kind per iteration, as one rank of each such group runs them.

    ``size_bytes`` follows NCCL's and AICB's ``msg_size``: the buffer of an all-reduce or broadcast, the
    input of a reduce-scatter, the output of an all-gather, one rank's send buffer of an all-to-all, one
    micro-batch's activation of a pipeline send. ``stage``: the pipeline stage whose groups run it
    (``None``: every stage). ``blocking``: the compute waits for it (TP, PP, EP); DP is overlapped.
    """

    kind: GroupKind
    op: str
    group_size: int
    size_bytes: float
    count: int = 1
    stage: int | None = None
    blocking: bool = True
    expert: bool = False  # a DP collective over the expert-data-parallel groups (dp / ep ranks)
    vpp: int = 1  # a pipeline's model chunks per stage (interleaved 1F1B where above 1)

    @property
    def message_bytes(self) -> float:
        """The message bytes these collectives list per iteration: ``count x size_bytes``; a 1F1B pipeline
        (``count`` micro-batches) lists every send of its ``2 (pp - 1)`` boundary directions, interleaved
        over ``vpp`` chunks its ``2 (pp vpp - 1)`` chunk boundaries."""
        if self.op == "pipeline_1f1b":
            return 2.0 * (self.group_size * self.vpp - 1) * self.count * self.size_bytes
        return self.count * self.size_bytes


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupedWorkload:
    """A job's parallelism and the group collectives of one iteration, with their provenance.

    Examples
    --------
    >>> w = GroupedWorkload(
    ...     parallel=ParallelSpec(tp=2, dp=2),
    ...     collectives=(GroupCollective(kind=GroupKind.TP, op="all_reduce", group_size=2, size_bytes=8.0,
    ...                                  count=3),),
    ...     source="doc")
    >>> w.message_bytes(GroupKind.TP), w.message_bytes(GroupKind.DP)
    (24.0, 0.0)
    """

    parallel: ParallelSpec
    collectives: tuple[GroupCollective, ...]
    source: str
    moe_layers: int | None = None  # the model's MoE layers (None: unknown, e.g. a log)
    #: kinds of group the layout implies (``dp > 1``, ``pp > 1``) that the log lists no row of
    absent: tuple[GroupKind, ...] = ()

    @property
    def bubble_factor(self) -> float:
        """How much the pipeline stretches one GPU's compute: ``1 + (pp - 1) / (vpp m)`` (1F1B's bubble
        ``(p - 1) / m``, divided by ``v`` under the interleaved schedule; Narayanan et al., SC 2021, §2.2).

        Examples
        --------
        >>> GroupedWorkload(parallel=ParallelSpec(tp=8, pp=2, dp=4, micro_batches=4), collectives=(),
        ...                 source="doc").bubble_factor
        1.25
        """
        vm = self.parallel.vpp * self.parallel.micro_batches
        return (vm + self.parallel.pp - 1) / vm

    def message_bytes(self, kind: GroupKind) -> float:
        """Listed message bytes of one kind per iteration (summed over stages and counts)."""
        return float(sum(c.message_bytes for c in self.collectives if c.kind is kind))


def rank_of(p: ParallelSpec, *, t: int, d: int, s: int) -> int:
    """The global rank of TP index ``t``, DP index ``d`` and stage ``s`` under ``p.order``.

    Examples
    --------
    >>> p = ParallelSpec(tp=2, pp=2, dp=3)
    >>> rank_of(p, t=1, d=2, s=1), rank_of(ParallelSpec(tp=2, pp=2, dp=3, order="tp-pp-dp"), t=1, d=2, s=1)
    (11, 11)
    >>> rank_of(p, t=0, d=1, s=0), rank_of(ParallelSpec(tp=2, pp=2, dp=3, order="tp-pp-dp"), t=0, d=1, s=0)
    (2, 4)
    """
    if p.order == "tp-pp-dp":
        return t + p.tp * (s + p.pp * d)
    return t + p.tp * (d + p.dp * s)


def group_ranks(p: ParallelSpec, c: GroupCollective) -> tuple[tuple[int, ...], ...]:
    """The rank groups (each in group order) that run collective ``c`` concurrently.

    TP: the ``tp`` ranks of one ``(d, s)``; DP: the ``dp`` ranks of one ``(t, s)`` (expert DP: the
    ``dp/ep`` ranks ``d = e, e + ep, ...``); EP: ``ep`` consecutive DP indices; PP: the ``pp`` stages of
    one ``(t, d)``. Only the groups of ``c.stage`` where it is set (PP sends: the chains' pairs).

    Examples
    --------
    >>> p = ParallelSpec(tp=2, pp=1, dp=4, ep=2)
    >>> group_ranks(p, GroupCollective(kind=GroupKind.EP, op="all_to_all", group_size=2, size_bytes=1.0))
    ((0, 2), (4, 6), (1, 3), (5, 7))
    """
    stages = range(p.pp) if c.stage is None else (c.stage,)
    out: list[tuple[int, ...]] = []
    if c.kind is GroupKind.TP:
        out = [tuple(rank_of(p, t=t, d=d, s=s) for t in range(p.tp)) for s in stages for d in range(p.dp)]
    elif c.kind is GroupKind.PP:
        out = [
            tuple(rank_of(p, t=t, d=d, s=s) for s in range(p.pp)) for d in range(p.dp) for t in range(p.tp)
        ]
    elif c.kind is GroupKind.EP:
        out = [
            tuple(rank_of(p, t=t, d=k * p.ep + e, s=s) for e in range(p.ep))
            for s in stages
            for t in range(p.tp)
            for k in range(p.dp // p.ep)
        ]
    elif c.expert:
        out = [
            tuple(rank_of(p, t=t, d=e + p.ep * k, s=s) for k in range(p.dp // p.ep))
            for s in stages
            for t in range(p.tp)
            for e in range(p.ep)
        ]
    else:
        out = [tuple(rank_of(p, t=t, d=d, s=s) for d in range(p.dp)) for s in stages for t in range(p.tp)]
    return tuple(out)


def _int_problems(p: ParallelSpec) -> list[tuple[str, str, str]]:
    out = []
    for name in ("tp", "pp", "dp", "ep", "micro_batches", "vpp"):
        v = getattr(p, name)
        if isinstance(v, bool) or not isinstance(v, int) or v < 1:
            out.append((name, f"{name} = {v!r}", "an integer >= 1"))
    if p.zero not in (0, 1, 2, 3):
        out.append(("zero", f"zero = {p.zero!r}", "0, 1, 2 or 3"))
    if p.schedule not in SCHEDULES:
        out.append(("schedule", f"unknown schedule {p.schedule!r}", "one of " + ", ".join(SCHEDULES)))
    for name in ("grad_dtype", "param_dtype"):
        v = getattr(p, name)
        if v and v not in ("fp32", "bf16", "fp16", "fp8"):
            out.append((name, f"unknown dtype {v!r}", "one of fp32, bf16, fp16, fp8"))
    if p.alltoall not in ALLTOALLS:
        out.append(("alltoall", f"unknown all-to-all {p.alltoall!r}", "one of " + ", ".join(ALLTOALLS)))
    if p.order not in ORDERS:
        out.append(("order", f"unknown rank order {p.order!r}", "one of " + ", ".join(ORDERS)))
    return out


def parallel_problems(p: ParallelSpec, *, gpus: int, moe_layers: int | None) -> list[tuple[str, str, str]]:
    """Every problem of a parallel spec for a job of ``gpus`` GPUs: ``(field, what, expected)`` triples.

    ``moe_layers``: the model's MoE layers (``None``: unknown, e.g. a logged workload without EP).

    Examples
    --------
    >>> parallel_problems(ParallelSpec(tp=8, pp=2, dp=5), gpus=64, moe_layers=0)
    [('dp', "tp x pp x dp = 8 x 2 x 5 = 80, not the job's 64 GPUs", 'tp * pp * dp == gpus')]
    >>> parallel_problems(ParallelSpec(dp=4, ep=3), gpus=4, moe_layers=2)[0][1]
    'ep = 3 does not divide dp = 4'
    >>> parallel_problems(ParallelSpec(dp=4, ep=2), gpus=4, moe_layers=0)[0][1]
    'ep = 2 for a model without MoE layers'
    """
    out = _int_problems(p)
    if out:
        return out
    if p.ranks != gpus:
        out.append(
            (
                "dp",
                f"tp x pp x dp = {p.tp} x {p.pp} x {p.dp} = {p.ranks}, not the job's {gpus} GPUs",
                "tp * pp * dp == gpus",
            )
        )
    if p.dp % p.ep:
        out.append(("ep", f"ep = {p.ep} does not divide dp = {p.dp}", "a divisor of dp"))
    if p.sp is False and p.tp > 1 and p.ep > 1:
        out.append(
            (
                "sp",
                "sp: false with tp > 1 and ep > 1",
                "sp: true (Megatron-LM needs sequence parallelism for EP with TP)",
            )
        )
    if p.vpp > 1 and p.pp < 2:
        out.append(("vpp", f"vpp = {p.vpp} without a pipeline (pp = {p.pp})", "vpp: 1, or pp >= 2"))
    if p.vpp > 1 and p.micro_batches % p.pp:
        out.append(
            (
                "micro_batches",
                f"{p.micro_batches} micro-batches under the interleaved schedule with pp = {p.pp}",
                "a multiple of pp (Megatron-LM's interleaved 1F1B)",
            )
        )
    if p.ep > 1 and moe_layers is not None and moe_layers < 1:
        out.append(("ep", f"ep = {p.ep} for a model without MoE layers", "ep: 1, or a model with MoE layers"))
    return out
