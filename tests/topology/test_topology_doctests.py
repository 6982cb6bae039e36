"""The docstring examples of the topology package are golden tests."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import commsched.topology as pkg

MODULES = sorted(m.name for m in pkgutil.walk_packages(pkg.__path__, prefix="commsched.topology."))


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
