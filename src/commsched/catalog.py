"""Names -> policies, at the edge (CLI, scenario files). One strict registry per family.

Three sources of names, in order: the built-in policies, policies that other installed packages
declare through entry points (group :data:`POLICY_ENTRY_POINTS`), and policies registered in this
process with :func:`register_policy`. Built-in names cannot be taken over; every policy is registered
with its one-line description (the built-in ones with :func:`~commsched.scheduling.policies.named_policies`,
a plug-in's from its docstring) and its aliases (``ecmp-fair`` is ``fair``). One name, one algorithm: a vClos
bundle that shares a communication policy's name (``balanced-ecmp``) routes with that very policy and
only adds its placement, so the simulator, ``commsched plan`` and the daemon route alike. A plug-in's
policy is named after the package that provides it: the entry point ``mine = "mypkg.policies:mine"`` is the
policy ``mypkg:mine``.
"""

from __future__ import annotations

from collections.abc import Callable
from importlib import metadata
from typing import Literal, cast

from commsched.errors import InputError
from commsched.registry import Registry
from commsched.scheduling.interfaces import PlacementFn, PolicyBundle, PolicyFn, QueueOrderFn
from commsched.scheduling.jobsched import job_schedulers
from commsched.scheduling.policies import NamedPolicy, named_policies
from commsched.scheduling.vclos.bundles import vclos_bundles, vclos_queue_orders

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
    return PolicyBundle(
        name=name or str(getattr(policy, "__name__", "custom")),
        communication=policy,
        description=_line(policy),
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


def registered_in_process(name: object, *, family: Literal["policy", "placement"]) -> bool:
    """Whether ``name`` is a ``family`` name (``"policy"`` or ``"placement"``) registered in this process
    only (:func:`register_policy`, :func:`register_placement`): one that other processes do not know.

    Examples
    --------
    >>> register_placement("doc:local", lambda request: None)
    >>> [registered_in_process(n, family="placement") for n in ("doc:local", "pack")]
    [True, False]
    >>> unregister_placement("doc:local")
    """
    table = _REGISTERED_POLICIES if family == "policy" else _REGISTERED_PLACEMENTS
    return isinstance(name, str) and name in table


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


def _renamed(bundle: PolicyBundle, alias: str) -> PolicyBundle:
    return as_bundle(bundle, name=alias)


def _description(bundle: PolicyBundle) -> str:
    return bundle.description


def _builtin_bundle(name: str, policy: NamedPolicy, bundles: dict[str, PolicyBundle]) -> PolicyBundle:
    """The bundle a built-in name stands for: the vClos bundle of that name, or the policy alone."""
    bundle = bundles.pop(name, None)
    if bundle is None:
        return PolicyBundle(name=name, communication=policy.policy, description=policy.description)
    if bundle.communication is not policy.policy:
        raise ValueError(f"policy {name!r} names two algorithms (a vClos bundle and a communication policy)")
    return bundle


def _base_policy_registry() -> Registry[PolicyBundle]:
    """Built-in policies and the entry-point ones (loaded on first use)."""
    reg: Registry[PolicyBundle] = Registry("policy", as_alias=_renamed, describe=_description)
    bundles = {b.name: b for b in vclos_bundles()}
    for name, policy in named_policies().items():
        b = _builtin_bundle(name, policy, bundles)
        reg.register(name, b, description=b.description, aliases=policy.aliases)
    for b in bundles.values():
        reg.register(b.name, b, description=b.description)
    for name, ep in _entry_points(POLICY_ENTRY_POINTS):
        if name not in reg:  # built-in names cannot be taken over
            reg.register_lazy(name, _policy_from_entry_point(name, ep))
    return reg


def policy_registry() -> Registry[PolicyBundle]:
    """Every named policy: communication policies, the vClos bundles (placement + routing + cluster),
    the policies of installed packages (entry points) and those registered in this process.

    Where a vClos bundle and a communication policy share a name (``balanced-ecmp``), the name stands
    for the bundle, whose routing *is* that communication policy (checked when the registry is built)
    with the placement the vClos evaluation pairs it with; the daemon, which does not place jobs, routes
    with the same policy. Aliases resolve to their policy, renamed (``ecmp-fair``).

    Examples
    --------
    >>> reg = policy_registry()
    >>> reg.get("crux-full").name
    'crux-full'
    >>> "ecmp-fair" in reg and "balanced-ecmp" in reg and "ecmp-fair" not in reg.names()
    True
    >>> reg.get("ecmp-fair").name, reg.get("ecmp-fair").communication is reg.get("fair").communication
    ('ecmp-fair', True)
    """
    reg = _base_policy_registry()
    for name, bundle in _REGISTERED_POLICIES.items():
        if name not in reg:
            reg.register(name, bundle, description=bundle.description)
    return reg


#: the one line ``commsched policies`` shows for each built-in placement (job scheduler)
_PLACEMENT_LINES = {
    "pack": "best-fit locality packing: fewest hosts, then fewest ToRs (Crux's default)",
    "first-fit": "first free GPUs in host order (the trace's production scheduler)",
    "hived": "HiveD-like: buddy cells of a power-of-two size within the smallest enclosing switch",
    "muri": "Muri-like: interleave communication-heavy and compute-heavy jobs on the same links",
}


def _line(fn: object) -> str:
    """The first paragraph of a callable's docstring, on one line."""
    doc = (getattr(fn, "__doc__", None) or "").strip().split("\n\n")[0]
    return " ".join(doc.split())


def _base_placement_registry() -> Registry[PlacementFn]:
    reg: Registry[PlacementFn] = Registry("placement")
    for name, fn in job_schedulers().items():
        reg.register(name, fn, description=_PLACEMENT_LINES.get(name) or _line(fn))
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
            reg.register(name, fn, description=_line(fn))
    return reg


def queue_registry() -> Registry[QueueOrderFn | None]:
    """Orders of the waiting queue by name (``fifo`` = arrival order)."""
    reg: Registry[QueueOrderFn | None] = Registry("queue order")
    reg.register("fifo", None, description="arrival order (default)")
    lines = {
        "sf": "smallest job first (fewest GPUs), ties by arrival (vClos evaluation)",
        "edf": "earliest deadline first: arrival + duration, jobs without a duration last (vClos evaluation)",
    }
    for name, fn in vclos_queue_orders().items():
        reg.register(name, fn, description=lines.get(name) or _line(fn))
    return reg


def policy_names() -> tuple[str, ...]:
    """Every policy name :func:`policy_registry` accepts (aliases last).

    Examples
    --------
    >>> {"crux-full", "ecmp-fair", "sincronia", "vclos"} <= set(policy_names())
    True
    """
    return policy_registry().accepted()


def placement_names() -> tuple[str, ...]:
    """Every placement name :func:`placement_registry` knows.

    Examples
    --------
    >>> {"pack", "first-fit", "hived", "muri"} <= set(placement_names())
    True
    """
    return placement_registry().accepted()
