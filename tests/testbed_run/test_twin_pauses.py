"""The twin of a command job runs the gaps between the synchronous steps of its ring (``pause_s``,
measured from its traffic) as time its links carry none of its bytes.

Two rings of two ranks on ``crux_testbed`` at the run's default rate scale (62.5 Mbit/s ToR-Agg
links), on the same uplink path both ways; expected values from the closed form of a ring of two
(each direction carries the gradients once per iteration, at the links' TCP goodput).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from commsched.experiments.testbed_run.twin import GOODPUT, MeasuredJob, TwinFacts, simulate_twin
from commsched.io.scenario import scenario_from_text
from commsched.topology import NodeId

RATE = 0.000625
BYTES = 2.0e6
COMPUTE = 0.2

TEXT = """
name: pauses
topology: {kind: crux_testbed}
priority_levels: 8
horizon_s: 60
jobs:
  - {id: top, hosts: [h0, h4], gpus_per_host: 1, compute_s: 0.2, comm_bytes: 2.0e6, overlap: 1.0}
  - {id: low, hosts: [h1, h5], gpus_per_host: 1, compute_s: 0.2, comm_bytes: 2.0e6, overlap: 1.0}
"""


def _twin(pause_s: float, *, alone: bool = False, step_latency_s: float | None = None) -> dict[str, float]:
    sc = scenario_from_text(TEXT, source="pauses")
    if alone:
        sc = replace(sc, jobs=sc.jobs[:1])
    topo = sc.topology
    emulated = {lk.id: lk.capacity_bps * RATE for lk in topo.links if lk.kind.value in ("access", "fabric")}
    paths: dict[tuple[str, str, str], tuple[int, ...]] = {}
    for job, a, b in (("top", "h0", "h4"), ("low", "h1", "h5")):
        for s, d in ((a, b), (b, a)):
            links = topo.equal_cost_paths(f"{s}/nic0", f"{d}/nic0")[0].links
            paths[(job, f"{s}/gpu0", f"{d}/gpu0")] = tuple(int(x) for x in links)
    measured = {
        "top": MeasuredJob(compute_s=COMPUTE, sync_bytes=BYTES, overlap=1.0,
                           gpus=(NodeId("h0/gpu0"), NodeId("h4/gpu0")), pause_s=pause_s),
        "low": MeasuredJob(compute_s=COMPUTE, sync_bytes=BYTES, overlap=1.0,
                           gpus=(NodeId("h1/gpu0"), NodeId("h5/gpu0"))),
    }  # fmt: skip
    res, unknown = simulate_twin(
        sc, policy="static", rate_scale=RATE, emulated=emulated, warmup_s=5.0, window_s=30.0,
        facts=TwinFacts(paths=paths, classes={"top": 0, "low": 1}, measured_jobs=measured,
                        step_latency_s=step_latency_s),
    )  # fmt: skip
    assert unknown == 0
    return {str(j.id): j.mean_iteration_s for j in res.jobs}


def _comm_s() -> float:
    uplink = 100e9 * RATE * GOODPUT  # bits/s of TCP payload on a ToR-Agg link
    return BYTES * 8 / uplink  # a ring of two: each direction carries the gradients once


def test_a_job_alone_pays_its_pauses_on_top_of_its_compute_and_bytes() -> None:
    """Alone on its path the job's iteration is its compute, its pauses and its bytes at the goodput;
    without the pauses the twin is that much faster (the bias of twins on paths of their own)."""
    expected = COMPUTE + 0.03 + _comm_s()
    assert _twin(0.03, alone=True)["top"] == pytest.approx(expected, rel=0.01)
    assert _twin(0.0, alone=True)["top"] == pytest.approx(expected - 0.03, rel=0.01)


def test_the_class_below_gets_the_links_during_the_pauses_of_the_class_above() -> None:
    """The top class's pauses leave its links to the class below, which runs faster than with the
    top class paused 0 or with the same time as the simulator's per-step latency (which holds the
    step's share of its links through the latency; the testbed run's crux-full rows of a class-1 job
    behind a class-0 ring were 8-22 % faster than their twins)."""
    paused, still = _twin(0.06), _twin(0.0)
    assert paused["top"] == pytest.approx(still["top"] + 0.06, rel=0.02)
    assert paused["low"] < 0.95 * still["low"]
    # the same 60 ms per iteration as link latency: two steps per iteration, four hops a path
    held = _twin(0.0, step_latency_s=0.03)
    assert held["low"] > paused["low"] * 1.03
