"""A package's public names keep their meaning whatever else has been imported.

Importing a submodule binds it as an attribute of its package, so a module named like an exported
function (``experiments/compare.py`` beside the lazily exported ``compare``) shadowed the function once
anything had imported the module: ``from commsched.experiments import compare`` returned the function
in a fresh process and the module after ``import commsched.api``. Here every facade's submodules are
imported first, then every exported name must still be what its declaring module defines.
"""

from __future__ import annotations

import importlib
import pkgutil
import subprocess
import sys
import types

import pytest

FACADES = ("commsched", "commsched.api", "commsched.sim", "commsched.io", "commsched.scheduling")


def _import_submodules(package: str) -> None:
    pkg = importlib.import_module(package)
    for info in pkgutil.iter_modules(pkg.__path__, prefix=package + "."):
        if package == "commsched" and info.name.split(".")[-1] in ("cli", "runtime", "testbed"):
            continue  # edges with optional dependencies; none of their names is exported by the root
        importlib.import_module(info.name)


@pytest.mark.parametrize("package", FACADES)
def test_no_exported_name_is_shadowed_by_a_submodule(package: str) -> None:
    _import_submodules(package)
    _import_submodules("commsched.api")
    pkg = importlib.import_module(package)
    names = [n for n in pkg.__all__ if n != "__version__"]
    shadowed = [n for n in names if isinstance(getattr(pkg, n), types.ModuleType)]
    assert not shadowed, f"{package} exports names that are modules after their imports: {shadowed}"


def test_compare_means_one_thing_before_and_after_importing_the_api() -> None:
    code = (
        "import commsched, importlib\n"
        "before = commsched.compare\n"
        "import commsched.api, commsched.api.comparing, commsched.experiments\n"
        "import commsched.sim.results.comparison\n"
        "assert commsched.compare is before is commsched.api.compare, 'commsched.compare changed'\n"
        "assert callable(before) and not isinstance(before, type(commsched))\n"
        "try:\n"
        "    from commsched.experiments import compare\n"
        "except ImportError:\n"
        "    pass\n"
        "else:\n"
        "    raise AssertionError(f'commsched.experiments.compare is {compare!r}: the API compares')\n"
        "from commsched import Comparison\n"
        "assert Comparison is importlib.import_module('commsched.sim.results.comparison').Comparison\n"
    )
    res = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stderr
