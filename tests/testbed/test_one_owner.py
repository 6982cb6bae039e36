"""One owner for a testbed run, read from the source (AST, no root): these fail when a duplicate comes back.

* HTB rules (``htb`` qdiscs and classes) are written in exactly one module of ``testbed/``;
* every fabric kind (routed topology, star, shaped link) is planned through one function, and only
  its module creates namespaces;
* one teardown function is called by ``commsched testbed down`` and by the end of a testbed run, and
  it is the only caller of what removes a testbed (its agents' ledgers, its namespaces);
* one options record for a run (no two records of the run's packages share a run's options, one
  ``say``);
* no ``tc`` or ``nft`` command is built outside ``testbed/`` and ``runtime/enforce/``;
* ``testbed/`` and ``runtime/`` never reach ``experiments/``: no import (anywhere in a module), no
  module name in a string, and no function of ``experiments/`` handed down to them as a callback;
* the experiments start no process by hand (the launcher's :class:`Processes` starts and stops them).
"""

from __future__ import annotations

import ast
import itertools
import re
from collections.abc import Iterator
from pathlib import Path

import pytest

SRC = Path(__file__).resolve().parents[2] / "src"
PACKAGE = SRC / "commsched"


def _module(path: Path) -> str:
    parts = list(path.relative_to(SRC).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _trees() -> dict[str, ast.Module]:
    return {_module(p): ast.parse(p.read_text(), str(p)) for p in sorted(PACKAGE.rglob("*.py"))}


TREES = _trees()


def _docstrings(tree: ast.Module) -> set[int]:
    """ids of the docstring constants of a module and of its classes and functions."""
    out: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef):
            body = node.body
            if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant):
                out.add(id(body[0].value))
    return out


def _strings(tree: ast.Module) -> Iterator[str]:
    """Every string constant of the code (f-string parts included), docstrings left out."""
    docs = _docstrings(tree)
    for node in ast.walk(tree):
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docs:
            yield node.value


def _modules_with(pattern: str) -> set[str]:
    rx = re.compile(pattern)
    return {m for m, tree in TREES.items() if any(rx.search(s) for s in _strings(tree))}


def _imports(tree: ast.Module, module: str) -> dict[str, str]:
    """Local name -> what it names (``pkg.mod`` or ``pkg.mod.attr``), every import of the module."""
    out: dict[str, str] = {}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for a in node.names:
                out[a.asname or a.name.split(".")[0]] = a.name if a.asname else a.name.split(".")[0]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:  # relative: anchored as tests/test_layers.py anchors it
                anchor = module.split(".") if _is_package(module) else module.split(".")[:-1]
                anchor = anchor[: len(anchor) - (node.level - 1)]
                base = ".".join([*anchor, base] if base else anchor)
            for a in node.names:
                out[a.asname or a.name] = f"{base}.{a.name}"
    return out


def _is_package(module: str) -> bool:
    return (PACKAGE / Path(*module.split(".")[1:]) / "__init__.py").exists()


def _dotted(node: ast.expr) -> str | None:
    if isinstance(node, ast.Name):
        return node.id
    if isinstance(node, ast.Attribute):
        head = _dotted(node.value)
        return None if head is None else f"{head}.{node.attr}"
    return None


def _callee(call: ast.Call, names: dict[str, str]) -> str | None:
    """The qualified name a call goes to, where an import names it (``None`` otherwise)."""
    dotted = _dotted(call.func)
    if dotted is None:
        return None
    head, _, rest = dotted.partition(".")
    if head not in names:
        return None
    return f"{names[head]}.{rest}" if rest else names[head]


def _functions(tree: ast.Module) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
    """(qualified name inside the module, node) of every function and method, nested ones too."""

    def walk(node: ast.AST, prefix: str) -> Iterator[tuple[str, ast.FunctionDef | ast.AsyncFunctionDef]]:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                yield f"{prefix}{child.name}", child
                yield from walk(child, f"{prefix}{child.name}.")
            elif isinstance(child, ast.ClassDef):
                yield from walk(child, f"{prefix}{child.name}.")

    yield from walk(tree, "")


