"""Alpha-beta timing of one ring all-reduce through the simulator (issue: ring acceptance)."""

from __future__ import annotations

import pytest

from commsched.topology.builders import two_layer_clos

from .helpers import job, run

GIB = float(1 << 30)


@pytest.mark.parametrize("n", [2, 3, 4, 8, 16, 32])
def test_ring_allreduce_duration_matches_alpha_beta(n: int) -> None:
    # one GPU per host, all hosts under one ToR: a non-blocking fabric; B = the NIC speed
    topo = two_layer_clos(tors=1, aggs=1, hosts_per_tor=n, host_template="single_gpu_nic", latency_s=2e-6)
    gpus = topo.gpus
    path = topo.gpu_route(gpus[0], gpus[1])
    alpha = float(topo.latency_s[list(path.links)].sum())
    b_bytes = float(topo.capacity_bps[list(path.links)].min()) / 8.0  # bits/s -> bytes/s
    compute = 1e-3
    j = job("ring", compute_s=compute, comm_bytes=GIB, gpus=n, iterations=1, gpu_ids=[str(g) for g in gpus])
    res = run(topo, [j], horizon_s=1e4)
    (r,) = res.jobs
    expected = 2 * (n - 1) * GIB / (n * b_bytes) + 2 * (n - 1) * alpha
    assert r.finished
    assert (r.end_s - compute) == pytest.approx(expected, rel=1e-3)
    assert r.standalone_iteration_s == pytest.approx(compute + expected, rel=1e-9)
