"""Invariants every builder must satisfy, closed-form path counts, and the registry edge."""

from __future__ import annotations

from collections import Counter

import numpy as np
import pytest

from commsched.errors import InputError, TopologyError, UnknownNameError
from commsched.topology import (
    NodeId,
    NodeKind,
    Topology,
    build_topology,
    crux_testbed,
    host_templates,
    leaf_spine,
    oversubscription,
    single_link,
    three_layer_double_sided,
    topology_builders,
    two_layer_clos,
)
from commsched.topology.paths import SWITCH_KINDS
from tests.paths import SHARED_DATA

LINGJUN = str(SHARED_DATA / "alibaba-lingjun-2023" / "topo.csv")

SMALL: dict[str, dict[str, object]] = {
    "single_link": {},
    "two_layer_clos": {"tors": 3, "aggs": 2, "hosts_per_tor": 2, "uplinks_per_tor": 4},
    "three_layer_double_sided": {"tors": 4, "aggs": 4, "cores": 2, "pods": 2, "hosts_per_tor_pair": 2},
    "leaf_spine": {"leaves": 3, "spines": 4, "gpus_per_host": 4},
    "leaf_spine_ocs": {"leaves": 3, "spines": 4, "gpus_per_host": 4, "ocs": True},
    "crux_testbed": {},
    "clos_pcie_only": {"tors": 2, "aggs": 2, "hosts_per_tor": 2, "host_template": "pcie_only"},
    "clos_nvlink_byteps": {"tors": 2, "aggs": 2, "hosts_per_tor": 1, "host_template": "nvlink_byteps"},
    "clos_single_gpu": {"tors": 2, "aggs": 3, "hosts_per_tor": 2, "host_template": "single_gpu_nic"},
    "dual_homed_4nic": {
        "tors": 2,
        "aggs": 2,
        "cores": 1,
        "pods": 1,
        "hosts_per_tor_pair": 2,
        "host_template": "a100_8gpu_4nic",
    },
}


def _build(name: str) -> Topology:
    kind = name if name in topology_builders() else name.rsplit("_", 1)[0]
    kind = {
        "leaf_spine_ocs": "leaf_spine",
        "clos_pcie_only": "two_layer_clos",
        "clos_nvlink_byteps": "two_layer_clos",
        "clos_single_gpu": "two_layer_clos",
        "dual_homed_4nic": "three_layer_double_sided",
    }.get(name, kind)
    return build_topology(kind, SMALL[name])


@pytest.fixture(scope="module", params=sorted(SMALL))
def topo(request: pytest.FixtureRequest) -> Topology:
    return _build(request.param)


def test_every_link_has_its_reverse(topo: Topology) -> None:
    pairs = Counter((lk.src, lk.dst, lk.capacity_bps, lk.kind) for lk in topo.links)
    for (a, b, cap, kind), n in pairs.items():
        assert pairs[(b, a, cap, kind)] == n


def test_params_record_the_kind(topo: Topology) -> None:
    assert topo.params["kind"] in topology_builders()


def _contiguous(topo: Topology, nodes: tuple[NodeId, ...], links: tuple[int, ...]) -> None:
    assert len(links) == len(nodes) - 1
    for i, lid in enumerate(links):
        lk = topo.link(lid)
        assert (lk.src, lk.dst) == (nodes[i], nodes[i + 1])


def test_every_gpu_reaches_sampled_others(topo: Topology) -> None:
    gpus = topo.gpus
    if not gpus:
        pytest.skip("abstract topology")
    rng = np.random.default_rng(7)
    for _ in range(40):
        a, b = rng.choice(len(gpus), size=2, replace=False)
        for choice in (0, 3):
            path = topo.gpu_route(gpus[a], gpus[b], choice)
            assert path.nodes[0] == gpus[a] and path.nodes[-1] == gpus[b]
            _contiguous(topo, path.nodes, path.links)


