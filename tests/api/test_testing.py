"""The public invariant helper: passes every built-in policy, catches each broken rule."""

from __future__ import annotations

import itertools
from types import MappingProxyType

import pytest

from commsched.catalog import policy_registry
from commsched.scheduling.basic import fair_policy
from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.policies import communication_policies
from commsched.scheduling.routing import network_pair
from commsched.scheduling.state import ClusterState, ConnectionKey, Decisions
from commsched.scheduling.traffic import job_connections
from commsched.testing import (
    check_compression,
    check_decisions,
    check_determinism,
    check_policy,
    example_states,
)

CTX = PolicyContext(seed=0, now_s=0.0, epoch=0)
UNIQUE = {"crux-pa", "crux-ps-pa"}  # one class per job by design (crux-spec §6.6)


@pytest.mark.parametrize("name", sorted(communication_policies()))
def test_every_builtin_communication_policy_keeps_the_invariants(name: str) -> None:
    rep = check_policy(
        name, seeds=(0,), simulate=name in ("crux-full", "fair"), unique_priorities=name in UNIQUE
    )
    assert rep.ok and rep.states == 3


def test_unique_priority_policies_exceed_the_levels_without_the_flag() -> None:
    rep = check_policy("crux-pa", seeds=(0,), simulate=False, raise_on_failure=False)
    assert not rep.ok and "outside 0..2" in rep.problems[0]


def test_vclos_bundles_keep_the_invariants() -> None:
    reg = policy_registry()
    for name in ("balanced-ecmp", "source-routing"):
        assert check_policy(reg.get(name), seeds=(0,), simulate=False).ok


def _first_network_key(st: ClusterState) -> ConnectionKey:
    return next(
        k
        for j in st.jobs
        for k in job_connections(st.topology, j)
        if network_pair(st.topology, k) is not None
    )


def test_each_broken_rule_is_caught() -> None:
    one, clos, _ = example_states()
    ids = [j.id for j in clos.jobs]
    key = _first_network_key(clos)
    pair = network_pair(clos.topology, key)
    assert pair is not None
    n_paths = len(clos.topology.equal_cost_paths(*pair))
    bad = {
        "class of a job not running": Decisions(classes={"ghost": 0}),
        "class above the levels": Decisions(classes={ids[0]: clos.priority_levels}),
        "ranking with a tie": Decisions(ranking=dict.fromkeys(ids, 0)),
        "ranking missing a job": Decisions(ranking={ids[0]: 0}),
        "route out of range": Decisions(routes=MappingProxyType({key: n_paths})),
        "negative time shift": Decisions(time_shift_s={ids[0]: -1.0}),
    }
    for what, d in bad.items():
        assert check_decisions(clos, d), what
    assert check_decisions(clos, Decisions(routes=MappingProxyType({key: n_paths - 1}))) == []
    inverted = Decisions(ranking={"a": 0, "b": 1}, classes={"a": 1, "b": 0})
    assert check_compression(one, inverted) and check_decisions(one, inverted) == []
    calls = itertools.count()
    flaky = lambda s, c: Decisions(classes={"a": next(calls) % 2})  # noqa: E731
    assert check_determinism(flaky, one, CTX)
    with pytest.raises(AssertionError, match="decided differently"):
        check_policy(flaky, [one], seeds=(0,), simulate=False)


def test_a_policy_that_raises_or_returns_junk_is_reported() -> None:
    def boom(state: ClusterState, ctx: PolicyContext) -> Decisions:
        raise RuntimeError("no")

    rep = check_policy(boom, seeds=(0,), simulate=False, raise_on_failure=False)
    assert "raised RuntimeError: no" in rep.problems[0]
    junk = check_policy(lambda s, c: {"a": 0}, seeds=(0,), simulate=False, raise_on_failure=False)  # type: ignore[arg-type, return-value]
    assert "not Decisions" in junk.problems[0]


def test_capacity_check_passes_the_fair_policy_on_every_example_state() -> None:
    from commsched.testing import check_capacity

    for st in example_states():
        assert check_capacity(fair_policy, st, horizon_s=5.0) == []
