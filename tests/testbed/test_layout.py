"""The pure half of the testbed: layout, configuration text, pins, scaling and state files (no root)."""

from __future__ import annotations

import pytest

from commsched.errors import InputError
from commsched.testbed import config, htb
from commsched.testbed.layout import check_name, plan_layout
from commsched.testbed.pinning import Pin, pin_lines, pins_from_plan, source_routing_pins
from commsched.testbed.scale import default_rate_scale, scale_bytes
from commsched.testbed.state import TestbedState, list_names, read_state, remove_state, write_state
from commsched.topology import LinkKind, crux_testbed, leaf_spine, two_layer_clos
from commsched.topology.records import NETWORK_LINK_KINDS

TOPOS = {
    "clos": lambda: two_layer_clos(tors=2, aggs=2, hosts_per_tor=2),
    "crux": crux_testbed,
    "ocs": lambda: leaf_spine(leaves=2, spines=2, gpus_per_host=1, hosts_per_leaf=2, ocs=True),
}


@pytest.mark.parametrize("kind", sorted(TOPOS))
def test_every_network_link_has_one_egress_and_intra_host_links_none(kind: str) -> None:
    topo = TOPOS[kind]()
    lay = plan_layout(topo, "cst0")
    egress = lay.egress()
    network = {lk.id for lk in topo.links if lk.kind in NETWORK_LINK_KINDS}
    assert set(egress) == network
    assert all(topo.links[lk].kind not in (LinkKind.NVLINK, LinkKind.PCIE) for lk in egress)
    assert all(len(iface) <= 15 for _, iface in egress.values())
    assert all(ns.startswith("cst0-") for ns in lay.namespaces)
    assert len(set(lay.namespaces)) == len(lay.namespaces) == len(topo.hosts) + len(lay.routers)
    ips = [e.ip for c in lay.cables for e in (c.a, c.b)]
    macs = [e.mac for c in lay.cables for e in (c.a, c.b)]
    assert len(set(ips)) == len(ips) and len(set(macs)) == len(macs)


def test_ocs_circuit_is_one_veth_carrying_both_of_its_links() -> None:
    topo = TOPOS["ocs"]()
    lay = plan_layout(topo, "cst0")
    kinds = {n.id: n.kind.value for n in topo.nodes}
    assert all(kinds[e.node] != "ocs" for c in lay.cables for e in (c.a, c.b))
    leaf_up = [c for c in lay.cables if c.a.node == "leaf0" and c.b.node.startswith("spine")]
    assert len(leaf_up) == 2
    for c in leaf_up:
        assert len(c.a.links_out) == 2  # leaf -> circuit, circuit -> spine
        assert topo.links[c.a.links_out[1]].dst == c.b.node


def test_ecmp_routes_offer_every_equal_cost_first_hop() -> None:
    topo = TOPOS["clos"]()  # 4 parallel cables per ToR-Agg pair: 8 uplinks, 32 paths between ToRs
    lay = plan_layout(topo, "cst0")
    lines = config.router_route_lines(lay)["cst0-tor0"]
    remote = [ln for ln in lines if ln.startswith("route add 10.0.2.1/32")]
    assert len(remote) == 1 and remote[0].count("nexthop") == 8
    n_paths = len(topo.equal_cost_paths("h0/nic0", "h2/nic0"))
    assert n_paths == 32


def test_router_hash_settings_and_seed_are_stable() -> None:
    s = config.router_sysctls(7, "tor0")  # type: ignore[arg-type]
    assert s["net.ipv4.fib_multipath_hash_policy"] == "3"
    assert s["net.ipv4.fib_multipath_hash_fields"] == "0x37"
    assert config.router_seed(7, "tor0") == config.router_seed(7, "tor0")  # type: ignore[arg-type]
    assert config.router_seed(7, "tor0") != config.router_seed(8, "tor0")  # type: ignore[arg-type]


def test_queues_are_eight_strict_classes_keyed_by_dscp_under_a_control_class() -> None:
    lines = htb.egress_tc_lines("c3", 2.5e8)
    leaves = [ln for ln in lines if "parent 1:1 classid 1:1" in ln]  # the job classes 1:10-1:17
    assert [f"classid 1:{10 + i} " in ln and f"prio {i} " in ln for i, ln in enumerate(leaves)] == [True] * 8
    assert all("ceil 250000000bit" in ln for ln in leaves)
    filters = [ln for ln in lines if ln.startswith("filter")]
    assert any(
        "match ip dsfield 0xb8 0xfc flowid 1:10" in ln for ln in filters
    )  # DSCP 46 -> highest job class
    # the control class (DSCP 48, CS6: TOS 0xc0): guaranteed 5 % of the 250 Mbit/s, so served first
    (control,) = [ln for ln in lines if "classid 1:9 " in ln]
    assert "rate 12500000bit ceil 250000000bit prio 0 " in control
    assert any("match ip dsfield 0xc0 0xfc flowid 1:9" in ln for ln in filters)
    assert len(filters) == 9
    assert htb.class_of_dscp(46) == 10 and htb.class_of_dscp(0) == 17 and htb.class_of_dscp(63) == 17