def test_network_paths_match_the_bfs_reference(topo: Topology) -> None:
    ends = [n for h in topo.hosts for n in h.nics] or [NodeId("a"), NodeId("b")]
    rng = np.random.default_rng(3)
    for _ in range(15):
        a, b = rng.choice(len(ends), size=2, replace=False)
        fast = topo.equal_cost_paths(ends[a], ends[b])
        ref = topo._shortest_paths(ends[a], ends[b], SWITCH_KINDS)
        assert sorted(p.links for p in ref) == [p.links for p in fast]  # same set, canonical order
        for p in fast:
            _contiguous(topo, p.nodes, p.links)
            assert all(topo.node(n).kind in SWITCH_KINDS for n in p.nodes[1:-1])


def test_unknown_parameter_lists_the_valid_ones() -> None:
    with pytest.raises(InputError, match=r"unknown parameter 'tor'.*expected one of tors, aggs"):
        build_topology("two_layer_clos", {"tor": 3})
    with pytest.raises(UnknownNameError):
        build_topology("fat_tree", {})
    with pytest.raises(InputError, match="missing parameter 'path'"):
        build_topology("lingjun", {})


@pytest.mark.parametrize(
    ("kwargs", "where"),
    [
        ({"tors": 0}, "topology.tors"),
        ({"uplinks_per_tor": 3}, "topology.uplinks_per_tor"),
        ({"host_link_bps": -1.0}, "topology.host_link_bps"),
        ({"links_per_host": 6}, "topology.links_per_host"),
        ({"host_template": "dgx"}, "topology.host_template"),
    ],
)
def test_bad_clos_parameters(kwargs: dict[str, object], where: str) -> None:
    with pytest.raises(InputError) as info:
        build_topology("two_layer_clos", kwargs)
    assert info.value.where == where


# ------------------------------------------------------------------ closed forms
@pytest.mark.parametrize(("aggs", "uplinks"), [(2, 2), (2, 8), (4, 4), (3, 6)])
def test_two_layer_path_count(aggs: int, uplinks: int) -> None:
    topo = two_layer_clos(tors=3, aggs=aggs, hosts_per_tor=2, uplinks_per_tor=uplinks)
    p = uplinks // aggs
    paths = topo.equal_cost_paths("h0/nic1", "h2/nic3")
    assert len(paths) == aggs * p * p
    assert [q.nodes[2] for q in paths[:: p * p]] == [f"agg{k}" for k in range(aggs)]  # canonical order
    assert len(topo.equal_cost_paths("h0/nic0", "h1/nic2")) == 1  # same ToR


def test_two_layer_oversubscription() -> None:
    topo = two_layer_clos(hosts_per_tor=4, uplinks_per_tor=8, host_link_bps=200e9, uplink_bps=100e9)
    assert oversubscription(topo) == pytest.approx(16 * 200 / (8 * 100))
    assert oversubscription(two_layer_clos()) == pytest.approx(1.0)


def test_three_layer_path_counts() -> None:
    topo = three_layer_double_sided(tors=8, aggs=6, cores=5, pods=2, hosts_per_tor_pair=1)
    a = 3  # aggs per pod
    assert topo.host("h0").tors == ("tor0", "tor1")
    assert len(topo.equal_cost_paths("h0/nic0", "h3/nic0")) == a * 5 * a  # other pod: aggs x cores x aggs
    assert len(topo.equal_cost_paths("h0/nic0", "h1/nic0")) == a  # same pod, other pair
    assert len(topo.equal_cost_paths("h0/nic0", "h0/nic1")) == a  # the two ToRs of one pair
    assert len(topo.equal_cost_paths("h0/nic0", "h0/nic2")) == 1  # same ToR
    assert oversubscription(topo) == pytest.approx(1.0)


def test_dual_port_nics_reach_both_tors() -> None:
    topo = three_layer_double_sided(
        tors=2, aggs=1, cores=1, pods=1, hosts_per_tor_pair=2, host_template="a100_8gpu_4nic"
    )
    assert topo.attached_switches("h0/nic3") == ("tor0", "tor1")
    assert len(topo.equal_cost_paths("h0/nic0", "h1/nic0")) == 2  # via either ToR


