"""The size checker of ``make lint`` (``tools/check_sizes.py``) on planted modules, and on the package."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "check_sizes.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("check_sizes", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["check_sizes"] = module
    spec.loader.exec_module(module)
    return module


cs = _load()


def _package(tmp_path: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        path = tmp_path / "commsched" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return tmp_path


def _function(name: str, body_lines: int, *, docstring_lines: int = 0) -> str:
    doc = ['    """', *(["    doc"] * docstring_lines), '    """'] if docstring_lines else []
    return "\n".join([f"def {name}() -> None:", *doc, *(["    x = 1"] * body_lines)]) + "\n"


def test_a_function_at_the_limit_passes_and_one_over_fails(tmp_path: Path) -> None:
    src = _package(tmp_path, {"a.py": _function("ok", 60, docstring_lines=30) + _function("long", 61)})
    errors = cs.check(src, exceptions={}).errors
    assert len(errors) == 1
    assert "a.py:" in errors[0] and "long has a body of 61 lines" in errors[0]


def test_methods_and_nested_functions_are_named_by_qualname(tmp_path: Path) -> None:
    body = "\n".join(["class C:", "    def m(self) -> None:", *(["        x = 1"] * 61)]) + "\n"
    errors = cs.check(_package(tmp_path, {"b.py": body}), exceptions={}).errors
    assert any("C.m has a body of 61" in e for e in errors)


def test_an_exception_with_its_reason_lets_a_function_through_and_a_stale_one_fails(tmp_path: Path) -> None:
    src = _package(tmp_path, {"a.py": _function("long", 70)})
    assert cs.check(src, exceptions={"commsched/a.py::long": "a reason"}).errors == ()
    stale = cs.check(src, exceptions={"commsched/a.py::long": "r", "commsched/a.py::gone": "r"}).errors
    assert stale == ("commsched/a.py::gone: listed in EXCEPTIONS but within the limit (remove it)",)


def test_a_big_module_fails(tmp_path: Path) -> None:
    src = _package(tmp_path, {"big.py": "x = 1\n" * 401, "fine.py": "x = 1\n" * 400})
    assert cs.check(src, exceptions={}).errors == ("commsched/big.py: module of 401 lines (limit 400)",)


def test_a_noqa_needs_its_reason(tmp_path: Path) -> None:
    bare = "def f(a, b, c, d, e, f, g, h, i, j) -> None:  # noqa: PLR0913\n    pass\n"
    told = "def g(a, b, c, d, e, f, g, h, i, j) -> None:  # noqa: PLR0913 -- options\n    pass\n"
    errors = cs.check(_package(tmp_path, {"a.py": bare + told}), exceptions={}).errors
    assert errors == ("commsched/a.py:1: a size/complexity noqa without its reason (`-- why`)",)


def test_noqa_comments_count_against_the_cap(tmp_path: Path) -> None:
    one = "def f{}(a, b, c, d, e, f, g, h, i, j) -> None:  # noqa: PLR0913 -- why\n    pass\n"
    lines = [one.format(i) for i in range(11)]
    errors = cs.check(_package(tmp_path, {"a.py": "".join(lines)}), exceptions={}).errors
    assert errors and "11 size/complexity noqa comments" in errors[-1]


def test_private_names_imported_across_modules_are_counted(tmp_path: Path) -> None:
    src = _package(
        tmp_path,
        {
            "__init__.py": "",
            "p/__init__.py": "",
            "p/a.py": "_hidden = 1\n__all__ = []\n",
            "p/b.py": "from .a import _hidden, __all__\nfrom commsched.p.a import _hidden as h\n",
            "p/c.py": "from . import a\nfrom commsched.p.a import public\n",
        },
    )
    found = cs.check(src, exceptions={}, max_private=1)
    assert [(p.path, p.module, p.name) for p in found.private] == [
        ("commsched/p/b.py", "commsched.p.a", "_hidden"),
        ("commsched/p/b.py", "commsched.p.a", "_hidden"),
    ]
    assert found.errors == ("2 imports of private names across modules (limit 1): make them public",)


def test_the_package_is_within_its_limits() -> None:
    found = cs.check()
    assert found.errors == ()
    for key, reason in cs.EXCEPTIONS.items():
        assert reason.strip(), f"{key}: an exception needs its reason"


@pytest.mark.parametrize("argv", [[], ["--report"]])
def test_the_command_line(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    code = cs.main(argv)
    out = capsys.readouterr()
    assert "check_sizes:" in out.out
    assert code == (1 if out.err else 0)
