"""The collectives of parallel groups: ring reduce-scatter / all-gather, chain broadcast, 1F1B sends."""

from __future__ import annotations

import math

from hypothesis import given
from hypothesis import strategies as st

from commsched.workload.collectives.sharded import (
    all_gather_ring,
    broadcast_chain,
    one_f_one_b_order,
    pipeline_1f1b,
    reduce_scatter_ring,
)

RANKS = st.integers(1, 24)
SIZE = st.floats(0.0, 1e10, allow_nan=False)


def close(a: float, b: float) -> bool:
    return math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-6)


@given(RANKS, SIZE)
def test_ring_shards_send_n_minus_1_over_n(n: int, m: float) -> None:
    for build in (reduce_scatter_ring, all_gather_ring):
        s = build(ranks=n, size_bytes=m)
        assert all(close(x, (n - 1) * m / n) for x in s.sent_bytes())
        assert all(close(x, (n - 1) * m / n) for x in s.received_bytes())
        assert all(t.dst == (t.src + 1) % n for step in s.steps for t in step.transfers)


@given(RANKS, SIZE)
def test_reduce_scatter_then_all_gather_is_a_ring_all_reduce(n: int, m: float) -> None:
    # Patarasuk & Yuan: a ring all-reduce is a reduce-scatter and an all-gather: 2 (n-1) M / n per rank
    rs, ag = reduce_scatter_ring(ranks=n, size_bytes=m), all_gather_ring(ranks=n, size_bytes=m)
    for a, b in zip(rs.sent_bytes(), ag.sent_bytes(), strict=True):
        assert close(a + b, 2 * (n - 1) * m / n)


@given(RANKS, SIZE)
def test_broadcast_chain_reaches_every_rank_once(n: int, m: float) -> None:
    s = broadcast_chain(ranks=n, size_bytes=m)
    recv = s.received_bytes()
    assert close(recv[0], 0.0)
    assert all(close(r, m) for r in recv[1:])


@given(st.integers(1, 8), st.integers(1, 12))
def test_1f1b_order_counts_and_in_flight_bound(p: int, m: int) -> None:
    for s in range(p):
        ops = one_f_one_b_order(p, m, s)
        assert sorted(i for k, i in ops if k == "F") == list(range(m))
        assert sorted(i for k, i in ops if k == "B") == list(range(m))
        in_flight = peak = 0
        for kind, _ in ops:
            in_flight += 1 if kind == "F" else -1
            peak = max(peak, in_flight)
            assert in_flight >= 0
        # 1F1B keeps at most p - s micro-batches' activations on stage s (Narayanan et al. §2.2)
        assert peak <= min(p - s, m)


@given(st.integers(1, 8), st.integers(1, 10), st.floats(0.0, 1e9, allow_nan=False))
def test_1f1b_sends_m_activations_per_boundary_and_direction(p: int, m: int, a: float) -> None:
    s = pipeline_1f1b(ranks=p, size_bytes=a, micro_batches=m)
    sent = s.sent_bytes()
    for stage in range(p):
        expected = m * a * ((stage < p - 1) + (stage > 0))
        assert close(sent[stage], expected)
    assert all(abs(t.src - t.dst) == 1 for step in s.steps for t in step.transfers)
