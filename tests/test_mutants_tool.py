"""The planted-mutation check of ``make test`` (``tools/mutants.py``): its table, and one run on a toy."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType

import pytest

TOOL = Path(__file__).resolve().parents[1] / "tools" / "mutants.py"


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("mutants_tool", TOOL)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["mutants_tool"] = module
    spec.loader.exec_module(module)
    return module


mt = _load()

TOY = "def double(x: int) -> int:\n    return 2 * x\n"
TOY_TEST = "from toypkg.mod import double\n\n\ndef test_double() -> None:\n    assert double(3) == 6\n"


def _toy(root: Path) -> Path:
    (root / "src" / "toypkg").mkdir(parents=True)
    (root / "src" / "toypkg" / "__init__.py").write_text("")
    (root / "src" / "toypkg" / "mod.py").write_text(TOY)
    (root / "tests").mkdir()
    (root / "tests" / "test_toy.py").write_text(TOY_TEST)
    return root / "src" / "toypkg" / "mod.py"


def _mutant(original: str, replacement: str, tests: tuple[str, ...] = ("tests/test_toy.py",)) -> object:
    return mt.Mutant(
        name="m", path="src/toypkg/mod.py", original=original, replacement=replacement, tests=tests
    )


def test_the_table_matches_the_code() -> None:
    """Every snippet occurs once and every test file exists (else the code moved: update the table)."""
    assert mt.stale(mt.MUTANTS) == []
    assert len({m.name for m in mt.MUTANTS}) == len(mt.MUTANTS)
    assert sum(m.planted for m in mt.MUTANTS) >= 4


def test_stale_entries_are_named(tmp_path: Path) -> None:
    _toy(tmp_path)
    twice = _mutant("x", "y")  # "x" occurs twice in the toy
    gone = _mutant("return 3 * x", "return x", tests=("tests/test_gone.py",))
    found = mt.stale((twice, gone), root=tmp_path)
    assert found == [
        "m: the snippet occurs 2 times in src/toypkg/mod.py (expected once)",
        "m: the snippet occurs 0 times in src/toypkg/mod.py (expected once)",
        "m: no test file tests/test_gone.py",
    ]


def test_the_file_is_restored_on_an_error_and_a_left_journal_is_put_back(tmp_path: Path) -> None:
    mod = _toy(tmp_path)
    journal = tmp_path / "journal.json"
    with pytest.raises(RuntimeError), mt.mutated(_mutant("2 * x", "3 * x"), root=tmp_path, journal=journal):
        assert "3 * x" in mod.read_text() and journal.is_file()
        raise RuntimeError
    assert mod.read_text() == TOY and not journal.exists()
    mod.write_text("mutated")  # as a run killed with SIGKILL leaves it
    journal.write_text(json.dumps({"path": "src/toypkg/mod.py", "text": TOY}))
    assert mt.restore_journal(journal, tmp_path) == "src/toypkg/mod.py"
    assert mod.read_text() == TOY and not journal.exists()


def test_a_mutant_the_tests_catch_is_killed_and_one_they_miss_survives(tmp_path: Path) -> None:
    mod = _toy(tmp_path)
    killed = mt.run_mutant(_mutant("2 * x", "3 * x"), root=tmp_path, timeout_s=60)
    survived = mt.run_mutant(_mutant("2 * x", "x + x"), root=tmp_path, timeout_s=60)
    assert (killed.code, killed.killed) == (1, True)
    assert (survived.code, survived.killed, survived.broken) == (0, False, False)
    assert mod.read_text() == TOY
    bug = mt.Mutant(name="bug", path="p", original="a", replacement="b", tests=(), planted=True)
    planted = mt.Outcome(mutant=bug, code=0, seconds=1.0)
    assert mt.verdict_of([killed, killed, killed, killed, killed, killed, survived], seconds=1.0) == 0  # 86 %
    assert mt.verdict_of([killed, survived], seconds=1.0) == 1  # 50 %
    assert mt.verdict_of([killed] * 9 + [planted], seconds=1.0) == 1  # 90 %, but a planted bug lives


SUBPROCESS_TEST = (
    "import subprocess\nimport sys\n\n\ndef test_double_in_a_subprocess() -> None:\n"
    "    code = 'from toypkg.mod import double; assert double(3) == 6'\n"
    "    assert subprocess.run([sys.executable, '-c', code], check=False).returncode == 0\n"
)


def test_mutants_run_side_by_side_in_checkouts_of_their_own(tmp_path: Path) -> None:
    """``--jobs 2``: each mutant in a worker's checkout (a copy of ``src``, links to the rest), two at
    a time; the tests' subprocesses import the worker's mutated copy; the checkout is never edited."""
    toy = tmp_path / "toy"
    mod = _toy(toy)
    (toy / "tests" / "test_sub.py").write_text(SUBPROCESS_TEST)
    before = mod.stat().st_mtime_ns
    roots = [mt.worker_checkout(toy, tmp_path / f"w{k}") for k in range(2)]
    assert (roots[0] / "tests").is_symlink() and not (roots[0] / "src").is_symlink()
    sub = ("tests/test_sub.py",)
    mutants = (
        _mutant("2 * x", "3 * x"),
        _mutant("2 * x", "x + x"),
        _mutant("2 * x", "3 * x", tests=sub),  # caught only in the subprocess
        _mutant("2 * x", "x + x", tests=sub),
    )
    out = mt.run_parallel(mutants, roots, timeout_s=60)
    assert [o.code for o in out] == [1, 0, 1, 0]
    assert mod.read_text() == TOY and mod.stat().st_mtime_ns == before
    for root in roots:  # every worker's copy put back, with its time
        copy = root / "src" / "toypkg" / "mod.py"
        assert copy.read_text() == TOY and copy.stat().st_mtime_ns == before
