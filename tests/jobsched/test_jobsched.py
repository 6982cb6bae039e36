"""Job schedulers (pack, HiveD-like, Muri-like): invariants across all three, and each one's own rule."""

from __future__ import annotations

import math
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.scheduling.interfaces import Allocation, PlacementFn, PlacementRequest
from commsched.scheduling.jobsched import comm_share, hived, job_schedulers, muri
from commsched.scheduling.state import PlacedJob
from commsched.topology import NodeId, Topology
from commsched.topology.builders.clos import two_layer_clos
from commsched.topology.builders.lingjun import load_lingjun_topo
from commsched.workload import job_from_model

SCHEDULERS = job_schedulers()
#: the locality-aware ones (first-fit is the trace's topology-blind production scheduler)
LOCALITY = sorted(set(SCHEDULERS) - {"first-fit"})


def small() -> Topology:
    return two_layer_clos(tors=3, aggs=2, hosts_per_tor=2)  # 6 hosts x 8 GPUs


def request(
    topo: Topology, gpus: int, free: set[NodeId], running: tuple[PlacedJob, ...] = (), model: str = "bert"
) -> PlacementRequest:
    return PlacementRequest(
        topology=topo, job=job_from_model("new", model, gpus=gpus), free_gpus=frozenset(free), running=running
    )


def tors_of(topo: Topology, gpus: tuple[NodeId, ...]) -> set[NodeId]:
    return {topo.host_of(g).tors[0] for g in gpus}


def hosts_of(topo: Topology, gpus: tuple[NodeId, ...]) -> Counter[str]:
    return Counter(str(topo.host_of(g).id) for g in gpus)


def test_registry_names() -> None:
    assert set(SCHEDULERS) == {"first-fit", "pack", "hived", "muri"}


def test_first_fit_takes_the_first_host_and_tor_that_fit() -> None:
    topo = small()  # tors: (h0, h1), (h2, h3), (h4, h5)
    g = {str(h.id): list(h.gpus) for h in topo.hosts}
    # h0 has 2 free, h1 6, h2 8: a 4-GPU job goes to h1 (first fit), pack takes h1 too (best fit)
    free = set(g["h0"][6:] + g["h1"][2:] + g["h2"] + g["h3"] + g["h4"] + g["h5"])
    alloc = SCHEDULERS["first-fit"](request(topo, 4, free))
    assert alloc is not None and hosts_of(topo, alloc.gpus) == Counter({"h1": 4})
    # 2 GPUs: first fit takes h0's last two, best fit too; 8 GPUs: the first whole host, h2
    alloc = SCHEDULERS["first-fit"](request(topo, 8, free))
    assert alloc is not None and hosts_of(topo, alloc.gpus) == Counter({"h2": 8})
    # 20 GPUs fit under tor1 (h2 + h3 = 16)? no; under no single ToR: the first 20 free GPUs in order,
    # straddling tor0 and tor1, where pack would start from the emptiest ToRs (tor1, tor2)
    alloc = SCHEDULERS["first-fit"](request(topo, 20, free))
    assert alloc is not None and hosts_of(topo, alloc.gpus) == Counter({"h0": 2, "h1": 6, "h2": 8, "h3": 4})
    packed = SCHEDULERS["pack"](request(topo, 20, free))
    assert packed is not None and tors_of(topo, packed.gpus) == {NodeId("tor1"), NodeId("tor2")}


