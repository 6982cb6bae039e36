"""Scoring of Crux's optimality microbenchmark (Crux §4.4, Fig. 16; crux-spec §6.8).

:class:`Scorer` simulates one contention component of a case under given Agg choices and levels
(fast mode, memoised on the relation pattern); :func:`best_for` runs over the distinct relation
patterns realisable with the case's levels per component (:mod:`.patterns`) and keeps the best;
:func:`choice_of` reads a method's routes back as an Agg choice.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.4; crux-spec §6.8.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from commsched.experiments.microbench.cases import Case, MicrobenchConfig
from commsched.experiments.microbench.patterns import Choice, assignments, components, pattern, sharing
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.placement import pack
from commsched.scheduling.priority import JobFacts, job_facts
from commsched.scheduling.routing import network_pair
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions
from commsched.scheduling.traffic import job_connections
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.results.records import Mode, SimConfig

__all__ = ["Best", "Scorer", "best_for", "choice_of"]


@dataclass(slots=True)
class Scorer:
    """Memoised component simulations of one case."""

    case: Case
    cfg: MicrobenchConfig
    network: np.ndarray
    cross: tuple[bool, ...]
    memo: dict[tuple[Any, ...], float] = field(default_factory=dict)
    sims: int = 0

    def routes(self, choice: Choice) -> dict[ConnectionKey, int]:
        topo = self.case.topology
        out: dict[ConnectionKey, int] = {}
        for job, agg in zip(self.case.jobs, choice, strict=True):
            for key in job_connections(topo, job):
                pair = network_pair(topo, key)
                if pair is None:
                    continue
                paths = topo.equal_cost_paths(*pair)
                hit = [i for i, p in enumerate(paths) if self.case.aggs[agg] in p.nodes]
                out[key] = hit[0] if hit else 0
        return out

    def facts(self, choice: Choice) -> list[JobFacts]:
        routes = self.routes(choice)
        return [job_facts(self.case.topology, j, routes, self.network) for j in self.case.jobs]

    def value(
        self, comp: Sequence[int], choice: Choice, levels: Sequence[int], facts: Sequence[JobFacts]
    ) -> float:
        """Busy-GPU utilisation x GPUs of one component under given Aggs and levels (memoised)."""
        sub = [choice[i] for i in comp if self.cross[i]]
        flip = bool(sub) and sub[0] == 1
        norm = tuple((choice[i] ^ 1) if (flip and self.cross[i]) else choice[i] for i in comp)
        key = (tuple(comp), norm, pattern(comp, levels, facts, self.network))
        hit = self.memo.get(key)
        if hit is None:
            hit = self._simulate(comp, choice, levels, facts)
            self.memo[key] = hit
        return hit

    def _simulate(
        self, comp: Sequence[int], choice: Choice, levels: Sequence[int], facts: Sequence[JobFacts]
    ) -> float:
        self.sims += 1
        jobs = [self.case.jobs[i] for i in comp]
        routes = self.routes(choice)
        classes = {self.case.jobs[i].id: int(levels[k]) for k, i in enumerate(comp)}
        decisions = Decisions(routes=MappingProxyType(routes), classes=MappingProxyType(classes))

        def policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
            return decisions

        period = max(facts[i].period_s for i in comp)
        warm = self.cfg.warmup_periods * period
        horizon = warm + self.cfg.horizon_periods * period
        sim = Simulation(
            topology=self.case.topology,
            jobs=[SimJob(spec=j.spec, gpus=j.gpus) for j in jobs],
            policy=policy,
            placement=pack,
            config=SimConfig(horizon_s=horizon, mode=Mode.FAST, warmup_s=warm, sample_s=horizon),
        )
        res = sim.run()
        return res.allocated_gpu_utilization * sum(j.n_gpus for j in jobs)


@dataclass(frozen=True, slots=True)
class Best:
    """The best total over the patterns of every component, and the levels that reach it."""

    total: float
    levels: dict[int, int]  # job index -> level of the best assignment


def best_for(
    sc: Scorer, choice: Choice, allowed: Callable[[Sequence[int], Sequence[int]], bool] | None = None
) -> Best:
    """Best total over the level patterns of every component (optionally only the allowed ones)."""
    facts = sc.facts(choice)
    share = sharing(facts, sc.network, sc.case.topology)
    total, levels = 0.0, {}
    for comp in components(share):
        best_v, best_lv = -math.inf, (0,) * len(comp)
        for lv in assignments(comp, share, sc.cfg.levels):
            if allowed is not None and not allowed(comp, lv):
                continue
            v = sc.value(comp, choice, lv, facts)
            if v > best_v + 1e-12:
                best_v, best_lv = v, lv
        total += best_v
        levels.update({i: best_lv[k] for k, i in enumerate(comp)})
    return Best(total=total, levels=levels)


def choice_of(sc: Scorer, routes: Mapping[ConnectionKey, int]) -> Choice:
    """The Agg each job's routes take (the first cross-ToR path found; 0 where none crosses)."""
    topo = sc.case.topology
    out = []
    for job in sc.case.jobs:
        agg = 0
        for key in job_connections(topo, job):
            pair = network_pair(topo, key)
            if pair is None or key not in routes:
                continue
            path = topo.equal_cost_paths(*pair)[routes[key]]
            if len(path.nodes) > 3:
                agg = sc.case.aggs.index(path.nodes[2])
                break
        out.append(agg)
    return tuple(out)