def _callers(target: str) -> set[str]:
    """Every function of the package with a call that goes to ``target`` (``module.function``)."""
    found: set[str] = set()
    for module, tree in TREES.items():
        names = _imports(tree, module)
        local = {name: f"{module}.{name}" for name, _ in _functions(tree) if "." not in name}
        for qual, fn in _functions(tree):
            for node in ast.walk(fn):
                if isinstance(node, ast.Call):
                    callee = _callee(node, names) or local.get(_dotted(node.func) or "")
                    if callee in (target, _reexported(target)):
                        found.add(f"{module}.{qual}")
    return found


def _reexported(target: str) -> str:
    """``commsched.testbed.build.down`` is also ``commsched.testbed.down`` (the package's face)."""
    module, _, name = target.rpartition(".")
    return f"{module.rpartition('.')[0]}.{name}"


# -- HTB rules -------------------------------------------------------------------------------


def test_htb_rules_are_written_in_exactly_one_module_of_the_testbed() -> None:
    assert _modules_with(r"\bhtb\b") == {"commsched.testbed.htb"}


def test_the_scan_for_htb_rules_sees_an_argv_and_an_fstring() -> None:
    """The scan reads list elements and f-string parts (a rule written either way is found)."""
    source = (
        'def f(d, r):\n    """htb in a docstring is prose."""\n'
        '    a = ["tc", "qdisc", "add", "htb"]\n    b = f"class add dev {d} htb rate {r}"\n'
    )
    tree = ast.parse(source)
    found = [s for s in _strings(tree) if re.search(r"\bhtb\b", s)]
    assert found == ["htb", " htb rate "]


# -- one planner -------------------------------------------------------------------------------


def test_every_fabric_kind_is_planned_by_one_function() -> None:
    from commsched.testbed.fabric import LinkSpec, RoutedSpec, StarSpec, plan_fabric
    from commsched.topology import two_layer_clos

    topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)
    routed = plan_fabric(RoutedSpec(topology=topo, name="hqt", rate_scale=0.01))
    # a cable joins two of the emulated nodes (NICs and switches): one veth pair each
    emulated = {n for h in topo.hosts for n in h.nics} | {n.id for n in topo.switches}
    cables = sum(1 for lk in topo.links if lk.src in emulated and lk.dst in emulated) // 2  # both ways
    assert len(routed.namespaces) == len(topo.hosts) + len(topo.switches) == 8
    assert len(routed.links) == cables == 32  # 16 NIC cables, 4 between every ToR and agg
    # every veth end is one HTB egress with 8 job classes and the control class: root and parent
    # class, then 3 lines per leaf (class, queue, filter)
    assert sum(len(v) for v in routed.tc.values()) == 2 * cables * (2 + 9 * 3)
    star = plan_fabric(StarSpec(rate_bps=1e9, hosts=3, prefix="hq"))
    assert len(star.namespaces) == 4 and len(star.links) == 3  # the hub and 3 hosts, one veth each
    link = plan_fabric(LinkSpec(rate_bps=1e9, prefix="hq", workers=2))
    assert len(link.namespaces) == 2 and len(link.links) == 1
    builders = {
        "commsched.testbed.build.up",
        "commsched.testbed.fabric.star_fabric",
        "commsched.testbed.fabric.shaped_link",
    }
    assert builders <= _callers("commsched.testbed.fabric.plan_fabric")


def test_only_the_planner_module_creates_namespaces() -> None:
    by_string = _modules_with(r"\bnetns add\b")
    by_argv = set()
    for module, tree in TREES.items():
        for node in ast.walk(tree):
            if isinstance(node, ast.List | ast.Tuple):
                words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
                if any(a == "netns" and b == "add" for a, b in itertools.pairwise(words)):
                    by_argv.add(module)
    assert by_string | by_argv == {"commsched.testbed.fabric"}


# -- one teardown ------------------------------------------------------------------------------

TEARDOWN = "commsched.runtime.launch.teardown.tear_down"


def test_one_teardown_for_testbed_down_and_the_end_of_a_run() -> None:
    callers = _callers(TEARDOWN)
    assert "commsched.cli.cmd_testbed.down" in callers
    assert "commsched.runtime.launch.launcher.launched" in callers
    run_end = _callers("commsched.runtime.launch.launcher.launched")
    assert "commsched.experiments.testbed_run.run_scenario" in run_end
    assert callers == {"commsched.cli.cmd_testbed.down", "commsched.runtime.launch.launcher.launched"}


