"""Rough edges a newcomer hit: file modes, float noise, GPU counts, the table's legend, flags in help,
unknown hashes, the JCT plot's unit and overlapping curves."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app
from commsched.io import results
from commsched.io.numbers import tidy

runner = CliRunner()
EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "crux-example1.yaml"


def _noise(x: Any) -> int:
    if isinstance(x, dict):
        return sum(_noise(v) for v in x.values())
    if isinstance(x, list):
        return sum(_noise(v) for v in x)
    return int(isinstance(x, float) and 0 < abs(x) < 1e-12)


@pytest.fixture
def umask_022() -> Any:
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def test_result_files_honour_the_umask(tmp_path: Path, umask_022: None) -> None:
    out = tmp_path / "o"
    res = runner.invoke(app, ["simulate", str(EXAMPLE), "--mode", "fast", "--out", str(out)])
    assert res.exit_code == 0, res.stderr
    modes = {p.name: stat.S_IMODE(p.stat().st_mode) for p in out.iterdir()}
    assert modes and set(modes.values()) == {0o644}, modes
    os.umask(0o077)
    (path,) = results.write_files(tmp_path / "private", {"x.json": "{}\n"})
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_compare_json_has_no_float_noise() -> None:
    # exact mode (the scenario's): there the equal rates of crux-full left losses of 2.22e-16
    res = runner.invoke(app, ["compare", "crux-fig19", "--policies", "ecmp-fair,crux-full", "--json"])
    assert res.exit_code == 0, res.stderr
    obj = json.loads(res.stdout)
    assert _noise(obj) == 0
    assert list(obj["policies"]) == ["ecmp-fair", "crux-full"]  # an alias is reported as asked


def test_tiny_values_are_written_as_zero_in_json_and_csv() -> None:
    assert tidy({"loss": 2.220446049250313e-16, "x": [-3e-13, 1e-9]}) == {"loss": 0.0, "x": [0.0, 1e-9]}
    assert results._g(2.220446049250313e-16) == "0" and results._g(0.25) == "0.25"


def test_validate_counts_the_gpus_of_an_abstract_example() -> None:
    res = runner.invoke(app, ["validate", str(EXAMPLE)])
    assert res.exit_code == 0, res.stderr
    assert (
        " 0 GPUs" not in res.stdout and "20 abstract GPUs" in res.stdout and "2 jobs on 20 GPUs" in res.stdout
    )
    obj = json.loads(runner.invoke(app, ["validate", str(EXAMPLE), "--json"]).stdout)
    assert (obj["gpus"], obj["job_gpus"]) == (20, 20)
    fig19 = json.loads(runner.invoke(app, ["validate", "crux-fig19", "--json"]).stdout)
    assert (fig19["gpus"], fig19["job_gpus"]) == (96, 56)


def test_the_comparison_table_has_a_legend_and_a_headline() -> None:
    res = runner.invoke(app, ["compare", "crux-fig19", "--policies", "ecmp-fair,crux-full", "--mode", "fast"])
    assert res.exit_code == 0, res.stderr
    text = " ".join(res.stdout.split())
    for col in ("alloc. util:", "avg JCT/JRT/JWT s:", "p95 / max loss:", "n>50%:"):
        assert col in text, col
    assert "GPU-hours" in text and "over ecmp-fair (GPU utilisation" in text


def _commands(group: Any, path: list[str]) -> list[list[str]]:
    out = []
    for name, cmd in getattr(group, "commands", {}).items():
        sub = [*path, name]
        out += _commands(cmd, sub) if getattr(cmd, "commands", None) else [sub]
    return out


def test_no_flag_looks_as_if_it_took_a_value_in_help() -> None:
    import typer.main

    root = typer.main.get_command(app)
    paths = _commands(root, [])
    assert ["plan"] in paths and ["testbed", "up"] in paths
    for path in [[], *paths]:
        res = runner.invoke(app, [*path, "--help"], env={"COLUMNS": "200"})
        assert res.exit_code == 0, (path, res.output)
        assert "<bool>" not in res.output, path
    assert "--json " in runner.invoke(app, ["plan", "--help"], env={"COLUMNS": "200"}).output


def test_plan_rejects_an_unknown_hash() -> None:
    res = runner.invoke(app, ["plan", str(EXAMPLE), "--hash", "nosuchhash"])
    assert res.exit_code == 2
    assert "--hash: unknown hash function 'nosuchhash'" in res.stderr and "murmur3" in res.stderr


FINITE = """\
topology: {kind: single_link, capacity_bps: 8.0e9}
policy: static
horizon_s: 600
jobs:
  - {id: a, gpus: 10, compute_s: 2.0, comm_bytes: 2.0e9, priority: 0, iterations: 20}
  - {id: b, gpus: 10, compute_s: 1.0, comm_bytes: 1.0e9, priority: 1, iterations: 30}
  - {id: c, gpus: 4, compute_s: 1.0, comm_bytes: 1.0e8, priority: 1, iterations: 50, arrival_s: 5}
"""


def test_the_jct_plot_is_in_seconds_and_shows_every_policy(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    from commsched.api import compare
    from commsched.experiments.plots import _plt, jct_cdf_figure

    path = tmp_path / "finite.yaml"
    path.write_text(FINITE)
    cmp = compare(path, ["fair", "static", "crux-full"], mode="fast")
    plt = _plt()
    fig = jct_cdf_figure(plt, cmp)
    try:
        ax = fig.axes[0]
        assert "(s)" in ax.get_xlabel()
        lines = ax.get_lines()
        assert len(lines) == 3
        for line, r in zip(lines, cmp.results, strict=True):
            jct = sorted(j.jct_s for j in r.jobs if j.finished)
            assert list(line.get_xdata()) == pytest.approx(jct)  # seconds, as in the table
            assert (line.get_alpha() or 1.0) < 1.0
        styles = {(ln.get_linestyle(), ln.get_marker()) for ln in lines}
        assert len(styles) == 3  # curves lying on one another stay distinguishable
    finally:
        plt.close(fig)
