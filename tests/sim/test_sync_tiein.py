"""Jobs that synchronise by PS or BytePS, and jobs whose iteration time comes from an intra-job model."""

from __future__ import annotations

import pytest

from commsched.api.runner import simulate_scenario
from commsched.errors import ValidationError
from commsched.io.scenario import scenario_from_text
from commsched.topology import LinkKind

FABRIC = (
    "topology: {kind: two_layer_clos, tors: 2, aggs: 2, hosts_per_tor: 4, host_template: single_gpu_nic}\n"
)


def _nic_tx_bytes(res, topo) -> dict[str, float]:  # type: ignore[no-untyped-def]
    """Bytes each host's NIC sent into the fabric (its NIC -> ToR link)."""
    out: dict[str, float] = {}
    for lk in topo.links:
        if lk.kind is LinkKind.ACCESS and topo.node(lk.src).host is not None:
            out[str(topo.node(lk.src).host)] = float(res.link_bytes[lk.id])
    return out


def _run(job_line: str) -> tuple[object, object]:
    text = FABRIC + "policy: fair\nhorizon_s: 1000\njobs:\n  - " + job_line + "\n"
    sc = scenario_from_text(text, source="t.yaml")
    return simulate_scenario(sc), sc.topology


M = 1.0e9


def test_ps_traffic_per_machine() -> None:
    # 4 GPU machines (one GPU each), 2 CPU machines: each worker pushes M, each server receives 4M/2
    res, topo = _run(
        f"{{id: p, gpus: 4, compute_s: 0.1, comm_bytes: {M}, sync: ps, cpu_machines: 2, iterations: 3}}"
    )
    tx = _nic_tx_bytes(res, topo)
    (job,) = res.jobs
    workers = {topo.host_of(g).id for g in job.placement}
    for h, b in tx.items():
        if h in workers:
            assert b == pytest.approx(3 * M)  # push M per iteration
        elif b > 0:
            assert b == pytest.approx(3 * 4 * M / 2)  # a server pulls back n M / k per iteration
    assert sum(1 for h, b in tx.items() if h not in workers and b > 0) == 2


@pytest.mark.parametrize(("n", "k"), [(4, 0), (4, 2), (4, 4), (3, 1)])
def test_byteps_traffic_matches_the_formula(n: int, k: int) -> None:
    line = f"{{id: b, gpus: {n}, compute_s: 0.1, comm_bytes: {M}, sync: byteps, cpu_machines: {k}, "
    line += "iterations: 2}"
    res, topo = _run(line)
    tx = _nic_tx_bytes(res, topo)
    (job,) = res.jobs
    workers = {topo.host_of(g).id for g in job.placement}
    d = n * n + k * n - 2 * k
    for h in workers:
        assert tx[h] == pytest.approx(2 * 2 * n * (n - 1) * M / d)  # BytePS §4.1: 2n(n-1)M/D per direction
    if k:
        servers = [b for h, b in tx.items() if h not in workers and b > 0]
        assert servers == pytest.approx([2 * n * 2 * (n - 1) * M / d] * k)


def test_intrajob_policy_sets_iteration_time() -> None:
    times = {}
    for pol in ("wfbp", "mercury"):
        res, _ = _run(f"{{id: v, model: vgg16, gpus: 4, intrajob: {pol}, iterations: 3}}")
        (job,) = res.jobs
        times[pol] = job.standalone_iteration_s
        assert job.mean_iteration_s == pytest.approx(job.standalone_iteration_s, rel=1e-6)
    assert times["mercury"] <= times["wfbp"] + 1e-12


@pytest.mark.parametrize(
    ("line", "fragment"),
    [
        (
            "{id: p, gpus: 4, compute_s: 1, comm_bytes: 1e9, sync: ps}",
            "a parameter-server job without CPU machines",
        ),
        (
            "{id: p, gpus: 4, compute_s: 1, comm_bytes: 1e9, cpu_machines: 2}",
            "CPU machines given to an all-reduce job",
        ),
        ("{id: p, gpus: 4, model: vgg16, intrajob: magic}", "unknown intra-job policy 'magic'"),
        ("{id: p, gpus: 4, model: moe, intrajob: mercury}", "has no per-layer profile"),
        ("{id: p, gpus: 4, compute_s: 1, comm_bytes: 1e9, sync: gossip}", "jobs[0].sync"),
    ],
)
def test_bad_sync_input(line: str, fragment: str) -> None:
    with pytest.raises(ValidationError) as info:
        scenario_from_text(FABRIC + "horizon_s: 10\njobs:\n  - " + line + "\n", source="t.yaml")
    assert any(fragment in p for p in info.value.problems), info.value.problems
