"""Random cases of Crux's optimality microbenchmark (Crux §4.4, Fig. 16; crux-spec §6.8).

A two-layer Clos with 2-4 ToRs and two Aggs, 5 jobs of 2-4 whole ``a100_8gpu_4nic``-like hosts with
synthetic ring all-reduce profiles; the shape is in :class:`MicrobenchConfig` and described in
:mod:`commsched.experiments.microbench`.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.4; crux-spec §6.8.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from commsched.scheduling.state import PlacedJob
from commsched.topology import NodeId, Topology
from commsched.topology.builders import two_layer_clos
from commsched.workload import JobId, JobSpec, ModelProfile

__all__ = ["NIC_BPS", "Case", "MicrobenchConfig", "make_case"]


NIC_BPS = 200e9


@dataclass(frozen=True, slots=True, kw_only=True)
class MicrobenchConfig:
    """Shape of the random cases and of the scoring runs (module docstring)."""

    max_hosts: int = 20
    min_hosts: int = 10
    tors: tuple[int, ...] = (2, 3, 4)
    jobs: int = 5
    hosts_per_job: tuple[int, int] = (2, 4)
    levels: int = 3
    horizon_periods: float = 8.0
    warmup_periods: float = 2.0


@dataclass(frozen=True, slots=True, kw_only=True)
class Case:
    """One random case: the fabric, the five jobs on their hosts, the two Aggs (path choice = Agg index)."""

    topology: Topology
    jobs: tuple[PlacedJob, ...]
    aggs: tuple[NodeId, ...]


def _profile(rng: np.random.Generator, name: str, hosts: int) -> ModelProfile:
    compute = float(rng.uniform(0.1, 0.5))
    rho = float(rng.uniform(0.2, 1.2))
    n = 8 * hosts
    link_bytes = rho * compute * NIC_BPS / 8.0  # seconds x bits/s -> bytes
    size = link_bytes * n / (2 * (n - 1))  # a ring puts 2(n-1)/n M on each of its links
    overlap = float(rng.choice([0.5, 0.75, 1.0]))
    return ModelProfile(
        name=name, gpu="synthetic", compute_s=compute, sync_bytes=size, overlap=overlap, source="microbench"
    )


def make_case(seed: int, case: int, cfg: MicrobenchConfig) -> Case:
    """The ``case``-th random case of run ``seed`` (independent of every other case)."""
    rng = np.random.default_rng([seed & 0xFFFFFFFF, case])
    tors = int(rng.choice(cfg.tors))
    lo = max(1, math.ceil(cfg.min_hosts / tors))
    hpt = int(rng.integers(lo, cfg.max_hosts // tors + 1))
    topo = two_layer_clos(
        tors=tors, aggs=2, hosts_per_tor=hpt, uplinks_per_tor=2, host_link_bps=NIC_BPS, uplink_bps=NIC_BPS
    )
    hosts = list(rng.permutation(len(topo.hosts)))
    jobs = []
    for k in range(cfg.jobs):
        want = int(rng.integers(cfg.hosts_per_job[0], cfg.hosts_per_job[1] + 1))
        take = sorted(int(h) for h in hosts[: max(1, min(want, len(hosts) - (cfg.jobs - k - 1)))])
        hosts = hosts[len(take) :]
        gpus = tuple(g for h in take for g in topo.hosts[h].gpus)
        spec = JobSpec(id=JobId(f"j{k}"), profile=_profile(rng, f"j{k}", len(take)), gpus=len(gpus))
        jobs.append(PlacedJob(spec=spec, gpus=gpus))
    aggs = tuple(NodeId(f"agg{a}") for a in range(2))
    return Case(topology=topo, jobs=tuple(jobs), aggs=aggs)
