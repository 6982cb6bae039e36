"""Decisions apply at once, routes included (DESIGN, modelling contract): a job whose routes a decision
changes moves the bytes its step in flight has not yet sent to the new links at once; a job of
``transport: persistent`` keeps the routes of its first decision.

The fabric: two ToRs of two single-GPU hosts each, one 1 Gbit/s uplink from each ToR to each of two Aggs
(the hosts' own links are 100 Gbit/s, so only an uplink can bind). Job ``a`` (h0 -> h2) starts alone on
the path through the first Agg; job ``b`` (h1 -> h3) arrives while ``a``'s first ring step is in flight.
The policy then sends ``a`` through the second Agg and ``b`` through the first: with routes at once the
two never share a link, so ``a``'s iterations are those of ``a`` alone, whatever the time ``b`` arrives.
"""

from __future__ import annotations

from dataclasses import replace
from types import MappingProxyType

import pytest

from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.routemap import JobRoutes, RouteMap
from commsched.scheduling.routing import network_pair
from commsched.scheduling.state import ClusterState, Decisions
from commsched.scheduling.traffic import job_connections
from commsched.sim.results.records import SimResult
from commsched.topology.builders import two_layer_clos

from .helpers import job, run

#: bytes of the ring all-reduce: 2 ranks, each step half of it per flow, at 1 Gbit/s = 125e6 B/s
COMM_BYTES = 1.0e9
UPLINK_BPS = 1.0e9


def _topology():  # type: ignore[no-untyped-def]
    return two_layer_clos(
        tors=2,
        aggs=2,
        hosts_per_tor=2,
        host_template="single_gpu_nic",
        uplinks_per_tor=2,
        uplink_bps=UPLINK_BPS,
        host_link_bps=100e9,
    )


def _switching(state: ClusterState, ctx: PolicyContext) -> Decisions:
    """``a`` through path 0 while alone, through path 1 once ``b`` is there; ``b`` through path 0."""
    routes = {}
    for j in state.jobs:
        idx = 1 if j.id == "a" and len(state.jobs) > 1 else 0
        keys = [k for k in job_connections(state.topology, j) if network_pair(state.topology, k) is not None]
        routes[j.id] = RouteMap(dict.fromkeys(keys, idx))
    return Decisions(routes=JobRoutes(routes), classes=MappingProxyType({j.id: 0 for j in state.jobs}))


def _jobs(b_arrival_s: float, transport: str = "rebind"):  # type: ignore[no-untyped-def]
    a = job("a", compute_s=1.0, comm_bytes=COMM_BYTES, gpus=2, gpu_ids=("h0/gpu0", "h2/gpu0"), iterations=3)
    b = job(
        "b",
        compute_s=0.01,
        comm_bytes=COMM_BYTES,
        gpus=2,
        gpu_ids=("h1/gpu0", "h3/gpu0"),
        iterations=3,
        arrival_s=b_arrival_s,
    )
    a = replace(a, spec=replace(a.spec, transport=transport))
    return [a, b]


def _a(res: SimResult) -> float:
    return next(j.mean_iteration_s for j in res.jobs if j.id == "a")


def _alone() -> float:
    return _a(run(_topology(), _jobs(1e6)[:1], horizon_s=200.0, policy=_switching))


def test_a_job_alone_iterates_at_its_uplink_rate() -> None:
    # ring of 2: two steps, each flow sends half the bytes on its uplink (1 Gbit/s, 125e6 B/s); the
    # fabric's five hops of 1 us latency each per step
    comm = 2 * (COMM_BYTES / 2) / (UPLINK_BPS / 8)
    assert _alone() == pytest.approx(1.0 + comm, rel=1e-5)


@pytest.mark.parametrize("b_arrival_s", [1.3, 2.5, 4.9, 7.0])
def test_new_routes_move_a_step_in_flight_at_once(b_arrival_s: float) -> None:
    # b arrives during a's first or second ring step (its communication runs from 1 s to 9 s)
    res = run(_topology(), _jobs(b_arrival_s), horizon_s=200.0, policy=_switching)
    assert _a(res) == pytest.approx(_alone(), rel=1e-12)


def test_a_persistent_job_keeps_the_routes_of_its_first_decision() -> None:
    res = run(_topology(), _jobs(1.3, transport="persistent"), horizon_s=200.0, policy=_switching)
    # a stays on path 0, where b is sent too: they share its uplinks, a iterates slower than alone
    assert _a(res) > 1.2 * _alone()


def test_the_bytes_of_a_moved_step_follow_it() -> None:
    # a sends COMM_BYTES per iteration from h0 across tor0's uplinks (its communication: 1-9 s, 10-18 s,
    # 19-27 s), b too (three iterations of 0.01 + 8 s from 1.3 s: it leaves at 25.33 s). a is on Agg 0
    # while alone: 0.3 s into its first step, and again from b's departure to its own end
    topo = _topology()
    res = run(topo, _jobs(1.3), horizon_s=200.0, policy=_switching)
    alone_s = 0.3 + (27.0 - (1.3 + 3 * 8.01))
    before = alone_s * UPLINK_BPS / 8
    via0 = res.link_bytes[topo.link_id("tor0", "agg0")]
    via1 = res.link_bytes[topo.link_id("tor0", "agg1")]
    assert via1 == pytest.approx(3 * COMM_BYTES - before, rel=1e-4)
    assert via0 == pytest.approx(3 * COMM_BYTES + before, rel=1e-4)
