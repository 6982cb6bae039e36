"""Closed-form iteration time of a grouped job alone, against hand calculations and a 1F1B brute force."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from commsched.workload.grouped import GroupedTimes, grouped_iteration_s, grouped_profile
from commsched.workload.parallel import GroupedWorkload, ParallelSpec
from commsched.workload.records import ModelProfile


@pytest.mark.parametrize(
    ("times", "expected"),
    [
        # dense TP x DP, no pipeline: B = 1 + 0.2 = 1.2; the DP stream ends at 0.5 x 1.2 + 0.9 = 1.5
        (GroupedTimes(compute_s=1.0, tp_s=0.2, dp_s=0.9, overlap=0.5), 1.5),
        # TP x PP x DP: B = (8 + 3) / 8 x (2 + 0.4) + 2 x 3 x 0.05 = 3.3 + 0.3 = 3.6; the DP starts half
        # into the last micro-batch's 2.4 / 8 = 0.3 s, at 3.6 - 0.15 = 3.45, and ends at 3.75
        (
            GroupedTimes(
                compute_s=2.0, stages=4, micro_batches=8, tp_s=0.4, pp_send_s=0.05, dp_s=0.3, overlap=0.5
            ),
            3.75,
        ),
        # MoE with EP: B = (4 + 1) / 4 x (1 + 0.2 + 0.6) + 2 x 0.1 = 2.45; the DP starts 0.75 x 1.8 / 4 =
        # 0.3375 before, at 2.1125, and ends at 5.1125
        (
            GroupedTimes(
                compute_s=1.0, stages=2, micro_batches=4, tp_s=0.2, ep_s=0.6, pp_send_s=0.1, dp_s=3.0,
                overlap=0.25,
            ),
            5.1125,
        ),
        # interleaved over 2 chunks: B = (2 x 4 + 1) / 8 x 1.8 + 2 x 0.1 = 2.225; no DP
        (
            GroupedTimes(
                compute_s=1.0, stages=2, micro_batches=4, chunks=2, tp_s=0.2, ep_s=0.6, pp_send_s=0.1
            ),
            2.225,
        ),
        # a DP stream paused by a span it starts inside: B = 1 + 1 = 2 (TP across hosts, all shared);
        # the DP starts at 0.5 x 2 = 1 (m = 1), waits out the span [1, 2], ends at 2.5
        (
            GroupedTimes(compute_s=1.0, tp_s=1.0, dp_s=0.5, overlap=0.5, dp_wait_s=1.0),
            2.5,
        ),
    ],
)  # fmt: skip
def test_closed_form_against_hand_calculations(times: GroupedTimes, expected: float) -> None:
    assert grouped_iteration_s(times) == pytest.approx(expected, rel=1e-12)


def _brute_1f1b_makespan(p: int, m: int, f: float, b: float) -> float:
    """Event-by-event 1F1B: each stage runs its ops in order once their inputs exist."""
    orders = []
    for s in range(p):
        warm = min(p - s - 1, m)
        ops = [("F", i) for i in range(warm)]
        k_f, k_b = warm, 0
        while k_f < m:
            ops += [("F", k_f), ("B", k_b)]
            k_f, k_b = k_f + 1, k_b + 1
        ops += [("B", i) for i in range(k_b, m)]
        orders.append(ops)
    end: dict[tuple[str, int, int], float] = {}
    clock = [0.0] * p
    pos = [0] * p
    while any(pos[s] < len(orders[s]) for s in range(p)):
        for s in range(p):
            while pos[s] < len(orders[s]):
                kind, i = orders[s][pos[s]]
                need = [("F", s - 1, i)] if kind == "F" and s > 0 else []
                if kind == "B":
                    need = [("F", s, i)] + ([("B", s + 1, i)] if s < p - 1 else [])
                if any(n not in end for n in need):
                    break
                start = max([clock[s]] + [end[n] for n in need])
                clock[s] = end[(kind, s, i)] = start + (f if kind == "F" else b)
                pos[s] += 1
    return max(end.values())


@given(st.integers(1, 6), st.integers(1, 10), st.floats(0.1, 3.0), st.floats(0.1, 3.0))
def test_bubble_equals_a_1f1b_brute_force(p: int, m: int, f: float, b: float) -> None:
    # compute of one GPU without the bubble: m micro-batches of f + b
    times = GroupedTimes(compute_s=m * (f + b), stages=p, micro_batches=m)
    assert math.isclose(grouped_iteration_s(times), _brute_1f1b_makespan(p, m, f, b), rel_tol=1e-9)


def test_grouped_profile_splits_and_stretches_the_compute() -> None:
    prof = ModelProfile(name="x", gpu="g", compute_s=12.0, sync_bytes=1e9, overlap=0.5, source="src")
    par = ParallelSpec(tp=2, pp=3, dp=1, micro_batches=6)
    work = GroupedWorkload(parallel=par, collectives=(), source="w")
    out = grouped_profile(prof, work)
    # 12 / 6 GPUs = 2 s; 1F1B over 3 stages and 6 micro-batches: x (6 + 2) / 6
    assert out.compute_s == pytest.approx(2.0 * 8 / 6)
    assert "bubble" in out.source and "src" in out.source
