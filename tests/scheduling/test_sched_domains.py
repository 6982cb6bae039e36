"""Contention domains against a reach built from the topology's links alone.

The reference (:mod:`tests.equal_cost_reference`) enumerates every equal-cost path between the NICs of
each of a job's connections by breadth-first search, without the path code; domains are then the
connected groups of jobs whose reaches meet.
"""

from __future__ import annotations

import numpy as np
import pytest

from commsched.scheduling.domains import domains, job_reach
from commsched.scheduling.paths import PathTable
from commsched.scheduling.state import ClusterState, PlacedJob
from commsched.scheduling.traffic import job_traffic
from commsched.topology import NodeId, Topology
from commsched.topology.builders.clos import three_layer_double_sided, two_layer_clos
from commsched.topology.builders.leaf_spine import leaf_spine
from commsched.workload import JobId, JobSpec, ModelProfile
from tests.equal_cost_reference import merged_groups, reference_reach, shortest_path_links


def rewired_leaf_spine() -> Topology:
    """Leaf-spine with an OCS layer, circuits rewired: leaf 2 reaches only spine 1, leaf 3 only spine 0."""
    return leaf_spine(
        leaves=4,
        spines=2,
        gpus_per_host=1,
        hosts_per_leaf=2,
        ocs=True,
        circuits=[[0, 1], [0, 1], [1, 1], [0, 0]],
    )


TOPOLOGIES = {
    "clos-2to1": lambda: two_layer_clos(tors=4, aggs=2, hosts_per_tor=2, uplinks_per_tor=4),
    "clos-3-aggs": lambda: two_layer_clos(tors=3, aggs=3, hosts_per_tor=2),
    "three-layer": lambda: three_layer_double_sided(tors=4, aggs=4, cores=2, pods=2, hosts_per_tor_pair=2),
    "leaf-spine": lambda: leaf_spine(leaves=4, spines=4, gpus_per_host=2, hosts_per_leaf=2),
    "ocs-rewired": rewired_leaf_spine,
}
COLLECTIVES = ("ring", "halving_doubling", "alltoall", "double_binary_tree")


def _placed(name: str, gpus: list[NodeId], collective: str) -> PlacedJob:
    prof = ModelProfile(name=name, gpu="test", compute_s=0.2, sync_bytes=5e8, overlap=1.0, source="test")
    spec = JobSpec(id=JobId(name), profile=prof, gpus=len(gpus), collective=collective)
    return PlacedJob(spec=spec, gpus=tuple(gpus))


def random_state(topo: Topology, seed: int) -> ClusterState:
    """Up to five jobs of 2-6 GPUs each on distinct random GPUs, with random collectives."""
    rng = np.random.default_rng(seed)
    free = [topo.gpus[i] for i in rng.permutation(len(topo.gpus)).tolist()]
    jobs = []
    for k in range(int(rng.integers(3, 6))):
        n = int(rng.integers(2, 7))
        if n > len(free):
            break
        jobs.append(_placed(f"j{k}", free[:n], str(rng.choice(COLLECTIVES))))
        free = free[n:]
    return ClusterState(topology=topo, jobs=tuple(jobs))


def test_the_reference_finds_the_two_aggregation_paths_of_a_small_clos() -> None:
    # two hosts under two ToRs, one uplink from each ToR to each of two Aggs: exactly the access link,
    # one uplink and one downlink per Agg, and the far access link (counted by hand: 1 + 2 + 2 + 1)
    topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=1, uplinks_per_tor=2)
    links = shortest_path_links(topo, NodeId("h0/nic0"), NodeId("h1/nic0"))
    ends = sorted((topo.link(i).src, topo.link(i).dst) for i in links)
    assert ends == [
        ("agg0", "tor1"),
        ("agg1", "tor1"),
        ("h0/nic0", "tor0"),
        ("tor0", "agg0"),
        ("tor0", "agg1"),
        ("tor1", "h1/nic0"),
    ]


@pytest.mark.parametrize("seed", range(6))
@pytest.mark.parametrize("topo_name", sorted(TOPOLOGIES))
def test_reach_and_domains_match_an_enumeration_of_every_equal_cost_path(topo_name: str, seed: int) -> None:
    topo = TOPOLOGIES[topo_name]()
    state = random_state(topo, seed)
    table = PathTable(topo)
    reach = {j.id: reference_reach(topo, j) for j in state.jobs}
    for j in state.jobs:
        assert set(job_reach(table, j).tolist()) == reach[j.id], j.id
    got = [{j.id for j in g} for g in domains(state, table)]
    assert sorted(map(sorted, got)) == sorted(map(sorted, merged_groups(reach)))
    for g in got:  # two domains share no link that any route could take
        for h in got:
            if g is not h:
                assert all(not (reach[x] & reach[y]) for x in g for y in h)


def test_jobs_that_meet_only_on_an_alternative_path_share_a_domain() -> None:
    # An OCS-rewired leaf-spine: leaves 0 and 1 reach both spines, leaf 2 only spine 1. Job a (leaf 0 <->
    # leaf 1) routes through spine 0 by default; job b (leaf 2 <-> leaf 1) can only cross spine 1, which
    # a's other path also crosses (spine1 -> ocs0/c3 -> leaf1): their default routes never meet, yet a
    # decision can put them on one link, so they are one domain.
    topo = rewired_leaf_spine()
    a = _placed("a", [NodeId("h0/gpu0"), NodeId("h2/gpu0")], "ring")
    b = _placed("b", [NodeId("h4/gpu0"), NodeId("h3/gpu0")], "ring")
    c = _placed("c", [NodeId("h6/gpu0"), NodeId("h7/gpu0")], "ring")  # both under leaf 3: alone
    default = {j.id: set(job_traffic(topo, j).link_ids.tolist()) for j in (a, b)}
    assert not default["a"] & default["b"]
    shared = reference_reach(topo, a) & reference_reach(topo, b)
    assert {(topo.link(i).src, topo.link(i).dst) for i in shared} >= {
        ("spine1", "ocs0/c3"),
        ("ocs0/c3", "leaf1"),
    }
    got = domains(ClusterState(topology=topo, jobs=(a, b, c)))
    assert [[j.id for j in g] for g in got] == [["a", "b"], ["c"]]
