"""Crux's communication policies: path selection, priority assignment and compression (Crux §4).

:func:`crux_plan` bundles Crux path selection (:func:`crux_routes`), the ranking by ``P_j = k_j I_j``
and the Max K-Cut compression run per component of the contention DAG
(:func:`~commsched.scheduling.compression.componentwise_compression`, in the compression family's
folder), each switchable through :class:`CruxSettings`; the names
``crux-pa``, ``crux-ps-pa``, ``crux-full`` and ``crux-full-guard`` of
:mod:`commsched.scheduling.policies` are variants of it.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.1-§4.4, §5.5, §6.6; crux-spec §2-§4, §6.6.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from numpy.typing import NDArray

from commsched.scheduling.compression import Compression
from commsched.scheduling.compression.componentwise import component_seed, componentwise_compression
from commsched.scheduling.guard import guard_classes
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.paths import PathSettings, greedy_routes
from commsched.scheduling.policies.common import (
    Plan,
    PlanFn,
    PolicyCtx,
    Routes,
    compressed_classes,
    flow_weight,
    make_plan,
    routed_facts,
    standalone_facts,
)
from commsched.scheduling.priority import CruxPriority, JobFacts, crux_ranking
from commsched.scheduling.routing import ecmp_routes
from commsched.scheduling.state import ClusterState, Decisions

__all__ = [
    "CruxSettings",
    "component_seed",
    "componentwise_compression",
    "crux_plan",
    "crux_routes",
    "crux_variant",
]


@dataclass(frozen=True, slots=True, kw_only=True)
class CruxSettings:
    """Which Crux mechanisms run and how.

    Attributes
    ----------
    select_paths
        Crux path selection (else ECMP hashing).
    compress
        Compress to ``priority_levels`` classes (else one class per job).
    paths
        Metric and granularity of path selection.
    priority
        Resolution of the pairwise comparison behind ``k_j``.
    orders
        Number ``m`` of sampled BFS orders of the compression.
    guard_loss
        Opt-in starvation guard: promote jobs whose predicted throughput loss exceeds this fraction
        (:mod:`commsched.scheduling.guard`); ``None`` = Crux as published.
    """

    select_paths: bool = True
    compress: bool = True
    paths: PathSettings = field(default_factory=PathSettings)
    priority: CruxPriority = field(default_factory=CruxPriority)
    orders: int = 10
    guard_loss: float | None = None


def _crux_routes(
    state: ClusterState, c: PolicyCtx, solo: Sequence[JobFacts], settings: PathSettings
) -> Routes:
    """Crux path selection: jobs in decreasing ``I_j`` (solo), ties by id (crux-spec §2.2 item 4)."""
    order = sorted(solo, key=lambda f: (-f.intensity.value, f.job.id))
    weights = {f.job.id: flow_weight(f, settings) for f in solo}
    return greedy_routes(
        c.table, [(f.job, c.flows[f.job.id]) for f in order], weights, settings, views=c.memo
    )


def crux_plan(state: ClusterState, ctx: PolicyContext, settings: CruxSettings | None = None) -> Plan:
    """Crux's decisions: path selection, priority assignment and compression (as configured).

    Path selection orders the jobs by ``I_j`` under their solo routes; ranking, ``k_j``, the
    contention DAG and the reported intensities use the finally chosen routes.

    References
    ----------
    Crux §4.1-§4.3 and §5.5 (all recomputed on every arrival and departure); crux-spec §2-§4.
    """
    cfg = settings or CruxSettings()
    if not state.jobs:
        return Plan(decisions=Decisions(), intensity={})
    c = PolicyCtx.of(state, ctx.memo)
    if cfg.select_paths:
        solo = standalone_facts(state, c, cfg.paths)
        routes = _crux_routes(state, c, solo, cfg.paths)
        facts = routed_facts(state, c, routes)
    else:
        routes = ecmp_routes(state, seed=ctx.seed, memo=ctx.memo)
        facts = routed_facts(state, c, routes)
    ranking = crux_ranking(facts, cfg.priority, memo=ctx.memo)
    ranked_ids = [str(j) for j in ranking.order]

    def crux_k_cut(share: NDArray[np.bool_], inten: NDArray[np.float64], k: int) -> Compression:
        return componentwise_compression(
            share, inten, k, seed=ctx.seed, ids=ranked_ids, orders=cfg.orders, memo=ctx.memo
        )

    classes = compressed_classes(state, ranking, facts, crux_k_cut if cfg.compress else None, c.network)
    if cfg.guard_loss is not None:
        classes = guard_classes(facts, classes, state.topology, c.network, cfg.guard_loss)
    return make_plan(routes, ranking, classes, facts)


def crux_variant(settings: CruxSettings) -> PlanFn:
    def plan(state: ClusterState, ctx: PolicyContext) -> Plan:
        return crux_plan(state, ctx, settings)

    return plan


def crux_routes(state: ClusterState, settings: PathSettings | None = None) -> Routes:
    """Crux path selection alone (jobs by decreasing solo ``I_j``), for experiments.

    References
    ----------
    Crux §4.1; crux-spec §2.2.
    """
    cfg = settings or PathSettings()
    c = PolicyCtx.of(state)
    return _crux_routes(state, c, standalone_facts(state, c, cfg), cfg)
