"""Every module of the public API carries docstring examples.

``tests/test_doctests.py`` runs the examples of every module; this file only checks that the public
API's modules have some, so that module-wide run cannot pass them vacuously.
"""

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
    "commsched.testing.invariants",
    "commsched._lazy",
    "commsched._docgen",
    "commsched.io.results",
    "commsched.scheduling.state",
    "commsched.scheduling.interfaces",
    "commsched.sim.results.records",
    "commsched.sim.results.comparison",
    "commsched.errors",
)


@pytest.mark.parametrize("name", MODULES)
def test_module_has_examples(name: str) -> None:
    if name == "commsched.api.frames":
        pytest.importorskip("pandas")
    module = importlib.import_module(name)
    tests = doctest.DocTestFinder().find(module, name)
    assert sum(len(t.examples) for t in tests) > 0, f"{name} has no docstring examples"