@pytest.mark.parametrize("name", LOCALITY)
@pytest.mark.parametrize("n", [8, 16, 24])
def test_whole_hosts_for_multiples_of_eight(name: str, n: int) -> None:
    topo = small()
    busy = {*topo.hosts[0].gpus[:3], *topo.hosts[3].gpus[:1]}  # two partly used hosts
    free = set(topo.gpus) - busy
    alloc = SCHEDULERS[name](request(topo, n, free))
    assert alloc is not None
    assert all(k == 8 for k in hosts_of(topo, alloc.gpus).values())


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
def test_never_hands_out_a_busy_gpu(name: str) -> None:
    topo = small()
    running: list[PlacedJob] = []
    free = set(topo.gpus)
    for i, n in enumerate([3, 8, 1, 16, 2, 4, 5]):
        alloc = SCHEDULERS[name](request(topo, n, free, tuple(running)))
        assert alloc is not None, (name, n)
        assert set(alloc.gpus) <= free and len(set(alloc.gpus)) == n
        free -= set(alloc.gpus)
        running.append(PlacedJob(spec=job_from_model(f"j{i}", "bert", gpus=n), gpus=alloc.gpus))


def test_hived_uses_fewest_tors() -> None:
    topo = small()
    # ToR0: 2 whole hosts, ToR1: 1 whole host, ToR2: 2 whole hosts; a 24-GPU job needs 2 ToRs
    busy = set(topo.hosts[2].gpus[:1])
    alloc = hived(request(topo, 24, set(topo.gpus) - busy))
    assert alloc is not None and len(tors_of(topo, alloc.gpus)) == 2
    assert all(k == 8 for k in hosts_of(topo, alloc.gpus).values())
    one = hived(request(topo, 16, set(topo.gpus) - busy))
    assert one is not None and len(tors_of(topo, one.gpus)) == 1
    assert tors_of(topo, one.gpus) != {topo.hosts[2].tors[0]}  # a ToR with one whole host cannot hold it


def test_hived_prefers_a_pod_on_lingjun(tmp_path: object) -> None:
    from pathlib import Path

    assert isinstance(tmp_path, Path)
    rows = (
        ["ip,DSW,PSW,ASW"]
        + [f"a{i},G6,P1,S{i // 2}" for i in range(6)]
        + [f"b{i},G6,P2,S{i // 2}" for i in range(4)]
    )
    (tmp_path / "topo.csv").write_text("\n".join(rows) + "\n")
    topo = load_lingjun_topo(tmp_path / "topo.csv")
    # pod P1: 3 ToRs x 2 hosts; pod P2: 2 ToRs x 2 hosts. 32 GPUs need 2 ToRs: P2 is the best-fitting pod.
    alloc = hived(request(topo, 32, set(topo.gpus)))
    assert alloc is not None
    assert {str(topo.host_of(g).label)[0] for g in alloc.gpus} == {"b"}
    assert len(tors_of(topo, alloc.gpus)) == 2


def test_hived_buddy_cells_within_a_host() -> None:
    topo = small()
    h0 = topo.hosts[0].gpus
    free = set(topo.gpus) - {h0[0]}
    a = hived(request(topo, 1, free))
    assert a is not None and a.gpus == (h0[1],)  # the free buddy of a used GPU, not a fresh host
    b = hived(request(topo, 4, free))
    assert b is not None and b.gpus == h0[4:8]  # the free 4-cell of the split host
    c = hived(request(topo, 3, free))
    assert c is not None and c.gpus == h0[4:7]  # a 3-GPU job takes a 4-cell


def test_hived_refuses_on_fragmentation_only() -> None:
    topo = two_layer_clos(tors=1, aggs=1, hosts_per_tor=1)
    g = topo.hosts[0].gpus
    free = {g[1], g[2], g[5]}  # 3 free GPUs, but no free 2-cell
    assert hived(request(topo, 2, free)) is None
    assert SCHEDULERS["pack"](request(topo, 2, free)) is not None
    assert muri(request(topo, 2, free)) is not None


