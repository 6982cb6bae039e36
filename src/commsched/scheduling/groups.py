"""A grouped job's per-iteration transfers: every group's collectives on the job's GPUs.

Rank ``r`` of a grouped job runs on ``gpus[r]`` (placement order, host by host), so the rank layout of
:mod:`commsched.workload.parallel` (TP innermost) keeps a TP group inside one host when ``tp`` divides
the GPUs per host. Each :class:`~commsched.workload.parallel.GroupCollective` runs in all its groups at
once: its schedule (ring all-reduce, ring reduce-scatter/all-gather, chain broadcast, all-to-all as
NCCL's grouped send/recv to every peer at once, or in pairwise rounds with ``alltoall: pairwise``, 1F1B
sends) is built over one group's ranks and the groups' transfers of each step form
one step, routed transfer by transfer (an all-to-all is not a ring). Collectives of one kind, operation,
group size and stage are merged into one of their summed bytes (per-rank bytes of these algorithms are
linear in the size). Blocking steps (TP, EP, PP) come first, in the workload's order, then the DP ones.

Fabric bytes: a transfer between GPUs of two hosts leaves a NIC once;
:func:`commsched.scheduling.traffic.fabric_bytes_by_kind` sums those per group kind.
"""

from __future__ import annotations

from dataclasses import dataclass

from commsched.workload import CollectiveSchedule, Step, Transfer
from commsched.workload.collectives.allreduce import ring_allreduce
from commsched.workload.collectives.exchange import grouped_alltoall, pairwise_alltoall
from commsched.workload.collectives.sharded import (
    all_gather_ring,
    broadcast_chain,
    pipeline_1f1b,
    reduce_scatter_ring,
)
from commsched.workload.parallel import GroupCollective, GroupedWorkload, GroupKind, group_ranks

__all__ = ["KINDS", "GroupStep", "grouped_schedule", "grouped_steps"]

#: the group kinds, in the order the per-job results list them
KINDS: tuple[str, ...] = tuple(k.value for k in GroupKind)

_BUILDERS = {
    "all_reduce": ring_allreduce,
    "reduce_scatter": reduce_scatter_ring,
    "all_gather": all_gather_ring,
    "broadcast": broadcast_chain,
    "all_to_all": pairwise_alltoall,
}


@dataclass(frozen=True, slots=True, kw_only=True)
class GroupStep:
    """One step of a grouped job's iteration over global ranks, with its group kind and whether the
    compute waits for it."""

    kind: GroupKind
    blocking: bool
    step: Step


def _merged(work: GroupedWorkload) -> list[GroupCollective]:
    """Collectives of one (kind, op, group size, stage, expert) merged into one of the summed bytes."""
    out: dict[tuple[object, ...], GroupCollective] = {}
    for c in work.collectives:
        if c.op == "recv":
            continue
        key: tuple[object, ...] = (c.kind, c.op, c.group_size, c.stage, c.expert, c.blocking)
        if c.op == "pipeline_1f1b":
            out[(*key, c.size_bytes, c.count, c.vpp)] = c
            continue
        prev = out.get(key)
        total = c.message_bytes + (prev.message_bytes if prev is not None else 0.0)
        out[key] = GroupCollective(
            kind=c.kind, op=c.op, group_size=c.group_size, size_bytes=total, count=1, stage=c.stage,
            blocking=c.blocking, expert=c.expert,
        )  # fmt: skip
    ordered = list(out.values())
    return [c for c in ordered if c.blocking] + [c for c in ordered if not c.blocking]


