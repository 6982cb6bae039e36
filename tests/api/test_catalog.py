"""Names at the edge: lazy registry items, plug-in naming, broken plug-ins, registered placements."""

from __future__ import annotations

from importlib import metadata

import pytest

import commsched as cs
from commsched.catalog import _policy_from_entry_point, plugin_name
from commsched.errors import InputError
from commsched.registry import Registry
from commsched.testing import toy_job
from commsched.topology import two_layer_clos


def test_lazy_items_load_once_and_keep_their_order() -> None:
    calls: list[str] = []
    reg: Registry[int] = Registry("thing")
    reg.register("a", 1)
    reg.register_lazy("b", lambda: calls.append("b") or 2)  # type: ignore[func-returns-value]
    reg.register("c", 3)
    assert reg.names() == ("a", "b", "c") and len(reg) == 3 and calls == []
    assert reg.get("b") == 2 and reg.get("b") == 2 and calls == ["b"]
    assert reg.names() == ("a", "b", "c")
    with pytest.raises(ValueError, match="already registered"):
        reg.register_lazy("a", lambda: 0)


def test_plugin_names_carry_their_package() -> None:
    ep = metadata.EntryPoint(name="mine", value="mypkg.sub:mine", group="commsched.policies")
    assert plugin_name(ep) == "mypkg:mine"
    qualified = metadata.EntryPoint(name="other:x", value="mypkg:mine", group="commsched.policies")
    assert plugin_name(qualified) == "other:x"


def test_a_broken_plugin_fails_only_when_asked_for_with_one_line() -> None:
    ep = metadata.EntryPoint(name="bad", value="no_such_module_xyz:bad", group="commsched.policies")
    load = _policy_from_entry_point("no_such_module_xyz:bad", ep)  # building the loader imports nothing
    with pytest.raises(InputError, match=r"cannot load policy 'no_such_module_xyz:bad'.*ModuleNotFoundError"):
        load()


def test_registered_placement_by_name_in_simulate_and_scenario_files(tmp_path: object) -> None:
    def never(request: cs.PlacementRequest) -> cs.Allocation | None:
        return None

    cs.register_placement("test:never", never)
    try:
        assert "test:never" in cs.placement_names()
        job = toy_job("a", compute_s=0.5, comm_bytes=1e9, gpus=16)
        small = cs.build_scenario(
            two_layer_clos(tors=2, aggs=2), [job], horizon_s=10.0, placement="test:never"
        )
        assert [j.start_s for j in cs.simulate(small, policy="fair", mode="fast").jobs] == [None]
        packed = cs.simulate(small, policy="fair", placement="pack", mode="fast")
        assert packed.jobs[0].start_s == 0.0
        with pytest.raises(ValueError, match="built in"):
            cs.register_placement("pack", never)
    finally:
        cs.unregister_placement("test:never")
    assert "test:never" not in cs.placement_names()
