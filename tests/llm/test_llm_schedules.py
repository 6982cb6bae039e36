"""Schedules a practitioner runs daily, each against its closed form written here by hand on a job alone:
sequence parallelism, interleaved 1F1B (``vpp``) and the DP reduce released in the last micro-batch's
backward. A100 hosts (two GPUs per 200 Gb/s NIC, NVSwitch 2.4 Tb/s per GPU, GPU to NIC over PCIe) under
one ToR; GPT-13B's shape: 40 layers, hidden 5120, seq 2048, batch 8 sequences per DP replica.
"""

from __future__ import annotations

import csv
from pathlib import Path

import pytest

from commsched.api.runner import simulate_scenario
from commsched.io.scenario import scenario_from_data
from commsched.sim.results.records import JobResult
from commsched.workload.grouped_jobs import grouped_job, resolve_model
from commsched.workload.parallel import GroupKind, ParallelSpec

NIC_BPS, NVLINK_BPS = 200e9, 2.4e12
MODEL = "gpt-13b@h200"
LAYERS, HIDDEN, SEQ, BATCH = 40, 5120, 2048, 8


def _alone(parallel: dict[str, object], hosts: int) -> JobResult:
    gpus = 1
    for k in ("tp", "pp", "dp"):
        gpus *= int(parallel.get(k, 1))  # type: ignore[call-overload]
    sc = scenario_from_data(
        {"topology": {"kind": "two_layer_clos", "tors": 1, "aggs": 1, "hosts_per_tor": hosts},
         "horizon_s": 1000, "policy": "crux-full", "mode": "exact",
         "jobs": [{"id": "x", "model": MODEL, "gpus": gpus, "iterations": 3, "parallel": parallel}]},
        source="alone",
    )  # fmt: skip
    (job,) = simulate_scenario(sc).jobs
    assert job.iterations == 3
    return job


def _act(m: int) -> float:
    """One micro-batch's bf16 activations: batch / m sequences x seq x hidden x 2 bytes."""
    return BATCH / m * SEQ * HIDDEN * 2


def test_sequence_parallel_pipeline_alone() -> None:
    """TP 8 x PP 2, 4 micro-batches, SP, on two hosts (stage s on host s): per layer and micro-batch 6
    all-gathers and 4 reduce-scatters of a in the TP group; each TP rank sends a / 8 to the next stage."""
    m, pp = 4, 2
    job = _alone({"tp": 8, "pp": pp, "micro_batches": m, "sp": True}, hosts=2)
    a = _act(m)
    c = resolve_model(MODEL, where="test").compute_s / 16
    # 20 layers per stage: one ring all-gather of 6 x 20 x 4 a and one ring reduce-scatter of 4 x 20 x 4 a
    # over the host's 8 GPUs, 7 steps of 1/8 of each through every GPU's NVLink
    t_tp = 7 * (480 + 320) * a / 8 * 8 / NVLINK_BPS
    t_send = 2 * (a / 8) * 8 / NIC_BPS  # 8 GPUs send a / 8 each, two per NIC
    expect = (m + pp - 1) / m * (c + t_tp) + 2 * (pp - 1) * t_send
    assert job.mean_iteration_s == pytest.approx(expect, rel=0.01)
    assert job.slowdown == pytest.approx(1.0, abs=1e-3)


