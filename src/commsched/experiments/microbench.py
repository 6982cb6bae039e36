"""Crux's optimality microbenchmark (Crux §4.4, Fig. 16): each mechanism against the enumerated optimum.

Cases (``MicrobenchConfig``; crux-spec §6.8)
--------------------------------------------
* A two-layer Clos with ``T`` ToRs (2-4, drawn), 2 Aggs, ``h`` hosts per ToR with ``T h <= 20``
  and at least 10 hosts; hosts are ``a100_8gpu_4nic`` (8 GPUs, 4 x 200 Gb/s NICs); each ToR has one
  200 Gb/s uplink per Agg, so two NIC pairs under different ToRs have exactly two equal-cost paths
  (one per Agg) and the fabric is oversubscribed (ToR-Agg links are the contended resource).
* 5 jobs of 2-4 whole hosts each (8 GPUs per host), hosts drawn at random without replacement;
  ring all-reduce over the job's GPUs host by host in host-id order. Synthetic profiles: compute
  ``c ~ U(0.1, 0.5)`` s, overlap ``o`` in {0.5, 0.75, 1}, gradient size chosen so that the ring's
  per-link time at 200 Gb/s is ``rho c`` with ``rho ~ U(0.2, 1.2)``.
* 3 priority levels.

What is enumerated (tractability choices)
-----------------------------------------
* **Paths**: one Agg per job for all its cross-ToR flows (``PathSettings(granularity="job")``):
  ``2^x`` assignments for the ``x`` jobs that cross ToRs, halved by the Agg symmetry (the first
  crossing job on Agg 0; results are invariant under swapping the two Aggs).
* **Priorities**: with 3 levels only class assignments matter, and with strict priority between
  classes and max-min sharing inside one, the rates depend only on the relation (higher / equal /
  lower) of every pair of jobs that *share a link*. So the enumeration runs over the distinct
  relation patterns on the contention edges realisable with at most 3 levels (one representative
  assignment each), per connected component of the contention graph (components do not interact).
  Every (ranking, valid compression) pair is such an assignment and every assignment is the
  compression of some ranking, so the optimum over assignments is the optimum over rankings and
  compressions.
* **Scoring**: the simulator in ``fast`` mode, one run per (component, paths, pattern), memoised;
  horizon ``warmup + 8`` periods of the component's slowest job (standalone estimate), averages
  after a warm-up of 2 periods; utilisation = busy GPU-seconds / (allocated GPUs x window), summed
  over components weighted by their GPUs (over the allocated GPUs of the case).

Ablation (crux-spec §6.8: the other two mechanisms at their optimum)
--------------------------------------------------------------------
* **path_selection**: each method's per-job Agg choice, scored with the best pattern per component.
  Methods: ``crux`` (intensity order, least congested), ``taccl-star`` (arrival order, least
  congested), ``balanced-ecmp`` (arrival order, fewest flows), ``ecmp`` (a seeded random Agg per job).
* **priority_assignment**: optimal paths; each method's ranking (under those paths), scored with the
  best compression *valid for that ranking*. Methods: ``crux``, ``sincronia``, ``varys``,
  ``taccl-star``.
* **compression**: optimal paths and the optimal ranking (jobs sorted by their optimal class, ties
  by Crux's ``P_j`` order); each method's 3-level compression of it. Methods: ``crux`` (Max K-Cut,
  ``m = 10`` BFS orders), ``sincronia`` (Sincronia-style split), ``varys`` (Varys-style split).

Ratios are method / optimum; every method lies inside the enumerated space, so ratios are <= 1 up to
the fast mode's extrapolation noise.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.4 (Fig. 16: 97.69 / 97.24 / 97.12 % of optimal);
   crux-spec §6.8.
"""

from __future__ import annotations

import itertools
import math
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.experiments.spread import spread
from commsched.scheduling.compression import crux_compression, sincronia_compression, varys_compression
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.paths import PathSettings
from commsched.scheduling.placement import pack
from commsched.scheduling.policies import balanced_ecmp_routes, contention_matrix, crux_routes, taccl_routes
from commsched.scheduling.priority import (
    JobFacts,
    Ranking,
    crux_ranking,
    job_facts,
    network_link_mask,
    sincronia_ranking,
    taccl_ranking,
    varys_ranking,
)
from commsched.scheduling.routing import network_pair
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions, PlacedJob
from commsched.scheduling.traffic import job_connections
from commsched.sim.engine import SimJob, Simulation
from commsched.sim.records import Mode, SimConfig
from commsched.topology import NodeId, Topology
from commsched.topology.builders import two_layer_clos
from commsched.workload import JobId, JobSpec, ModelProfile

