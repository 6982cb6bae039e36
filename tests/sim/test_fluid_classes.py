"""The fluid steady state depends on the order of jobs sharing a link, never on class numbers.

Priority compression (Crux Max K-Cut) gives jobs that share no link the same class or any order, and
renumbers classes from one decision to the next; unique classes shift by one under every newcomer
ranked above. Two class maps that order every pair sharing a link alike must give the same fluid
periods, and the same replay (docs/fig23-gaps.md, "why the fluid widens the gap").
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
import pytest

from commsched.scheduling.basic import fair_policy
from commsched.scheduling.interfaces import PolicyContext, PolicyFn
from commsched.scheduling.placement import pack
from commsched.scheduling.state import ClusterState, Decisions
from commsched.scheduling.traffic import JobTraffic, StepLoad, job_traffic
from commsched.sim.engine import Simulation
from commsched.sim.fast.fluid import fluid_load, fluid_periods
from commsched.sim.results.records import Mode, SimConfig, SimResult

from .scenarios import small_clos, spread_jobs


def _levels(rank: list[int], links: list[set[int]]) -> list[int]:
    """Compressed classes: each job one level below the lowest higher-ranked job it shares a link with.

    Every pair sharing a link keeps its order; jobs that share none may share a level.
    """
    level = [0] * len(rank)
    for j in sorted(range(len(rank)), key=lambda k: rank[k]):
        above = [level[k] + 1 for k in range(len(rank)) if rank[k] < rank[j] and links[k] & links[j]]
        level[j] = max(above, default=0)
    return level


def _random_component(seed: int, n: int, n_links: int) -> tuple[list[JobTraffic], np.ndarray]:
    rng = np.random.default_rng(seed)
    cap = rng.uniform(1.0, 4.0, n_links)
    out = []
    for _ in range(n):
        ids = np.sort(rng.choice(n_links, size=int(rng.integers(1, 4)), replace=False)).astype(np.int64)
        share = rng.uniform(0.5, 2.0, ids.size)
        nbytes = float(rng.uniform(0.2, 2.0))
        step = StepLoad(
            links=ids,
            bytes_per_rep=nbytes * share,
            max_flow_bytes=nbytes,
            repeat=int(rng.integers(1, 4)),
            latency_s=float(rng.uniform(0.0, 0.01)),
            share=share,
        )
        out.append(JobTraffic(steps=(step,), link_ids=ids, link_bytes=step.repeat * nbytes * share))
    return out, cap


@pytest.mark.parametrize("seed", range(6))
def test_fluid_periods_depend_on_the_order_of_link_sharing_jobs_only(seed: int) -> None:
    traffics, cap = _random_component(seed, n=12, n_links=9)
    rng = np.random.default_rng(100 + seed)
    rank = rng.permutation(len(traffics)).tolist()
    links = [set(t.link_ids.tolist()) for t in traffics]
    levels = _levels(rank, links)
    assert len(set(levels)) < len(rank)  # the compressed map does merge jobs that share no link

    def periods(classes: list[int]) -> np.ndarray:
        out = fluid_periods(
            loads=[fluid_load(t, cap) for t in traffics],
            compute_s=rng_compute,
            overlap=overlap,
            classes=np.array(classes, dtype=np.int64),
            capacity_bytes_per_s=cap,
        )
        assert out is not None
        return out

    rng_compute = rng.uniform(0.2, 1.5, len(traffics))
    overlap = rng.choice([0.0, 0.5, 1.0], len(traffics))
    unique = periods(rank)
    np.testing.assert_allclose(periods(levels), unique, rtol=1e-12)
    np.testing.assert_allclose(periods([3 * c + 7 for c in levels]), unique, rtol=1e-12)  # renumbered
    # the order of a pair sharing a link does matter: reversing every rank changes the periods
    assert not np.allclose(periods([-r for r in rank]), unique, rtol=1e-6)


def _ranked(compress: bool, rank: dict[str, int], merged: list[int] | None = None) -> PolicyFn:
    """ECMP routes (fixed per job) and classes from a fixed ranking: unique among the running jobs, or
    compressed to levels of the jobs sharing links and renumbered at every decision (``merged`` gets,
    per decision, how many jobs share a level with another)."""

    def policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
        base = fair_policy(state, ctx)
        jobs = sorted(state.jobs, key=lambda j: rank[j.id])
        if compress:
            links = [set(job_traffic(state.topology, j, base.routes).link_ids.tolist()) for j in jobs]
            levels = _levels(list(range(len(jobs))), links)
            shift = ctx.epoch % 3  # renumbered, order kept
            classes = {j.id: shift + lv for j, lv in zip(jobs, levels, strict=True)}
            if merged is not None:
                merged.append(len(levels) - len(set(levels)))
        else:
            classes = {j.id: k for k, j in enumerate(jobs)}
        return Decisions(routes=base.routes, classes=MappingProxyType(classes))

    return policy


def _replay(policy: PolicyFn, fluid_min_jobs: int) -> tuple[SimResult, Simulation]:
    sim = Simulation(
        topology=small_clos(),
        jobs=spread_jobs(7, priorities=False, max_iterations=300),  # many decisions renumber classes
        policy=policy,
        placement=pack,
        config=SimConfig(horizon_s=1e6, mode=Mode.FAST, seed=3, fluid_min_jobs=fluid_min_jobs),
        priority_levels=16,
    )
    return sim.run(), sim


@pytest.mark.parametrize("fluid_min_jobs", [0, 4])
def test_compressed_and_unique_classes_give_the_same_replay(fluid_min_jobs: int) -> None:
    rank = {f"j{k}": (5 * k) % 12 for k in range(12)}
    unique, sim_u = _replay(_ranked(False, rank), fluid_min_jobs)
    merged: list[int] = []
    levels, sim_l = _replay(_ranked(True, rank, merged), fluid_min_jobs)
    assert (sim_u.fluid_solves > 0) == (fluid_min_jobs > 0)
    assert max(merged) >= 2  # the compressed classes do put jobs sharing no link in one class
    for u, v in zip(unique.jobs, levels.jobs, strict=True):
        assert u.finished and v.finished
        assert (v.start_s, v.iterations) == (u.start_s, u.iterations)
        assert v.end_s == pytest.approx(u.end_s, rel=1e-9)
        assert v.busy_gpu_s == pytest.approx(u.busy_gpu_s, rel=1e-9)
    assert levels.gpu_utilization == pytest.approx(unique.gpu_utilization, rel=1e-9)
    # and the replay does depend on the order: the reversed ranking gives other completion times
    reverse, _ = _replay(_ranked(False, {j: 11 - r for j, r in rank.items()}), fluid_min_jobs)
    ends = [((a.end_s or 0.0), (b.end_s or 0.0)) for a, b in zip(unique.jobs, reverse.jobs, strict=True)]
    assert any(abs(a - b) > 1e-3 for a, b in ends)
    assert sim_l.fluid_solves == sim_u.fluid_solves
