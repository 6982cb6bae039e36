"""Policies through the simulator (Crux §2.2 setup), ``plan`` output, CASSINI shifts, microbench."""

from __future__ import annotations

import pytest

from commsched.cli.cmd_plan import plan_json
from commsched.errors import InputError
from commsched.experiments.microbench import MECHANISMS, MicrobenchConfig, run_case, run_microbench, summarise
from commsched.io.scenario import scenario_from_text
from commsched.scheduling.placement import pack
from commsched.scheduling.policies import communication_plans, communication_policies
from commsched.scheduling.state import PlacedJob
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import Mode, SimConfig
from commsched.topology.builders import single_link, two_layer_clos
from commsched.topology.ecmp import path_for_port
from commsched.workload import JobId, JobSpec
from commsched.workload.zoo import get_model

from .helpers import CTX, abstract, spec, state


def _gpt_bert(seed: int, policy: str) -> dict[str, float]:
    # Crux §2.2 / Fig. 7: GPT on 64 GPUs (4 hosts per ToR) + BERT on 16 GPUs (4 GPUs on 2 hosts per
    # ToR) under the same two ToRs, contending on oversubscribed ToR-Agg links (50 Gb/s vs 200 Gb/s NICs)
    topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=6, uplinks_per_tor=2, uplink_bps=50e9)

    def gpus(hosts: list[int], n: int) -> tuple:  # type: ignore[type-arg]
        return tuple(g for h in hosts for g in topo.hosts[h].gpus[:n])

    jobs = [
        SimJob(
            spec=JobSpec(id=JobId("gpt"), profile=get_model("GPT"), gpus=64),
            gpus=gpus([0, 1, 2, 3, 6, 7, 8, 9], 8),
        ),
        SimJob(
            spec=JobSpec(id=JobId("bert"), profile=get_model("bert"), gpus=16), gpus=gpus([4, 5, 10, 11], 4)
        ),
    ]
    sim = Simulation(
        topology=topo,
        jobs=jobs,
        policy=communication_policies()[policy],
        placement=pack,
        config=SimConfig(horizon_s=40.0, mode=Mode.FAST, seed=seed, warmup_s=8.0),
    )
    res = sim.run()
    out = {str(j.id): j.mean_iteration_s for j in res.jobs}
    out["util"] = res.allocated_gpu_utilization
    return out


def test_crux_full_beats_ecmp_fair_on_the_gpt_bert_setup() -> None:
    ecmp = _gpt_bert(0, "ecmp-fair")  # seed 0: ECMP hashes GPT and BERT onto one uplink
    crux = _gpt_bert(0, "crux-full")
    assert crux["gpt"] < ecmp["gpt"] * 0.9
    assert crux["util"] > ecmp["util"] + 0.05


def test_plan_json_ports_realise_the_paths() -> None:
    text = """
topology: {kind: two_layer_clos, tors: 2, aggs: 2, hosts_per_tor: 2, uplinks_per_tor: 2}
priority_levels: 3
policy: fair
horizon_s: 10
jobs:
  - {id: a, gpus: 16, compute_s: 0.3, comm_bytes: 2.0e9}
  - {id: b, gpus: 16, compute_s: 0.2, comm_bytes: 1.0e9}
  - {id: c, gpus: 8, compute_s: 0.2, comm_bytes: 1.0e9, arrival_s: 5}
"""
    sc = scenario_from_text(text, source="plan.yaml")
    out = plan_json(sc, "crux-full", seed=0, hash_name="murmur3")
    assert [j["id"] for j in out["jobs"]] == ["a", "b"] and out["waiting"] == ["c"]
    assert sorted(j["rank"] for j in out["jobs"]) == [0, 1]
    assert all(j["dscp"] is not None and j["k"] is not None for j in out["jobs"])
    topo = sc.topology
    net = [c for c in out["connections"] if c["src_port"] is not None]
    assert net
    for c in net:
        a, b = topo.nic_of(c["src"]), topo.nic_of(c["dst"])
        mid = path_for_port(topo, a, b, c["src_port"], "murmur3").nodes
        assert list(mid) == c["path"][c["path"].index(a) : c["path"].index(b) + 1]


def test_cassini_shifts_interleave_two_jobs_on_one_link() -> None:
    # two identical jobs, each sending half of its 2 s period: the best rotation puts them half a period apart
    jobs = [
        abstract(spec("x", compute_s=1.0, comm_bytes=1e9, gpus=1, overlap=1.0)),
        abstract(spec("y", compute_s=1.0, comm_bytes=1e9, gpus=1, overlap=1.0)),
    ]
    plan = communication_plans()["cassini"](state(single_link(capacity_bps=8e9), jobs), CTX)
    shifts = plan.decisions.time_shift_s
    assert abs(shifts["x"] - shifts["y"]) == pytest.approx(1.0)


def test_microbench_small_cases_are_within_the_optimum() -> None:
    cfg = MicrobenchConfig(jobs=3, hosts_per_job=(2, 2), min_hosts=6, max_hosts=8)
    results = [run_case(3, i, cfg) for i in range(2)]
    for r in results:
        assert 0 < r.optimum <= 1
        for m in MECHANISMS:
            assert r.ratios[m]
            assert all(0 < v <= 1 + 1e-6 for v in r.ratios[m].values())
    js = summarise(results).as_json()
    assert js["cases"] == 2 and set(js["mechanisms"]) == set(MECHANISMS)
    assert set(js["mechanisms"]["compression"]["crux"]) == {"mean", "p5"}


def test_microbench_rejects_ray_without_ray_and_bad_counts() -> None:
    pytest.importorskip("joblib")
    try:
        import ray  # noqa: F401
    except ImportError:
        with pytest.raises(InputError, match="Ray is not installed"):
            run_microbench(1, 0, ray_address="auto")
    with pytest.raises(InputError):
        run_microbench(0, 0)


def test_placed_job_helper_roundtrip() -> None:
    j = PlacedJob(spec=spec("z", compute_s=1.0, comm_bytes=0.0, gpus=2), gpus=())
    plan = communication_plans()["crux-full"](state(single_link(), [j]), CTX)
    assert plan.decisions.ranking == {"z": 0} and plan.intensity["z"] == 0.0