__all__ = [
    "MECHANISMS",
    "CaseResult",
    "MicrobenchConfig",
    "MicrobenchSummary",
    "run_case",
    "run_microbench",
    "summarise",
]

MECHANISMS = ("path_selection", "priority_assignment", "compression")
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
class CaseResult:
    """One case: the optimum and, per mechanism and method, the fraction of it reached."""

    case: int
    optimum: float
    ratios: Mapping[str, Mapping[str, float]]
    simulations: int
    wall_s: float


# ---------------------------------------------------------------------------------------------- cases
@dataclass(frozen=True, slots=True, kw_only=True)
class _Case:
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


def make_case(seed: int, case: int, cfg: MicrobenchConfig) -> _Case:
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
    return _Case(topology=topo, jobs=tuple(jobs), aggs=aggs)


# ---------------------------------------------------------------------------------------------- scoring
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


# ---------------------------------------------------------------------------------------------- mechanisms
def _state(case: _Case, levels: int) -> ClusterState:
    return ClusterState(topology=case.topology, jobs=case.jobs, priority_levels=levels)


def _path_methods(sc: _Scorer, seed: int, case: int) -> dict[str, Choice]:
    state = _state(sc.case, sc.cfg.levels)
    job_level = PathSettings(granularity="job")
    rng = np.random.default_rng([seed & 0xFFFFFFFF, case, 1])
    ecmp = tuple(int(rng.integers(0, 2)) if c else 0 for c in sc.cross)
    return {
        "crux": _choice_of(sc, crux_routes(state, job_level)),
        "taccl-star": _choice_of(sc, taccl_routes(state, job_level)),
        "balanced-ecmp": _choice_of(sc, balanced_ecmp_routes(state, "job")),
        "ecmp": ecmp,
    }


def _rank_methods(sc: _Scorer, choice: Choice) -> dict[str, Ranking]:
    facts = sc.facts(choice)
    topo = sc.case.topology
    routes = sc.routes(choice)
    return {
        "crux": crux_ranking(facts),
        "sincronia": sincronia_ranking(topo, facts),
        "varys": varys_ranking(topo, facts),
        "taccl-star": taccl_ranking(topo, facts, routes),
    }


def _valid_for(
    sc: _Scorer, ranking: Ranking, share: np.ndarray
) -> Callable[[Sequence[int], Sequence[int]], bool]:
    pos = {jid: r for r, jid in enumerate(ranking.order)}
    rank = [pos[j.id] for j in sc.case.jobs]

    def allowed(comp: Sequence[int], lv: Sequence[int]) -> bool:
        for a, b in itertools.combinations(range(len(comp)), 2):
            if not share[comp[a], comp[b]]:
                continue
            hi, lo = (a, b) if rank[comp[a]] < rank[comp[b]] else (b, a)
            if lv[hi] > lv[lo]:
                return False
        return True

    return allowed


def _compression_scores(sc: _Scorer, choice: Choice, best: _Best, seed: int, case: int) -> dict[str, float]:
    facts = sc.facts(choice)
    crux_order = crux_ranking(facts).order
    by_id = {j.id: i for i, j in enumerate(sc.case.jobs)}
    ranked = sorted(crux_order, key=lambda jid: best.levels[by_id[jid]])  # stable: ties by P_j
    idx = [by_id[jid] for jid in ranked]
    sub = [facts[i] for i in idx]
    share = _sharing(sub, sc.network, sc.case.topology)
    inten = np.array([f.intensity.value for f in sub])
    rng = np.random.default_rng([seed & 0xFFFFFFFF, case, 2])
    comps = {
        "crux": crux_compression(share, inten, sc.cfg.levels, rng=rng, orders=10),
        "sincronia": sincronia_compression(share, inten, sc.cfg.levels),
        "varys": varys_compression(share, inten, sc.cfg.levels),
    }
    full_share = _sharing(facts, sc.network, sc.case.topology)
    out = {}
    for name, comp in comps.items():
        level = {idx[k]: comp.levels[k] for k in range(len(idx))}
        out[name] = sum(sc.value(c, choice, [level[i] for i in c], facts) for c in _components(full_share))
    return out


