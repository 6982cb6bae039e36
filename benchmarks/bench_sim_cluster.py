"""30 concurrent jobs (8-256 GPUs, ring all-reduce, mixed models) on a 2,048-GPU Clos for one hour.

Target: fast mode under 10 s wall. The exact mode's time on the same input is the reference measured
in the same run (pass ``--no-exact`` to skip it); the two modes' utilisations are printed side by side.
"""

from __future__ import annotations

import sys
import time

import numpy as np

from commsched.scheduling.basic import fair_policy
from commsched.scheduling.placement import pack
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import Mode, SimConfig, SimResult
from commsched.topology.builders import two_layer_clos
from commsched.workload import JobId, JobSpec
from commsched.workload.zoo import get_model

TARGET_S = 10.0
MODELS = ("resnet50", "vgg16", "bert-base", "bert-large", "gpt3-crux", "gnmt", "vgg19", "inception_v3")


def jobs(seed: int = 0) -> list[SimJob]:
    rng = np.random.default_rng(seed)
    sizes = [8, 16, 32, 64, 128, 256]
    out: list[SimJob] = []
    total = 0
    while len(out) < 30:
        n = int(rng.choice(sizes, p=[0.3, 0.25, 0.2, 0.12, 0.08, 0.05]))
        if total + n > 2048:
            n = 8
        total += n
        prof = get_model(str(rng.choice(MODELS)))
        out.append(SimJob(spec=JobSpec(id=JobId(f"j{len(out)}"), profile=prof, gpus=n, model=prof.name)))
    return out


def simulate(mode: Mode) -> tuple[SimResult, float]:
    topo = two_layer_clos(tors=16, aggs=8, hosts_per_tor=16, uplinks_per_tor=64)
    t0 = time.perf_counter()
    sim = Simulation(
        topology=topo,
        jobs=jobs(),
        policy=fair_policy,
        placement=pack,
        config=SimConfig(horizon_s=3600.0, mode=mode),
    )
    res = sim.run()
    return res, time.perf_counter() - t0


def main() -> None:
    fast, wall = simulate(Mode.FAST)
    print(f"30 jobs, 2048-GPU Clos, 1 simulated hour, fast mode: {wall:.2f} s wall, {fast.events} events")
    print(f"  target {TARGET_S:.0f} s -> ratio {wall / TARGET_S:.2f} (<= 1 meets it)")
    if "--no-exact" in sys.argv:
        return
    exact, ewall = simulate(Mode.EXACT)
    print(f"  exact mode: {ewall:.2f} s wall, {exact.events} events; exact/fast wall = {ewall / wall:.1f}x")
    print(f"  GPU utilisation fast {fast.gpu_utilization:.4f} vs exact {exact.gpu_utilization:.4f}")
    d = [
        abs(f.iterations - e.iterations) / max(e.iterations, 1)
        for f, e in zip(fast.jobs, exact.jobs, strict=True)
    ]
    print(f"  largest per-job difference in iterations done: {max(d) * 100:.2f} %")


if __name__ == "__main__":
    main()
