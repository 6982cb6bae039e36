"""All-to-all as NCCL runs it, and a job alone whose TP crosses hosts: the engine against closed forms
written here by hand from the model's shape, the rank layout and the A100 host (one 200 Gb/s NIC per
two GPUs, 2.4 Tb/s NVSwitch per GPU), on hosts under one ToR (no route changes a step's time).

NCCL's ``ncclAllToAll`` / PyTorch's ``all_to_all_single`` post a send and a receive to every peer inside
one group: every peer's share is in flight at once, and the step takes its most loaded link's bytes
over its capacity. The pairwise variant runs ``n - 1`` rounds one after another, round ``k`` sending to
the peer ``k`` places on.
"""

from __future__ import annotations

import pytest

from commsched.api.runner import simulate_scenario
from commsched.io.scenario import scenario_from_data
from commsched.sim.results.records import JobResult
from commsched.workload.grouped_jobs import resolve_model

NIC_BPS, NVLINK_BPS = 200e9, 2.4e12


def _alone(model: str, parallel: dict[str, object], hosts: int) -> JobResult:
    gpus = int(parallel["tp"]) * int(parallel.get("pp", 1)) * int(parallel["dp"])  # type: ignore[call-overload]
    sc = scenario_from_data(
        {"topology": {"kind": "two_layer_clos", "tors": 1, "aggs": 1, "hosts_per_tor": hosts},
         "horizon_s": 1000, "policy": "crux-full", "mode": "exact",
         "jobs": [{"id": "x", "model": model, "gpus": gpus, "iterations": 3, "parallel": parallel}]},
        source="alone",
    )  # fmt: skip
    (job,) = simulate_scenario(sc).jobs
    assert job.iterations == 3
    return job


def _mixtral_forms(alltoall: str) -> float:
    """Mixtral 8x7B, tp 2, dp 8, ep 8, 4 micro-batches on two 8-GPU hosts (closed form by hand).

    Shape (AICB's Mistral 8x7B): 32 layers, all MoE, hidden 4096, seq 2048, batch 8, top-2; one
    micro-batch of 2 sequences carries ``a = 2 x 2048 x 4096 x 2`` bytes of bf16 activations.
    """
    a = 2 * 2048 * 4096 * 2
    base = resolve_model("mixtral-8x7b@h200", where="test")
    c = base.compute_s / 2  # tp 2, pp 1: no bubble
    # TP: MoE with TP runs sequence parallelism (Megatron-LM requires it with EP): per layer and
    # micro-batch 6 all-gathers and 4 reduce-scatters of a (6 x 32 x 4 = 768 a, 512 a) over a GPU pair of
    # one host: a 2-rank ring, one step of half of each through each GPU's NVLink
    t_tp = (384 + 256) * a * 8 / NVLINK_BPS
    # EP: 512 all-to-alls of a k / tp = a per rank; the EP group of TP index t is ranks t + 2d, d < 8:
    # four on each host. Each rank sends 512 a / 8 = 64 a to each of its 7 peers, 4 of them on the
    # other host; two GPUs share a NIC. At once: every NIC sends 2 x 4 x 64 a. In rounds: round k,
    # member j sends to j + k mod 8; every round has members crossing, and the NIC of GPUs 2d, 2d + 1
    # (the same member of both groups) then carries 2 x 64 a
    r = 2 * 64 * a * 8 / NIC_BPS
    t_ep = 8 * 64 * a * 8 / NIC_BPS if alltoall == "grouped" else 7 * r
    # the DP rings (below) cross hosts from member 3 to 4 and from 7 to 0: their NICs are those of
    # GPUs 6, 7 (host 0 up), 8, 9 (host 1 down), 14, 15 (host 1 up) and 0, 1 (host 0 down). The grouped
    # all-to-all holds every NIC; of the rounds, k = 1..4 cross on those NICs (3 -> 3 + k >= 4, 7 ->
    # 7 + k - 8 < 4; 4 - k -> 4, 8 - k -> 0), k = 5..7 not
    held = t_ep if alltoall == "grouped" else 4 * r
    b = c + t_tp + t_ep
    # DP (ZeRO 1): reduce-scatter (fp32) + all-gather (bf16, half) of the dense shard over the 8 ranks
    # t + 2d (a ring crossing hosts twice; two rings on each crossing NIC): 7 steps of S / 8 and 7 of
    # S / 16; the expert shard has dp / ep = 1 rank, no traffic. Gradients are final in the last
    # micro-batch's backward: the DP starts the fraction o into its (c + T_tp + T_ep) / 4, and makes no
    # progress while the TP ring holds the NVLinks its ring uses within a host and the all-to-alls the
    # NICs (they go first)
    s = base.sync_bytes / 2 * (1 - _expert_share())
    t_dp = 7 * 2 * (s / 8 + s / 16) * 8 / NIC_BPS
    start = b - (1 - base.overlap) * (c + t_tp + t_ep) / 4
    return max(b, _paused_end(start, t_dp, (c, c + t_tp + held)))


