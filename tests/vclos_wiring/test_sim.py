"""The vClos bundles end to end in the simulator on a small leaf-spine."""

from __future__ import annotations

import numpy as np

from commsched.scheduling.vclos.bundles import vclos_bundles
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import Mode, SimConfig
from commsched.topology.builders import leaf_spine
from commsched.workload import JobId, JobSpec, ModelProfile

PROF = ModelProfile(name="heavy", gpu="x", compute_s=0.05, sync_bytes=2e9, overlap=0.5, source="test")


def _jobs() -> list[SimJob]:
    """Contended case: four 8-GPU jobs (2 hosts each) arriving together on 2 leaves x 2 spines."""
    return [
        SimJob(
            spec=JobSpec(
                id=JobId(f"j{i}"), profile=PROF, gpus=8, iterations=20, collective="hierarchical_ring"
            )
        )
        for i in range(4)
    ]


def _run(name: str) -> float:
    topo = leaf_spine(leaves=4, spines=4, gpus_per_host=4, hosts_per_leaf=1)
    b = next(x for x in vclos_bundles() if x.name == name)
    tp = b.topology(topo) if b.topology else topo
    assert b.placement is not None
    sim = Simulation(
        topology=tp, jobs=_jobs(), policy=b.communication, placement=b.placement,
        config=SimConfig(horizon_s=1e5, mode=Mode.EXACT, seed=3),
    )  # fmt: skip
    r = sim.run()
    assert all(j.finished for j in r.jobs)
    return float(np.mean([j.jct_s for j in r.jobs]))


def test_every_bundle_runs_and_best_le_vclos_le_ecmp() -> None:
    jct = {b.name: _run(b.name) for b in vclos_bundles()}
    assert all(np.isfinite(v) for v in jct.values())
    assert jct["best"] <= jct["vclos"] + 1e-9
    assert jct["vclos"] <= jct["ecmp"] + 1e-9
