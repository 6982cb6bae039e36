"""A grouped job's traffic: TP inside hosts, each group routed per flow, fabric bytes in closed form."""

from __future__ import annotations

import math

import pytest

from commsched.scheduling.intensity import job_intensity
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import fabric_bytes_by_kind, job_connections, job_traffic
from commsched.topology.builders import two_layer_clos
from commsched.topology.records import INTRA_HOST_LINK_KINDS, NETWORK_LINK_KINDS
from commsched.workload.grouped_jobs import flattened, grouped_job
from commsched.workload.parallel import ParallelSpec
from commsched.workload.zoo import get_model


@pytest.fixture(scope="module")
def topo():  # type: ignore[no-untyped-def]
    return two_layer_clos(tors=4, aggs=2, hosts_per_tor=4)  # 16 hosts x 8 GPUs


def test_tp_traffic_never_reaches_a_fabric_link(topo) -> None:  # type: ignore[no-untyped-def]
    job = grouped_job("g", "gpt3-crux", gpus=64, parallel=ParallelSpec(tp=8, pp=2, dp=4, micro_batches=4))
    placed = PlacedJob(spec=job, gpus=topo.gpus[:64])
    tr = job_traffic(topo, placed)
    kinds = {lk.id: lk.kind for lk in topo.links}
    tp_steps = [s for s in tr.steps if s.group == "tp"]
    assert tp_steps and all(s.blocking for s in tp_steps)
    assert all(kinds[int(lid)] in INTRA_HOST_LINK_KINDS for s in tp_steps for lid in s.links)
    assert tr.fabric_bytes["tp"] == 0.0
    assert all(not s.blocking for s in tr.steps if s.group == "dp")
    # the PP sends and DP shards do cross hosts
    assert any(kinds[int(lid)] in NETWORK_LINK_KINDS for s in tr.steps if s.group == "pp" for lid in s.links)


def test_tp_across_hosts_reaches_the_fabric() -> None:
    from commsched.topology.hosts import rail_host

    topo4 = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2, host_template=rail_host(4))  # 4 GPUs per host
    job = grouped_job("g", "gpt3-crux", gpus=16, parallel=ParallelSpec(tp=8, dp=2))
    fb = fabric_bytes_by_kind(topo4, PlacedJob(spec=job, gpus=topo4.gpus[:16]))
    # a TP ring of 8 over two hosts of 4: 2 of its 8 edges cross, each carrying 2 (n-1) / n of every
    # all-reduce; 4 all-reduces of b s h e bytes per layer, 24 layers, one micro-batch; 2 TP groups
    a = 16 * 2048 * 1024 * 2
    assert fb["tp"] == pytest.approx(2 * 2 * (2 * 7 / 8) * (4 * 24 * a), rel=1e-9)


def test_ep_all_to_all_is_routed_per_pair_not_as_a_ring(topo) -> None:  # type: ignore[no-untyped-def]
    job = grouped_job(
        "m", "mixtral-8x7b@h200", gpus=32, parallel=ParallelSpec(tp=1, dp=32, ep=8, micro_batches=2)
    )
    gpus = topo.gpus[:32]
    conns = {(k.src, k.dst) for k in job_connections(topo, PlacedJob(spec=job, gpus=gpus))}
    # every ordered pair of an EP group (8 consecutive DP ranks) talks directly
    for g0 in range(0, 32, 8):
        for i in range(g0, g0 + 8):
            for j in range(g0, g0 + 8):
                if i != j:
                    assert (gpus[i], gpus[j]) in conns


def _mixtral_params() -> tuple[float, float]:
    """Mixtral-8x7B's parameters as the shape counts them: 4 h^2 attention and 8 experts of 3 h F per
    layer, and the V h embedding (AICB Workload_spec_v1.1: h 4096, F 14336, 32 layers, V 32000)."""
    h, f, layers, experts, vocab = 4096.0, 14336.0, 32, 8, 32000
    expert = layers * experts * 3 * h * f
    return layers * 4 * h * h + expert + vocab * h, expert


