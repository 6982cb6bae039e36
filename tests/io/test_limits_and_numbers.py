"""Bounds checked before work starts, numbers tidied at the output edge, files written atomically."""

from __future__ import annotations

import json
import math
from dataclasses import replace
from pathlib import Path

import pytest

from commsched.errors import InputError
from commsched.io import budget, limits, numbers, results, yamlio
from commsched.io.scenario import scenario_from_text

TEXT = """\
topology: {kind: single_link, capacity_bps: 8.0e9}
horizon_s: 100
jobs:
  - {id: a, gpus: 1, compute_s: 2.0, comm_bytes: 1.0e9}
  - {id: b, gpus: 1, compute_s: 0.5, comm_bytes: 1.0e9, arrival_s: 50, iterations: 7}
  - {id: c, gpus: 1, compute_s: 1.0, comm_bytes: 1.0e9, duration_s: 10}
"""


def test_estimated_iterations_follow_horizon_arrival_and_counts() -> None:
    sc = scenario_from_text(TEXT, source="s.yaml")
    # a: 100 s / 2 s = 50; b: min(50 s / 0.5 s, 7) = 7; c: min(100 / 1, 10 / 1) = 10
    assert budget.estimated_iterations(sc) == pytest.approx(67.0)


def test_run_budget_refuses_exact_runs_only(monkeypatch: pytest.MonkeyPatch) -> None:
    sc = scenario_from_text(TEXT, source="s.yaml")
    monkeypatch.setattr(budget, "MAX_EXACT_ITERATIONS", 66)
    with pytest.raises(InputError, match=r"about 67 iterations .*use --mode fast"):
        budget.check_run_budget(sc, "exact")
    budget.check_run_budget(sc, "fast")
    monkeypatch.setattr(budget, "MAX_EXACT_ITERATIONS", 67)
    budget.check_run_budget(sc, "exact")
    longer = replace(sc, horizon_s=1000.0)
    with pytest.raises(InputError):
        budget.check_run_budget(longer, "exact")


def test_topology_size_counts_default_factors() -> None:
    assert limits.topology_size({"tors": 4096}, "two_layer_clos") is None  # 16,384 hosts: the limit
    problem = limits.topology_size({"tors": 4097}, "two_layer_clos")
    assert problem is not None and problem[0] == "tors" and "16,388 hosts" in problem[1]
    assert limits.topology_size({"tors": 4097, "hosts_per_tor": 1}, "two_layer_clos") is None


def test_tidy_rounds_only_noise_and_clamps_fractions() -> None:
    assert numbers.tidy_float(0.1 + 0.2) == 0.3
    assert numbers.tidy_float(1234.5678901234) == 1234.56789012
    assert numbers.tidy_float(123456789.123) == 123456789.123
    obj = numbers.tidy({"gpu_utilization": -1e-17, "x": [math.nan, True, 3], "utilization": 1.5})
    assert obj == {"gpu_utilization": 0.0, "x": [obj["x"][0], True, 3], "utilization": 1.0}  # type: ignore[index]
    assert math.isnan(obj["x"][0])  # type: ignore[index]


def test_write_files_leaves_old_files_on_failure(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "a.json").write_text("old a")
    (tmp_path / "b.csv").write_text("old b")

    def boom(src: str, dst: str) -> None:
        raise OSError("no space left")

    monkeypatch.setattr(results.os, "replace", boom)
    with pytest.raises(OSError):
        results.write_files(tmp_path, {"a.json": json.dumps({"new": 1}), "b.csv": "new b"})
    assert sorted(p.name for p in tmp_path.iterdir()) == ["a.json", "b.csv"]
    assert (tmp_path / "a.json").read_text() == "old a" and (tmp_path / "b.csv").read_text() == "old b"
    monkeypatch.undo()
    results.write_files(tmp_path, {"a.json": "new a", "b.csv": "new b"})
    assert (tmp_path / "a.json").read_text() == "new a"


def test_check_file_reads_nothing_of_a_special_file() -> None:
    with pytest.raises(InputError, match="not a regular file"):
        yamlio.check_file(Path("/dev/zero"))


def test_yaml_12_numbers_and_overflow() -> None:
    data = yamlio.load("{a: 1e9, b: 8.0e9, c: 1e999, d: 10, e: 0x10, f: .5}")
    assert data == {"a": 1e9, "b": 8e9, "c": math.inf, "d": 10, "e": 16, "f": 0.5}
