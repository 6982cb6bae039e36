"""Every example in the package's docstrings runs and prints what it shows (one test per module)."""

from __future__ import annotations

import doctest
import importlib
import pkgutil

import pytest

import commsched

#: optional dependencies (extras) whose absence skips a module's examples instead of failing them
OPTIONAL = {"ray", "matplotlib", "pulp", "highspy", "ortools", "networkx", "pandas", "rich_click"}


def _modules() -> list[str]:
    return [
        "commsched",
        *sorted(m.name for m in pkgutil.walk_packages(commsched.__path__, prefix="commsched.")),
    ]


def test_the_package_has_examples() -> None:
    """The runner finds the examples (a broken discovery would pass every module below vacuously)."""
    finder = doctest.DocTestFinder()
    n = 0
    for name in _modules():
        try:
            module = importlib.import_module(name)
        except ModuleNotFoundError:
            continue
        n += sum(len(t.examples) for t in finder.find(module, name))
    assert n >= 400


@pytest.mark.parametrize("name", _modules())
def test_doctests(name: str) -> None:
    try:
        module = importlib.import_module(name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and exc.name.split(".")[0] in OPTIONAL:
            pytest.skip(f"optional dependency {exc.name} is not installed")
        raise
    finder = doctest.DocTestFinder()
    runner = doctest.DocTestRunner(optionflags=doctest.ELLIPSIS)
    tests = [t for t in finder.find(module, name) if t.examples]
    for t in sorted(tests, key=lambda t: t.name):
        runner.run(t)
    result = runner.summarize(verbose=False)
    assert result.failed == 0, f"{result.failed} of {result.attempted} examples failed in {name} (see above)"
