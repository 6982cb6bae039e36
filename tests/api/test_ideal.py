"""The ideal iteration: one reference for every policy (``commsched.sim.results.ideal``), held by closed
forms."""

from __future__ import annotations

import math

import pytest

from commsched.catalog import policy_registry
from commsched.scheduling.placement import pack
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import SimConfig, SimResult
from commsched.topology import NodeId, two_layer_clos
from commsched.workload import JobId, JobSpec, ModelProfile

B_BPS = 8e9  # every cable, bits/s: 1e9 bytes/s
M_BYTES = 4e8  # bytes all-reduced per iteration
C_S = 0.01  # compute per iteration
N = 4  # GPUs, one per host


def _topology():  # type: ignore[no-untyped-def]
    # two ToRs of two single-GPU hosts, two Aggs: between the ToRs two equal-cost paths (one per Agg)
    return two_layer_clos(
        tors=2, aggs=2, hosts_per_tor=2, host_template="single_gpu_nic",
        host_link_bps=B_BPS, uplink_bps=B_BPS, latency_s=0.0,
    )  # fmt: skip


def _job(**kw: object) -> SimJob:
    prof = ModelProfile(name="m", gpu="test", compute_s=C_S, sync_bytes=M_BYTES, overlap=1.0, source="test")
    spec = JobSpec(id=JobId("a"), profile=prof, gpus=N, **kw)  # type: ignore[arg-type]
    # ring order h0, h2, h1, h3: the flows h0->h2 and h1->h3 both leave ToR 0, h2->h1 and h3->h0 ToR 1;
    # alone, each pair can take one Agg each, and ECMP's hash may send a pair through the same one
    gpus = tuple(NodeId(f"h{h}/gpu0") for h in (0, 2, 1, 3))
    return SimJob(spec=spec, gpus=gpus)


def _run(policy: str, seed: int, **kw: object) -> SimResult:
    sim = Simulation(
        topology=_topology(),
        jobs=[_job(**kw)],
        policy=policy_registry().get(policy).communication,
        placement=pack,
        config=SimConfig(horizon_s=1e4, seed=seed),
        policy_name=policy,
    )
    return sim.run()


def _closed_form(k: float) -> float:
    """A ring all-reduce of M over N ranks, ``2 (N-1)`` steps of ``M / N`` each, every flow at ``B / k``."""
    per_step_s = (M_BYTES / N) / (B_BPS / 8.0 / k)  # bits/s -> bytes/s
    return C_S + 2 * (N - 1) * per_step_s


def test_the_ideal_is_the_ring_alone_with_its_flows_spread() -> None:
    r = _run("crux-full", 0, iterations=20)
    (j,) = r.jobs
    assert j.ideal_iteration_s == pytest.approx(_closed_form(1.0), rel=1e-9)
    assert j.slowdown == pytest.approx(1.0, rel=1e-9)


def test_an_ecmp_collision_is_slowdown_by_its_factor_and_spreading_is_none() -> None:
    """Alone on the cluster, a job whose ECMP routes put two of its flows on one uplink runs every step at
    half the pace: slowdown ``(c + 2 T) / (c + T)`` against the ideal under ecmp-fair (its standalone time
    on its own routes says 1), and 1 under crux-full, which spreads them."""
    collided = _closed_form(2.0) / _closed_form(1.0)
    seen = set()
    for seed in range(8):
        (e,) = _run("ecmp-fair", seed, iterations=20).jobs
        (c,) = _run("crux-full", seed, iterations=20).jobs
        assert e.ideal_iteration_s == c.ideal_iteration_s == pytest.approx(_closed_form(1.0), rel=1e-9)
        assert c.slowdown == pytest.approx(1.0, rel=1e-9)
        assert e.standalone_slowdown == pytest.approx(1.0, rel=1e-9)  # alone: no contention of others
        hit = math.isclose(e.slowdown, collided, rel_tol=1e-9)
        assert hit or math.isclose(e.slowdown, 1.0, rel_tol=1e-9), e.slowdown
        seen.add(hit)
    assert seen == {True, False}  # some seeds collide (3 in 4 on average), some do not


def test_a_duration_gives_the_same_iterations_under_every_policy() -> None:
    duration = 100 * _closed_form(1.0)
    targets = {
        (p, s): _run(p, s, duration_s=duration).jobs[0].target_iterations
        for p in ("ecmp-fair", "crux-full")
        for s in range(4)
    }
    assert set(targets.values()) == {100.0}