def _expert_share() -> float:
    """Mixtral's expert parameters over all: 32 x 8 experts x 3 h F against attention, experts and
    the embedding (shape of AICB's Mistral 8x7B: h 4096, F 14336, vocabulary 32000)."""
    h, f, v = 4096.0, 14336.0, 32000.0
    expert = 32 * 8 * 3 * h * f
    return expert / (32 * 4 * h * h + expert + v * h)


@pytest.mark.parametrize("alltoall", ["grouped", "pairwise"])
def test_moe_job_alone_matches_its_all_to_all_closed_form(alltoall: str) -> None:
    par: dict[str, object] = {"tp": 2, "dp": 8, "ep": 8, "micro_batches": 4}
    if alltoall != "grouped":
        par["alltoall"] = alltoall
    job = _alone("mixtral-8x7b@h200", par, hosts=2)
    assert job.mean_iteration_s == pytest.approx(_mixtral_forms(alltoall), rel=0.01)
    assert job.slowdown == pytest.approx(1.0, abs=1e-3)


def test_grouped_all_to_all_is_the_default_and_beats_the_rounds() -> None:
    par = {"tp": 2, "dp": 8, "ep": 8, "micro_batches": 4}
    grouped = _alone("mixtral-8x7b@h200", par, hosts=2)
    rounds = _alone("mixtral-8x7b@h200", {**par, "alltoall": "pairwise"}, hosts=2)
    # the rounds take 7 x 2 / (2 x 4) = 1.75 times the grouped all-to-all's time on the NICs
    assert grouped.mean_iteration_s < rounds.mean_iteration_s
    assert rounds.mean_iteration_s - grouped.mean_iteration_s == pytest.approx(
        _mixtral_forms("pairwise") - _mixtral_forms("grouped"), rel=0.01
    )


def _paused_end(start: float, work: float, span: tuple[float, float]) -> float:
    """A stream needing ``work`` seconds of a link from ``start``, paused while ``span`` holds it."""
    a, b = span
    if start + work <= a or start >= b:
        return start + work
    if start < a:
        return b + work - (a - start)
    return b + work


@pytest.mark.parametrize("model", ["gpt3-crux", "gpt-13b@h200"])
def test_tp_across_hosts_alone_is_its_own_standalone(model: str) -> None:
    """``gpus: 32, tp 16, dp 2`` on four 8-GPU hosts: each TP group spans two hosts."""
    job = _alone(model, {"tp": 16, "dp": 2}, hosts=4)
    base = resolve_model(model, where="test")
    name = model.split("@", maxsplit=1)[0]
    layers, hidden, seq, batch = {"gpt3-crux": (24, 1024, 2048, 16), "gpt-13b": (40, 5120, 2048, 8)}[name]
    a = batch * seq * hidden * 2  # one micro-batch (the whole batch) of bf16 activations
    c = base.compute_s / 16
    # TP: 4 L all-reduces of a merged into one ring of 4 L a over 16 ranks on two hosts: 30 steps of
    # 4 L a / 16; the ring crosses hosts on two edges, one GPU's flow on its NIC at 200 Gb/s (the
    # NVLink edges keep its pace)
    t_tp = 30 * (4 * layers * a / 16) * 8 / NIC_BPS
    # DP (ZeRO 1): ranks t and t + 16 on hosts two apart; reduce-scatter of the fp32 shard S = M / 16
    # and all-gather of its bf16 parameters (S / 2), one step each of half of them, two GPUs per NIC
    s = base.sync_bytes / 16
    t_dp = 2 * (s / 2 + s / 4) * 8 / NIC_BPS
    b = c + t_tp
    # the TP ring holds the NIC of GPUs 6 and 7 that the DP uses too: the DP makes no progress then
    expect = max(b, _paused_end(base.overlap * b, t_dp, (c, b)))
    assert job.mean_iteration_s == pytest.approx(expect, rel=1e-3)
    assert job.slowdown == pytest.approx(1.0, abs=1e-3)
