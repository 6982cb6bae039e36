"""Each policy's placement on the testbed: the simulator's decision, the daemon's pinned routes, circuits."""

from __future__ import annotations

from typing import Any

import pytest

from commsched.api.runner import simulate_scenario
from commsched.errors import InputError
from commsched.experiments.testbed_run.placing import placed_scenario, policy_placement, static_circuits
from commsched.io.scenario import scenario_from_text
from commsched.io.shipped import shipped_text
from commsched.runtime.daemon.decide import Cause, decide
from commsched.runtime.daemon.records import ClusterConfig, JobRecord
from commsched.topology import LinkKind
from commsched.topology.builders import leaf_spine

POLICIES = ("ecmp", "sr", "vclos", "ocs-vclos")


@pytest.fixture(scope="module")
def mix() -> Any:
    return scenario_from_text(shipped_text("vclos-testbed-policy"), source="vclos-testbed-policy")


def _records(sc: Any, gpus: dict[str, Any]) -> list[JobRecord]:
    return [
        JobRecord(
            id=str(j.spec.id),
            gpus=tuple(str(g) for g in gpus[str(j.spec.id)]),
            compute_s=j.spec.profile.compute_s,
            comm_bytes=j.spec.profile.sync_bytes,
            overlap=j.spec.profile.overlap,
            collective=j.spec.collective,
            started_s=float(i),
            profiling=False,
        )
        for i, j in enumerate(sc.jobs)
    ]


@pytest.mark.parametrize("policy", POLICIES)
def test_placement_is_the_simulators(mix: Any, policy: str) -> None:
    """The testbed places every job where the simulator places it under the same policy, at time 0."""
    placing = policy_placement(mix, policy)
    sim = simulate_scenario(mix, policy=policy)
    for job in sim.jobs:
        assert job.start_s == 0.0
        assert tuple(str(g) for g in placing.gpus[str(job.id)]) == tuple(str(g) for g in job.placement)
    placed = placed_scenario(mix, placing)
    assert all(j.gpu_ids for j in placed.jobs)
    leaves = {mix.topology.host_of(g).tors for g in placing.gpus["bert"]}
    assert len(leaves) == 2  # bert spans both leaves: its traffic crosses the leaf-spine links
    if policy == "ocs-vclos":
        assert placing.circuits is not None and len(placing.circuits) == 2
        assert all(len(r) == 16 for r in placing.circuits)
    else:
        assert placing.circuits is None


def test_daemon_serves_the_routes_vclos_pinned(mix: Any) -> None:
    """Under vclos the daemon replays the placement: bert's rails get disjoint uplinks and downlinks."""
    topo = mix.topology
    for policy, disjoint in (("vclos", True), ("ocs-vclos", True)):
        placing = policy_placement(mix, policy)
        cfg = ClusterConfig(topology=dict(topo.params), policy=policy, priority_levels=1)
        doc = decide(topo, cfg, _records(mix, placing.gpus), version=0, cause=Cause(kind="test"))
        bert = [c for c in doc["connections"] if c["job"] == "bert"]
        assert len(bert) == 8
        fabric = [lk for c in bert for lk in c["links"] if topo.links[lk].kind == LinkKind.FABRIC]
        assert (len(fabric) == len(set(fabric))) is disjoint, policy


def test_daemon_without_the_placement_pins_nothing(mix: Any) -> None:
    """Jobs placed elsewhere than the bundle would place them keep the default route (no pins)."""
    topo = mix.topology
    placing = policy_placement(mix, "vclos")
    moved = {k: tuple(reversed(v)) for k, v in placing.gpus.items()}  # other rank order: not the grant
    cfg = ClusterConfig(topology=dict(topo.params), policy="vclos", priority_levels=1)
    doc = decide(topo, cfg, _records(mix, moved), version=0, cause=Cause(kind="test"))
    assert {c["path_index"] for c in doc["connections"] if c["job"] == "bert"} == {0}


def test_static_circuits_are_the_builders() -> None:
    """The circuit table the runner restores is the builder's static cabling (same links)."""
    topo = leaf_spine(leaves=2, spines=2, gpus_per_host=4, hosts_per_leaf=4, ports_per_leaf=32, ocs=True)
    table = static_circuits(topo)
    assert len(table) == 2 and table[0] == (0,) * 8 + (1,) * 8
    again = leaf_spine(
        leaves=2, spines=2, gpus_per_host=4, hosts_per_leaf=4, ports_per_leaf=32, ocs=True, circuits=table
    )
    assert [(lk.src, lk.dst) for lk in again.links] == [(lk.src, lk.dst) for lk in topo.links]


def test_ocs_vclos_circuits_keep_every_spine_within_its_ports() -> None:
    """vclos-testbed-ocs: OCS-vClos rewires circuits; the table builds (at most 16 per spine)."""
    sc = scenario_from_text(shipped_text("vclos-testbed-ocs"), source="vclos-testbed-ocs")
    placing = policy_placement(sc, "ocs-vclos")
    assert placing.circuits is not None and placing.circuits_changed > 0
    counts = [sum(s == k for r in placing.circuits for s in r) for k in range(2)]
    assert counts == [16, 16]
    rewired = leaf_spine(
        leaves=2, spines=2, gpus_per_host=4, hosts_per_leaf=4, ports_per_leaf=32, ocs=True,
        circuits=placing.circuits,
    )  # fmt: skip
    assert len(rewired.equal_cost_paths("h0/nic0", "h4/nic0")) > 0
    sim = simulate_scenario(sc, policy="ocs-vclos")
    for job in sim.jobs:
        assert tuple(str(g) for g in placing.gpus[str(job.id)]) == tuple(str(g) for g in job.placement)
    with pytest.raises(InputError, match="does not place job 'bert'"):
        policy_placement(sc, "vclos")  # vClos leaves bert waiting: not a testbed run


def test_daemon_carries_pinned_routes_onto_rewired_circuits() -> None:
    """On the rewired fabric the daemon serves the routes OCS-vClos pinned (disjoint fabric links)."""
    sc = scenario_from_text(shipped_text("vclos-testbed-ocs"), source="vclos-testbed-ocs")
    placing = policy_placement(sc, "ocs-vclos")
    assert placing.circuits is not None
    p = sc.topology.params
    rewired = leaf_spine(
        leaves=2, spines=2, gpus_per_host=4, hosts_per_leaf=4, ports_per_leaf=32, ocs=True,
        host_link_bps=p["host_link_bps"], uplink_bps=p["uplink_bps"], circuits=placing.circuits,
    )  # fmt: skip
    cfg = ClusterConfig(topology=dict(rewired.params), policy="ocs-vclos", priority_levels=1)
    doc = decide(rewired, cfg, _records(sc, placing.gpus), version=0, cause=Cause(kind="test"))
    big = [c for c in doc["connections"] if c["job"] == "big" and c["n_paths"] > 1]
    fabric = [lk for c in big for lk in c["links"] if rewired.links[lk].kind == LinkKind.FABRIC]
    assert len(big) == 8 and len(fabric) == len(set(fabric)) == 32
