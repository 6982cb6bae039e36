"""Per-rank bytes of every collective against the textbook formulas, and schedule invariants."""

from __future__ import annotations

import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import InputError, UnknownNameError
from commsched.workload.collectives import (
    build_collective,
    collective_registry,
    double_binary_tree_parents,
)
from commsched.workload.records import CollectiveSchedule

RANKS = st.integers(min_value=1, max_value=70)
SIZE = st.floats(min_value=1.0, max_value=1e10, allow_nan=False, allow_infinity=False)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


def check_invariants(s: CollectiveSchedule) -> None:
    for step in s.steps:
        assert step.repeat >= 1
        assert step.transfers
        for t in step.transfers:
            assert t.src != t.dst
            assert 0 <= t.src < s.endpoints and 0 <= t.dst < s.endpoints
            assert t.size_bytes >= 0
    for a, b in zip(s.steps, s.steps[1:], strict=False):
        assert (a.transfers, a.label) != (b.transfers, b.label), "consecutive identical steps not merged"
    assert close(sum(s.sent_bytes()), sum(s.received_bytes()))


@given(RANKS, SIZE)
def test_ring(n: int, m: float) -> None:
    s = build_collective("ring", ranks=n, size_bytes=m)
    check_invariants(s)
    assert len(s.steps) == (1 if n > 1 else 0)
    for x in (*s.sent_bytes(), *s.received_bytes()):
        assert close(x, 2 * (n - 1) * m / n)


@given(RANKS, SIZE)
def test_halving_doubling(n: int, m: float) -> None:
    s = build_collective("halving_doubling", ranks=n, size_bytes=m)
    check_invariants(s)
    p = 1 << (n.bit_length() - 1)
    r = n - p
    core = 2 * (p - 1) * m / p
    for rank, (snt, rcv) in enumerate(zip(s.sent_bytes(), s.received_bytes(), strict=True)):
        if rank >= 2 * r:
            assert close(snt, core) and close(rcv, core)
        elif rank % 2 == 0:
            assert close(snt, m) and close(rcv, m)
        else:
            assert close(snt, core + m) and close(rcv, core + m)
    assert s.n_steps == 2 * (p.bit_length() - 1) + (2 if r else 0)


@pytest.mark.parametrize("n", [1, 2, 4, 8, 16, 64])
def test_halving_doubling_power_of_two_is_bandwidth_optimal(n: int) -> None:
    s = build_collective("halving_doubling", ranks=n, size_bytes=1024.0)
    assert all(close(x, 2 * (n - 1) * 1024.0 / n) for x in s.sent_bytes())


@given(st.integers(1, 8), st.integers(1, 9), SIZE)
def test_hierarchical_ring(g: int, h: int, m: float) -> None:
    n = g * h
    s = build_collective("hierarchical_ring", ranks=n, size_bytes=m, ranks_per_host=g)
    check_invariants(s)
    expected = 2 * (g - 1) * m / g + 2 * (h - 1) * m / (g * h)
    assert all(close(x, expected) for x in (*s.sent_bytes(), *s.received_bytes()))
    for step in s.steps:  # intra phases stay inside a host, inter phase stays on a rail
        for t in step.transfers:
            if step.label.startswith("intra"):
                assert t.src // g == t.dst // g
            else:
                assert t.src % g == t.dst % g


def test_hierarchical_ring_rejects_non_divisor() -> None:
    with pytest.raises(InputError, match="ranks_per_host"):
        build_collective("hierarchical_ring", ranks=10, size_bytes=1.0, ranks_per_host=4)


@given(st.integers(1, 200))
def test_double_binary_trees_are_spanning_binary_trees(n: int) -> None:
    for parents in double_binary_tree_parents(n):
        assert sum(q is None for q in parents) == 1
        children = [0] * n
        for r, parent in enumerate(parents):
            seen = set()
            q = parent
            while q is not None:  # reaches the root without a cycle
                assert q not in seen and q != r
                seen.add(q)
                q = parents[q]
            if parent is not None:
                children[parent] += 1
        assert max(children) <= 2


@given(st.integers(1, 70), SIZE, st.integers(1, 6))
def test_double_binary_tree(n: int, m: float, chunks: int) -> None:
    s = build_collective("double_binary_tree", ranks=n, size_bytes=m, chunks=chunks)
    check_invariants(s)
    trees = double_binary_tree_parents(n)
    for r in range(n):
        edges = sum((p[r] is not None) + sum(q == r for q in p) for p in trees)
        assert close(s.sent_bytes()[r], edges * m / 2)
        assert close(s.received_bytes()[r], edges * m / 2)
    assert close(sum(s.sent_bytes()), 2 * (n - 1) * m)


@given(RANKS, SIZE)
def test_alltoall(n: int, m: float) -> None:
    s = build_collective("alltoall", ranks=n, size_bytes=m)
    check_invariants(s)
    assert s.n_steps == n - 1
    assert all(close(x, (n - 1) * m / n) for x in (*s.sent_bytes(), *s.received_bytes()))
    pairs = {(t.src, t.dst) for step in s.steps for t in step.transfers}
    assert len(pairs) == n * (n - 1)


