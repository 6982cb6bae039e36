"""The free-GPU index (``scheduling.freegpus``): first-fit and pack read it and place exactly as a scan of
every host would (the scans below are the rules as first written, kept as the reference)."""

from __future__ import annotations

from collections import defaultdict

from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.scheduling.freegpus import FreeGpus
from commsched.scheduling.interfaces import PlacementRequest
from commsched.scheduling.jobsched.common import by_key, host_views
from commsched.scheduling.jobsched.firstfit import first_fit
from commsched.scheduling.placement import pack_gpus
from commsched.topology import Host, NodeId, Topology
from commsched.topology.builders.clos import two_layer_clos
from commsched.workload import job_from_model

TOPO = two_layer_clos(tors=4, aggs=2, hosts_per_tor=3)  # 12 hosts x 8 GPUs


def scan_first_fit(req: PlacementRequest) -> tuple[NodeId, ...] | None:
    n = req.job.gpus
    views = host_views(req)
    if sum(len(v.free) for v in views) < n:
        return None
    for v in views:
        if len(v.free) >= n:
            return v.free[:n]
    for hosts in by_key(views).values():
        if sum(len(v.free) for v in hosts) >= n:
            return _first([g for v in hosts for g in v.free], n)
    return _first([g for v in views for g in v.free], n)


def _first(free: list[NodeId], n: int) -> tuple[NodeId, ...]:
    return tuple(free[:n])


def scan_pack(req: PlacementRequest) -> tuple[NodeId, ...] | None:
    n = req.job.gpus
    by_host = [(h, [g for g in h.gpus if g in req.free_gpus]) for h in req.topology.hosts]
    by_host = [(h, f) for h, f in by_host if f]
    if sum(len(f) for _, f in by_host) < n:
        return None
    single = [(len(f), h.id, f) for h, f in by_host if len(f) >= n]
    if single:
        return tuple(min(single)[2][:n])
    by_tor: dict[str, list[tuple[Host, list[NodeId]]]] = defaultdict(list)
    for h, f in by_host:
        by_tor[str(h.tors[0]) if h.tors else ""].append((h, f))
    fits = [
        (sum(len(f) for _, f in hs), tor) for tor, hs in by_tor.items() if sum(len(f) for _, f in hs) >= n
    ]
    if fits:
        return _take(by_tor[min(fits)[1]], n)
    tors = sorted(by_tor.items(), key=lambda kv: (-sum(len(f) for _, f in kv[1]), kv[0]))
    return _take([hf for _, hs in tors for hf in hs], n)


def _take(hosts: list[tuple[Host, list[NodeId]]], n: int) -> tuple[NodeId, ...]:
    chosen: list[NodeId] = []
    for _, free in sorted(hosts, key=lambda hf: -len(hf[1])):
        chosen.extend(free[: n - len(chosen)])
        if len(chosen) == n:
            break
    order = {g: i for i, g in enumerate(g for h, _ in hosts for g in h.gpus)}
    return tuple(sorted(chosen, key=lambda g: order.get(g, 0)))


def _request(topo: Topology, n: int, free: frozenset[NodeId] | FreeGpus) -> PlacementRequest:
    return PlacementRequest(topology=topo, job=job_from_model("new", "bert", gpus=n), free_gpus=free)


@settings(max_examples=150, deadline=None)
@given(
    busy=st.lists(st.booleans(), min_size=96, max_size=96), n=st.sampled_from([1, 2, 3, 4, 8, 12, 16, 24, 40])
)
def test_first_fit_and_pack_on_the_index_place_as_a_scan_does(busy: list[bool], n: int) -> None:
    free = frozenset(g for g, b in zip(TOPO.gpus, busy, strict=True) if not b)
    index = FreeGpus(TOPO, free)
    assert set(index) == set(free) and len(index) == len(free)
    assert all((g in index) == (g in free) for g in TOPO.gpus)
    alloc = first_fit(_request(TOPO, n, index))
    assert (alloc.gpus if alloc is not None else None) == scan_first_fit(_request(TOPO, n, free))
    assert pack_gpus(_request(TOPO, n, index)) == scan_pack(_request(TOPO, n, free))


@settings(max_examples=60, deadline=None)
@given(
    ops=st.lists(st.tuples(st.booleans(), st.integers(0, 95), st.integers(1, 16)), min_size=1, max_size=40)
)
def test_takes_and_gives_keep_the_index_equal_to_a_rebuilt_one(ops: list[tuple[bool, int, int]]) -> None:
    index = FreeGpus(TOPO)
    for take, start, count in ops:
        gpus = TOPO.gpus[start : start + count]
        (index.take if take else index.give)(gpus)
        fresh = FreeGpus(TOPO, set(index))
        for n in (1, 5, 8, 20):
            assert index.first_host(n) == fresh.first_host(n)
            assert index.first_group(n) == fresh.first_group(n)
            assert index.best_fit_host(n) == fresh.best_fit_host(n)
            assert index.first_free(n) == fresh.first_free(n)
