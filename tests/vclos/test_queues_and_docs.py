"""Queue orderings, admission, the doctests of the package and the Topology adapter."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

from commsched.scheduling import vclos
from commsched.scheduling.vclos import (
    Fabric,
    JobRequest,
    admit,
    allocate_vclos,
    edf_order,
    empty_state,
    fabric_from_topology,
    fifo_order,
    queue_registry,
    smallest_first_order,
)
from commsched.topology.builders import leaf_spine

JOBS = [
    JobRequest(job_id="a", gpus=4, arrival_s=3.0, deadline_s=50.0),
    JobRequest(job_id="b", gpus=2, arrival_s=1.0),
    JobRequest(job_id="c", gpus=2, arrival_s=2.0, deadline_s=10.0),
    JobRequest(job_id="d", gpus=8, arrival_s=1.0, deadline_s=10.0),
]


def ids(jobs: tuple[JobRequest, ...]) -> list[str]:
    return [j.job_id for j in jobs]


def test_orderings() -> None:
    assert ids(fifo_order(JOBS)) == ["b", "d", "c", "a"]  # ties keep queue order
    assert ids(smallest_first_order(JOBS)) == ["b", "c", "a", "d"]
    assert ids(edf_order(JOBS)) == ["d", "c", "a", "b"]
    for order in (fifo_order, smallest_first_order, edf_order):
        assert sorted(ids(order(JOBS))) == ["a", "b", "c", "d"]
        assert order(()) == ()
    assert set(queue_registry().names()) == {"fifo", "sf", "edf"}


def test_admit_blocks_without_backfill_and_backfills_with_it() -> None:
    state = empty_state(Fabric(leaves=2, spines=2, servers_per_leaf=1, gpus_per_server=2))
    queue = [
        JobRequest(job_id="big", gpus=2, arrival_s=0.0),
        JobRequest(job_id="huge", gpus=4, arrival_s=1.0),
        JobRequest(job_id="small", gpus=1, arrival_s=2.0),
    ]
    strict = admit(state, queue, allocate_vclos)
    assert [p.job_id for p in strict.placed] == ["big"] and ids(strict.waiting) == ["huge", "small"]
    loose = admit(state, queue, allocate_vclos, backfill=True)
    assert [p.job_id for p in loose.placed] == ["big", "small"] and ids(loose.waiting) == ["huge"]
    sf = admit(state, queue, allocate_vclos, smallest_first_order)
    assert [p.job_id for p in sf.placed] == ["small", "big"]
    assert sum(o is not None for o in sf.state.gpu_owner) == 3


def test_doctests() -> None:
    for mod in pkgutil.iter_modules(vclos.__path__):
        module = importlib.import_module(f"{vclos.__name__}.{mod.name}")
        result = doctest.testmod(module, optionflags=doctest.ELLIPSIS)
        assert result.failed == 0, mod.name


def test_adapter_on_leaf_spine_builder() -> None:
    topo = leaf_spine(leaves=4, spines=4)
    view = fabric_from_topology(topo)
    assert view.fabric.leaves == 4 and view.fabric.spines == 4
    assert len(view.gpu_ids) == view.fabric.n_gpus == topo.n_gpus
    some = next(iter(view.gpu_ids))
    assert view.gpu_addr(view.gpu_ids[some]) == some
    f = fabric_from_topology(
        leaf_spine(leaves=4, spines=8, gpus_per_host=2, hosts_per_leaf=2, ports_per_leaf=16)
    )
    assert f.fabric == Fabric(leaves=4, spines=8, servers_per_leaf=2, gpus_per_server=2)
    o = fabric_from_topology(leaf_spine(leaves=4, spines=4, ocs=True)).fabric
    assert o.has_ocs and o.ocs_groups == 1 and o.up_ports == o.down_ports
