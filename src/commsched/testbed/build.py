"""Build, tear down and rewire a testbed (``commsched testbed up/down/rewire``).

``up`` records every namespace it is about to create in the state file *before* creating it, and the
phase it is in before each step; all interfaces, addresses, routes and queues live inside those
namespaces, so ``down`` removes exactly the testbed by deleting the recorded namespaces that exist,
also after a crash halfway through ``up``. Nothing in the root namespace is changed.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import replace
from typing import Any

from commsched.errors import InputError, TestbedError
from commsched.testbed import config, fabric, htb, netns
from commsched.testbed.fabric import FabricPlan, RoutedSpec
from commsched.testbed.layout import Layout, check_name, plan_layout
from commsched.testbed.pinning import Pin, pin_lines, source_routing_pins
from commsched.testbed.state import (
    TestbedState,
    list_names,
    read_state,
    remove_state,
    state_path,
    write_state,
)
from commsched.topology import Topology, build_topology

ROUTINGS = ("ecmp", "source-routing", "pinned")


def topology_of(state: TestbedState) -> Topology:
    """Rebuild the topology a testbed was built from."""
    params = {k: v for k, v in state.topology.items() if k != "kind"}
    return build_topology(str(state.topology["kind"]), params, where=f"testbed {state.name}: topology")


def topology_spec(topo: Topology) -> dict[str, Any]:
    """The builder kind and parameters that rebuild ``topo`` (checked by rebuilding it).

    The vClos rail host is the leaf-spine builder's default and has no registered name, so it is left
    out of the parameters.
    """
    spec: dict[str, Any] = dict(topo.params)
    if spec.get("kind") == "leaf_spine" and str(spec.get("host_template", "")).startswith("rail_"):
        spec.pop("host_template")
    if "kind" not in spec:
        raise InputError(f"topology {topo.name!r} has no builder kind", where="topology")
    params = {k: v for k, v in spec.items() if k != "kind"}
    again = build_topology(str(spec["kind"]), params, where="topology")
    if len(again.links) != len(topo.links) or len(again.hosts) != len(topo.hosts):
        raise InputError(f"topology {topo.name!r} cannot be rebuilt from its parameters", where="topology")
    return spec


def _fabric_step(step: str) -> Callable[[FabricPlan, TestbedState], None]:
    def run(plan: FabricPlan, state: TestbedState) -> None:
        fabric.create_step(plan, step)

    return run


def _step_pins(plan: FabricPlan, state: TestbedState) -> None:
    pins = [Pin.from_json(p) for p in state.pinned]
    if pins:
        assert isinstance(plan.fabric, Layout)
        fabric.run_batches("ip", pin_lines(plan.fabric, pins))


#: the creation steps in order (the fabric's, then the pinned routes); the state file names the step
#: started last
STEPS: tuple[tuple[str, Callable[[FabricPlan, TestbedState], None]], ...] = (
    *((step, _fabric_step(step)) for step in fabric.FABRIC_STEPS),
    ("pins", _step_pins),
)


def up(
    topo: Topology,
    *,
    name: str,
    rate_scale: float,
    routing: str = "ecmp",
    seed: int = 0,
    pins: Sequence[Pin] = (),
) -> TestbedState:
    """Build a testbed for ``topo`` and return its state (also written to the state file).

    Raises
    ------
    CapabilityError
        Without root / CAP_NET_ADMIN (one line; exit 2 on the command line).
    InputError
        Bad name or rate scale, a testbed of that name exists, or an unsupported topology.
    TestbedError
        A system command failed; the namespaces created so far are removed again.
    """
    check_name(name)
    if routing not in ROUTINGS:
        raise InputError(f"unknown routing {routing!r}", where="--routing", expected=" | ".join(ROUTINGS))
    if not 0 < rate_scale <= 1:
        raise InputError(f"rate scale {rate_scale}", where="--rate-scale", expected="a number in (0, 1]")
    plan = fabric.plan_fabric(RoutedSpec(topology=topo, name=name, rate_scale=rate_scale, seed=seed))
    netns.require_capability()
    if state_path(name).exists():
        raise InputError(
            f"testbed {name!r} exists", where="--name", expected="a new name, or 'testbed down' first"
        )
    clash = [ns for ns in plan.namespaces if netns.exists(ns)]
    if clash:
        raise InputError(f"namespace {clash[0]!r} exists already", where="--name", expected="a new name")
    if routing == "source-routing":
        pins = source_routing_pins(topo)
    elif routing == "pinned" and not pins:
        raise InputError("pinned routing needs a plan", where="--plan", expected="a plan file")
    state = TestbedState(
        name=name,
        topology=topology_spec(topo),
        rate_scale=rate_scale,
        routing=routing,
        seed=seed,
        namespaces=plan.namespaces,
        phase="planned",
        pinned=tuple(p.to_json() for p in pins),
        notes=("intra-host links (NVLink/PCIe) are not emulated",),
    )
    write_state(state)
    try:
        for phase, step in STEPS:
            state = state.with_phase(phase)
            write_state(state)
            step(plan, state)
    except BaseException:
        down(name)
        raise
    state = state.with_phase("up")
    write_state(state)
    return state


def down(name: str) -> tuple[str, ...]:
    """Remove testbed ``name``: its recorded namespaces that exist, then its state files.

    Returns the namespaces deleted. Raises :class:`TestbedError` when one survives.
    """
    state = read_state(name)
    netns.require_capability()
    present = [ns for ns in state.namespaces if netns.exists(ns)]
    if present:
        netns.run(
            ["ip", "-force", "-batch", "-"], "".join(f"netns del {ns}\n" for ns in present), check=False
        )
    left = [ns for ns in present if netns.exists(ns)]
    if left:
        raise TestbedError(f"namespaces left after down: {', '.join(left)}")
    remove_state(name)
    return tuple(present)


def names() -> tuple[str, ...]:
    """Names of every testbed with a state file."""
    return list_names()


def rewire(name: str, circuits: Sequence[Sequence[int]]) -> TestbedState:
    """Re-create the OCS circuits of a leaf-spine testbed as ``circuits[leaf][uplink] = spine``.

    Only circuits whose spine changes are torn down and re-created (same interface names, addresses
    and queues); then every router's routes are replaced atomically, (ECMP testbeds only: the vClos
    routing layer maps only static circuits, so pinned paths are not derived again). Traffic of a
    rewired circuit moves to the new one as soon as the routes are in (well under a second here).
    """
    state = read_state(name)
    netns.require_capability()
    if state.routing != "ecmp":
        # the vClos routing layer (scheduling.vclos.wiring) maps only the static circuits, so pinned
        # paths cannot be derived again for rewired ones
        raise InputError(
            f"testbed {name!r} uses {state.routing} routing", where="rewire", expected="an ecmp testbed"
        )
    if not state.topology.get("ocs"):
        raise InputError(
            f"testbed {name!r} has no OCS layer", where="rewire", expected="a leaf_spine with ocs: true"
        )
    old = plan_layout(topology_of(state), name)
    params: dict[str, Any] = dict(state.topology) | {"circuits": [list(r) for r in circuits]}
    new_state = replace(state, topology=params, phase="rewiring")
    new = plan_layout(topology_of(new_state), name)
    changed = [
        n for o, n in zip(old.cables, new.cables, strict=True) if (o.a.node, o.b.node) != (n.a.node, n.b.node)
    ]
    write_state(new_state)
    if changed:
        dels: dict[str, list[str]] = {}
        for c in changed:
            dels.setdefault(new.node_ns(c.a), []).append(f"link del {c.a.iface}")
        fabric.run_batches("ip", dels)
        sub = replace(new, cables=tuple(changed))
        netns.run(["ip", "-batch", "-"], "\n".join(config.veth_lines(sub)) + "\n")
        fabric.run_batches("ip", config.interface_ip_lines(sub))
        shaping = htb.namespace_tc_lines(sub, state.rate_scale)
        fabric.run_batches("tc", shaping)
    fabric.run_batches("ip", config.router_route_lines(new, verb="replace"))
    new_state = new_state.with_phase("up")
    write_state(new_state)
    return new_state
