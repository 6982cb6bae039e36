"""The daemon decides with the same code as ``commsched plan``; the profiling top class; paths and ports."""

from __future__ import annotations

from dataclasses import replace
from importlib import resources

import pytest

from commsched.cli.cmd_plan import plan_json
from commsched.io.scenario import load_scenario
from commsched.runtime.daemon import Cause, ClusterConfig, JobRecord, decide
from commsched.scheduling.dscp import default_dscp_table, dscp_for_level
from commsched.topology.builders import crux_testbed
from commsched.topology.ecmp import path_for_port


def _fig19() -> tuple[object, list[JobRecord]]:
    path = resources.files("commsched") / "scenarios" / "crux-fig19.yaml"
    sc = load_scenario(str(path))
    jobs = [
        JobRecord(
            id=str(j.spec.id),
            gpus=tuple(map(str, j.gpu_ids)),
            compute_s=j.spec.profile.compute_s,
            comm_bytes=j.spec.profile.sync_bytes,
            overlap=j.spec.profile.overlap,
            collective=j.spec.collective,
            started_s=float(i),
            profiling=False,
        )
        for i, j in enumerate(sc.jobs)
    ]
    return sc, jobs


@pytest.mark.parametrize("policy", ["crux-full", "ecmp-fair", "crux-pa"])
def test_same_decisions_as_plan(policy: str) -> None:
    sc, jobs = _fig19()
    cfg = ClusterConfig(topology={"kind": "crux_testbed"}, policy=policy, priority_levels=8)
    doc = decide(sc.topology, cfg, jobs, version=0, cause=Cause(kind="test"))  # type: ignore[attr-defined]
    ref = plan_json(sc, policy, seed=0, hash_name="murmur3")
    for row in ref["jobs"]:
        got = doc["jobs"][row["id"]]
        assert (got["rank"], got["class"], got["dscp"]) == (row["rank"], row["class"], row["dscp"])
    ref_conns = {(c["job"], c["src"], c["dst"]): (c["path"], c["src_port"]) for c in ref["connections"]}
    assert doc["connections"]
    for c in doc["connections"]:
        full, port = ref_conns[(c["job"], c["src"], c["dst"])]
        network = full[full.index(c["src_nic"]) : full.index(c["dst_nic"]) + 1]
        assert (network, port) == (c["path"], c["src_port"])
    got_conns = {(c["job"], c["src"], c["dst"]) for c in doc["connections"]}
    assert {k for k, v in ref_conns.items() if v[1] is not None} == got_conns


def test_paths_ports_and_dscp_are_consistent() -> None:
    sc, jobs = _fig19()
    topo = sc.topology  # type: ignore[attr-defined]
    doc = decide(
        topo, ClusterConfig(topology={"kind": "crux_testbed"}), jobs, version=4, cause=Cause(kind="t")
    )
    table = default_dscp_table()
    for info in doc["jobs"].values():
        assert info["dscp"] == dscp_for_level(table, info["class"])
        assert info["tos"] == info["dscp"] << 2
    for c in doc["connections"]:
        path = path_for_port(topo, c["src_nic"], c["dst_nic"], c["src_port"], "murmur3")
        assert [str(n) for n in path.nodes] == c["path"]
        assert [int(x) for x in path.links] == c["links"]
        gpus = doc["jobs"][c["job"]]["gpus"]
        assert gpus[c["src_rank"]] == c["src"] and gpus[c["dst_rank"]] == c["dst"]
    per_link: dict[int, float] = {}
    for c in doc["connections"]:
        for link in c["links"]:
            per_link[link] = per_link.get(link, 0.0) + 1
    assert {r["link"] for r in doc["link_load"]} == set(per_link)


def test_profiling_jobs_take_the_top_class_alone() -> None:
    sc, jobs = _fig19()
    topo = sc.topology  # type: ignore[attr-defined]
    cfg = ClusterConfig(topology={"kind": "crux_testbed"}, priority_levels=4)
    settled = decide(topo, cfg, jobs, version=1, cause=Cause(kind="t"))
    new = [replace(jobs[0], profiling=True, started_s=99.0), *jobs[1:]]
    doc = decide(topo, cfg, new, version=2, cause=Cause(kind="t"))
    gpt = jobs[0].id
    assert doc["jobs"][gpt]["class"] == 0 and doc["jobs"][gpt]["rank"] == 0
    for jid, info in doc["jobs"].items():
        if jid != gpt:
            assert 1 <= info["class"] <= cfg.priority_levels - 1
            assert info["rank"] >= 1
    assert sorted(i["rank"] for i in doc["jobs"].values()) == list(range(len(jobs)))
    assert settled["jobs"][gpt]["profiling"] is False and doc["jobs"][gpt]["profiling"] is True
    one = decide(topo, replace(cfg, priority_levels=1), new, version=3, cause=Cause(kind="t"))
    assert {i["class"] for i in one["jobs"].values()} == {0}


def test_decision_is_reproducible() -> None:
    topo = crux_testbed()
    jobs = [
        JobRecord(id="a", gpus=("h0/gpu0", "h4/gpu0"), compute_s=0.1, comm_bytes=1e8, overlap=1.0),
        JobRecord(
            id="b", gpus=("h1/gpu0", "h5/gpu0"), compute_s=0.2, comm_bytes=4e8, overlap=1.0, started_s=1
        ),
    ]
    cfg = ClusterConfig(topology={"kind": "crux_testbed"})
    a = decide(topo, cfg, jobs, version=7, cause=Cause(kind="t"))
    b = decide(topo, cfg, list(reversed(jobs)), version=7, cause=Cause(kind="t"))
    assert a == b


@pytest.mark.parametrize("policy", ["ecmp", "sr", "vclos", "ocs-vclos"])
def test_vclos_bundles_are_served_with_the_routes_of_plan(policy: str) -> None:
    """The daemon serves a placement + routing bundle's routing on the jobs as placed."""
    path = resources.files("commsched") / "scenarios" / "vclos-testbed.yaml"
    sc = load_scenario(str(path))
    jobs = [
        JobRecord(
            id=str(j.spec.id),
            gpus=tuple(map(str, j.gpu_ids)),
            compute_s=j.spec.profile.compute_s,
            comm_bytes=j.spec.profile.sync_bytes,
            overlap=j.spec.profile.overlap,
            collective=j.spec.collective,
            started_s=float(i),
            profiling=False,
        )
        for i, j in enumerate(sc.jobs)
    ]
    cfg = ClusterConfig(topology=dict(sc.topology.params), policy=policy, priority_levels=1)
    doc = decide(sc.topology, cfg, jobs, version=0, cause=Cause(kind="test"))
    assert doc["policy"] == policy and {v["class"] for v in doc["jobs"].values()} == {0}
    ref = plan_json(sc, policy, seed=0, hash_name="murmur3")
    ref_paths = {  # the connections that cross the fabric (the intra-host ones have no port)
        (c["job"], c["src"], c["dst"]): c["path"] for c in ref["connections"] if c["src_port"] is not None
    }
    assert len(doc["connections"]) == len(ref_paths) > 0
    for c in doc["connections"]:
        full = ref_paths[(c["job"], c["src"], c["dst"])]
        assert full[full.index(c["src_nic"]) : full.index(c["dst_nic"]) + 1] == c["path"]
        assert c["src_port"] is not None
