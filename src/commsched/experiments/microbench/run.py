"""Running Crux's optimality microbenchmark: one case against its optimum, many cases, the summary.

:func:`run_case` enumerates a case's optimum (:mod:`.patterns`, :mod:`.scoring`) and scores the
methods of every mechanism (:mod:`.methods`) against it; :func:`run_microbench` runs many cases on local
cores or Ray; :func:`summarise` aggregates them. The benchmark is described in
:mod:`commsched.experiments.microbench`.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.4 (Fig. 16: 97.69 / 97.24 / 97.12 % of optimal);
   crux-spec §6.8.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import numpy as np

from commsched.errors import InputError
from commsched.experiments.microbench.cases import NIC_BPS, MicrobenchConfig, make_case
from commsched.experiments.microbench.methods import compression_scores, path_methods, rank_methods, valid_for
from commsched.experiments.microbench.patterns import choices, crosses, sharing
from commsched.experiments.microbench.scoring import Scorer, best_for
from commsched.experiments.spread import spread
from commsched.scheduling.priority import network_link_mask

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


def run_case(seed: int, case: int, cfg: MicrobenchConfig | None = None) -> CaseResult:
    """Enumerate the optimum of one case and score every method of every mechanism against it."""
    t0 = time.perf_counter()
    conf = cfg or MicrobenchConfig()
    c = make_case(seed, case, conf)
    cross = tuple(crosses(c, j) for j in c.jobs)
    sc = Scorer(case=c, cfg=conf, network=network_link_mask(c.topology), cross=cross)
    per_choice = {ch: best_for(sc, ch) for ch in choices(cross)}
    opt_choice = max(per_choice, key=lambda ch: (per_choice[ch].total, tuple(-x for x in ch)))
    best = per_choice[opt_choice]
    opt = best.total
    ratios: dict[str, dict[str, float]] = {m: {} for m in MECHANISMS}
    for name, ch in path_methods(sc, seed, case).items():
        ratios["path_selection"][name] = best_for(sc, ch).total / opt
    share = sharing(sc.facts(opt_choice), sc.network, c.topology)
    for name, ranking in rank_methods(sc, opt_choice).items():
        ratios["priority_assignment"][name] = (
            best_for(sc, opt_choice, valid_for(sc, ranking, share)).total / opt
        )
    for name, v in compression_scores(sc, opt_choice, best, seed, case).items():
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
