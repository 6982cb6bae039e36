"""Names -> policies, at the edge (CLI, scenario files). One strict registry per family.

Three sources of names, in order: the built-in policies, policies that other installed packages
declare through entry points (group :data:`POLICY_ENTRY_POINTS`), and policies registered in this
process with :func:`register_policy`. Built-in names cannot be taken over. A plug-in's policy is
named after the package that provides it: the entry point ``mine = "mypkg.policies:mine"`` is the
policy ``mypkg:mine``.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import cast

from commsched.errors import InputError
from commsched.registry import Registry
from commsched.scheduling.interfaces import PlacementFn, PolicyBundle, PolicyFn, QueueOrderFn
from commsched.scheduling.jobsched import job_schedulers
from commsched.scheduling.policies import communication_policies
from commsched.scheduling.vclos.bundles import vclos_bundles, vclos_queue_orders

#: one line per communication policy, shown by ``commsched policies``
DESCRIPTIONS = {
    "static": "classes = the priorities written on the jobs; ECMP routes",
    "fair": "one class (max-min fair everywhere); ECMP routes",
    "ecmp-fair": "one class (max-min fair everywhere); ECMP routes (Crux's baseline name)",
    "crux-pa": "Crux priority assignment (P = k I), unique priorities; ECMP routes",
    "crux-ps-pa": "Crux path selection + priority assignment, unique priorities",
    "crux-full": "Crux path selection + priority assignment + Max K-Cut compression to the levels",
    "crux-full-guard": "crux-full, promoting any job whose predicted throughput loss exceeds 60 %",
    "sincronia": "Sincronia BSSI order on a NIC big switch, Sincronia-style split; ECMP routes",
    "varys": "Varys SEBF order, Varys-style split; ECMP routes",
    "taccl-star": "TACCL*: least-congested paths in arrival order, longer paths first",
    "cassini": "CASSINI: one class, per-job time shifts from link compatibility; ECMP routes",
    "source-routing": "fixed port mapping (vClos-style source routing without isolation), one class",
}


#: entry-point group through which installed packages provide communication policies
POLICY_ENTRY_POINTS = "commsched.policies"
#: entry-point group through which installed packages provide placements (job schedulers)
PLACEMENT_ENTRY_POINTS = "commsched.placements"

# The names registered in this process (``register_policy``): the one process-wide table of the
# edge. It holds names only; every simulation still receives its callables explicitly.
_REGISTERED_POLICIES: dict[str, PolicyBundle] = {}
_REGISTERED_PLACEMENTS: dict[str, PlacementFn] = {}


def as_bundle(policy: PolicyFn | PolicyBundle, *, name: str | None = None) -> PolicyBundle:
    """A communication policy as a :class:`PolicyBundle` (a bundle is returned as it is, renamed if asked).

    The bundle's name is ``name``, else the function's ``__name__``; its description is the first
    paragraph of the function's docstring, on one line.

    Examples
    --------
    >>> from commsched.scheduling.state import Decisions
    >>> def everyone_fair(state, ctx):
    ...     '''One class for every job.'''
    ...     return Decisions()
    >>> b = as_bundle(everyone_fair)
    >>> (b.name, b.description, b.placement is None)
    ('everyone_fair', 'One class for every job.', True)
    >>> def wrapped(state, ctx):
    ...     '''One class
    ...     for every job.
    ...
    ...     Details.'''
    ...     return Decisions()
    >>> as_bundle(wrapped).description
    'One class for every job.'
    """
    if isinstance(policy, PolicyBundle):
        if name is None or name == policy.name:
            return policy
        return PolicyBundle(
            name=name,
            communication=policy.communication,
            placement=policy.placement,
            queue_order=policy.queue_order,
            topology=policy.topology,
            description=policy.description,
        )
    if not callable(policy):
        raise InputError(
            f"{type(policy).__name__} is not a policy",
            where="policy",
            expected="a name, a callable (ClusterState, PolicyContext) -> Decisions, or a PolicyBundle",
        )
    doc = (getattr(policy, "__doc__", None) or "").strip().split("\n\n")[0]
    return PolicyBundle(
        name=name or str(getattr(policy, "__name__", "custom")),
        communication=policy,
        description=" ".join(doc.split()),
    )


def register_policy(name: str, policy: PolicyFn | PolicyBundle, *, replace: bool = False) -> None:
    """Make ``policy`` known by ``name`` in this process (``simulate``, ``compare``, ``plan``, scenarios).

    Built-in names and entry-point names cannot be taken; a name registered here before raises
    ``ValueError`` unless ``replace``. For the command line and worker processes, publish the policy
    through the ``commsched.policies`` entry-point group of an installed package instead.

    Examples
    --------
    >>> from commsched.scheduling.state import Decisions
    >>> register_policy("doc:fair", lambda state, ctx: Decisions())
    >>> "doc:fair" in policy_registry()
    True
    >>> unregister_policy("doc:fair")
    >>> "doc:fair" in policy_registry()
    False
    """
    if name in _base_policy_registry():
        raise ValueError(f"policy {name!r} is already registered (built in or from an entry point)")
    if name in _REGISTERED_POLICIES and not replace:
        raise ValueError(f"policy {name!r} is already registered in this process")
    _REGISTERED_POLICIES[name] = as_bundle(policy, name=name)


def unregister_policy(name: str) -> None:
    """Forget a policy registered with :func:`register_policy` (unknown names raise ``KeyError``).

    Examples
    --------
    >>> from commsched.scheduling.basic import fair_policy
    >>> register_policy("doc:again", fair_policy)
    >>> unregister_policy("doc:again")
    >>> "doc:again" in policy_names()
    False
    """
    del _REGISTERED_POLICIES[name]


def register_placement(name: str, placement: PlacementFn, *, replace: bool = False) -> None:
    """Make a placement (job scheduler) known by ``name`` in this process; see :func:`register_policy`.

    Examples
    --------
    >>> register_placement("doc:never", lambda request: None)
    >>> "doc:never" in placement_registry()
    True
    >>> unregister_placement("doc:never")
    """
    if name in _base_placement_registry():
        raise ValueError(f"placement {name!r} is already registered (built in or from an entry point)")
    if name in _REGISTERED_PLACEMENTS and not replace:
        raise ValueError(f"placement {name!r} is already registered in this process")
    _REGISTERED_PLACEMENTS[name] = placement


def unregister_placement(name: str) -> None:
    """Forget a placement registered with :func:`register_placement`.

    Examples
    --------
    >>> register_placement("doc:again", lambda request: None)
    >>> unregister_placement("doc:again")
    >>> "doc:again" in placement_names()
    False
    """
    del _REGISTERED_PLACEMENTS[name]


def _entry_point_loader(name: str, ep: metadata.EntryPoint, family: str) -> Callable[[], object]:
    def load() -> object:
        try:
            return ep.load()
        except Exception as exc:
            raise InputError(
                f"cannot load {family} {name!r} from {ep.value!r}: {type(exc).__name__}: {exc}",
                where=f"entry point group {ep.group}",
                expected="an importable object",
            ) from None

    return load


def _policy_from_entry_point(name: str, ep: metadata.EntryPoint) -> Callable[[], PolicyBundle]:
    load = _entry_point_loader(name, ep, "policy")
    return lambda: as_bundle(cast(PolicyFn, load()), name=name)  # as_bundle checks it is callable


def _placement_from_entry_point(name: str, ep: metadata.EntryPoint) -> Callable[[], PlacementFn]:
    load = _entry_point_loader(name, ep, "placement")

    def placement() -> PlacementFn:
        fn = load()
        if not callable(fn):
            raise InputError(
                f"placement {name!r} from entry point {ep.value!r} is not callable",
                where=f"entry point group {ep.group}",
                expected="a callable (PlacementRequest) -> Allocation | None",
            )
        return cast(PlacementFn, fn)

    return placement


def plugin_name(ep: metadata.EntryPoint) -> str:
    """The name of an entry point's policy: ``PACKAGE:NAME``, ``PACKAGE`` being its top-level module.

    Examples
    --------
    >>> plugin_name(metadata.EntryPoint(name="mine", value="mypkg.policies:mine", group=POLICY_ENTRY_POINTS))
    'mypkg:mine'
    """
    return ep.name if ":" in ep.name else f"{ep.module.split('.')[0]}:{ep.name}"


def _entry_points(group: str) -> list[tuple[str, metadata.EntryPoint]]:
    return sorted(((plugin_name(ep), ep) for ep in metadata.entry_points(group=group)), key=lambda p: p[0])


def _base_policy_registry() -> Registry[PolicyBundle]:
    """Built-in policies and the entry-point ones (loaded on first use)."""
    reg: Registry[PolicyBundle] = Registry("policy")
    bundles = vclos_bundles()
    taken = {b.name for b in bundles}
    for name, fn in communication_policies().items():
        if name not in taken:
            reg.register(
                name, PolicyBundle(name=name, communication=fn, description=DESCRIPTIONS.get(name, ""))
            )
    for b in bundles:
        reg.register(b.name, b)
    for name, ep in _entry_points(POLICY_ENTRY_POINTS):
        if name not in reg:  # built-in names cannot be taken over
            reg.register_lazy(name, _policy_from_entry_point(name, ep))
    return reg


def policy_registry() -> Registry[PolicyBundle]:
    """Every named policy: communication policies, the vClos bundles (placement + routing + cluster),
    the policies of installed packages (entry points) and those registered in this process.

    Where a vClos bundle and a communication policy share a name (``balanced-ecmp``), the bundle wins:
    it is the same routing with the placement the vClos evaluation pairs it with.

    Examples
    --------
    >>> reg = policy_registry()
    >>> reg.get("crux-full").name
    'crux-full'
    >>> "ecmp-fair" in reg and "balanced-ecmp" in reg
    True
    """
    reg = _base_policy_registry()
    for name, bundle in _REGISTERED_POLICIES.items():
        if name not in reg:
            reg.register(name, bundle)
    return reg


def _base_placement_registry() -> Registry[PlacementFn]:
    reg: Registry[PlacementFn] = Registry("placement")
    for name, fn in job_schedulers().items():
        reg.register(name, fn)
    for name, ep in _entry_points(PLACEMENT_ENTRY_POINTS):
        if name not in reg:
            reg.register_lazy(name, _placement_from_entry_point(name, ep))
    return reg


def placement_registry() -> Registry[PlacementFn]:
    """Every placement (job scheduler) policy by name: built in, from entry points, registered here.

    Examples
    --------
    >>> sorted(n for n in placement_registry() if ":" not in n)[:3]
    ['first-fit', 'hived', 'muri']
    """
    reg = _base_placement_registry()
    for name, fn in _REGISTERED_PLACEMENTS.items():
        if name not in reg:
            reg.register(name, fn)
    return reg


def queue_registry() -> Registry[QueueOrderFn | None]:
    """Orders of the waiting queue by name (``fifo`` = arrival order)."""
    reg: Registry[QueueOrderFn | None] = Registry("queue order")
    reg.register("fifo", None)
    for name, fn in vclos_queue_orders().items():
        reg.register(name, fn)
    return reg


def policy_names() -> tuple[str, ...]:
    """Every policy name :func:`policy_registry` knows.

    Examples
    --------
    >>> {"crux-full", "ecmp-fair", "sincronia", "vclos"} <= set(policy_names())
    True
    """
    return policy_registry().names()


def placement_names() -> tuple[str, ...]:
    """Every placement name :func:`placement_registry` knows.

    Examples
    --------
    >>> {"pack", "first-fit", "hived", "muri"} <= set(placement_names())
    True
    """
    return placement_registry().names()
