"""The ``intrajob`` and ``byteps`` commands on a Typer app built here (model lookup injected)."""

from __future__ import annotations

import json

import pytest
import typer
from typer.testing import CliRunner

from commsched.cli import cmd_byteps, cmd_intrajob
from commsched.errors import UnknownNameError
from commsched.workload import LayerProfile, ModelProfile

POLICIES = {"wfbp", "bytescheduler", "mercury", "mercury-no-preemption", "oracle"}


def fake_model(name: str) -> ModelProfile:
    if name not in {"tiny", "tiny-bert", "flat"}:
        raise UnknownNameError("model", name, ["tiny", "tiny-bert", "flat"], where="MODEL")
    sizes = [4e6, 8e6, 1.6e7, 2e8] if name != "flat" else []
    layers = tuple(
        LayerProfile(name=f"l{i}", forward_s=0.01, backward_s=0.02, param_bytes=s)
        for i, s in enumerate(sizes)
    )
    return ModelProfile(
        name=name,
        gpu="test",
        compute_s=0.12,
        sync_bytes=sum(sizes) or 1e8,
        overlap=0.5,
        source="test",
        layers=layers,
    )


@pytest.fixture
def app() -> typer.Typer:
    a = typer.Typer()

    @a.callback()
    def root() -> None:
        """test root"""

    cmd_intrajob.register(a, get_model=fake_model)
    cmd_byteps.register(a, get_model=fake_model)
    return a


runner = CliRunner()


def test_single_bandwidth_json_shape(app):
    res = runner.invoke(app, ["intrajob", "tiny", "--bandwidth-gbps", "10", "--json"])
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert set(data["policies"]) == POLICIES
    for row in data["policies"].values():
        assert row["iteration_s"] > 0 and 0 < row["normalized_speed"] <= 1 + 1e-12
    assert data["policies"]["oracle"]["normalized_speed"] == pytest.approx(1.0)
    assert data["policies"]["mercury"]["iteration_s"] <= data["policies"]["wfbp"]["iteration_s"]


def test_sweep_json_and_plots(app, tmp_path):
    res = runner.invoke(
        app, ["intrajob", "tiny-bert", "--sweep", "1:100", "--points", "5", "--json", "--out", str(tmp_path)]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["target"] == 0.9
    assert len(data["bandwidths_gbps"]) == 5
    for row in data["policies"].values():
        assert len(row["normalized_speed"]) == 5
        assert "min_bandwidth_gbps" in row
    assert data["policies"]["mercury"]["min_bandwidth_gbps"] <= data["policies"]["wfbp"]["min_bandwidth_gbps"]
    assert data["mercury_bandwidth_reduction_vs_wfbp"] >= 0
    names = sorted(p.name for p in tmp_path.iterdir())
    assert names == [
        "tiny-bert_intrajob.json",
        "tiny-bert_min_bandwidth.png",
        "tiny-bert_normalized_speed.png",
    ]


def test_sweep_table(app):
    res = runner.invoke(app, ["intrajob", "tiny", "--points", "3"])
    assert res.exit_code == 0, res.output
    assert "least bandwidth" in res.stdout


@pytest.mark.parametrize(
    "args",
    [
        ["intrajob", "nope", "--bandwidth-gbps", "1"],
        ["intrajob", "flat", "--bandwidth-gbps", "1"],
        ["intrajob", "tiny", "--bandwidth-gbps", "1", "--sweep", "1:2"],
        ["intrajob", "tiny", "--sweep", "5"],
        ["intrajob", "tiny", "--bandwidth-gbps", "-1"],
        ["byteps", "--gpu-machines", "1", "--bytes", "1e9"],
        ["byteps", "--gpu-machines", "4"],
    ],
)
def test_user_errors_exit_2(app, args):
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert "error" in res.output.lower()


def test_byteps_json(app):
    res = runner.invoke(
        app, ["byteps", "--gpu-machines", "32", "--cpu-machines", "16", "--bytes", "1e9", "--json"]
    )
    assert res.exit_code == 0, res.output
    data = json.loads(res.stdout)
    assert data["speedup_vs_allreduce"] == pytest.approx(1.46, abs=0.01)
    assert data["speedup_vs_ps"] == pytest.approx(1.52, abs=0.01)
    assert data["communication_s"] > 0
    for kind in ("gpu_machine", "cpu_machine"):
        assert set(data["traffic"][kind]) == {"sent_bytes", "received_bytes"}


def test_byteps_model_and_table(app):
    res = runner.invoke(app, ["byteps", "--gpu-machines", "4", "--model", "tiny"])
    assert res.exit_code == 0, res.output
    assert "speed-up vs all-reduce" in res.stdout
    res = runner.invoke(
        app, ["byteps", "--gpu-machines", "4", "--cpu-machines", "0", "--model", "tiny", "--json"]
    )
    data = json.loads(res.stdout)
    assert data["mode"] == "allreduce" and data["speedup_vs_ps"] is None
