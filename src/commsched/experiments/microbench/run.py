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

The random cases live in :mod:`commsched.experiments.microbench.cases`, the scoring and the
enumeration in :mod:`commsched.experiments.microbench.scoring`; this module scores the methods of
every mechanism and drives the runs.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.4 (Fig. 16: 97.69 / 97.24 / 97.12 % of optimal);
   crux-spec §6.8.
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.experiments.microbench.cases import NIC_BPS, MicrobenchConfig, _Case, make_case
from commsched.experiments.microbench.scoring import (
    Choice,
    _Best,
    _best_for,
    _choice_of,
    _choices,
    _components,
    _crosses,
    _Scorer,
    _sharing,
)
from commsched.experiments.spread import spread
from commsched.scheduling.compression import crux_compression, sincronia_compression, varys_compression
from commsched.scheduling.paths import PathSettings
from commsched.scheduling.policies import balanced_ecmp_routes, crux_routes, taccl_routes
from commsched.scheduling.priority import (
    Ranking,
    crux_ranking,
    network_link_mask,
    sincronia_ranking,
    taccl_ranking,
    varys_ranking,
)
from commsched.scheduling.state import ClusterState

__all__ = [
    "MECHANISMS",
    "NIC_BPS",
    "CaseResult",
    "MicrobenchConfig",
    "MicrobenchSummary",
    "make_case",
    "run_case",
    "run_microbench",
    "summarise",
]


MECHANISMS = ("path_selection", "priority_assignment", "compression")


@dataclass(frozen=True, slots=True, kw_only=True)
class CaseResult:
    """One case: the optimum and, per mechanism and method, the fraction of it reached."""

    case: int
    optimum: float
    ratios: Mapping[str, Mapping[str, float]]
    simulations: int
    wall_s: float


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
