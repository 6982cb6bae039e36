"""The examples in the docstrings of the public API run (every public name has one)."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = (
    "commsched",
    "commsched.api.scenarios",
    "commsched.api.running",
    "commsched.api.planning",
    "commsched.api.frames",
    "commsched.catalog",
    "commsched.registry",
    "commsched.testing",
    "commsched._lazy",
    "commsched._docgen",
    "commsched.io.results",
    "commsched.scheduling.state",
    "commsched.scheduling.interfaces",
    "commsched.sim.records",
    "commsched.experiments.compare",
    "commsched.errors",
)


@pytest.mark.parametrize("name", MODULES)
def test_module_doctests(name: str) -> None:
    if name == "commsched.api.frames":
        pytest.importorskip("pandas")
    module = importlib.import_module(name)
    res = doctest.testmod(module, optionflags=doctest.ELLIPSIS, verbose=False)
    assert res.failed == 0
    assert res.attempted > 0
