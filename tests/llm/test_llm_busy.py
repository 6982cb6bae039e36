"""GPU time is compute time: a pipelined job's GPUs waiting in the 1F1B bubble are not busy.

References written here: one GPU computes ``c = compute_s / (tp pp)`` per iteration (its share of one DP
replica's work); 1F1B runs ``m + pp - 1`` micro-batch slots of ``c / m`` on the critical path
(Narayanan et al., SC 2021, §2.2), so a compute-bound stage is busy ``m / (m + pp - 1)`` of the time.
"""

from __future__ import annotations

import pytest

from commsched.api.runner import simulate_scenario
from commsched.io.scenario import scenario_from_data
from commsched.sim.results.records import SimResult
from commsched.workload.grouped_jobs import resolve_model

# links so fast (1 Pb/s) that the pipeline sends and TP all-reduces take microseconds: compute-bound
FAST = {
    "kind": "two_layer_clos", "tors": 4, "aggs": 4, "hosts_per_tor": 2, "uplinks_per_tor": 8,
    "host_link_bps": 1.0e15, "uplink_bps": 1.0e15,
}  # fmt: skip


def _alone(model: str, tp: int, pp: int, dp: int, m: int, topology: dict[str, object]) -> SimResult:
    sc = scenario_from_data(
        {"topology": topology, "horizon_s": 3000, "policy": "ecmp-fair", "mode": "exact", "jobs": [
            {"id": "p", "model": model, "gpus": tp * pp * dp, "iterations": 3,
             "parallel": {"tp": tp, "pp": pp, "dp": dp, "micro_batches": m}}]},
        source="busy",
    )  # fmt: skip
    return simulate_scenario(sc)


@pytest.mark.parametrize(
    ("model", "tp", "pp", "dp", "m"),
    [("gpt3-crux@h200-bf16", 8, 2, 4, 4), ("gpt3-crux@h200-bf16", 8, 4, 1, 8), ("gpt-175b@h200", 4, 4, 2, 2)],
)
def test_a_pipelined_job_alone_is_busy_its_compute(model: str, tp: int, pp: int, dp: int, m: int) -> None:
    res = _alone(model, tp, pp, dp, m, FAST)
    (job,) = res.jobs
    gpus = tp * pp * dp
    c = resolve_model(model).compute_s / (tp * pp)  # one GPU's compute per iteration, no bubble
    assert job.iterations == 3
    # busy GPU-seconds: 3 iterations of gpus x c; the utilisation over the job's GPUs is c / T
    assert job.busy_gpu_s == pytest.approx(3 * gpus * c, rel=1e-9)
    assert res.allocated_gpu_utilization == pytest.approx(c / job.mean_iteration_s, rel=1e-3)


@pytest.mark.parametrize(("pp", "dp", "m"), [(2, 4, 4), (4, 2, 8), (8, 1, 8)])
def test_a_compute_bound_pipeline_is_busy_m_over_m_plus_pp_minus_one(pp: int, dp: int, m: int) -> None:
    """GPT-175B without TP: its pipeline sends take 1e-5 of the compute on 1 Pb/s links."""
    res = _alone("gpt-175b@h200", 1, pp, dp, m, FAST)
    c = resolve_model("gpt-175b@h200").compute_s / pp
    assert res.jobs[0].mean_iteration_s == pytest.approx(c * (m + pp - 1) / m, rel=1e-3)
    assert res.allocated_gpu_utilization == pytest.approx(m / (m + pp - 1), rel=1e-3)


def test_the_issue_figure_tp8_pp2_dp4_four_micro_batches() -> None:
    """0.317 = compute / T, not 0.396 = the bubble-stretched compute / T (issue figures, A100 hosts)."""
    topo = {"kind": "two_layer_clos", "tors": 4, "aggs": 4, "hosts_per_tor": 2}
    res = _alone("gpt3-crux@h200-bf16", 8, 2, 4, 4, topo)
    c = resolve_model("gpt3-crux@h200-bf16").compute_s / 16
    t = res.jobs[0].mean_iteration_s
    assert res.allocated_gpu_utilization == pytest.approx(c / t, rel=1e-3)
    assert res.allocated_gpu_utilization < c * (4 + 2 - 1) / 4 / t - 0.05  # not the stretched compute
