"""Replaying a vClos-style bundle's placement on the daemon's running jobs.

The daemon does not place jobs, but a bundle that places (``vclos``, ``ocs-vclos``, ...) decides its
routes at placement (vClos §6.1): its placement is asked again for every running job in start order, so
the routes it pins are the ones the daemon serves (:mod:`commsched.runtime.daemon.decide`).
"""

from __future__ import annotations

from types import MappingProxyType
from typing import Any

from commsched.scheduling.state import ClusterState, PlacedJob


def placed_routing(policy: str, state: ClusterState) -> tuple[ClusterState, Any] | None:
    """For a bundle that places jobs: the state with its placement replayed on *all* running jobs,
    and its routing alone (to be run per domain); ``None`` for any other policy.

    The replay must see every running job (each request sees the jobs started before it); run inside
    one contention domain it would see only that domain's jobs and grant other GPUs, and pin nothing.
    """
    from commsched.catalog import policy_registry
    from commsched.scheduling.policies import communication_plans
    from commsched.scheduling.policies.common import Plan

    reg = policy_registry()
    if policy in communication_plans() or policy not in reg:
        return None
    bundle = reg.get(policy)
    if bundle.placement is None:
        return None
    fn = bundle.communication

    def routing(s: ClusterState, ctx: Any) -> Plan:
        return Plan(decisions=fn(s, ctx), intensity=MappingProxyType({}))

    return replay_placement(state, bundle.placement), routing


def replay_placement(state: ClusterState, placement: Any) -> ClusterState:
    """The running jobs with the links their bundle's placement reserves and the routes it pins.

    The daemon does not place jobs, but a vClos bundle's routing is decided by its placement (the
    route of every connection is pinned when the job is placed, vClos §6.1). The placement is asked
    again for every job in start order, each request seeing the jobs before it with their
    reservations, as the launcher (``commsched testbed run``) and the simulator asked it; where it
    grants the GPUs the job runs on, the job gets the grant's reserved links and pinned routes, else
    it keeps none (its connections then take the policy's default route).
    """

    if state.topology.params.get("circuits") is not None:
        return _rewired(state, placement)
    return _replay(state, placement)


def _replay(state: ClusterState, placement: Any) -> ClusterState:
    """:func:`replay_placement` on the fabric as it is."""
    from dataclasses import replace

    from commsched.errors import CommschedError
    from commsched.scheduling.freegpus import FreeGpus
    from commsched.scheduling.inorder import OrderRules, place_in_order
    from commsched.scheduling.interfaces import Allocation, PlacementRequest

    def guarded(req: PlacementRequest) -> Allocation | None:
        try:
            return placement(req)  # type: ignore[no-any-return]
        except CommschedError:  # e.g. a vClos placement on a fabric that is not a leaf-spine
            return None

    rules = OrderRules(placement=guarded, explicit="replayed")
    placed = place_in_order(state.jobs, free=FreeGpus(state.topology), rules=rules)
    return replace(state, jobs=tuple(p.job for p in placed))


def _rewired(state: ClusterState, placement: Any) -> ClusterState:
    """Replay on a fabric with rewired OCS circuits: placed on the static circuits, routes carried over.

    The vClos placement maps only the static circuits (``scheduling.vclos.wiring``), so it is asked on
    the same fabric with static circuits; each pinned path becomes the path of the rewired fabric
    through the same leaf up port and the same destination leaf port (the leaf-OCS fibres keep their
    link ids), or else through the same up port.
    """
    from dataclasses import replace

    from commsched.scheduling.routing import network_pair
    from commsched.scheduling.vclos.bundles import with_ocs
    from commsched.topology import LinkKind

    topo = state.topology
    static = with_ocs(topo)
    replayed = _replay(replace(state, topology=static), placement)
    if static.params.get("circuits") == topo.params.get("circuits"):
        return _replay(state, placement)
    jobs: list[PlacedJob] = []
    for job in replayed.jobs:
        routes: dict[Any, int] = {}
        for key, idx in job.pinned_routes.items():
            pair = network_pair(static, key)
            if pair is None:
                continue
            old = [
                lk
                for lk in static.equal_cost_paths(*pair)[idx].links
                if static.links[lk].kind == LinkKind.FABRIC
            ]
            paths = topo.equal_cost_paths(*pair)
            for need in ({old[0], old[-1]}, {old[0]}):
                hit = next((i for i, p in enumerate(paths) if need.issubset(p.links)), None)
                if hit is not None:
                    routes[key] = hit
                    break
        jobs.append(replace(job, pinned_routes=MappingProxyType(routes)))
    return replace(state, jobs=tuple(jobs))
