"""Named communication policies: Crux (PA, PS-PA, full) and the baselines it is compared with.

Every policy is a plain :data:`PolicyFn`; :func:`communication_policies` maps names to them (the edge's
registry is built from it). Each policy also exists as a *plan* function returning the decisions
together with the per-job intensities and correction factors behind them (``commsched plan``).

==================  ==============================  ========================  =======================
name                paths                           ranking                   classes
==================  ==============================  ========================  =======================
``static``          ECMP hash                       -                         the jobs' own priorities
``fair``            ECMP hash                       -                         one class
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

``ecmp-fair`` (Crux's name for its baseline) is an alias of ``fair``. Each policy is registered with
its one-line description (:class:`NamedPolicy`, :func:`named_policies`); the edge's registry and
``commsched policies`` show it. ``K`` is the state's ``priority_levels``. Crux-PA and Crux-PS-PA use
as many classes as jobs (unique priorities, the ideal of crux-spec §6.6). TACCL* has no compression of
its own; it gets the balanced (Varys-style) split of its hop-count ranking, which keeps equally long
jobs together. Random draws derive from ``ctx.seed`` and what they decide only: an ECMP source port from its
connection (:func:`~commsched.scheduling.routing.connection_seed`), the BFS orders of the compression
from the jobs of their contention component (:func:`~commsched.scheduling.compression.component_seed`).
A decision is therefore the same whenever its jobs are, which lets the simulator decide per contention
domain (:mod:`commsched.scheduling.domains`). ``crux-full-guard`` is ``crux-full`` with the opt-in
starvation guard of :mod:`commsched.scheduling.guard` at :data:`GUARD_LOSS`.

The shared machinery lives in :mod:`commsched.scheduling.policies.common`, and each policy in a module
of its own: Crux in :mod:`~commsched.scheduling.policies.crux`, the baselines in
:mod:`~commsched.scheduling.policies.sincronia`, :mod:`~commsched.scheduling.policies.varys`,
:mod:`~commsched.scheduling.policies.taccl`, :mod:`~commsched.scheduling.policies.cassini`,
:mod:`~commsched.scheduling.policies.balanced_ecmp` and :mod:`~commsched.scheduling.policies.source_routing`
(``static`` and ``fair`` are :mod:`commsched.scheduling.basic`); this module holds the registry and
re-exports their names.

References
----------
.. [1] J. Cao et al., "Crux", SIGCOMM 2024, §4.1-§4.4, §6.6; crux-spec §2-§4, §6.6, §8.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

from commsched.scheduling.basic import fair_policy, static_policy
from commsched.scheduling.interfaces import PolicyContext, PolicyFn
from commsched.scheduling.policies.balanced_ecmp import (
    balanced_ecmp_plan,
    balanced_ecmp_policy,
    balanced_ecmp_routes,
)
from commsched.scheduling.policies.cassini import cassini_plan
from commsched.scheduling.policies.common import (
    Compressor,
    Plan,
    PlanFn,
    PolicyCtx,
    Routes,
    contention_matrix,
    routed_facts,
)
from commsched.scheduling.policies.crux import (
    CruxSettings,
    componentwise_compression,
    crux_plan,
    crux_routes,
    crux_variant,
)
from commsched.scheduling.policies.sincronia import sincronia_plan
from commsched.scheduling.policies.source_routing import source_routing_plan
from commsched.scheduling.policies.taccl import taccl_plan, taccl_routes
from commsched.scheduling.policies.varys import varys_plan
from commsched.scheduling.state import ClusterState, Decisions

__all__ = [
    "GUARD_LOSS",
    "Compressor",
    "CruxSettings",
    "NamedPolicy",
    "Plan",
    "PlanFn",
    "Routes",
    "balanced_ecmp_plan",
    "balanced_ecmp_policy",
    "balanced_ecmp_routes",
    "cassini_plan",
    "communication_plans",
    "communication_policies",
    "componentwise_compression",
    "contention_matrix",
    "crux_plan",
    "crux_routes",
    "named_policies",
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


@dataclass(frozen=True, slots=True, kw_only=True)
class NamedPolicy:
    """A named communication policy: its plan, its decisions-only callable, its line, its aliases.

    Examples
    --------
    >>> p = named_policies()["fair"]
    >>> (p.policy is fair_policy, p.aliases, p.description.startswith("one class"))
    (True, ('ecmp-fair',), True)
    """

    #: decisions together with intensities and correction factors (``commsched plan``, the daemon)
    plan: PlanFn
    #: the decisions only (the simulator); the same routes and classes as ``plan``
    policy: PolicyFn
    #: one line, shown by ``commsched policies``
    description: str
    #: other names of the same policy
    aliases: tuple[str, ...] = ()


def _named(plan: PlanFn, description: str, policy: PolicyFn | None = None, *aliases: str) -> NamedPolicy:
    return NamedPolicy(
        plan=plan, policy=policy or _decisions_only(plan), description=description, aliases=aliases
    )


def named_policies() -> dict[str, NamedPolicy]:
    """Every communication policy by name (the module docstring's table), with its description.

    Examples
    --------
    >>> all(p.description for p in named_policies().values())
    True
    """
    crux = crux_variant
    return {
        "static": _named(
            _wrap(static_policy), "classes = the priorities written on the jobs; ECMP routes", static_policy
        ),
        "fair": _named(
            _wrap(fair_policy), "one class (max-min fair everywhere); ECMP routes", fair_policy, "ecmp-fair"
        ),
        "crux-pa": _named(
            crux(CruxSettings(select_paths=False, compress=False)),
            "Crux priority assignment (P = k I), unique priorities; ECMP routes",
        ),
        "crux-ps-pa": _named(
            crux(CruxSettings(select_paths=True, compress=False)),
            "Crux path selection + priority assignment, unique priorities",
        ),
        "crux-full": _named(
            crux(CruxSettings()),
            "Crux path selection + priority assignment + Max K-Cut compression to the levels",
        ),
        "crux-full-guard": _named(
            crux(CruxSettings(guard_loss=GUARD_LOSS)),
            "crux-full, promoting any job whose predicted throughput loss exceeds 60 %",
        ),
        "sincronia": _named(
            sincronia_plan, "Sincronia BSSI order on a NIC big switch, Sincronia-style split; ECMP routes"
        ),
        "varys": _named(varys_plan, "Varys SEBF order, Varys-style split; ECMP routes"),
        "taccl-star": _named(
            taccl_plan, "TACCL*: least-congested paths in arrival order, longer paths first"
        ),
        "cassini": _named(
            cassini_plan, "CASSINI: one class, per-job time shifts from link compatibility; ECMP routes"
        ),
        "balanced-ecmp": _named(
            balanced_ecmp_plan,
            "fewest-flows equal-cost path per flow in arrival order, one class",
            balanced_ecmp_policy,
        ),
        "source-routing": _named(
            source_routing_plan,
            "fixed port mapping (vClos-style source routing without isolation), one class",
        ),
    }


def _with_aliases(named: dict[str, NamedPolicy]) -> dict[str, NamedPolicy]:
    return {n: p for name, p in named.items() for n in (name, *p.aliases)}


def communication_plans() -> dict[str, PlanFn]:
    """Every named policy as a plan function (decisions + intensities + factors), aliases included."""
    return {name: p.plan for name, p in _with_aliases(named_policies()).items()}


def _decisions_only(plan: PlanFn) -> PolicyFn:
    def policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
        return plan(state, ctx).decisions

    return policy


def communication_policies() -> dict[str, PolicyFn]:
    """Every named communication policy (module docstring table), aliases included.

    ``static``, ``fair`` (alias ``ecmp-fair``) are the plain functions of :mod:`commsched.scheduling.basic`.
    """
    return {name: p.policy for name, p in _with_aliases(named_policies()).items()}
