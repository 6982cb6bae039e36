"""The docstring examples of the testbed package are golden tests (none needs root)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import commsched.testbed as pkg

MODULES = sorted(m.name for m in pkgutil.walk_packages(pkg.__path__, prefix="commsched.testbed."))


@pytest.mark.parametrize("name", MODULES)
def test_doctests(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name), optionflags=doctest.ELLIPSIS)
    assert result.failed == 0
