"""Properties of the policies: Mercury's Theorem 1, ByteScheduler's limits, packet-level convergence."""

from __future__ import annotations

import itertools

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.intrajob import (
    PartitionConfig,
    bytescheduler,
    iteration_time,
    make_problem,
    mercury,
    mercury_no_preemption,
    mercury_packets,
    oracle_time,
    wfbp,
)

times = st.floats(min_value=0.0, max_value=0.05, allow_nan=False)
sizes = st.floats(min_value=0.0, max_value=2e8, allow_nan=False)


@st.composite
def problems(draw):
    n = draw(st.integers(min_value=1, max_value=8))
    return make_problem(
        bandwidth_bps=draw(st.floats(min_value=1e9, max_value=1e11)),
        size_bytes=draw(st.lists(sizes, min_size=n, max_size=n)),
        bp_s=draw(st.lists(times, min_size=n, max_size=n)),
        fp_s=draw(st.lists(times, min_size=n, max_size=n)),
        upd_s=draw(st.lists(st.floats(min_value=0, max_value=0.005), min_size=n, max_size=n)),
    )


configs = st.builds(
    PartitionConfig,
    partition_bytes=st.floats(min_value=5e6, max_value=3e8),
    credit_bytes=st.one_of(st.none(), st.floats(min_value=5e6, max_value=1e9)),
    startup_s=st.floats(min_value=0, max_value=2e-3),
    priority=st.booleans(),
)


@settings(max_examples=150, deadline=None)
@given(problems(), configs)
def test_theorem1_mercury_is_never_slower(p, cfg):
    # Theorem 1 (fluid packets, chain of computations, instant aggregation, optimizer on the workers):
    # Mercury's iteration time is the minimum over policies, and never below the oracle (Eq. 9).
    ours = iteration_time(p, mercury)
    tol = 1e-9 * max(1.0, ours)
    assert oracle_time(p) <= ours + tol
    others = [wfbp, mercury_no_preemption, bytescheduler(cfg), mercury_packets(5e6)]
    for pol in others:
        assert ours <= iteration_time(p, pol) + tol


def vgg_like():
    # Large tensors at the back (FC layers), small ones at the front, like VGG-16 (Mercury Fig. 10a).
    size = np.array([2e6, 3e6, 5e6, 9e6, 9e6, 2e7, 4e8, 6.4e7, 1.6e7])
    return make_problem(
        bandwidth_bps=20e9,
        size_bytes=size,
        bp_s=np.full(size.size, 0.02),
        fp_s=np.full(size.size, 0.01),
    )


def test_bytescheduler_tends_to_mercury_as_partitions_shrink():
    p = vgg_like()
    target = iteration_time(p, mercury)
    gaps = []
    for part in (6.4e7, 1.6e7, 4e6, 1e6, 2.5e5):
        cfg = PartitionConfig(partition_bytes=part, credit_bytes=None, startup_s=0.0)
        gaps.append(iteration_time(p, bytescheduler(cfg)) - target)
    assert all(g >= -1e-12 for g in gaps)
    assert gaps == sorted(gaps, reverse=True)
    # the gap is at most about one partition's push plus pull
    assert gaps[-1] <= 2 * 2.5e5 * 8 / p.bandwidth_bps + 1e-12
    assert gaps[-1] < 1e-3 * target


def test_bytescheduler_falls_behind_as_startup_grows():
    p = vgg_like()
    merc = iteration_time(p, mercury)
    ts = [
        iteration_time(p, bytescheduler(PartitionConfig(partition_bytes=1e6, credit_bytes=None, startup_s=s)))
        for s in (0.0, 1e-5, 1e-4, 1e-3)
    ]
    assert ts == sorted(ts)
    assert ts[-1] > ts[0] > merc - 1e-12
    # a credit window hides part of the startup behind transmission
    credit = PartitionConfig(partition_bytes=1e6, credit_bytes=4e6, startup_s=1e-3)
    assert iteration_time(p, bytescheduler(credit)) < ts[-1]


@pytest.mark.parametrize("preemptive", [True, False])
def test_packet_level_mercury_tends_to_fluid(preemptive):
    p = vgg_like()
    fluid = iteration_time(p, mercury if preemptive else mercury_no_preemption)
    gaps = [
        iteration_time(p, mercury_packets(pkt, preemptive=preemptive)) - fluid for pkt in (4e6, 2.5e5, 3e4)
    ]
    assert all(g >= -1e-12 for g in gaps)
    assert gaps[-1] <= gaps[0]
    assert gaps[-1] <= 2 * 3e4 * 8 / p.bandwidth_bps + 1e-12


def test_mercury_monotone_in_bandwidth():
    p = vgg_like()
    ts = [iteration_time(p.with_bandwidth(b), mercury) for b in np.geomspace(1e9, 1e12, 20)]
    assert all(a >= b - 1e-12 for a, b in itertools.pairwise(ts))
