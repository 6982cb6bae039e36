"""Rank layout of the parallel groups, and the group collectives built from a model's shape."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commsched.workload.llm import llm_shape, llm_workload
from commsched.workload.parallel import GroupCollective, GroupKind, ParallelSpec, group_ranks


@st.composite
def specs(draw: st.DrawFn) -> ParallelSpec:
    tp, pp = draw(st.sampled_from([1, 2, 4, 8])), draw(st.integers(1, 4))
    ep = draw(st.sampled_from([1, 2, 4]))
    dp = ep * draw(st.integers(1, 4))
    order = draw(st.sampled_from(["tp-dp-pp", "tp-pp-dp"]))
    return ParallelSpec(tp=tp, pp=pp, dp=dp, ep=ep, order=order)


def _coll(kind: GroupKind, expert: bool = False) -> GroupCollective:
    return GroupCollective(kind=kind, op="all_reduce", group_size=1, size_bytes=1.0, expert=expert)


@given(specs())
def test_groups_of_each_kind_partition_the_ranks(p: ParallelSpec) -> None:
    sizes = {GroupKind.TP: p.tp, GroupKind.PP: p.pp, GroupKind.DP: p.dp, GroupKind.EP: p.ep}
    for kind, size in sizes.items():
        groups = group_ranks(p, _coll(kind))
        flat = sorted(r for g in groups for r in g)
        assert flat == list(range(p.ranks)) and all(len(g) == size for g in groups)
    expert = group_ranks(p, _coll(GroupKind.DP, expert=True))
    assert sorted(r for g in expert for r in g) == list(range(p.ranks))
    assert all(len(g) == p.dp // p.ep for g in expert)
    # TP innermost: a TP group is tp consecutive ranks starting at a multiple of tp
    assert all(
        g == tuple(range(g[0], g[0] + p.tp)) and g[0] % p.tp == 0 for g in group_ranks(p, _coll(GroupKind.TP))
    )
    # an EP group and an expert-DP group share at most one rank (experts split, then replicated)
    for eg in group_ranks(p, _coll(GroupKind.EP)):
        for xg in expert:
            assert len(set(eg) & set(xg)) <= 1


@pytest.mark.parametrize(
    ("zero", "dp_shards"),
    [
        (0, 1.0),  # Megatron DDP: one all-reduce of the fp32 gradients
        (1, 1.0 + 0.5),  # Megatron's distributed optimizer: fp32 reduce-scatter, bf16 all-gather
        (2, 1.0 + 0.5),
        (3, 0.5 + 0.5 + 2 * 4 * 0.5),  # DeepSpeed ZeRO-3: everything in bf16, + 2 m gathers
    ],
)
def test_zero_stage_sets_the_data_parallel_collectives(zero: int, dp_shards: float) -> None:
    p = ParallelSpec(tp=2, pp=2, dp=4, zero=zero, micro_batches=4)
    w = llm_workload(llm_shape("gpt3-crux"), p, sync_bytes=8e9)  # type: ignore[arg-type]
    shard = 8e9 / (2 * 2)  # the stage's fp32 gradient bytes on one rank: 4 bytes per parameter
    assert w.message_bytes(GroupKind.DP) == pytest.approx(dp_shards * shard)
    assert all(not c.blocking for c in w.collectives if c.kind is GroupKind.DP)


def test_shape_built_blocking_collectives_per_iteration() -> None:
    shape = llm_shape("gpt-13b")
    assert shape is not None
    p = ParallelSpec(tp=8, pp=4, dp=2, micro_batches=8)
    w = llm_workload(shape, p, sync_bytes=1e9)
    a = (8 / 8) * 2048 * 5120 * 2  # one micro-batch of one sequence, bf16
    # TP: 4 all-reduces per layer per micro-batch, 40 layers over 4 stages, summed over the stages
    assert w.message_bytes(GroupKind.TP) == pytest.approx(4 * 40 * 8 * a)
    # PP: 2 (pp - 1) boundary directions, m sends of a each
    assert w.message_bytes(GroupKind.PP) == pytest.approx(2 * 3 * 8 * a)
    assert w.message_bytes(GroupKind.EP) == 0.0


@pytest.mark.parametrize(
    ("grad", "param", "dp_shards"), [("bf16", "", 0.5 + 0.5), ("fp32", "fp32", 2.0), ("", "fp8", 1.25)]
)
def test_dtypes_are_overridable_per_job(grad: str, param: str, dp_shards: float) -> None:
    p = ParallelSpec(tp=2, pp=2, dp=4, zero=1, micro_batches=4, grad_dtype=grad, param_dtype=param)
    w = llm_workload(llm_shape("gpt3-crux"), p, sync_bytes=8e9)  # type: ignore[arg-type]
    assert w.message_bytes(GroupKind.DP) == pytest.approx(dp_shards * 8e9 / 4)
