"""Contention domains: the engine's index of them, and decisions that stay inside them.

Jobs of two domains can never share a link, so a decision for one must not change what happens in the
other: every job's result is the same whether the other domain's jobs run beside it or not.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.catalog import policy_registry
from commsched.scheduling.domains import decide_per_domain, domains
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.paths import PathTable
from commsched.scheduling.policies import crux_plan
from commsched.scheduling.state import ClusterState, PlacedJob
from commsched.sim.decide.domains import DomainIndex
from commsched.sim.engine import SimJob
from commsched.sim.results.records import Mode, SimResult
from commsched.topology import NodeId
from commsched.topology.builders.clos import two_layer_clos
from tests.equal_cost_reference import merged_groups, reference_reach

from .helpers import job, run

TOPO = two_layer_clos(tors=4, aggs=2, hosts_per_tor=2, uplinks_per_tor=4)  # 8 hosts x 8 GPUs, 2:1


@settings(max_examples=80, deadline=None)
@given(ops=st.lists(st.tuples(st.booleans(), st.integers(0, 29), st.sets(st.integers(0, 40), max_size=3))))
def test_the_domain_index_matches_the_connected_groups_of_the_running_jobs(
    ops: list[tuple[bool, int, set[int]]],
) -> None:
    index = DomainIndex()
    reach: dict[int, set[int]] = {}
    for add, job_id, links in ops:
        if add and job_id not in reach:
            reach[job_id] = links
            index.add(job_id, np.array(sorted(links), dtype=np.int64))
        elif not add and job_id in reach:
            del reach[job_id]
            index.remove(job_id)
        got = sorted(sorted(m) for m in index.members.values())
        assert got == sorted(sorted(g) for g in merged_groups(reach))
        assert all(index.domain_of(j) in index.members for j in reach)


def test_a_long_chain_splits_where_its_bridge_leaves() -> None:
    index = DomainIndex()
    for j in range(30):  # job j reaches links j and j + 1: one chain
        index.add(j, np.array([j, j + 1]))
    assert len(index.members) == 1 and index.largest == 30
    parts = index.remove(14)
    assert sorted(sorted(index.members[p]) for p in parts) == [list(range(14)), list(range(15, 30))]


def _placed(name: str, hosts: list[int], per_host: int = 4) -> PlacedJob:
    gpus = tuple(NodeId(f"h{h}/gpu{g}") for h in hosts for g in range(per_host))
    return PlacedJob(spec=job(name, compute_s=0.2, comm_bytes=5e8, gpus=len(gpus)).spec, gpus=gpus)


def test_jobs_of_two_domains_share_no_link_that_any_route_could_take() -> None:
    jobs = (_placed("a", [0, 2]), _placed("b", [1, 3]), _placed("c", [4, 6]), _placed("d", [5]))
    state = ClusterState(topology=TOPO, jobs=jobs)
    table = PathTable(TOPO)
    groups = domains(state, table)
    assert [[j.id for j in g] for g in groups] == [["a", "b"], ["c"], ["d"]]
    reach = {j.id: reference_reach(TOPO, j) for j in jobs}  # every equal-cost path, enumerated apart
    for g in groups:
        for h in groups:
            if g is not h:
                assert all(not (reach[x.id] & reach[y.id]) for x in g for y in h)


def test_a_decision_is_the_same_whatever_came_before_it() -> None:
    # the compression's random orders are seeded by the component's jobs, not by a decision counter
    state = ClusterState(topology=TOPO, jobs=tuple(_placed(f"j{k}", [k % 4, 4 + k % 4]) for k in range(6)))
    first = crux_plan(state, PolicyContext(seed=3, now_s=0.0, epoch=0)).decisions
    later = crux_plan(state, PolicyContext(seed=3, now_s=50.0, epoch=17)).decisions
    assert dict(first.classes) == dict(later.classes) and dict(first.routes) == dict(later.routes)


def test_deciding_per_domain_gives_each_domain_what_it_gets_alone() -> None:
    jobs = (_placed("a", [0, 2]), _placed("b", [1, 3]), _placed("c", [4, 6]), _placed("e", [5, 7]))
    state = ClusterState(topology=TOPO, jobs=jobs, priority_levels=2)
    policy = policy_registry().get("crux-full").communication
    ctx = PolicyContext(seed=1, now_s=0.0, epoch=0)
    whole = decide_per_domain(policy, state, ctx)
    for part in (jobs[:2], jobs[2:]):
        alone = policy(ClusterState(topology=TOPO, jobs=part, priority_levels=2), ctx)
        assert {j.id: whole.class_of(j.id) for j in part} == {j.id: alone.class_of(j.id) for j in part}
        assert all(whole.routes[k] == v for k, v in alone.routes.items())


def _group(prefix: str, hosts: list[int], seed: int) -> list[SimJob]:
    """Jobs on ``hosts`` only (two ToRs), arriving and leaving at random."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(5):
        pick = rng.choice(hosts, size=2, replace=False)
        out.append(
            job(
                f"{prefix}{k}",
                compute_s=float(rng.uniform(0.05, 0.3)),
                comm_bytes=float(rng.uniform(0.1e9, 0.8e9)),
                gpus=2,
                overlap=float(rng.choice([0.5, 1.0])),
                iterations=int(rng.integers(60, 200)),
                arrival_s=float(rng.uniform(0, 20.0)),
                gpu_ids=[f"h{h}/gpu{k}" for h in sorted(pick.tolist())],  # its own GPUs: no queueing
            )
        )
    return out


def _by_id(res: SimResult) -> dict[str, tuple[float, float, float]]:
    return {j.id: (j.iterations, j.mean_iteration_s, j.end_s or math.nan) for j in res.jobs}


@pytest.mark.parametrize("policy", ["crux-full", "ecmp-fair", "sincronia"])
@pytest.mark.parametrize("mode", [Mode.EXACT, Mode.FAST])
def test_a_domain_runs_the_same_with_or_without_another_beside_it(policy: str, mode: Mode) -> None:
    # hosts 0-3 hang off ToRs 0-1, hosts 4-7 off ToRs 2-3: the two groups can never share a link
    left, right = _group("l", [0, 1, 2, 3], 1), _group("r", [4, 5, 6, 7], 2)
    fn = policy_registry().get(policy).communication
    both = _by_id(run(TOPO, left + right, horizon_s=400.0, mode=mode, policy=fn, seed=5))
    for part in (left, right):
        alone = _by_id(run(TOPO, part, horizon_s=400.0, mode=mode, policy=fn, seed=5))
        for jid, fig in alone.items():
            assert both[jid] == pytest.approx(fig, rel=1e-9, nan_ok=True), jid
