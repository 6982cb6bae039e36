"""Named communication policies: Crux (PA, PS-PA, full) and the baselines it is compared with.

Every policy is a plain :data:`PolicyFn`; :func:`communication_policies` maps names to them (the edge's
registry is built from it). Each policy also exists as a *plan* function returning the decisions
together with the per-job intensities and correction factors behind them (``commsched plan``).

==================  ==============================  ========================  =======================
name                paths                           ranking                   classes
==================  ==============================  ========================  =======================
``static``          ECMP hash                       -                         the jobs' own priorities
``fair``            ECMP hash                       -                         one class
``ecmp-fair``       ECMP hash                       -                         one class
``crux-pa``         ECMP hash                       ``P_j = k_j I_j``         unique: class = rank
``crux-ps-pa``      Crux path selection             ``P_j = k_j I_j``         unique: class = rank
``crux-full``       Crux path selection             ``P_j = k_j I_j``         Max K-Cut, K levels
``crux-full-guard`` Crux path selection             ``P_j = k_j I_j``         Max K-Cut + loss guard
``sincronia``       ECMP hash                       BSSI (big switch)         Sincronia-style split
``varys``           ECMP hash                       SEBF (big switch)         Varys-style split
``taccl-star``      least congested, arrival order  most hops first           Varys-style split
``cassini``         ECMP hash                       - (time shifts)           one class
``balanced-ecmp``   least loaded, arrival order     -                         one class
``source-routing``  fixed port mapping (vClos)      -                         one class
==================  ==============================  ========================  =======================

``K`` is the state's ``priority_levels``. Crux-PA and Crux-PS-PA use as many classes as jobs
(unique priorities, the ideal of crux-spec §6.6). TACCL* has no compression of its own; it gets the
balanced (Varys-style) split of its hop-count ranking, which keeps equally long jobs together.
Random draws derive from ``ctx.seed`` and what they decide only: an ECMP source port from its
connection (:func:`~commsched.scheduling.routing.connection_seed`), the BFS orders of the compression
from the jobs of their contention component (:func:`~commsched.scheduling.policies_crux.component_seed`).
A decision is therefore the same whenever its jobs are, which lets the simulator decide per contention
domain (:mod:`commsched.scheduling.domains`). ``crux-full-guard`` is ``crux-full`` with the opt-in
starvation guard of :mod:`commsched.scheduling.guard` at :data:`GUARD_LOSS`.

The shared machinery lives in :mod:`commsched.scheduling.policies_common`, Crux in
:mod:`commsched.scheduling.policies_crux` and the baselines in
:mod:`commsched.scheduling.policies_baselines`; this module holds the registry and re-exports their
names.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.1-§4.4, §6.6; crux-spec §2-§4, §6.6, §8.
"""

from __future__ import annotations

from types import MappingProxyType

from commsched.scheduling.basic import fair_policy, static_policy
from commsched.scheduling.interfaces import PolicyContext, PolicyFn
from commsched.scheduling.policies_baselines import (
    balanced_ecmp_plan,
    balanced_ecmp_routes,
    cassini_plan,
    sincronia_plan,
    source_routing_plan,
    taccl_plan,
    taccl_routes,
    varys_plan,
)
from commsched.scheduling.policies_common import (
    Compressor,
    Plan,
    PlanFn,
    PolicyCtx,
    Routes,
    contention_matrix,
    routed_facts,
)
from commsched.scheduling.policies_crux import (
    CruxSettings,
    componentwise_compression,
    crux_plan,
    crux_routes,
    crux_variant,
)
from commsched.scheduling.state import ClusterState, Decisions

__all__ = [
    "GUARD_LOSS",
    "Compressor",
    "CruxSettings",
    "Plan",
    "PlanFn",
    "Routes",
    "balanced_ecmp_plan",
    "balanced_ecmp_routes",
    "cassini_plan",
    "communication_plans",
    "communication_policies",
    "componentwise_compression",
    "contention_matrix",
    "crux_plan",
    "crux_routes",
    "sincronia_plan",
    "source_routing_plan",
    "taccl_plan",
    "taccl_routes",
    "varys_plan",
]


#: the throughput-loss bound of ``crux-full-guard`` (a job may lose at most 60 % of its standalone rate)
GUARD_LOSS = 0.6


def _wrap(policy: PolicyFn) -> PlanFn:
    def plan(state: ClusterState, ctx: PolicyContext) -> Plan:
        c = PolicyCtx.of(state, ctx.memo)
        d = policy(state, ctx)
        facts = routed_facts(state, c, d.routes)
        return Plan(decisions=d, intensity=MappingProxyType({f.job.id: f.intensity.value for f in facts}))

    return plan


def communication_plans() -> dict[str, PlanFn]:
    """Every named policy as a plan function (decisions + intensities + factors)."""
    return {
        "static": _wrap(static_policy),
        "fair": _wrap(fair_policy),
        "ecmp-fair": _wrap(fair_policy),
        "crux-pa": crux_variant(CruxSettings(select_paths=False, compress=False)),
        "crux-ps-pa": crux_variant(CruxSettings(select_paths=True, compress=False)),
        "crux-full": crux_variant(CruxSettings()),
        "crux-full-guard": crux_variant(CruxSettings(guard_loss=GUARD_LOSS)),
        "sincronia": sincronia_plan,
        "varys": varys_plan,
        "taccl-star": taccl_plan,
        "cassini": cassini_plan,
        "balanced-ecmp": balanced_ecmp_plan,
        "source-routing": source_routing_plan,
    }


def _decisions_only(plan: PlanFn) -> PolicyFn:
    def policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
        return plan(state, ctx).decisions

    return policy


def communication_policies() -> dict[str, PolicyFn]:
    """Every named communication policy (module docstring table), for the edge's registry.

    ``static``, ``fair`` and ``ecmp-fair`` are the plain functions of :mod:`commsched.scheduling.basic`.
    """
    plans = communication_plans()
    out: dict[str, PolicyFn] = {"static": static_policy, "fair": fair_policy, "ecmp-fair": fair_policy}
    for name, plan in plans.items():
        if name not in out:
            out[name] = _decisions_only(plan)
    return out