def _local_schedule(c: GroupCollective, alltoall: str = "grouped") -> CollectiveSchedule:
    if c.op == "all_to_all" and alltoall == "grouped":  # NCCL: every peer at once
        return grouped_alltoall(ranks=c.group_size, size_bytes=c.size_bytes)
    if c.op == "pipeline_1f1b":
        return pipeline_1f1b(ranks=c.group_size, size_bytes=c.size_bytes, micro_batches=c.count, chunks=c.vpp)
    if c.op in ("send_forward", "send_backward"):
        s = c.stage or 0
        dst = s + 1 if c.op == "send_forward" else s - 1
        steps: tuple[Step, ...] = ()
        if 0 <= dst < c.group_size and c.size_bytes > 0:
            steps = (Step(transfers=(Transfer(src=s, dst=dst, size_bytes=c.size_bytes),), label=c.op),)
        return CollectiveSchedule(algorithm=c.op, ranks=c.group_size, size_bytes=c.size_bytes, steps=steps)
    return _BUILDERS[c.op](ranks=c.group_size, size_bytes=c.size_bytes)


def grouped_steps(work: GroupedWorkload) -> tuple[GroupStep, ...]:
    """The steps of one iteration of a grouped job, over its global ranks.

    Examples
    --------
    Two TP pairs (``tp = 2, dp = 2``) all-reduce 8 bytes at once: one step of 4 transfers, twice:

    >>> from commsched.workload.parallel import ParallelSpec
    >>> w = GroupedWorkload(parallel=ParallelSpec(tp=2, dp=2), source="doc", collectives=(
    ...     GroupCollective(kind=GroupKind.TP, op="all_reduce", group_size=2, size_bytes=8.0),))
    >>> [(s.kind.value, s.step.repeat, [(t.src, t.dst) for t in s.step.transfers]) for s in grouped_steps(w)]
    [('tp', 2, [(0, 1), (1, 0), (2, 3), (3, 2)])]
    """
    out: list[GroupStep] = []
    for bucket in _stage_buckets(_merged(work)):
        per_stage = [_global_steps(work, c) for c in bucket]
        kind, blocking = bucket[0].kind, bucket[0].blocking
        if len({tuple((st.repeat, st.label) for st in steps) for steps in per_stage}) > 1:
            # stages whose schedules differ run theirs one after another
            out += [GroupStep(kind=kind, blocking=blocking, step=st) for steps in per_stage for st in steps]
            continue
        for parts in zip(*per_stage, strict=True):  # the stages' k-th steps at the same time
            step = Step(
                transfers=tuple(t for st in parts for t in st.transfers),
                repeat=parts[0].repeat,
                label=parts[0].label,
            )
            out.append(GroupStep(kind=kind, blocking=blocking, step=step))
    return tuple(out)


def _global_steps(work: GroupedWorkload, c: GroupCollective) -> list[Step]:
    """The steps of collective ``c`` in all its groups at once, over the job's global ranks."""
    groups = group_ranks(work.parallel, c)
    return [
        Step(
            transfers=tuple(
                Transfer(src=g[t.src], dst=g[t.dst], size_bytes=t.size_bytes)
                for g in groups
                for t in st.transfers
            ),
            repeat=st.repeat,
            label=st.label,
        )
        for st in _local_schedule(c, work.parallel.alltoall).steps
    ]


def _stage_buckets(colls: list[GroupCollective]) -> list[list[GroupCollective]]:
    """The collectives that differ only by their stage, together: the stages run them at the same time."""
    buckets: dict[tuple[object, ...], list[GroupCollective]] = {}
    for k, c in enumerate(colls):
        key: tuple[object, ...] = (c.kind, c.op, c.group_size, c.expert, c.blocking)
        if c.stage is None or c.op == "pipeline_1f1b":
            key += (k,)  # on its own
        buckets.setdefault(key, []).append(c)
    return list(buckets.values())


def grouped_schedule(work: GroupedWorkload) -> CollectiveSchedule:
    """All steps of one iteration as one schedule over the job's ranks (for its connections)."""
    steps = tuple(g.step for g in grouped_steps(work))
    return CollectiveSchedule(algorithm="grouped", ranks=work.parallel.ranks, size_bytes=0.0, steps=steps)
