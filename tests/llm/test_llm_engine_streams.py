"""A grouped job alone through ``commsched simulate --json``: its blocking and data-parallel streams in
flight side by side, its iteration the closed form of its schedule (1F1B bubble, blocking all-to-all,
overlapped DP), computed here by hand or from the job's projected steps, never by the engine's code."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from typer.testing import CliRunner

from commsched.api.runner import simulate_scenario
from commsched.cli.app import app
from commsched.io.scenario import load_scenario
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import job_traffic
from commsched.topology import NodeId, Topology
from commsched.topology.records import NETWORK_LINK_KINDS
from commsched.workload.grouped_jobs import resolve_model

runner = CliRunner()
# one leaf: every path between two hosts is NIC -> leaf -> NIC (routes cannot change a step's time)
TOPO = "{kind: two_layer_clos, tors: 1, aggs: 1, hosts_per_tor: %d}"
NIC_BPS, NVLINK_BPS = 200e9, 2.4e12  # A100 hosts: one 200 Gb/s NIC per two GPUs, NVSwitch per GPU


def _run(tmp_path: Path, job: str, hosts: int) -> tuple[dict[str, Any], Path]:
    """``commsched simulate --json`` of one job alone; its JSON result and the scenario's path."""
    path = tmp_path / "alone.yaml"
    path.write_text(
        f"topology: {TOPO % hosts}\npolicy: crux-full\nhorizon_s: 1000\njobs:\n  - {job}\n", encoding="utf-8"
    )
    res = runner.invoke(app, ["simulate", str(path), "--json"])
    assert res.exit_code == 0, res.stderr
    (out,) = json.loads(res.stdout)["jobs"]
    return out, path


def test_dense_job_alone_by_hand(tmp_path: Path) -> None:
    """GPT-3 350M, TP 8 x PP 2 x DP 2, 4 micro-batches, on 4 hosts of 8 GPUs."""
    out, _ = _run(
        tmp_path,
        "{id: g, model: gpt3-crux, gpus: 32, iterations: 4, "
        "parallel: {tp: 8, pp: 2, dp: 2, micro_batches: 4}}",
        hosts=4,
    )
    base = resolve_model("gpt3-crux", where="test")  # one replica's iteration on one GPU
    tp, pp, m = 8, 2, 4
    c = base.compute_s / (tp * pp)
    act = 16 * 2048 * 1024 * 2 / m  # one micro-batch's activations: batch 16 / m x seq x hidden, bf16
    # TP: 4 all-reduces of act per layer and micro-batch, 12 layers per stage: one ring of 48 m act over
    # the 8 GPUs of a host (all stages and replicas at once, each on its own host), 2 (n - 1) steps
    t_tp = 2 * (tp - 1) * (48 * m * act / tp) * 8 / NVLINK_BPS
    # PP: one send of act from each GPU of a stage to its peer on the next stage's host; two GPUs share
    # each NIC
    t_send = 2 * act * 8 / NIC_BPS
    # DP (ZeRO 1): reduce-scatter then all-gather of the stage's gradient shard M / (tp pp) over 2 ranks
    # on two hosts: one step each, (n - 1) / n of the shard per rank, two ranks per NIC
    shard = base.sync_bytes / (tp * pp)
    t_dp = 2 * (2 * shard / 2) * 8 / NIC_BPS
    blocking = (m + pp - 1) * (c + t_tp) / m + 2 * (pp - 1) * t_send
    expect = max(blocking, base.overlap * blocking + t_dp)
    assert out["iterations"] == 4
    assert out["mean_iteration_s"] == pytest.approx(expect, rel=0.01)
    assert out["standalone_iteration_s"] == pytest.approx(expect, rel=0.01)


def _paused_end(start: float, work: float, spans: list[tuple[float, float]]) -> float:
    """A stream needing ``work`` seconds of its links from ``start``, making no progress in ``spans``."""
    t, left = start, work
    for a, b in sorted(spans):
        if left <= 0 or b <= t:
            continue
        if a > t:
            run = min(left, a - t)
            t, left = t + run, left - run
        if left > 0:
            t = max(t, b)
    return t + left


