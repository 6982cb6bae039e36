"""Hostile YAML: duplicate keys, alias bombs, recursive aliases, deep nesting, special and huge files.

Each ends in one line and exit 2, within a second or so (the limits of ``_cli`` apply), and the file is
never read whole when its size or kind already disqualify it.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import pytest

from commsched.io import yamlio
from tests.hostile._cli import assert_user_error, run

VALID = """\
topology: {kind: single_link, capacity_bps: 8.0e9}
policy: static
horizon_s: 60
jobs:
  - {id: a, gpus: 10, compute_s: 2.0, comm_bytes: 2.0e9, priority: 0}
"""

BOMB = "\n".join(
    ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    + [f"{chr(98 + i)}: &{chr(98 + i)} [{', '.join([f'*{chr(97 + i)}'] * 10)}]" for i in range(9)]
    + ["topology: {kind: single_link}", "horizon_s: 1", "jobs: [*j]"]
)

TEXT_CASES: list[tuple[str, str, str]] = [
    (
        "duplicate-top-key",
        VALID + "horizon_s: 90\n",
        ":6: malformed YAML: duplicate key 'horizon_s' (first on line 3)",
    ),
    ("duplicate-job-key", VALID.replace("priority: 0}", "priority: 0, gpus: 4}"), "duplicate key 'gpus'"),
    (
        "duplicate-topology-key",
        VALID.replace("capacity_bps: 8.0e9}", "capacity_bps: 8.0e9, capacity_bps: 1}"),
        "duplicate key 'capacity_bps'",
    ),
    ("alias-bomb", BOMB, "the document expands to more than"),
    ("recursive-alias", "a: &a [*a]\n" + VALID, "recursive alias"),
    ("recursive-mapping-alias", "a: &a {b: *a}\n" + VALID, "recursive alias"),
    ("deep-nesting", "a: " + "[" * 50_000 + "]" * 50_000 + "\n", "malformed YAML"),
    ("unclosed-bracket", "topology: {kind: single_link\nhorizon_s: 60\n", "malformed YAML"),
    ("tab-indent", "topology:\n\tkind: single_link\n", "malformed YAML"),
    ("python-tag", "a: !!python/object/apply:os.system ['true']\n" + VALID, "malformed YAML"),
    ("two-documents", VALID + "---\n" + VALID, "malformed YAML"),
    ("top-level-list", "- a\n- b\n", "the file holds list, not a mapping"),
    ("top-level-scalar", "just text\n", "the file holds str, not a mapping"),
    ("empty-file", "", "the file holds NoneType, not a mapping"),
    ("comments-only", "# nothing here\n", "the file holds NoneType, not a mapping"),
]


@pytest.mark.parametrize(("case", "text", "fragment"), TEXT_CASES, ids=[c[0] for c in TEXT_CASES])
def test_hostile_yaml_text(tmp_path: Path, case: str, text: str, fragment: str) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(text, encoding="utf-8")
    t0 = time.perf_counter()
    assert_user_error(["validate", str(path)], fragment)
    assert time.perf_counter() - t0 < 5.0
    assert_user_error(["simulate", str(path)], fragment)


def test_non_utf8_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(b"topology: {kind: single_link}\nname: \xff\xfe\n")
    assert_user_error(["validate", str(path)], "not UTF-8 text (byte 36 is 0xff)")


def test_binary_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_bytes(bytes(range(256)) * 4)
    assert_user_error(["simulate", str(path)], "not UTF-8 text")


def test_file_above_the_size_limit_is_refused_before_reading(tmp_path: Path) -> None:
    path = tmp_path / "big.yaml"
    with path.open("wb") as fh:  # a sparse file: its size is known without writing 64 MiB
        fh.truncate(yamlio.MAX_FILE_BYTES + 1)
    line = assert_user_error(["validate", str(path)], "is larger than the limit")
    assert f"<= {yamlio.MAX_FILE_BYTES:,} bytes" in line


@pytest.mark.parametrize("special", ["/dev/zero", "/dev/null", "/dev/urandom"])
def test_special_files_are_refused(special: str) -> None:
    if not os.path.exists(special):
        pytest.skip(f"{special} does not exist here")
    assert_user_error(["simulate", special], "not a regular file")


def test_fifo_is_refused_without_blocking(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe.yaml"
    os.mkfifo(fifo)
    assert_user_error(["validate", str(fifo)], "not a regular file")


def test_directory_and_missing_file(tmp_path: Path) -> None:
    assert_user_error(["validate", str(tmp_path)], "is a directory")
    assert_user_error(["validate", str(tmp_path / "none.yaml")], "file not found")


def test_unreadable_file(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text(VALID, encoding="utf-8")
    path.chmod(0)
    if os.access(path, os.R_OK):
        pytest.skip("running as root: permissions do not stop reading")
    assert_user_error(["validate", str(path)], "cannot read file")


def test_aliases_within_the_bound_still_work(tmp_path: Path) -> None:
    text = (
        "common: &job {gpus: 10, compute_s: 1.0, comm_bytes: 1.0e9}\n"
        "topology: {kind: single_link, capacity_bps: 8.0e9}\nhorizon_s: 60\n"
        "jobs:\n  - {<<: *job, id: a, priority: 0}\n  - {<<: *job, id: b, priority: 1}\n"
    )
    data = yamlio.load(text)
    assert isinstance(data, dict)
    assert [j["gpus"] for j in data["jobs"]] == [10, 10]
    with pytest.raises(Exception, match="common"):  # the anchor's own key is not a scenario field
        from commsched.io.scenario import scenario_from_text

        scenario_from_text(text, source="s.yaml")


def _jobs_text(n: int) -> str:
    rows = "".join(
        f"  - {{id: j{i}, gpus: 1, compute_s: 1.0, comm_bytes: 1.0e6, priority: 0}}\n" for i in range(n)
    )
    return "topology: {kind: single_link, capacity_bps: 8.0e9}\nhorizon_s: 60\njobs:\n" + rows


def _parse_seconds(text: str) -> float:
    best = float("inf")
    for _ in range(2):
        t0 = time.perf_counter()
        yamlio.load(text)
        best = min(best, time.perf_counter() - t0)
    return best


@pytest.mark.slow
def test_large_legitimate_files_parse_in_linear_time() -> None:
    # best of two per size (the CPU is shared); quadrupling the size may at most ~quadruple the time
    small, large = _parse_seconds(_jobs_text(500)), _parse_seconds(_jobs_text(2_000))
    assert large < 4 * small * 2.0, (small, large)


def test_duplicate_keys_are_found_at_any_depth() -> None:
    with pytest.raises(Exception, match="duplicate key 'x'"):
        yamlio.load("a: {b: [{c: 1, x: 1, x: 2}]}")
    assert yamlio.load("a: {x: 1}\nb: {x: 2}") == {"a": {"x": 1}, "b": {"x": 2}}


def test_validate_json_reports_yaml_problems(tmp_path: Path) -> None:
    path = tmp_path / "s.yaml"
    path.write_text("a: &a [*a]\n", encoding="utf-8")
    out = run(["validate", str(path), "--json"])
    assert out.exit_code == 2
    assert '"valid": false' in out.stdout and "recursive alias" in out.stdout
