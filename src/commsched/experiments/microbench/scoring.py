"""Scoring and enumeration of Crux's optimality microbenchmark (Crux §4.4, Fig. 16; crux-spec §6.8).

:class:`_Scorer` simulates one contention component of a case under given Agg choices and levels
(fast mode, memoised on the relation pattern); :func:`_best_for` enumerates the distinct relation
patterns realisable with the case's levels per component and keeps the best. The enumeration and its
tractability choices are described in :mod:`commsched.experiments.microbench`.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.4; crux-spec §6.8.
"""

from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from commsched.experiments.microbench.cases import MicrobenchConfig, _Case
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.placement import pack
from commsched.scheduling.policies import contention_matrix
from commsched.scheduling.priority import JobFacts, job_facts
from commsched.scheduling.routing import network_pair
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
from commsched.scheduling.traffic import job_connections
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.records import Mode, SimConfig
from commsched.topology import Topology

__all__ = ["Choice"]


Choice = tuple[int, ...]  # Agg index per job (0 for jobs that do not cross ToRs)


@dataclass(slots=True)
class _Scorer:
    """Memoised component simulations of one case."""

    case: _Case
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
        key = (tuple(comp), norm, _pattern(comp, levels, facts, self.network))
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


def _sharing(facts: Sequence[JobFacts], network: np.ndarray, topo: Topology) -> np.ndarray:
    return contention_matrix(topo, facts, network)


def _pattern(
    comp: Sequence[int], levels: Sequence[int], facts: Sequence[JobFacts], network: np.ndarray
) -> tuple[int, ...]:
    links = [set(facts[i].traffic.link_ids[network[facts[i].traffic.link_ids]].tolist()) for i in comp]
    out = []
    for a, b in itertools.combinations(range(len(comp)), 2):
        if links[a] & links[b]:
            out.append(int(np.sign(levels[a] - levels[b])))
    return tuple(out)


def _components(share: np.ndarray) -> list[tuple[int, ...]]:
    n = share.shape[0]
    seen: set[int] = set()
    comps = []
    for s in range(n):
        if s in seen:
            continue
        stack, comp = [s], []
        seen.add(s)
        while stack:
            a = stack.pop()
            comp.append(a)
            for b in np.flatnonzero(share[a]).tolist():
                if b not in seen:
                    seen.add(b)
                    stack.append(b)
        comps.append(tuple(sorted(comp)))
    return comps


@dataclass(frozen=True, slots=True)
class _Best:
    total: float
    levels: dict[int, int]  # job index -> level of the best assignment


def _assignments(comp: Sequence[int], share: np.ndarray, levels: int) -> list[tuple[int, ...]]:
    """One level assignment per distinct relation pattern on the component's contention edges."""
    edges = [(a, b) for a, b in itertools.combinations(range(len(comp)), 2) if share[comp[a], comp[b]]]
    seen: set[tuple[int, ...]] = set()
    out = []
    for lv in itertools.product(range(min(levels, len(comp))), repeat=len(comp)):
        pat = tuple(int(np.sign(lv[a] - lv[b])) for a, b in edges)
        if pat not in seen:
            seen.add(pat)
            out.append(lv)
    return out


def _best_for(
    sc: _Scorer, choice: Choice, allowed: Callable[[Sequence[int], Sequence[int]], bool] | None = None
) -> _Best:
    """Best total over the level patterns of every component (optionally only the allowed ones)."""
    facts = sc.facts(choice)
    share = _sharing(facts, sc.network, sc.case.topology)
    total, levels = 0.0, {}
    for comp in _components(share):
        best_v, best_lv = -math.inf, (0,) * len(comp)
        for lv in _assignments(comp, share, sc.cfg.levels):
            if allowed is not None and not allowed(comp, lv):
                continue
            v = sc.value(comp, choice, lv, facts)
            if v > best_v + 1e-12:
                best_v, best_lv = v, lv
        total += best_v
        levels.update({i: best_lv[k] for k, i in enumerate(comp)})
    return _Best(total=total, levels=levels)


def _choices(cross: Sequence[bool]) -> list[Choice]:
    idx = [i for i, c in enumerate(cross) if c]
    out = []
    for bits in itertools.product((0, 1), repeat=max(0, len(idx) - 1)):
        ch = [0] * len(cross)
        for i, b in zip(idx[1:], bits, strict=True):
            ch[i] = b
        out.append(tuple(ch))
    return out


def _crosses(case: _Case, job: PlacedJob) -> bool:
    tors = {case.topology.host_of(g).tors[0] for g in job.gpus}
    return len(tors) > 1


def _choice_of(sc: _Scorer, routes: Mapping[ConnectionKey, int]) -> Choice:
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
