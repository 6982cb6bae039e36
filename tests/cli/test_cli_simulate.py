"""The command line: one JSON object with --json, CSV outputs, one-line errors with exit code 2."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "crux-example1.yaml"
runner = CliRunner()


def test_help_lists_commands() -> None:
    res = runner.invoke(app, ["--help"])
    assert res.exit_code == 0
    for cmd in ("simulate", "validate", "topology", "models", "collective"):
        assert cmd in res.output


def test_simulate_json_is_one_object() -> None:
    res = runner.invoke(app, ["simulate", str(EXAMPLE), "--json"])
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    for key in ("gpu_utilization", "allocated_gpu_utilization", "sim_time_s", "wall_time_s", "jobs"):
        assert key in obj
    assert 0 <= obj["gpu_utilization"] <= 1
    assert obj["sim_time_s"] == 120
    for j in obj["jobs"]:
        assert {
            "id",
            "gpus",
            "iterations",
            "jct_s",
            "wait_s",
            "standalone_iteration_s",
            "mean_iteration_s",
        } <= set(j)


def test_simulate_options_override() -> None:
    res = runner.invoke(
        app, ["simulate", str(EXAMPLE), "--json", "--policy", "fair", "--mode", "fast", "--seed", "3"]
    )
    assert res.exit_code == 0, res.output
    obj = json.loads(res.stdout)
    assert (obj["policy"], obj["mode"], obj["seed"]) == ("fair", "fast", 3)


def test_simulate_out_writes_files(tmp_path: Path) -> None:
    res = runner.invoke(app, ["simulate", str(EXAMPLE), "--out", str(tmp_path / "o")])
    assert res.exit_code == 0, res.output
    for name in ("summary.json", "jobs.csv", "utilization.csv", "links.csv"):
        assert (tmp_path / "o" / name).stat().st_size > 0
    rows = (tmp_path / "o" / "utilization.csv").read_text().splitlines()
    assert rows[0] == "t_s,gpu_utilization,allocated_gpu_utilization" and len(rows) > 100


def test_missing_file_one_line_exit_2(tmp_path: Path) -> None:
    res = runner.invoke(app, ["simulate", str(tmp_path / "nope.yaml")])
    assert res.exit_code == 2
    assert res.stderr.strip().count("\n") == 0
    assert "file not found" in res.stderr and "Traceback" not in res.output + res.stderr


def test_malformed_yaml_exit_2(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("jobs: [\n", encoding="utf-8")
    res = runner.invoke(app, ["validate", str(p)])
    assert res.exit_code == 2
    assert "malformed YAML" in res.stderr and "Traceback" not in res.stderr


def test_validate_lists_every_problem(tmp_path: Path) -> None:
    p = tmp_path / "s.yaml"
    p.write_text(
        EXAMPLE.read_text()
        .replace("policy: static", "policy: nope")
        .replace("horizon_s: 120", "horizon_s: 0")
    )
    res = runner.invoke(app, ["validate", str(p)])
    assert res.exit_code == 2
    lines = res.stderr.strip().splitlines()
    assert len(lines) == 2 and all(line.startswith("error: ") for line in lines)


def test_unknown_policy_lists_choices() -> None:
    res = runner.invoke(app, ["simulate", str(EXAMPLE), "--policy", "zzz"])
    assert res.exit_code == 2
    assert "unknown policy 'zzz'" in res.stderr and "static" in res.stderr


def test_validate_ok() -> None:
    res = runner.invoke(app, ["validate", str(EXAMPLE)])
    assert res.exit_code == 0 and "OK" in res.stdout


def test_fluid_min_jobs_reaches_the_engine_from_the_file_and_the_option(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import commsched.api.runner as runner_mod

    seen: list[int] = []
    real = runner_mod.Simulation

    def spy(**kw: Any) -> Any:
        seen.append(kw["config"].fluid_min_jobs)
        return real(**kw)

    monkeypatch.setattr(runner_mod, "Simulation", spy)
    path = tmp_path / "s.yaml"
    path.write_text(EXAMPLE.read_text() + "\nfluid_min_jobs: 3\nmode: fast\n")
    for extra, want in (([], 3), (["--fluid-min-jobs", "0"], 0), (["--fluid-min-jobs", "12"], 12)):
        res = runner.invoke(app, ["simulate", str(path), "--json", *extra])
        assert res.exit_code == 0, res.output
        assert seen[-1] == want


def test_a_negative_fluid_threshold_is_refused(tmp_path: Path) -> None:
    res = runner.invoke(app, ["simulate", str(EXAMPLE), "--fluid-min-jobs", "-1"])
    assert res.exit_code == 2 and "--fluid-min-jobs" in res.output and "Traceback" not in res.output
    path = tmp_path / "s.yaml"
    path.write_text(EXAMPLE.read_text() + "\nfluid_min_jobs: -2\n")
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 2 and "fluid_min_jobs" in res.output