@given(RANKS, SIZE)
def test_grouped_alltoall_sends_to_every_peer_in_one_step(n: int, m: float) -> None:
    s = build_collective("alltoall_grouped", ranks=n, size_bytes=m)
    check_invariants(s)
    assert s.n_steps == (1 if n > 1 else 0)
    assert all(close(x, (n - 1) * m / n) for x in (*s.sent_bytes(), *s.received_bytes()))
    pairs = [(t.src, t.dst) for step in s.steps for t in step.transfers]
    assert len(pairs) == len(set(pairs)) == n * (n - 1)
    assert all(close(t.size_bytes, m / n) for step in s.steps for t in step.transfers)


@given(RANKS, SIZE, st.integers(1, 12))
def test_pipeline(n: int, a: float, mb: int) -> None:
    s = build_collective("pipeline", ranks=n, size_bytes=a, micro_batches=mb)
    check_invariants(s)
    for stage, snt in enumerate(s.sent_bytes()):
        expected = mb * a * ((stage < n - 1) + (stage > 0))
        assert close(snt, expected)
    for step in s.steps:
        assert all(abs(t.src - t.dst) == 1 for t in step.transfers)


@given(RANKS, st.integers(1, 8), SIZE)
def test_ps(n: int, k: int, m: float) -> None:
    s = build_collective("ps", ranks=n, size_bytes=m, servers=k)
    check_invariants(s)
    sent, recv = s.sent_bytes(), s.received_bytes()
    assert s.endpoints == n + k
    for w in range(n):
        assert close(sent[w], m) and close(recv[w], m)
    for j in range(n, n + k):
        assert close(recv[j], n * m / k) and close(sent[j], n * m / k)


@pytest.mark.parametrize("name", collective_registry().names())
def test_single_rank_has_no_transfers(name: str) -> None:
    s = build_collective(name, ranks=1, size_bytes=100.0)
    assert all(t.src != t.dst for step in s.steps for t in step.transfers)
    if name != "ps":
        assert s.steps == ()


@pytest.mark.parametrize("name", collective_registry().names())
@pytest.mark.parametrize("ranks", [0, -3, 2.5, True])
def test_bad_ranks(name: str, ranks: object) -> None:
    with pytest.raises(InputError, match="ranks"):
        build_collective(name, ranks=ranks, size_bytes=1.0)  # type: ignore[arg-type]


@pytest.mark.parametrize("size", [-1.0, math.inf, math.nan, "x"])
def test_bad_size(size: object) -> None:
    with pytest.raises(InputError, match="size_bytes"):
        build_collective("ring", ranks=4, size_bytes=size)  # type: ignore[arg-type]


def test_unknown_name_and_param() -> None:
    with pytest.raises(UnknownNameError) as exc:
        build_collective("butterfly", ranks=4, size_bytes=1.0)
    assert "ring" in str(exc.value) and "halving_doubling" in str(exc.value)
    with pytest.raises(InputError, match="servers"):
        build_collective("ps", ranks=4, size_bytes=1.0, server=2)
    with pytest.raises(InputError, match="servers"):
        build_collective("ps", ranks=4, size_bytes=1.0, servers=0)


@settings(max_examples=5, deadline=None)
@given(st.integers(512, 1024))
def test_schedules_stay_compact(n: int) -> None:
    assert len(build_collective("ring", ranks=n, size_bytes=1e9).steps) == 1
    s = build_collective("double_binary_tree", ranks=n, size_bytes=1e9, chunks=64)
    assert len(s.steps) < 2 * (64 + 2 * n.bit_length())


@given(RANKS, SIZE)
def test_the_parallel_groups_collectives_by_name(n: int, m: float) -> None:
    """The parallel groups' collectives are registered for flat jobs too, with their textbook bytes."""
    for name in ("reduce_scatter", "all_gather"):
        s = build_collective(name, ranks=n, size_bytes=m)
        check_invariants(s)
        assert all(close(x, (n - 1) * m / n) for x in s.sent_bytes())
        assert all(close(x, (n - 1) * m / n) for x in s.received_bytes())
    s = build_collective("broadcast", ranks=n, size_bytes=m)
    check_invariants(s)
    assert [close(x, m if r < n - 1 else 0.0) for r, x in enumerate(s.sent_bytes())] == [True] * n
    assert [close(x, m if r > 0 else 0.0) for r, x in enumerate(s.received_bytes())] == [True] * n


@given(st.integers(1, 12), st.integers(1, 16), SIZE)
def test_pipeline_1f1b_by_name(n: int, mb: int, a: float) -> None:
    s = build_collective("pipeline_1f1b", ranks=n, size_bytes=a, micro_batches=mb)
    check_invariants(s)
    for stage, sent in enumerate(s.sent_bytes()):
        want = mb * a * ((stage < n - 1) + (stage > 0))
        assert close(sent, want), (stage, sent, want)
