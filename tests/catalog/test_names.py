"""One algorithm per policy name, descriptions registered with the policies, no name taken twice."""

from __future__ import annotations

from dataclasses import replace

import pytest

import commsched as cs
from commsched.catalog import placement_registry, policy_registry, queue_registry
from commsched.registry import Registry
from commsched.runtime.daemon import Cause, ClusterConfig, JobRecord, decide
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.policies import communication_plans, named_policies
from commsched.scheduling.state import ClusterState, Decisions


def test_a_name_or_alias_taken_twice_raises() -> None:
    reg: Registry[int] = Registry("thing")
    reg.register("a", 1, aliases=("b",))
    for name, aliases in (
        ("a", ()),
        ("b", ()),
        ("c", ("a",)),
        ("d", ("b",)),
        ("e", ("e",)),
        ("f", ("g", "g")),
    ):
        with pytest.raises(ValueError, match="already registered"):
            reg.register(name, 2, aliases=aliases)
        with pytest.raises(ValueError, match="already registered"):
            reg.register_lazy(name, lambda: 2, aliases=aliases)
    assert reg.names() == ("a",) and reg.get("b") == 1  # the failed registrations left nothing behind


def test_a_builtin_policy_name_cannot_be_registered_again() -> None:
    for name in ("fair", "ecmp-fair", "balanced-ecmp"):
        with pytest.raises(ValueError, match="already registered"):
            cs.register_policy(name, lambda state, ctx: Decisions())


def test_every_registered_policy_placement_and_queue_order_has_a_description() -> None:
    pols = policy_registry()
    for name in pols.accepted():
        assert pols.get(name).description, name
        assert pols.description(name) == pols.get(name).description, name
    for reg in (placement_registry(), queue_registry()):
        for name in reg.names():
            assert reg.description(name) and "\n" not in reg.description(name), name
    assert all(p.description for p in named_policies().values())


def test_fair_and_ecmp_fair_are_one_policy_listed_once() -> None:
    reg = policy_registry()
    assert "fair" in reg.names() and "ecmp-fair" not in reg.names()
    assert reg.aliases("fair") == ("ecmp-fair",) and reg.canonical("ecmp-fair") == "fair"
    fair, alias = reg.get("fair"), reg.get("ecmp-fair")
    assert alias.communication is fair.communication and alias.name == "ecmp-fair"  # reported as asked
    assert communication_plans()["ecmp-fair"] is not None and "ecmp-fair" in cs.policy_names()


def test_balanced_ecmp_is_one_algorithm_for_simulator_plan_and_daemon() -> None:
    bundle = policy_registry().get("balanced-ecmp")
    assert bundle.communication is named_policies()["balanced-ecmp"].policy
    assert bundle.placement is not None  # the simulator's bundle adds locality packing, nothing else


def _records(state: ClusterState) -> list[JobRecord]:
    return [
        JobRecord(
            id=str(j.id),
            gpus=tuple(map(str, j.gpus)),
            compute_s=j.spec.profile.compute_s,
            comm_bytes=j.spec.profile.sync_bytes,
            overlap=j.spec.profile.overlap,
            collective=j.spec.collective,
            started_s=float(i),
            profiling=False,
        )
        for i, j in enumerate(state.jobs)
    ]


def test_simulate_and_the_daemon_route_balanced_ecmp_alike_on_a_shipped_scenario() -> None:
    sc = cs.load_scenario("vclos-testbed")
    sc = replace(sc, horizon_s=60.0)
    bundle = policy_registry().get("balanced-ecmp")
    seen: list[tuple[ClusterState, Decisions]] = []

    def recorded(state: ClusterState, ctx: PolicyContext) -> Decisions:
        d = bundle.communication(state, ctx)
        seen.append((state, d))
        return d

    cs.simulate(sc, replace(bundle, communication=recorded), mode="exact")
    assert seen and max(len(s.jobs) for s, _ in seen) >= 2
    cfg = ClusterConfig(topology={"kind": "leaf_spine"}, policy="balanced-ecmp", priority_levels=1)
    compared = 0
    for state, d in seen:
        doc = decide(state.topology, cfg, _records(state), version=1, cause=Cause(kind="test"))
        for c in doc["connections"]:
            key = (
                next(
                    k
                    for k in d.routes
                    if (str(k.job), str(k.src), str(k.dst)) == (c["job"], c["src"], c["dst"])
                )
                if c["n_paths"] > 1
                else None
            )
            if key is None:
                continue
            assert c["path_index"] == d.routes[key] % c["n_paths"], (c["job"], c["src"], c["dst"])
            compared += 1
    assert compared >= 8  # several connections with a choice of paths were compared


def test_a_failing_lazy_item_fails_the_same_way_every_time() -> None:
    def broken() -> int:
        raise RuntimeError("cannot load")

    reg: Registry[int] = Registry("thing")
    reg.register_lazy("x", broken, aliases=("y",))
    for name in ("x", "y", "x"):
        with pytest.raises(RuntimeError, match="cannot load"):
            reg.get(name)
