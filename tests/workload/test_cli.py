"""CLI: ``commsched models`` and ``commsched collective`` on a Typer app with the commands registered."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from commsched.cli import cmd_collective, cmd_models


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()

    @a.callback()
    def _root() -> None:
        """Test app."""

    cmd_models.register(a)
    cmd_collective.register(a)
    return a


def test_models_json(app: typer.Typer) -> None:
    res = CliRunner().invoke(app, ["models", "--json"])
    assert res.exit_code == 0, res.output
    rows = json.loads(res.stdout)
    assert isinstance(rows, list) and len(rows) >= 11
    for row in rows:
        assert {"name", "compute_s", "gpu", "sync_bytes", "source", "overlap", "layers"} <= row.keys()
        assert row["compute_s"] > 0 and row["source"]
    assert "gpt3-crux" in {r["name"] for r in rows}


def test_models_table(app: typer.Typer) -> None:
    res = CliRunner().invoke(app, ["models"])
    assert res.exit_code == 0 and "resnet50" in res.stdout


def test_collective_json(app: typer.Typer) -> None:
    res = CliRunner().invoke(
        app, ["collective", "ps", "--ranks", "4", "--bytes", "100", "--param", "servers=2", "--json"]
    )
    assert res.exit_code == 0, res.output
    doc = json.loads(res.stdout)
    assert doc["algorithm"] == "ps" and doc["servers"] == 2
    assert doc["sent_bytes"][:4] == [100.0] * 4 and doc["received_bytes"][4:] == [200.0, 200.0]
    assert [s["label"] for s in doc["steps"]] == ["push", "pull"]


def test_collective_truncates(app: typer.Typer) -> None:
    res = CliRunner().invoke(app, ["collective", "ring", "--ranks", "64", "--bytes", "1e6"])
    assert res.exit_code == 0, res.output
    assert "x126" in res.stdout and "more" in res.stdout
    doc = json.loads(
        CliRunner().invoke(app, ["collective", "ring", "-n", "64", "-m", "1e6", "--json"]).stdout
    )
    assert doc["steps"][0]["truncated"] and doc["steps"][0]["n_transfers"] == 64


@pytest.mark.parametrize(
    ("args", "needle"),
    [
        (["collective", "tree", "--ranks", "4", "--bytes", "1"], "halving_doubling"),
        (["collective", "ring", "--ranks", "0", "--bytes", "1"], "ranks"),
        (["collective", "ps", "--ranks", "4", "--bytes", "1", "--param", "srv=2"], "servers"),
        (["collective", "ps", "--ranks", "4", "--bytes", "1", "--param", "servers"], "KEY=VALUE"),
    ],
)
def test_collective_errors(app: typer.Typer, args: list[str], needle: str) -> None:
    res = CliRunner().invoke(app, args)
    assert res.exit_code == 2
    assert needle in res.stderr and "Traceback" not in res.output


def test_models_json_and_verbose_show_precision_and_provenance(app: typer.Typer) -> None:
    rows = {r["name"]: r for r in json.loads(CliRunner().invoke(app, ["models", "--json"]).stdout)}
    assert rows["gnmt"]["precision"] == "fp32-grads" and rows["dlrm"]["precision"] == "unrecorded"
    prov = rows["alexnet"]["provenance"]
    assert prov["kind"] == "measured" and prov["reference"].startswith("pipedream-profiles/alexnet.graph.txt")
    assert "gpu V100 (not recorded in the file)" in prov["assumptions"]
    assert all(r["precision"] and r["provenance"]["kind"] for r in rows.values())
    text = CliRunner().invoke(app, ["models", "--verbose"], terminal_width=400).stdout
    assert "provenance: simulator-workload; reference: simai-examples/workload_analytical.txt" in text
    assert "assumption: compute times read as nanoseconds" in text
