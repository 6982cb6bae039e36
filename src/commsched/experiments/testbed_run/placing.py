"""Where each policy places a scenario's jobs on the testbed, and the OCS circuits it asks for.

A job with an explicit placement (``hosts`` / ``gpu_ids``) keeps it under every policy, as in the
simulator. A job without one is placed by the policy's own placement (a bundle of the policy
registry: locality packing for ``ecmp`` / ``sr``, vClos or OCS-vClos for ``vclos`` / ``ocs-vclos``), else
by the scenario's ``placement``: the same :class:`~commsched.scheduling.interfaces.PlacementRequest`
sequence the simulator makes at time 0 (jobs in arrival order, then file order; each request sees the
jobs placed before it with their reserved links and pinned routes). All jobs of a testbed run start
together, so a job the policy would leave waiting is an input error.

Under OCS-vClos the allocator's placement also names the circuits of the job's virtual Clos
(:class:`~commsched.scheduling.vclos.fabric.Cable`: leaf up port -> spine); :func:`policy_placement`
returns the whole circuit table ``circuits[leaf][uplink] = spine`` with those circuits set and every
other uplink on its static spine, for :func:`commsched.testbed.build.rewire`.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace

from commsched.catalog import placement_registry, policy_registry
from commsched.errors import InputError
from commsched.io.scenario import Scenario
from commsched.scheduling.freegpus import FreeGpus
from commsched.scheduling.inorder import OrderRules, place_in_order
from commsched.scheduling.interfaces import Allocation, PlacementRequest
from commsched.scheduling.state import PlacedJob
from commsched.topology import NodeId, Topology

__all__ = ["PolicyPlacement", "placed_scenario", "policy_placement", "static_circuits"]


@dataclass(frozen=True, slots=True, kw_only=True)
class PolicyPlacement:
    """One policy's placement of a scenario: GPUs per job (rank order), circuits (OCS-vClos only)."""

    policy: str
    gpus: dict[str, tuple[NodeId, ...]]
    placed_by: str
    #: ``circuits[leaf][uplink] = spine`` the placement asks for (``None``: not an OCS placement)
    circuits: tuple[tuple[int, ...], ...] | None = None
    #: circuits that differ from the static cabling
    circuits_changed: int = 0


def static_circuits(topology: Topology) -> tuple[tuple[int, ...], ...]:
    """The static OCS circuits of a leaf-spine: uplink ``j`` on spine ``j // p`` (as the builder)."""
    p = topology.params
    leaves, spines = int(str(p["leaves"])), int(str(p["spines"]))
    ports = p.get("ports_per_leaf")
    up = int(str(ports)) // 2 if ports is not None else spines
    per = max(1, up // spines)
    return tuple(tuple(j // per for j in range(up)) for _ in range(leaves))


def policy_placement(scenario: Scenario, policy: str) -> PolicyPlacement:
    """Place the scenario's jobs as the simulator does at time 0 under ``policy``."""
    bundle = policy_registry().get(policy, where="--policies") if policy in policy_registry() else None
    fn = bundle.placement if bundle is not None and bundle.placement is not None else None
    placed_by = f"{policy} (the policy's own)" if fn is not None else str(scenario.placement)
    if fn is None:
        fn = placement_registry().get(scenario.placement, where="placement")
    topo = scenario.topology
    if bundle is not None and bundle.topology is not None:
        topo = bundle.topology(topo)
    ocs = _ocs_allocator(fn)
    circuits = [list(r) for r in static_circuits(topo)] if ocs is not None else None
    held: set[tuple[int, int]] = set()  # uplinks whose circuit a placed job holds

    def place(req: PlacementRequest) -> Allocation | None:
        if ocs is not None and circuits is not None:
            for c in ocs(req):
                _set_circuit(circuits, held, c)
        return fn(req)

    order = sorted(range(len(scenario.jobs)), key=lambda i: (scenario.jobs[i].spec.arrival_s, i))
    queue = [
        PlacedJob(spec=scenario.jobs[i].spec, gpus=tuple(NodeId(g) for g in scenario.jobs[i].gpu_ids))
        for i in order
    ]
    placed = place_in_order(
        queue, free=FreeGpus(topo), rules=OrderRules(placement=place, explicit="as-given")
    )
    if len(placed) < len(queue):
        spec = queue[len(placed)].spec
        raise InputError(
            f"policy {policy!r} does not place job {spec.id!r} at the start",
            where=f"{scenario.source}: jobs.{spec.id}",
            expected="a mix every policy starts at once (a testbed run starts all its jobs together)",
        )
    gpus = {str(p.job.id): p.job.gpus for p in placed}
    table = None if circuits is None else tuple(tuple(r) for r in circuits)
    changed = 0
    if table is not None:
        static = static_circuits(topo)
        changed = sum(a != b for r, s in zip(table, static, strict=True) for a, b in zip(r, s, strict=True))
    return PolicyPlacement(
        policy=policy, gpus=gpus, placed_by=placed_by, circuits=table, circuits_changed=changed
    )


def _set_circuit(circuits: list[list[int]], held: set[tuple[int, int]], c: tuple[int, int, int]) -> None:
    """Join uplink ``(leaf, port)`` to spine ``c[2]``; an idle uplink of that spine takes its old spine.

    A spine has as many ports as circuits, so the circuit that held the spine port goes to the
    spine the rewired uplink leaves (the swap keeps every spine's count; an OCS-vClos placement
    rewires only idle links, and the swapped uplink is one no placed job holds).
    """
    leaf, port, spine = c
    held.add((leaf, port))
    old = circuits[leaf][port]
    if old == spine:
        return
    circuits[leaf][port] = spine
    for l2, row in enumerate(circuits):
        for j, s2 in enumerate(row):
            if s2 == spine and (l2, j) not in held:
                row[j] = old
                return


def _ocs_allocator(fn: object) -> Callable[[PlacementRequest], list[tuple[int, int, int]]] | None:
    """For an OCS-vClos placement: a function request -> its circuits ``(leaf, uplink, spine)``."""
    from commsched.scheduling.vclos.fabric import JobRequest
    from commsched.scheduling.vclos.policy import FabricPlacement
    from commsched.scheduling.vclos.wiring import state_from_running

    if not isinstance(fn, FabricPlacement) or fn.pin != "ocs":
        return None

    def circuits(req: PlacementRequest) -> list[tuple[int, int, int]]:
        from commsched.errors import InfeasibleError

        wiring = fn.cache.get(req.topology)
        state = state_from_running(wiring, req.running)
        try:
            _, placement = fn.allocate(state, JobRequest(job_id=req.job.id, gpus=req.job.gpus))
        except InfeasibleError:
            return []
        return [(c.leaf, c.port, c.spine) for c in placement.cables]

    return circuits


def placed_scenario(scenario: Scenario, placement: PolicyPlacement) -> Scenario:
    """``scenario`` with every job at the GPUs of ``placement`` (explicit placements)."""
    jobs = tuple(replace(j, gpu_ids=placement.gpus[str(j.spec.id)]) for j in scenario.jobs)
    return replace(scenario, jobs=jobs)
