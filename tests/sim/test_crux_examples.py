"""Crux Example 1 (crux-spec A1, A4) through the simulator and the scenario file of the foundation issue."""

from __future__ import annotations

from pathlib import Path

import pytest

from commsched.api.runner import simulate_scenario
from commsched.io.scenario import scenario_from_text
from commsched.sim.results.metrics import theorem1
from commsched.sim.results.records import Mode
from commsched.topology.builders import single_link

from .helpers import job, run

EXAMPLE1 = """
topology: {kind: single_link, capacity_bps: 8.0e9}
priority_levels: 8
policy: static          # static: use the priorities written on the jobs (0 = highest)
horizon_s: 120
jobs:
  - {id: a, gpus: 10, compute_s: 2.0, comm_bytes: 2.0e9, overlap: 1.0, priority: PA}
  - {id: b, gpus: 10, compute_s: 1.0, comm_bytes: 1.0e9, overlap: 1.0, priority: PB}
"""


@pytest.mark.parametrize(("pa", "pb", "expected"), [(0, 1, 0.375), (1, 0, 5 / 12)])
@pytest.mark.parametrize("mode", ["exact", "fast"])
def test_example1_yaml_120s(pa: int, pb: int, expected: float, mode: str) -> None:
    # 120 s from a cold aligned start: the first 12 s are a transient (A1's trap, 0.4167 / 0.4583);
    # over 120 s its weight is small enough that the average is within 0.005 of the steady state.
    sc = scenario_from_text(EXAMPLE1.replace("PA", str(pa)).replace("PB", str(pb)), source="example1.yaml")
    res = simulate_scenario(sc, mode=mode)
    assert res.cluster_gpus == 20
    assert res.gpu_utilization == pytest.approx(expected, abs=0.005)


@pytest.mark.parametrize(("pa", "pb", "expected"), [(0, 1, 0.375), (1, 0, 5 / 12)])
def test_example1_steady_state_window_is_exact(pa: int, pb: int, expected: float) -> None:
    # excluding the first period (12 s = lcm of the contended periods) gives the steady state exactly
    topo = single_link(capacity_bps=8e9)
    jobs = [
        job("a", compute_s=2.0, comm_bytes=2e9, gpus=10, priority=pa),
        job("b", compute_s=1.0, comm_bytes=1e9, gpus=10, priority=pb),
    ]
    res = run(topo, jobs, horizon_s=132.0, warmup_s=12.0)
    assert res.gpu_utilization == pytest.approx(expected, abs=1e-9)


@pytest.mark.parametrize(("pa", "pb"), [(0, 1), (1, 0)])
def test_theorem1_on_example1(pa: int, pb: int) -> None:
    topo = single_link(capacity_bps=8e9)
    jobs = [
        job("a", compute_s=2.0, comm_bytes=2e9, gpus=10, priority=pa),
        job("b", compute_s=1.0, comm_bytes=1e9, gpus=10, priority=pb),
    ]
    res = run(topo, jobs, horizon_s=1200.0)
    th = theorem1(res, topo, topo.link_id("a", "b"))
    assert th.ratio == pytest.approx(1.0, abs=0.01)
    # both jobs have intensity W/t = 20 GPU-s / 2 s = 10 GPU-s / 1 s = 10
    assert [j.intensity for j in res.jobs] == [pytest.approx(10.0), pytest.approx(10.0)]


def test_example1_link_time_a2() -> None:
    # crux-spec A2: per 12 s with job a first, the link carries 6 s of a and 3 s of b
    topo = single_link(capacity_bps=8e9)
    jobs = [
        job("a", compute_s=2.0, comm_bytes=2e9, gpus=10, priority=0),
        job("b", compute_s=1.0, comm_bytes=1e9, gpus=10, priority=1),
    ]
    res = run(topo, jobs, horizon_s=120.0, warmup_s=12.0)
    by = {j.id: j for j in res.jobs}
    # steady state: a iterates every 4 s (30 per 120 s), b every 4 s as well (it waits for a)
    assert by["a"].mean_iteration_s == pytest.approx(4.0, rel=1e-6)
    assert res.link_bytes[topo.link_id("a", "b")] / 1e9 == pytest.approx(120 * 9 / 12, rel=0.02)


def test_example_file_in_repo_is_valid() -> None:
    from commsched.io.scenario import load_scenario

    root = Path(__file__).resolve().parents[2]
    sc = load_scenario(root / "examples" / "crux-example1.yaml")
    assert sc.horizon_s == 120 and len(sc.jobs) == 2
    assert Mode(sc.mode) is Mode.EXACT