def test_sequence_parallel_tp_collectives_are_those_of_aicbs_sp_log() -> None:
    """Per layer and micro-batch: AICB's GPT-13B SP log (one micro-batch) lists 6 all-gathers and 4
    reduce-scatters in the TP group of every layer (counted here), against 4 all-reduces without SP."""
    log = Path(
        "/work/shared/data/aicb-workloads/physical/model_workload/G13B-M1-C02_GPT13B_megatron_tp8_pp1_mbs1_sp.csv"
    )
    if not log.exists():
        pytest.skip("the AICB workloads are not on this machine")
    with log.open(newline="") as fh:
        rows = [r for r in csv.reader(fh) if len(r) == 12 and r[1] == "CommGroup.tp_group"]
    linear = [r for r in rows if "Linear" in r[4]]
    ag = sum(int(r[11]) for r in linear if r[0] == "CommType.all_gather") / LAYERS
    rs = sum(int(r[11]) for r in linear if r[0] == "CommType.reduce_scatter") / LAYERS
    job = grouped_job("s", MODEL, gpus=8, parallel=ParallelSpec(tp=8, sp=True))
    counts = {c.op: c.count for c in job.parallel.collectives if c.kind is GroupKind.TP}  # type: ignore[union-attr]
    assert (counts["all_gather"] / LAYERS, counts["reduce_scatter"] / LAYERS) == (ag, rs) == (6, 4)


def test_interleaved_pipeline_alone() -> None:
    """TP 8 x PP 2 with vpp 2 (10 layers per chunk), 4 micro-batches, no SP: the bubble is divided by 2,
    each micro-batch crosses 2 x 2 - 1 = 3 chunk boundaries each way (the last stage sends on to the
    first between chunks)."""
    m, pp, v = 4, 2, 2
    par = {"tp": 8, "pp": pp, "micro_batches": m, "vpp": v}
    job = _alone(par, hosts=2)
    a = _act(m)
    c = resolve_model(MODEL, where="test").compute_s / 16
    t_tp = 14 * (4 * 20 * m) * a / 8 * 8 / NVLINK_BPS  # 320 all-reduces of a: one ring, 14 steps
    t_send = 2 * a * 8 / NIC_BPS  # every TP rank sends the whole a (no SP), two per NIC
    expect = (v * m + pp - 1) / (v * m) * (c + t_tp) + 2 * (pp - 1) * t_send
    assert job.mean_iteration_s == pytest.approx(expect, rel=0.01)
    # fabric: 8 chains, 2 x 3 boundary crossings per micro-batch, each a, every one between the hosts
    fb = dict(job.fabric_bytes_per_iteration)
    assert fb["pp"] == pytest.approx(8 * 2 * (pp * v - 1) * m * a, rel=1e-9)
    # against the plain 1F1B: a bubble of (pp - 1) / m
    plain = _alone({"tp": 8, "pp": pp, "micro_batches": m}, hosts=2)
    assert plain.mean_iteration_s == pytest.approx(
        (m + pp - 1) / m * (c + t_tp) + 2 * (pp - 1) * t_send, rel=0.01
    )


def test_dp_reduce_starts_in_the_last_micro_batch() -> None:
    """TP 8 x DP 2, 4 micro-batches on two hosts: gradients are final only in the last micro-batch's
    backward, so the DP reduce-scatter (fp32) and all-gather (bf16) of the rank's shard start the
    overlap fraction o into the last micro-batch's compute (Megatron-LM's overlap-grad-reduce)."""
    m = 4
    job = _alone({"tp": 8, "dp": 2, "micro_batches": m}, hosts=2)
    base = resolve_model(MODEL, where="test")
    a = _act(m)
    c = base.compute_s / 8
    t_tp = 14 * (4 * LAYERS * m) * a / 8 * 8 / NVLINK_BPS
    s = base.sync_bytes / 8  # the rank's fp32 gradient shard
    t_dp = 2 * (s / 2 + s / 4) * 8 / NIC_BPS  # one step each of half of it, two GPUs per NIC
    b = c + t_tp
    start = b - (1 - base.overlap) * (c + t_tp) / m  # the DP goes over PCIe and NICs, TP over NVLink
    expect = max(b, start + t_dp)
    assert expect > 1.1 * max(b, base.overlap * b + t_dp)  # not the whole iteration's overlap
    assert job.mean_iteration_s == pytest.approx(expect, rel=0.01)
    assert job.slowdown == pytest.approx(1.0, abs=1e-3)