def _closed_form(topo: Topology, placed: PlacedJob, model: str) -> dict[str, float]:
    """The closed form of the job's 1F1B schedule from its projected steps, each step alone at its most
    loaded link (bits over bits/s)::

        B = (m + pp - 1) x / m + T_fill + T_drain       x = c + T_tp + T_ep (compute, blocking steps)
        D = the DP steps from max(B - (1 - o) x / m, T_steady), needing T_dp outside W's spans
        T = max(B, D)

    The fill and the drain are the first and the last ``pp - 1`` pipeline sends (the first micro-batch's
    forward, the last one's backward); the steady state's sends overlap the compute from the start and
    the DP steps follow them, released the fraction ``o`` into the last micro-batch's compute (its
    gradients are final only in its backward). ``W``: the blocking steps on a link of the DP steps (a
    GPU's NVLink, a NIC) hold it at full rate and go first, and a DP ring moves in lockstep with its
    slowest link: while they run (after the compute, in the traffic's order, the fill and drain last)
    the DP steps make no progress.
    """
    par = placed.spec.parallel
    assert par is not None
    tp, pp, m = par.parallel.tp, par.parallel.pp, par.parallel.micro_batches
    base = resolve_model(model, where="test")
    network = topo.links_of_kind(NETWORK_LINK_KINDS)
    steps = job_traffic(topo, placed).steps
    times = [s.repeat * (s.latency_s + float(np.max(s.bytes_per_rep * 8.0 / topo.capacity_bps[s.links])))
             for s in steps]  # fmt: skip
    c = base.compute_s / (tp * pp)
    k = (m + pp - 1) / m
    sums = {"tp": 0.0, "ep": 0.0, "dp": 0.0}
    spans: list[tuple[float, float]] = []
    dp_links = np.concatenate([s.links for s in steps if s.group == "dp"] or [np.zeros(0, np.int64)])
    at = k * c  # the blocking steps after the compute, each stretched by the bubble
    for s, t in zip(steps, times, strict=True):
        if s.group != "pp":
            sums[s.group] += t
            if s.group != "dp":
                if np.isin(s.links, dp_links).any():  # NVLink or NIC: the DP ring waits
                    spans.append((at, at + k * t))
                at += k * t
    # one entry per send (a step repeated r times is r sends in a row)
    pp_times = [
        t / s.repeat for s, t in zip(steps, times, strict=True) if s.group == "pp" for _ in range(s.repeat)
    ]
    edge = pp - 1
    fill_drain = sum(pp_times[:edge]) + sum(pp_times[len(pp_times) - edge :]) if edge else 0.0
    steady = sum(pp_times[edge : len(pp_times) - edge]) if edge else 0.0
    if fill_drain and np.isin(network, dp_links).any():
        spans.append((at, at + fill_drain))  # the stages' hosts differ: the sends hold the DP's NICs
    x = c + sums["tp"] + sums["ep"]
    blocking = k * x + fill_drain
    start = max(blocking - (1 - base.overlap) * x / m, steady)
    dp_end = _paused_end(start, sums["dp"], spans) if sums["dp"] > 0 else start
    return {
        "T": max(blocking, dp_end),
        "serial": blocking + steady + sums["dp"],
        "B": blocking,
        "ep": sums["ep"],
        "dp": sums["dp"],
        "steady": steady,
    }


CONFIGS = [
    # model, parallel, GPUs, hosts
    ("gpt3-crux", "{tp: 8, pp: 4, micro_batches: 8}", 32, 4),  # a deep pipeline: bubble and sends
    ("gpt3-crux", "{tp: 4, pp: 2, dp: 4, micro_batches: 4}", 32, 4),  # TP, PP and DP together
    ("mixtral-8x7b@h200", "{tp: 2, dp: 16, ep: 8, micro_batches: 2}", 32, 4),  # MoE: EP all-to-all
    ("mixtral-8x7b@h200", "{tp: 2, pp: 2, dp: 8, ep: 4, micro_batches: 4}", 32, 4),  # MoE pipelined
    ("gpt-13b@h200", "{tp: 8, dp: 8, zero: 0}", 64, 8),  # one DP all-reduce, exposed
    ("mixtral-8x7b@h200", "{tp: 4, dp: 8, ep: 8, micro_batches: 4}", 32, 4),  # MoE, DP in the last slot
    ("gpt-13b@h200", "{tp: 8, dp: 2}", 16, 2),  # one micro-batch: the DP hides under the compute
]


