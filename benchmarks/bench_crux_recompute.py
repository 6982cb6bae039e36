"""Benchmark: one full Crux recompute (path selection + ranking + compression) at cluster scale.

300 concurrent jobs on a 2,048-GPU two-layer Clos (16 ToRs x 16 hosts x 8 GPUs, 8 Aggs, 16 uplinks
per ToR: 32 equal-cost paths per cross-ToR NIC pair), jobs of 1-64 GPUs placed by ``pack``. Prints
the time of ``crux-full`` (target < 1 s), of ``crux-ps-pa`` and ``crux-pa``, and the ratio to an
ECMP-only recompute (``ecmp-fair``: ECMP hashing of every connection, one class) measured in the
same run.

Run: ``.venv/bin/python benchmarks/bench_crux_recompute.py``
"""

from __future__ import annotations

import time
from collections.abc import Callable

import numpy as np

from commsched.scheduling.interfaces import PlacementRequest, PolicyContext
from commsched.scheduling.placement import pack
from commsched.scheduling.policies import communication_policies
from commsched.scheduling.state import ClusterState, PlacedJob
from commsched.topology.builders import two_layer_clos
from commsched.workload import JobId, JobSpec
from commsched.workload.zoo import get_model

TARGET_S = 1.0
JOBS = 300
MODELS = ("bert", "gpt", "resnet50")
SIZES = (1, 2, 4, 4, 8, 8, 8, 16, 16, 32, 64)


def cluster_state(seed: int = 0) -> ClusterState:
    topo = two_layer_clos(tors=16, aggs=8, hosts_per_tor=16, uplinks_per_tor=16)
    rng = np.random.default_rng(seed)
    free = set(topo.gpus)
    jobs: list[PlacedJob] = []
    budget = topo.n_gpus
    for k in range(JOBS):
        left = JOBS - k
        size = int(rng.choice([s for s in SIZES if s <= max(1, (budget - left) // 2 + 1)] or [1]))
        spec = JobSpec(id=JobId(f"j{k}"), profile=get_model(str(rng.choice(MODELS))), gpus=size)
        alloc = pack(
            PlacementRequest(topology=topo, job=spec, free_gpus=frozenset(free), running=tuple(jobs))
        )
        if alloc is None:
            break
        free.difference_update(alloc.gpus)
        budget -= size
        jobs.append(PlacedJob(spec=spec, gpus=alloc.gpus))
    return ClusterState(topology=topo, jobs=tuple(jobs), priority_levels=8)


def best_of(repeats: int, fn: Callable[[], object]) -> float:
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return min(times)


def main() -> None:
    state = cluster_state()
    policies = communication_policies()
    ctx = PolicyContext(seed=0, now_s=0.0, epoch=0)
    gpus = sum(j.n_gpus for j in state.jobs)
    print(f"{len(state.jobs)} jobs on {gpus} of {state.topology.n_gpus} GPUs, {state.topology!r}")
    for name in ("ecmp-fair", "crux-full"):  # warm the topology's path caches once
        policies[name](state, ctx)
    ref = best_of(3, lambda: policies["ecmp-fair"](state, ctx))
    print(f"ecmp-fair (reference) recompute: {ref:.3f} s")
    for name in ("crux-pa", "crux-ps-pa", "crux-full"):
        t = best_of(3, lambda name=name: policies[name](state, ctx))  # type: ignore[misc]
        print(f"{name:>10} recompute: {t:.3f} s  ({t / ref:.2f}x ECMP-only)")
        if name == "crux-full":
            verdict = "OK" if t < TARGET_S else "SLOWER THAN TARGET"
            print(f"crux-full vs target {TARGET_S:.1f} s: {t / TARGET_S:.2f}x of target — {verdict}")


if __name__ == "__main__":
    main()