@pytest.mark.parametrize("ocs", [False, True])
def test_leaf_spine_path_count_is_the_number_of_spines(ocs: bool) -> None:
    topo = leaf_spine(leaves=4, spines=8, ocs=ocs)
    assert topo.n_gpus == 32 and len(topo.hosts[0].nics) == 8
    paths = topo.equal_cost_paths("h0/nic0", "h3/nic5")
    assert len(paths) == 8
    spines = [n for p in paths for n in p.nodes if n.startswith("spine")]
    assert spines == [f"spine{k}" for k in range(8)]
    assert oversubscription(topo) == pytest.approx(1.0)


def test_leaf_spine_parallel_uplinks_and_ocs_rewiring() -> None:
    topo = leaf_spine(leaves=2, spines=2, gpus_per_host=4, hosts_per_leaf=1)
    assert len(topo.equal_cost_paths("h0/nic0", "h1/nic0")) == 2 * 2 * 2  # spines x p^2, p = 2
    rewired = leaf_spine(
        leaves=2, spines=2, gpus_per_host=4, hosts_per_leaf=1, ocs=True, circuits=[[0, 0, 0, 1], [0, 1, 1, 1]]
    )
    assert len(rewired.nodes_of_kind(NodeKind.OCS)) == 8
    assert len(rewired.equal_cost_paths("h0/nic0", "h1/nic0")) == 3 * 1 + 1 * 3
    with pytest.raises(InputError, match="circuits"):
        leaf_spine(leaves=2, spines=2, gpus_per_host=4, circuits=[[0, 0, 0, 0], [0, 0, 0, 0]], ocs=True)
    with pytest.raises(InputError, match="without an OCS"):
        leaf_spine(leaves=2, spines=2, circuits=[[0]])


def test_crux_testbed_shape() -> None:
    topo = crux_testbed()
    assert (len(topo.hosts), topo.n_gpus) == (12, 96)
    assert len(topo.nodes_of_kind(NodeKind.TOR)) == 6 and len(topo.nodes_of_kind(NodeKind.AGG)) == 8
    for tor in topo.nodes_of_kind(NodeKind.TOR):
        assert sum(1 for lk in topo.out_links(tor.id) if topo.node(lk.dst).kind is NodeKind.NIC) == 8
    assert topo.nic_of("h3/gpu3") == "h3/nic1"
    assert oversubscription(topo) == pytest.approx(2.0)


def test_single_link() -> None:
    topo = single_link(capacity_bps=1e9, latency_s=1e-3)
    assert [(lk.src, lk.dst) for lk in topo.links] == [("a", "b"), ("b", "a")]
    assert not topo.hosts and topo.equal_cost_paths("a", "b")[0].links == (0,)
    with pytest.raises(TopologyError):
        topo.equal_cost_paths("a", "a")


def test_host_templates() -> None:
    reg = host_templates()
    a100 = reg.get("a100_8gpu_4nic")
    assert a100.gpu_nic == ("nic0", "nic0", "nic1", "nic1", "nic2", "nic2", "nic3", "nic3")
    assert reg.get("rail_8gpu").n_nics == 8 and reg.get("pcie_only").n_nics == 1
    topo = two_layer_clos(tors=1, aggs=1, hosts_per_tor=1, uplinks_per_tor=1)
    nv = topo.intra_host_path("h0/gpu0", "h0/gpu7")
    assert [topo.node(n).kind for n in nv.nodes] == [NodeKind.GPU, NodeKind.NVSWITCH, NodeKind.GPU]
    assert topo.node("h0/nic1").ip == (10 << 24) | 2
    byteps = two_layer_clos(tors=1, aggs=1, hosts_per_tor=1, uplinks_per_tor=1, host_template="pcie_only")
    route = byteps.intra_host_path("h0/gpu5", "h0/nic0")
    assert route.nodes == ("h0/gpu5", "h0/pcie1", "h0/cpu1", "h0/cpu0", "h0/nic0")


def test_switch_path_index_counts_all_tor_pairs() -> None:
    topo = two_layer_clos(tors=4, aggs=2, hosts_per_tor=1, uplinks_per_tor=2)
    assert topo.index_switch_paths() == 4 * 3 * 2
    assert len(topo.switch_paths("tor0", "tor3")) == 2
    with pytest.raises(TopologyError):
        topo.switch_paths("h0/nic0", "tor3")