@pytest.mark.parametrize(("model", "parallel", "gpus", "hosts"), CONFIGS)
def test_engine_alone_equals_the_closed_form(
    tmp_path: Path, model: str, parallel: str, gpus: int, hosts: int
) -> None:
    out, path = _run(
        tmp_path, f"{{id: x, model: {model}, gpus: {gpus}, iterations: 3, parallel: {parallel}}}", hosts
    )
    sc = load_scenario(path)
    (res,) = simulate_scenario(sc).jobs  # the placement the CLI's run used (deterministic)
    placed = PlacedJob(spec=sc.jobs[0].spec, gpus=tuple(NodeId(g) for g in res.placement))
    cf = _closed_form(sc.topology, placed, model)
    assert out["iterations"] == 3
    assert out["mean_iteration_s"] == pytest.approx(cf["T"], rel=0.01)
    if "ep" in parallel:
        assert cf["ep"] > 0.0  # the all-to-alls block the compute
    if cf["dp"] > 0.0 and cf["T"] < 0.99 * cf["serial"]:
        # the DP stream overlaps the blocking one: the engine beats running them one after the other
        assert out["mean_iteration_s"] < 0.99 * cf["serial"]


def test_some_config_exposes_dp_and_some_hides_it(tmp_path: Path) -> None:
    """Both branches of ``max(B, o B + T_dp)`` are met by the configurations above."""
    exposed = hidden = 0
    for k, (model, parallel, gpus, hosts) in enumerate(CONFIGS):
        d = tmp_path / str(k)
        d.mkdir()
        _, path = _run(
            d, f"{{id: x, model: {model}, gpus: {gpus}, iterations: 1, parallel: {parallel}}}", hosts
        )
        sc = load_scenario(path)
        (res,) = simulate_scenario(sc).jobs
        cf = _closed_form(
            sc.topology, PlacedJob(spec=sc.jobs[0].spec, gpus=tuple(map(NodeId, res.placement))), model
        )
        exposed += cf["T"] > cf["B"] * 1.01
        hidden += cf["dp"] > 0 and cf["T"] == cf["B"]
    assert exposed >= 1 and hidden >= 1


def test_fast_mode_runs_grouped_jobs_in_detail() -> None:
    """A component holding a grouped job is never extrapolated: its jobs' results in fast mode are the
    exact mode's, bit for bit (the flat bert, alone in its component, may be extrapolated)."""
    from dataclasses import replace

    from commsched.io.shipped import resolve_scenario

    sc = replace(resolve_scenario("llm-h200"), horizon_s=12.0)
    exact = {j.id: j for j in simulate_scenario(sc, mode="exact").jobs}
    fast = {j.id: j for j in simulate_scenario(sc, mode="fast").jobs}
    for k in ("mixtral", "llama65b", "gpt350m", "gpt13b"):
        assert (fast[k].iterations, fast[k].mean_iteration_s) == (
            exact[k].iterations,
            exact[k].mean_iteration_s,
        )
    assert fast["bert"].iterations == exact["bert"].iterations


def test_streams_put_every_byte_of_the_iteration_on_its_links(tmp_path: Path) -> None:
    """Stretched steps (bubble) and split pipeline steps (fill, drain, steady state) carry the traffic's
    bytes: after 3 iterations each link has carried 3 times its bytes per iteration, no more, no less."""
    _, path = _run(
        tmp_path,
        "{id: x, model: mixtral-8x7b@h200, gpus: 32, iterations: 3, "
        "parallel: {tp: 2, pp: 2, dp: 8, ep: 4, micro_batches: 4}}",
        hosts=4,
    )
    sc = load_scenario(path)
    res = simulate_scenario(sc)
    (job,) = res.jobs
    assert job.iterations == 3
    traffic = job_traffic(
        sc.topology, PlacedJob(spec=sc.jobs[0].spec, gpus=tuple(map(NodeId, job.placement)))
    )
    expect = np.zeros(res.link_bytes.size)
    expect[traffic.link_ids] = 3 * traffic.link_bytes
    assert np.allclose(res.link_bytes, expect, rtol=1e-9, atol=1e-3)
