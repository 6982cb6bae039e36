"""The docstring examples of commsched.intrajob are golden tests."""

from __future__ import annotations

import doctest
import importlib

import pytest

MODULES = ["problem", "iteration", "partitioned", "sweep", "byteps", "byteps_intra"]


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples(name):
    mod = importlib.import_module(f"commsched.intrajob.{name}")
    result = doctest.testmod(mod, optionflags=doctest.NORMALIZE_WHITESPACE)
    assert result.failed == 0
    assert result.attempted > 0