def test_rate_scale_and_byte_scale_agree() -> None:
    topo = crux_testbed()
    scale = default_rate_scale(topo)
    assert max(lk.capacity_bps for lk in topo.links if lk.kind in NETWORK_LINK_KINDS) * scale == 5e8
    # a transfer takes as long on the testbed as on the cluster: bytes and rate scale together
    size, rate = 100e6, 200e9
    assert scale_bytes(size, scale) * 8 / (rate * scale) == pytest.approx(size * 8 / rate)
    with pytest.raises(InputError):
        scale_bytes(1.0, 2.0)


def test_names_are_checked() -> None:
    assert check_name("cst12") == "cst12"
    for bad in ("", "1abc", "Abc", "a-b", "a" * 17):
        with pytest.raises(InputError):
            check_name(bad)


def test_state_file_round_trip(tmp_path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("COMMSCHED_TESTBED_DIR", str(tmp_path))
    st = TestbedState(
        name="cst9",
        topology={"kind": "crux_testbed"},
        rate_scale=0.0025,
        routing="ecmp",
        seed=3,
        namespaces=("cst9-h0",),
        phase="links",
    )
    write_state(st)
    assert read_state("cst9") == st
    assert list_names() == ("cst9",)
    remove_state("cst9")
    assert list_names() == ()
    with pytest.raises(InputError, match="no testbed named"):
        read_state("cst9")


def test_source_routing_pins_one_vclos_path_per_pair() -> None:
    topo = leaf_spine(leaves=2, spines=2, gpus_per_host=1, hosts_per_leaf=2)
    pins = source_routing_pins(topo)
    assert len(pins) == 8  # 4 NICs, pairs under different leaves
    for pin in pins:
        assert pin.links in {p.links for p in topo.equal_cost_paths(pin.src, pin.dst)}
    # default leaf map: down port i -> up port i, so the two NICs of a leaf use different spines
    spine = {(p.src, p.dst): topo.links[p.links[1]].dst for p in pins}
    assert spine[("h0/nic0", "h2/nic0")] != spine[("h1/nic0", "h2/nic0")]
    lines = pin_lines(plan_layout(topo, "cst0"), pins)
    assert set(lines) == {"cst0-leaf0", "cst0-leaf1", "cst0-spine0", "cst0-spine1"}
    assert sum(ln.startswith("rule add pref 300") for ls in lines.values() for ln in ls) == 8 * 3


def test_plan_connections_become_pins() -> None:
    topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2, uplinks_per_tor=2)  # no parallel cables
    path = topo.gpu_route("h0/gpu0", "h2/gpu0", 1)
    plan = {
        "connections": [{"src": "h0/gpu0", "dst": "h2/gpu0", "path": list(path.nodes), "src_port": 40000}]
    }
    (pin,) = pins_from_plan(topo, plan)
    assert pin.links == topo.equal_cost_paths("h0/nic0", "h2/nic0")[1].links and pin.sport == 40000
    lines = pin_lines(plan_layout(topo, "cst0"), [pin])
    assert any("ipproto tcp sport 40000" in ln for ln in lines["cst0-tor0"])
    with pytest.raises(InputError):
        pins_from_plan(topo, {"jobs": []})
    bad = Pin(src=pin.src, dst=pin.dst, links=pin.links[:-1])
    assert bad.to_json()["links"] == list(pin.links[:-1])


def test_the_testbed_layer_never_imports_sim_cli_or_experiments() -> None:
    import ast
    from pathlib import Path

    import commsched.testbed as pkg

    banned = ("commsched.sim", "commsched.cli", "commsched.experiments", "commsched.runtime")
    for path in Path(pkg.__path__[0]).glob("*.py"):
        tree = ast.parse(path.read_text())
        for node in ast.walk(tree):
            names = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module:
                names = [node.module]
            assert not [n for n in names if n.startswith(banned)], (path.name, names)


def test_probe_result_round_trip_and_lookup() -> None:
    import json

    from commsched.testbed.probe import PairProbe, ProbeResult, nic_pairs
    from commsched.topology import LinkId, NodeId

    a, b = NodeId("h0/nic0"), NodeId("h2/nic0")
    p1, p2 = (LinkId(1), LinkId(5)), (LinkId(1), LinkId(7))
    res = ProbeResult(dport=5201, pairs=(PairProbe(src=a, dst=b, ports={p1: 20003}, missing=(p2,)),))
    back = ProbeResult.from_json(json.loads(json.dumps(res.to_json())))
    assert back.source_port(a, b, [1, 5]) == 20003 and back.coverage == 0.5
    with pytest.raises(InputError, match="no port found"):
        back.source_port(a, b, [1, 7])
    with pytest.raises(InputError, match="not probed"):
        back.source_port(b, a, [1, 5])
    topo = TOPOS["crux"]()
    sample = nic_pairs(topo, limit=40, seed=3)
    assert len(sample) == 40 and sample == nic_pairs(topo, limit=40, seed=3)
    assert all(topo.node(s).host != topo.node(d).host for s, d in sample)  # intra-host pairs excluded