def run_case(seed: int, case: int, cfg: MicrobenchConfig | None = None) -> CaseResult:
    """Enumerate the optimum of one case and score every method of every mechanism against it."""
    t0 = time.perf_counter()
    conf = cfg or MicrobenchConfig()
    c = make_case(seed, case, conf)
    cross = tuple(_crosses(c, j) for j in c.jobs)
    sc = _Scorer(case=c, cfg=conf, network=network_link_mask(c.topology), cross=cross)
    per_choice = {ch: _best_for(sc, ch) for ch in _choices(cross)}
    opt_choice = max(per_choice, key=lambda ch: (per_choice[ch].total, tuple(-x for x in ch)))
    best = per_choice[opt_choice]
    opt = best.total
    ratios: dict[str, dict[str, float]] = {m: {} for m in MECHANISMS}
    for name, ch in _path_methods(sc, seed, case).items():
        ratios["path_selection"][name] = _best_for(sc, ch).total / opt
    share = _sharing(sc.facts(opt_choice), sc.network, c.topology)
    for name, ranking in _rank_methods(sc, opt_choice).items():
        ratios["priority_assignment"][name] = (
            _best_for(sc, opt_choice, _valid_for(sc, ranking, share)).total / opt
        )
    for name, v in _compression_scores(sc, opt_choice, best, seed, case).items():
        ratios["compression"][name] = v / opt
    return CaseResult(
        case=case,
        optimum=opt / sum(j.n_gpus for j in c.jobs),
        ratios=MappingProxyType({m: MappingProxyType(r) for m, r in ratios.items()}),
        simulations=sc.sims,
        wall_s=time.perf_counter() - t0,
    )


# ---------------------------------------------------------------------------------------------- driver
@dataclass(frozen=True, slots=True, kw_only=True)
class MicrobenchSummary:
    """Mean and 5th percentile of the fractions of optimal, per mechanism and method."""

    cases: int
    mechanisms: Mapping[str, Mapping[str, Mapping[str, float]]]
    simulations: int
    case_wall_s: float

    def as_json(self) -> dict[str, Any]:
        return {
            "cases": self.cases,
            "mechanisms": {m: {k: dict(v) for k, v in r.items()} for m, r in self.mechanisms.items()},
        }


def summarise(results: Sequence[CaseResult]) -> MicrobenchSummary:
    """Aggregate case results: ``{"mean", "p5"}`` per mechanism and method."""
    mech: dict[str, dict[str, dict[str, float]]] = {}
    for m in MECHANISMS:
        names = list(results[0].ratios[m]) if results else []
        mech[m] = {}
        for name in names:
            vals = np.array([r.ratios[m][name] for r in results])
            mech[m][name] = {"mean": float(vals.mean()), "p5": float(np.percentile(vals, 5))}
    return MicrobenchSummary(
        cases=len(results),
        mechanisms=mech,
        simulations=sum(r.simulations for r in results),
        case_wall_s=sum(r.wall_s for r in results),
    )


def run_microbench(
    cases: int,
    seed: int,
    *,
    workers: int = 1,
    ray_address: str | None = None,
    cfg: MicrobenchConfig | None = None,
    progress: Callable[[int, CaseResult], None] | None = None,
) -> list[CaseResult]:
    """Run ``cases`` cases on local cores (joblib) or on a Ray cluster (``ray_address``, ``"local"``
    starts one); the results are in case order and equal to a ``workers=1`` run apart from wall times.
    ``progress`` receives ``(case, result)`` as each case finishes.

    Raises
    ------
    InputError
        Non-positive ``cases`` or ``workers``; ``ray_address`` given but Ray is not installed.
    """
    if cases < 1:
        raise InputError(f"{cases}", where="--cases", expected="an integer >= 1")
    if workers < 1:
        raise InputError(f"{workers}", where="--workers", expected="an integer >= 1")
    conf = cfg or MicrobenchConfig()
    return spread(
        run_case,
        [(seed, i, conf) for i in range(cases)],
        workers=workers,
        ray_address=ray_address,
        progress=progress,
    )
