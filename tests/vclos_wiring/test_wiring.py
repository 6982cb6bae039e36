"""Placement functions: reservations never overlap, pinned routes follow source routing."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from commsched.scheduling.interfaces import PlacementRequest
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.vclos import allocate_ocs_vclos, allocate_vclos
from commsched.scheduling.vclos.bundles import (
    one_switch,
    redundant,
    vclos_bundles,
    vclos_queue_orders,
    with_ocs,
)
from commsched.scheduling.vclos.policy import fabric_placement
from commsched.scheduling.vclos.wiring import wiring_of
from commsched.topology.builders import leaf_spine
from commsched.workload import JobId, JobSpec, ModelProfile

PROF = ModelProfile(name="m", gpu="x", compute_s=0.1, sync_bytes=1e8, overlap=0.5, source="test")
TOPO = leaf_spine(leaves=4, spines=4, gpus_per_host=2, hosts_per_leaf=2)
OCS_TOPO = with_ocs(TOPO)


def _spec(i: int, n: int) -> JobSpec:
    return JobSpec(id=JobId(f"j{i}"), profile=PROF, gpus=n, collective="hierarchical_ring")


def _replay(topo, placement, ops):  # type: ignore[no-untyped-def]
    running: list[PlacedJob] = []
    free = set(topo.gpus)
    for i, (arrive, n) in enumerate(ops):
        if not arrive and running:
            gone = running.pop(n % len(running))
            free.update(gone.gpus)
            continue
        req = PlacementRequest(
            topology=topo, job=_spec(i, n), free_gpus=frozenset(free), running=tuple(running)
        )
        alloc = placement(req)
        if alloc is None:
            continue
        held = {lk for j in running for lk in j.reserved_links}
        assert not (held & alloc.reserved_links)
        assert set(alloc.gpus) <= free and len(alloc.gpus) == n
        free.difference_update(alloc.gpus)
        running.append(
            PlacedJob(
                spec=_spec(i, n),
                gpus=alloc.gpus,
                reserved_links=alloc.reserved_links,
                pinned_routes=alloc.pinned_routes,
            )
        )
        yield alloc


OPS = st.lists(st.tuples(st.booleans(), st.sampled_from([1, 2, 3, 4, 6, 8, 12])), min_size=1, max_size=25)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_vclos_never_reserves_a_held_link(ops: list[tuple[bool, int]]) -> None:
    for _ in _replay(TOPO, fabric_placement(allocate_vclos, pin="source"), ops):
        pass


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(OPS)
def test_ocs_vclos_never_reserves_a_held_link(ops: list[tuple[bool, int]]) -> None:
    for _ in _replay(OCS_TOPO, fabric_placement(allocate_ocs_vclos, pin="ocs"), ops):
        pass


def test_pinned_routes_follow_source_routing() -> None:
    w = wiring_of(TOPO)
    pl = fabric_placement(allocate_vclos, pin="source")
    ops = [(True, 4), (True, 12)]  # 4 GPUs fit a leaf; 12 GPUs need a virtual Clos over 3 leaves
    allocs = list(_replay(TOPO, pl, ops))
    vc = allocs[-1]
    assert vc.reserved_links and vc.pinned_routes
    for key, idx in vc.pinned_routes.items():
        path = TOPO.equal_cost_paths(TOPO.nic_of(key.src), TOPO.nic_of(key.dst))[idx]
        assert set(path.links) & vc.reserved_links  # it climbs through the job's own cables
        a = w.addr_of[key.src]
        spine = path.nodes[2]
        up = next(lk for lk in path.links if lk in w.leaf_of_link)
        u = w.leaf_of_link[up] - a.leaf * w.fabric.up_ports
        assert spine == w.view.spine_ids[u % w.fabric.spines]


def test_bundles_and_queue_orders() -> None:
    assert [b.name for b in vclos_bundles()] == [
        "best", "ocs-vclos", "vclos", "sr", "balanced-ecmp", "ecmp", "ecmp-redundant",
    ]  # fmt: skip
    assert sorted(vclos_queue_orders()) == ["edf", "sf"]
    assert one_switch(TOPO).n_gpus == TOPO.n_gpus
    assert len(redundant(TOPO).equal_cost_paths("h0/nic0", "h2/nic0")) == 6
    jobs = [_spec(0, 8), _spec(1, 2)]
    assert [j.id for j in vclos_queue_orders()["sf"](jobs, 0.0)] == ["j1", "j0"]