def test_muri_pairs_complementary_jobs() -> None:
    topo = two_layer_clos(tors=1, aggs=1, hosts_per_tor=3)
    h = [hh.gpus for hh in topo.hosts]
    comm_heavy = PlacedJob(spec=job_from_model("g", "gnmt", gpus=4), gpus=h[0][:4])
    compute_heavy = PlacedJob(spec=job_from_model("r", "resnet50", gpus=4), gpus=h[1][:4])
    free = set(h[0][4:]) | set(h[1][4:]) | set(h[2])
    running = (comm_heavy, compute_heavy)
    assert comm_share(comm_heavy.spec) > 0.5
    assert comm_share(compute_heavy.spec) < 0.1
    a = muri(request(topo, 4, free, running, model="resnet50"))  # compute-heavy -> next to gnmt
    b = muri(request(topo, 4, free, running, model="gnmt"))  # communication-heavy -> next to resnet50
    assert a is not None and b is not None
    assert set(a.gpus) <= set(h[0]) and set(b.gpus) <= set(h[1])


def test_muri_multi_host_picks_complementary_tor() -> None:
    topo = two_layer_clos(tors=2, aggs=1, hosts_per_tor=3)
    h = [hh.gpus for hh in topo.hosts]
    running = (
        PlacedJob(spec=job_from_model("g", "gnmt", gpus=8), gpus=h[0]),  # ToR0
        PlacedJob(spec=job_from_model("r", "resnet50", gpus=8), gpus=h[3]),  # ToR1
    )
    free = set(topo.gpus) - set(h[0]) - set(h[3])
    a = muri(request(topo, 16, free, running, model="resnet50"))
    assert a is not None and tors_of(topo, a.gpus) == {topo.hosts[0].tors[0]}


# ------------------------------------------------------------------------------ property-based invariants
OPS = st.lists(
    st.tuples(st.booleans(), st.integers(min_value=1, max_value=40), st.integers(0, 99)), max_size=25
)


def check_sequence(fn: PlacementFn, name: str, ops: list[tuple[bool, int, int]]) -> None:
    topo = small()
    free = set(topo.gpus)
    running: list[PlacedJob] = []
    for i, (arrive, n, pick) in enumerate(ops):
        if not arrive and running:
            gone = running.pop(pick % len(running))
            free |= set(gone.gpus)
            continue
        alloc: Allocation | None = fn(
            request(topo, n, free, tuple(running), model=("bert", "gnmt", "resnet50")[pick % 3])
        )
        if alloc is None:
            # pack, first-fit and Muri refuse only when too few GPUs are free; HiveD may also refuse on
            # fragmentation
            assert name == "hived" or len(free) < n
            continue
        assert set(alloc.gpus) <= free  # never a busy GPU
        assert len(alloc.gpus) == n == len(set(alloc.gpus))
        if n <= 8:
            assert len(hosts_of(topo, alloc.gpus)) == 1 or name in {"pack", "muri", "first-fit"}
        if name == "hived" and n > 8:
            assert sum(k != 8 for k in hosts_of(topo, alloc.gpus).values()) <= 1  # one partial host at most
            assert len(hosts_of(topo, alloc.gpus)) == math.ceil(n / 8)
        free -= set(alloc.gpus)
        running.append(PlacedJob(spec=job_from_model(f"j{i}", "bert", gpus=n), gpus=alloc.gpus))


@pytest.mark.parametrize("name", sorted(SCHEDULERS))
@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_invariants_over_random_sequences(name: str, ops: list[tuple[bool, int, int]]) -> None:
    check_sequence(SCHEDULERS[name], name, ops)


@settings(max_examples=60, deadline=None)
@given(ops=OPS)
def test_hived_minimal_tors(ops: list[tuple[bool, int, int]]) -> None:
    topo = small()
    free = set(topo.gpus)
    for i, (arrive, n, _) in enumerate(ops):
        if not arrive:
            continue
        alloc = hived(request(topo, n, free))
        if alloc is None:
            continue
        if n > 8:
            whole_per_tor = Counter(h.tors[0] for h in topo.hosts if set(h.gpus) <= free)
            need, total = 0, 0
            for c in sorted(whole_per_tor.values(), reverse=True):
                need, total = need + 1, total + 8 * c
                if total >= n:
                    break
            assert len(tors_of(topo, alloc.gpus)) == need, i
        free -= set(alloc.gpus)