def test_flattened_and_grouped_moe_differ_by_a2a_pipeline_and_dp_in_closed_form(topo) -> None:  # type: ignore[no-untyped-def]
    tp, pp, dp, ep, m = 8, 2, 4, 2, 4
    job = grouped_job(
        "m", "mixtral-8x7b@h200", gpus=64, parallel=ParallelSpec(tp=tp, pp=pp, dp=dp, ep=ep, micro_batches=m)
    )
    gpus = topo.gpus[:64]  # 8 hosts; rank t + 8 (d + 4 s) on host d + 4 s
    grouped = fabric_bytes_by_kind(topo, PlacedJob(spec=job, gpus=gpus))
    flat = fabric_bytes_by_kind(topo, PlacedJob(spec=flattened(job), gpus=gpus))
    n = 64
    params, expert = _mixtral_params()
    sync = 4.0 * params  # fp32 gradients
    assert job.profile.sync_bytes == pytest.approx(sync)
    a = (8 / m) * 2048 * 4096 * 2  # one micro-batch's activations (8 sequences per replica, bf16)
    # EP: 16 MoE layers per stage x 4 all-to-alls x m micro-batches; each rank sends (ep-1)/ep of its
    # a * top_k / tp bytes, to a rank on another host
    ep_bytes = n * (16 * 4 * m) * (ep - 1) / ep * (a * 2 / tp)
    # PP: tp * dp chains, one boundary, m forward and m backward sends, host to host; MoE with TP runs
    # sequence parallelism (Megatron requires it with EP): each TP rank sends a / tp
    pp_bytes = tp * dp * (pp - 1) * 2 * m * a / tp
    # DP: reduce-scatter (fp32 gradients) + all-gather (bf16 parameters: half the bytes) of the dense
    # shard over dp ranks and of the expert shard over dp / ep ranks, every ring edge between hosts
    shard = sync / (tp * pp)
    dense, exp = shard * (1 - expert / params), shard * (expert / params) / ep
    dp_bytes = n * 1.5 * (dp - 1) / dp * dense + n * 1.5 * (dp // ep - 1) / (dp // ep) * exp
    # flattened: one ring all-reduce of sync over 64 GPUs in placement order: 8 of its edges cross hosts
    flat_bytes = 8 * 2 * (n - 1) * sync / n
    assert grouped["tp"] == 0.0
    assert grouped["ep"] == pytest.approx(ep_bytes, rel=1e-9)
    assert grouped["pp"] == pytest.approx(pp_bytes, rel=1e-9)
    assert grouped["dp"] == pytest.approx(dp_bytes, rel=1e-9)
    assert flat == pytest.approx({"tp": 0.0, "pp": 0.0, "dp": flat_bytes, "ep": 0.0}, rel=1e-9)
    diff = sum(grouped.values()) - sum(flat.values())
    assert diff == pytest.approx(ep_bytes + pp_bytes + (dp_bytes - flat_bytes), rel=1e-9)


def test_intensity_of_a_grouped_job_is_over_its_inter_host_traffic(topo) -> None:  # type: ignore[no-untyped-def]
    job = grouped_job("g", "gpt3-crux", gpus=64, parallel=ParallelSpec(tp=8, pp=2, dp=4, micro_batches=4))
    placed = PlacedJob(spec=job, gpus=topo.gpus[:64])
    tr = job_traffic(topo, placed)
    net = set(topo.links_of_kind(NETWORK_LINK_KINDS).tolist())
    t_net = max(
        b * 8 / topo.capacity_bps[lid]
        for lid, b in zip(tr.link_ids.tolist(), tr.link_bytes.tolist(), strict=True)
        if lid in net
    )
    got = job_intensity(topo, placed)
    assert math.isclose(got.bottleneck_s, t_net, rel_tol=1e-12)
    # W: 64 GPUs computing gpt3-crux's work over tp x pp = 16 GPUs each, the 1F1B bubble not counted
    work = 64 * get_model("gpt3-crux").compute_s / 16
    assert math.isclose(got.value, work / t_net, rel_tol=1e-12)


def test_ungrouped_job_reports_its_ring_under_dp(topo) -> None:  # type: ignore[no-untyped-def]
    from commsched.workload import job_from_model

    job = job_from_model("b", "bert-large", gpus=32)
    fb = fabric_bytes_by_kind(topo, PlacedJob(spec=job, gpus=topo.gpus[:32]))
    s = job.profile.sync_bytes
    assert fb == pytest.approx({"tp": 0.0, "pp": 0.0, "dp": 4 * 2 * 31 * s / 32, "ep": 0.0}, rel=1e-12)
