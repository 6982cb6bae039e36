"""A grouped job alone: the closed form from its traffic, by hand, and against the engine for jobs with
data-parallel groups only (the jobs with blocking groups: tests/llm/test_llm_engine_streams.py)."""

from __future__ import annotations

import pytest

from commsched.api.runner import simulate_scenario
from commsched.io.scenario import scenario_from_data
from commsched.scheduling.grouped_time import grouped_standalone_s, grouped_times
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import job_traffic
from commsched.topology import NodeId
from commsched.topology.builders import two_layer_clos
from commsched.workload.grouped_jobs import grouped_job
from commsched.workload.parallel import ParallelSpec

TOPO = {"kind": "two_layer_clos", "tors": 2, "aggs": 2, "hosts_per_tor": 2}


def test_times_from_the_traffic_by_hand() -> None:
    topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)  # A100 hosts: NVSwitch 2.4 Tb/s, 200 Gb/s NICs
    job = grouped_job("g", "gpt3-crux", gpus=16, parallel=ParallelSpec(tp=8, pp=2))
    t = grouped_times(
        topo,
        PlacedJob(spec=job, gpus=topo.gpus[:16]),
        job_traffic(topo, PlacedJob(spec=job, gpus=topo.gpus[:16])),
    )
    a = 16 * 2048 * 1024 * 2  # one micro-batch (the whole batch of 16) of activations, bf16
    # PP: 8 chains send a at once from host 0 to host 1; two GPUs share each 200 Gb/s NIC
    assert t.pp_send_s == pytest.approx(2 * a * 8 / 200e9, rel=1e-3)
    # TP: 4 all-reduces of a per layer, 12 layers per stage, as one ring of 48 a over 8 GPUs of a host
    # (both stages at once, on their own hosts): 2 (n - 1) steps of 48 a / 8 through each GPU's NVLink
    assert t.tp_s == pytest.approx(14 * (48 * a / 8) * 8 / 2.4e12, rel=1e-3)
    assert t.dp_s == 0.0 and t.stages == 2


@pytest.mark.parametrize(
    ("model", "parallel"),
    [
        ("bert-large", {"dp": 16}),  # ZeRO 1: reduce-scatter + all-gather
        ("gpt3-crux", {"dp": 16, "zero": 0}),  # one all-reduce
        ("mixtral-8x7b@h200", {"dp": 16, "micro_batches": 2}),  # MoE: dense and expert shards
    ],
)
def test_engine_iteration_alone_equals_the_closed_form(model: str, parallel: dict[str, int]) -> None:
    sc = scenario_from_data(
        {"topology": TOPO, "horizon_s": 60, "policy": "crux-full", "jobs": [
            {"id": "x", "model": model, "gpus": parallel["dp"], "parallel": parallel, "iterations": 3}]},
        source="x",
    )  # fmt: skip
    (res,) = simulate_scenario(sc).jobs
    placed = PlacedJob(spec=sc.jobs[0].spec, gpus=tuple(NodeId(g) for g in res.placement))
    assert res.iterations == 3
    assert res.mean_iteration_s == pytest.approx(grouped_standalone_s(sc.topology, placed), rel=0.01)
