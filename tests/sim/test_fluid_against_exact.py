"""The analytic fluid (``SimConfig.fluid_min_jobs``) against exact simulation where it must be exact.

The fluid is a mean-field approximation and outside the fast mode's error bound on crowded components
(``tests/sim/test_fast_crowded.py``), but two of its rules are exact and checked against the engine here:
a job alone in its class on its links runs at its standalone speed (strict priority: lower classes never
slow it), and a job alone runs at its standalone iteration time, every repetition of a step paying its
latency (a ring all-reduce repeats one step ``2 (n - 1)`` times).
"""

from __future__ import annotations

import numpy as np
import pytest

from commsched.scheduling.placement import pack
from commsched.scheduling.state import PlacedJob
from commsched.scheduling.traffic import job_traffic
from commsched.sim.engine import Simulation
from commsched.sim.fast.fluid import fluid_load, fluid_periods
from commsched.sim.results.records import Mode, SimConfig, SimResult
from commsched.testing.crowded import crowded_topology
from commsched.topology import NodeId

from .helpers import classes_policy, job

TOPO = crowded_topology(4.0)


def _ring(jid: str, hosts: list[int], gpus: list[int], *, compute_s: float, comm_bytes: float) -> PlacedJob:
    """A ring on the given GPUs of every host (GPUs 2k and 2k + 1 share NIC k)."""
    sj = job(jid, compute_s=compute_s, comm_bytes=comm_bytes, gpus=len(gpus) * len(hosts), overlap=0.5,
             gpu_ids=[f"h{h}/gpu{g}" for h in hosts for g in gpus])  # fmt: skip
    return PlacedJob(spec=sj.spec, gpus=tuple(NodeId(g) for g in sj.gpus))


def _simulate(placed: list[PlacedJob], classes: dict[str, int], mode: Mode, fluid_min_jobs: int) -> SimResult:
    from commsched.sim.engine import SimJob

    sim = Simulation(
        topology=TOPO,
        jobs=[SimJob(spec=p.spec, gpus=p.gpus) for p in placed],
        policy=classes_policy(classes),
        placement=pack,
        config=SimConfig(horizon_s=20.0, mode=mode, seed=1, fluid_min_jobs=fluid_min_jobs),
        priority_levels=4,
    )
    return sim.run()


def test_a_ring_alone_as_a_fluid_takes_its_standalone_time_latency_of_every_repetition_included() -> None:
    ring = _ring("solo", [0, 4, 8, 12], [0, 1], compute_s=0.01, comm_bytes=4e6)  # 8 ranks on four ToRs
    tr = job_traffic(TOPO, ring)
    cap = TOPO.capacity_bps / 8.0  # bits/s -> bytes/s
    load = fluid_load(tr, cap)
    assert any(s.repeat > 1 and s.latency_s > 0 for s in tr.steps)
    assert load.latency_s == pytest.approx(sum(s.repeat * s.latency_s for s in tr.steps), rel=1e-12)
    exact = _simulate([ring], {}, Mode.EXACT, 0)
    fluid = _simulate([ring], {}, Mode.FAST, 1)  # a component of one job runs as a fluid
    period = fluid_periods(
        loads=[load],
        compute_s=np.array([0.01]),
        overlap=np.array([0.5]),
        classes=np.array([0]),
        capacity_bytes_per_s=cap,
    )
    assert period is not None
    standalone = exact.jobs[0].standalone_iteration_s
    # latency is a visible part of this iteration: counting it once per step would be off by far more
    assert sum(s.repeat * s.latency_s for s in tr.steps) > 1e-3 * standalone
    assert exact.jobs[0].mean_iteration_s == pytest.approx(standalone, rel=1e-9)
    assert float(period[0]) == pytest.approx(standalone, rel=1e-9)
    assert fluid.jobs[0].mean_iteration_s == pytest.approx(standalone, rel=1e-6)


def test_the_highest_class_runs_at_its_standalone_speed_in_the_fluid_as_in_exact_mode() -> None:
    # one class-0 ring and three class-1 rings over three hosts under three ToRs; lo0 shares hi's NICs
    hosts = [0, 4, 8]
    placed = [
        _ring("hi", hosts, [0], compute_s=0.02, comm_bytes=2e8),
        *(_ring(f"lo{k}", hosts, [k + 1], compute_s=0.02, comm_bytes=2e8) for k in range(3)),
    ]
    classes = {"hi": 0, "lo0": 1, "lo1": 1, "lo2": 1}
    exact = _simulate(placed, classes, Mode.EXACT, 0)
    fluid = _simulate(placed, classes, Mode.FAST, 2)
    hi_e, hi_f = exact.jobs[0], fluid.jobs[0]
    assert hi_e.standalone_iteration_s == pytest.approx(hi_f.standalone_iteration_s)
    # strict priority: the lower class never slows the higher one, in either mode
    assert hi_e.mean_iteration_s == pytest.approx(hi_e.standalone_iteration_s, rel=1e-3)
    assert hi_f.mean_iteration_s == pytest.approx(hi_e.standalone_iteration_s, rel=1e-3)
    # and the lower class is slowed by the higher one where they share links
    assert exact.jobs[1].slowdown > 1.2 and fluid.jobs[1].slowdown > 1.2
