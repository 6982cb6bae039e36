"""``commsched topology show`` through Typer's test runner on an app built here."""

from __future__ import annotations

import json
from pathlib import Path

import typer
from typer.testing import CliRunner

from commsched.cli.cmd_topology import register


def _app() -> typer.Typer:
    app = typer.Typer()

    @app.callback()
    def _root() -> None:
        """test root"""

    register(app)
    return app


def test_show_kind_with_params_as_json() -> None:
    res = CliRunner().invoke(
        _app(), ["topology", "show", "two_layer_clos", "-p", "tors=3", "-p", "aggs=4", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.output)
    assert data["hosts"] == 12 and data["nodes_by_kind"]["agg"] == 4
    assert data["oversubscription"] == 1.0
    assert data["path_samples"][0]["n_paths"] == 4 * 4 * 4


def test_show_text_and_yaml(tmp_path: Path) -> None:
    f = tmp_path / "t.yaml"
    f.write_text("kind: leaf_spine\nleaves: 2\nspines: 4\ngpus_per_host: 4\n")
    res = CliRunner().invoke(_app(), ["topology", "show", str(f)])
    assert res.exit_code == 0, res.output
    assert "equal-cost paths h0/nic0 -> h1/nic0 (different ToR, 4 hops): 4" in res.output
    assert "ToR oversubscription (worst): 1:1" in res.output


def test_errors_are_one_line_exit_2(tmp_path: Path) -> None:
    runner = CliRunner()
    res = runner.invoke(_app(), ["topology", "show", "leaf_spine", "-p", "bogus=1"])
    assert res.exit_code == 2
    assert "unknown parameter 'bogus'" in res.output and "Traceback" not in res.output
    bad = tmp_path / "topo.csv"
    bad.write_text("ip,DSW\n")
    res = runner.invoke(_app(), ["topology", "show", str(bad)])
    assert res.exit_code == 2 and f"{bad}:1" in res.output
    res = runner.invoke(_app(), ["topology", "show", "single_link", "-p", "novalue"])
    assert res.exit_code == 2 and "KEY=VALUE" in res.output
