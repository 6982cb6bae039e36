"""Random multi-job scenarios on a small Clos, for property tests of the simulator."""

from __future__ import annotations

import numpy as np

from commsched.sim.engine import SimJob
from commsched.topology import Topology
from commsched.topology.builders import two_layer_clos

from .helpers import job


def small_clos() -> Topology:
    """4 ToRs x 4 hosts x 8 GPUs (128 GPUs), 2 Aggs, 2:1 oversubscribed uplinks."""
    return two_layer_clos(tors=4, aggs=2, hosts_per_tor=4, uplinks_per_tor=8)


def random_jobs(seed: int, n_jobs: int, *, gpus_total: int = 128, spread_s: float = 60.0) -> list[SimJob]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n_jobs):
        gpus = int(rng.choice([2, 4, 8, 8, 16, 16, 32]))
        out.append(
            job(
                f"j{k}",
                compute_s=float(rng.uniform(0.05, 0.5)),
                comm_bytes=float(rng.uniform(0.05e9, 1.0e9)),
                gpus=min(gpus, gpus_total),
                overlap=float(rng.choice([0.5, 0.7, 1.0])),
                priority=int(rng.integers(0, 3)),
                iterations=int(rng.integers(100, 600)),
                arrival_s=float(rng.uniform(0, spread_s)),
            )
        )
    return out


def spread_jobs(seed: int, *, priorities: bool = True, max_iterations: int = 400) -> list[SimJob]:
    """12 four-GPU jobs, each on four hosts, arriving over a minute: they share NICs and ToR uplinks
    and form large components (``priorities``: random priority 0-2, else none given)."""
    rng = np.random.default_rng(seed)
    out = []
    for k in range(12):
        compute_s = float(rng.uniform(0.05, 0.3))
        comm_bytes = float(rng.uniform(0.05e9, 0.5e9))
        overlap = float(rng.choice([0.5, 1.0]))
        priority = int(rng.integers(0, 3)) if priorities else None
        out.append(
            job(
                f"j{k}",
                compute_s=compute_s,
                comm_bytes=comm_bytes,
                gpus=4,
                overlap=overlap,
                priority=priority,
                iterations=int(rng.integers(100, max_iterations)),
                arrival_s=float(rng.uniform(0, 60.0)),
                gpu_ids=[f"h{(k + 5 * i) % 16}/gpu{k % 8}" for i in range(4)],
            )
        )
    return out
