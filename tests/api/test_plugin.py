"""A policy from another installed package (entry point ``mypkg:mine``): simulate, compare, the CLI."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

import commsched as cs
from commsched.testing import check_policy

pytestmark = pytest.mark.usefixtures("mypkg_installed")


def test_entry_point_policy_is_listed_and_loads() -> None:
    assert "mypkg:mine" in cs.policy_names()
    import mypkg

    assert cs.resolve_policy("mypkg:mine").communication is mypkg.mine


def test_entry_point_policy_through_simulate_and_compare() -> None:
    import mypkg

    sc = cs.load_scenario("crux-fig19")
    by_name = cs.simulate(sc, policy="mypkg:mine", mode="fast")
    direct = cs.simulate(sc, policy=mypkg.mine, mode="fast")
    assert by_name.policy == "mypkg:mine" and direct.policy == "mine"
    assert by_name.gpu_utilization == direct.gpu_utilization
    cmp = cs.compare(sc, ["crux-full", "mypkg:mine"], mode="fast")
    assert [s.policy for s in cmp.summaries] == ["crux-full", "mypkg:mine"]
    assert cmp.summaries[1].gpu_utilization == by_name.gpu_utilization


def test_entry_point_policy_passes_the_public_invariants() -> None:
    assert check_policy("mypkg:mine").ok


def test_cli_compare_runs_the_plugin_by_name() -> None:
    cli = Path(sys.executable).with_name("commsched")
    proc = subprocess.run(
        [str(cli), "compare", "crux-fig19", "--policies", "crux-full,mypkg:mine", "--mode", "fast", "--json"],
        capture_output=True,
        text=True,
        check=False,
        timeout=600,
    )
    assert proc.returncode == 0, proc.stderr
    obj = json.loads(proc.stdout)
    assert list(obj["policies"]) == ["crux-full", "mypkg:mine"]
    api = cs.simulate("crux-fig19", policy="mypkg:mine", mode="fast")
    # a comparison's figures are written to 10 significant digits
    # (commsched.sim.results.comparison.RESOLVED_DIGITS)
    assert obj["policies"]["mypkg:mine"]["gpu_utilization"] == float(f"{api.gpu_utilization:.10g}")
