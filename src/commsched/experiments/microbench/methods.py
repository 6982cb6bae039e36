"""The methods the microbenchmark scores, per mechanism (Crux §4.4, Fig. 16; crux-spec §6.8).

Path selection (``crux``, ``taccl-star``, ``balanced-ecmp``, ``ecmp``), priority assignment (``crux``,
``sincronia``, ``varys``, ``taccl-star``) and compression (``crux``, ``sincronia``, ``varys``), each
with the other two mechanisms at their optimum.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.4; crux-spec §6.8.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence

import numpy as np

from commsched.experiments.microbench.cases import Case
from commsched.experiments.microbench.patterns import Choice, components, sharing
from commsched.experiments.microbench.scoring import Best, Scorer, choice_of
from commsched.scheduling.compression import crux_compression, sincronia_compression, varys_compression
from commsched.scheduling.paths import PathSettings
from commsched.scheduling.policies import balanced_ecmp_routes, crux_routes, taccl_routes
from commsched.scheduling.priority import (
    Ranking,
    crux_ranking,
    sincronia_ranking,
    taccl_ranking,
    varys_ranking,
)
from commsched.scheduling.state import ClusterState

__all__ = ["compression_scores", "path_methods", "rank_methods", "valid_for"]


def _state(case: Case, levels: int) -> ClusterState:
    return ClusterState(topology=case.topology, jobs=case.jobs, priority_levels=levels)


def path_methods(sc: Scorer, seed: int, case: int) -> dict[str, Choice]:
    """Path selection: each method's per-job Agg choice (``ecmp``: a seeded random Agg per crossing job)."""
    state = _state(sc.case, sc.cfg.levels)
    job_level = PathSettings(granularity="job")
    rng = np.random.default_rng([seed & 0xFFFFFFFF, case, 1])
    ecmp = tuple(int(rng.integers(0, 2)) if c else 0 for c in sc.cross)
    return {
        "crux": choice_of(sc, crux_routes(state, job_level)),
        "taccl-star": choice_of(sc, taccl_routes(state, job_level)),
        "balanced-ecmp": choice_of(sc, balanced_ecmp_routes(state, "job")),
        "ecmp": ecmp,
    }


def rank_methods(sc: Scorer, choice: Choice) -> dict[str, Ranking]:
    """Priority assignment: each method's ranking under the paths of ``choice``."""
    facts = sc.facts(choice)
    topo = sc.case.topology
    routes = sc.routes(choice)
    return {
        "crux": crux_ranking(facts),
        "sincronia": sincronia_ranking(topo, facts),
        "varys": varys_ranking(topo, facts),
        "taccl-star": taccl_ranking(topo, facts, routes),
    }


def valid_for(
    sc: Scorer, ranking: Ranking, share: np.ndarray
) -> Callable[[Sequence[int], Sequence[int]], bool]:
    """Whether a component's levels are a valid compression of ``ranking`` (no shared link runs uphill)."""
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


def compression_scores(sc: Scorer, choice: Choice, best: Best, seed: int, case: int) -> dict[str, float]:
    """Compression: each method's levels for the optimal ranking under ``choice``, scored."""
    facts = sc.facts(choice)
    crux_order = crux_ranking(facts).order
    by_id = {j.id: i for i, j in enumerate(sc.case.jobs)}
    ranked = sorted(crux_order, key=lambda jid: best.levels[by_id[jid]])  # stable: ties by P_j
    idx = [by_id[jid] for jid in ranked]
    sub = [facts[i] for i in idx]
    share = sharing(sub, sc.network, sc.case.topology)
    inten = np.array([f.intensity.value for f in sub])
    rng = np.random.default_rng([seed & 0xFFFFFFFF, case, 2])
    comps = {
        "crux": crux_compression(share, inten, sc.cfg.levels, rng=rng, orders=10),
        "sincronia": sincronia_compression(share, inten, sc.cfg.levels),
        "varys": varys_compression(share, inten, sc.cfg.levels),
    }
    full_share = sharing(facts, sc.network, sc.case.topology)
    out = {}
    for name, comp in comps.items():
        level = {idx[k]: comp.levels[k] for k in range(len(idx))}
        out[name] = sum(sc.value(c, choice, [level[i] for i in c], facts) for c in components(full_share))
    return out