@pytest.mark.parametrize(
    "remover", ["commsched.runtime.enforce.ledger.clean_dir", "commsched.testbed.build.down"]
)
def test_only_the_teardown_removes_a_testbed(remover: str) -> None:
    # build.up removes what it made when a step fails (its own undo, inside build.py)
    outside = {c for c in _callers(remover) if not c.startswith("commsched.testbed.build.")}
    assert outside == {TEARDOWN}


# -- one options record ------------------------------------------------------------------------

RUN_PACKAGES = ("commsched.testbed", "commsched.runtime.launch", "commsched.experiments.testbed_run")


def _run_records() -> dict[str, tuple[set[str], bool]]:
    """Class -> (its annotated fields, whether it defines ``say``) of the testbed run's packages."""
    out: dict[str, tuple[set[str], bool]] = {}
    for module, tree in TREES.items():
        if not (module.startswith(RUN_PACKAGES) or module.startswith("commsched.cli.cmd_testbed")):
            continue
        for node in ast.walk(tree):
            if isinstance(node, ast.ClassDef):
                fields = {
                    s.target.id
                    for s in node.body
                    if isinstance(s, ast.AnnAssign) and isinstance(s.target, ast.Name)
                }
                says = any(isinstance(s, ast.FunctionDef) and s.name == "say" for s in node.body)
                out[f"{module}.{node.name}"] = (fields, says)
    return out


def test_one_options_record_for_a_run() -> None:
    records = _run_records()
    assert [name for name, (_, says) in records.items() if says] == [
        "commsched.runtime.launch.settings.RunOptions"
    ]
    options = records["commsched.runtime.launch.settings.RunOptions"][0]
    assert {"profiling_window_s", "window_s", "time_scale", "progress"} <= options
    sharing = {
        name: sorted(fields & options)
        for name, (fields, _) in records.items()
        if not name.endswith(".RunOptions") and len(fields & options - {"name", "seed"}) >= 2
    }
    assert sharing == {}


# -- tc and nft commands -----------------------------------------------------------------------

COMMAND_HOMES = ("commsched.testbed", "commsched.runtime.enforce")


def test_no_tc_or_nft_command_is_built_outside_the_testbed_and_the_enforcer() -> None:
    builders = set()
    for module, tree in TREES.items():
        for node in ast.walk(tree):
            words = node.elts if isinstance(node, ast.List | ast.Tuple) else []
            if any(isinstance(e, ast.Constant) and e.value in ("tc", "nft") for e in words):
                builders.add(module)
    builders |= _modules_with(r"^(tc|nft)\s")
    assert builders, "the scan finds the testbed's own tc commands"
    assert {m for m in builders if not m.startswith(COMMAND_HOMES)} == set()


# -- no climbing back up -----------------------------------------------------------------------

LOWER = ("commsched.testbed", "commsched.runtime")


def test_testbed_and_runtime_never_import_or_name_experiments() -> None:
    for module, tree in TREES.items():
        if not module.startswith(LOWER):
            continue
        up = [t for t in _imports(tree, module).values() if t.startswith("commsched.experiments")]
        assert not up, module
        assert not [s for s in _strings(tree) if "commsched.experiments" in s], module


def test_no_function_of_experiments_is_handed_down_as_a_callback() -> None:
    handed = []
    for module, tree in TREES.items():
        if not module.startswith("commsched.experiments"):
            continue
        names = _imports(tree, module)
        own = {name.rpartition(".")[2] for name, _ in _functions(tree)}
        for node in ast.walk(tree):
            if not isinstance(node, ast.Call):
                continue
            callee = _callee(node, names) or ""
            if not callee.startswith(LOWER):
                continue
            for arg in [*node.args, *(k.value for k in node.keywords)]:
                if isinstance(arg, ast.Lambda) or (isinstance(arg, ast.Name) and arg.id in own):
                    handed.append(f"{module}: {callee}({ast.unparse(arg)})")
    assert handed == []


# -- processes -----------------------------------------------------------------------------------


def test_experiments_start_no_process_by_hand() -> None:
    """The experiments' processes (PS roles, probes, testbed jobs) go through the launcher's owner."""
    by_hand = {
        module
        for module, tree in TREES.items()
        if module.startswith("commsched.experiments")
        and any(t.split(".")[0] in ("subprocess", "multiprocessing") for t in _imports(tree, module).values())
    }
    assert by_hand == set()
    ps = [_imports(tree, m).values() for m, tree in TREES.items() if m.startswith("commsched.experiments.ps")]
    assert "commsched.runtime.launch.procs.Processes" in {t for names in ps for t in names}
