"""Profiles in scenarios (``model: {profile: FILE}``), the H200 zoo entries and ``commsched models``."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest
from typer.testing import CliRunner

import commsched as cs
from commsched.cli.app import app
from commsched.errors import ValidationError
from commsched.workload import get_model, list_models
from tests.paths import SHARED_DATA

H200 = SHARED_DATA / "h200-profiles"


@pytest.fixture(scope="module")
def profile_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A profile document written by ``commsched profile --kineto`` from the real ResNet-50 H200 trace."""
    if not H200.exists():
        pytest.skip("shared data folder not present")
    out = tmp_path_factory.mktemp("prof") / "r50.json"
    trace = str(H200 / "trace-resnet50.json.gz")
    args = ["--out", str(out), "--name", "r50", "--precision", "bf16", "--batch-size", "128"]
    res = CliRunner().invoke(app, ["profile", "--kineto", trace, *args])
    assert res.exit_code == 0, res.output
    return out


def _scenario(folder: Path, jobs: str) -> Path:
    path = folder / "s.yaml"
    path.write_text(f"topology: {{kind: single_link, capacity_bps: 1.0e10}}\nhorizon_s: 1\njobs:\n{jobs}")
    return path


def test_a_profile_file_runs_in_a_scenario_beside_zoo_names(profile_file: Path) -> None:
    path = _scenario(
        profile_file.parent,
        "  - {id: mine, gpus: 4, model: {profile: r50.json}}\n"
        "  - {id: fast, gpus: 4, model: {profile: r50.json}, compute_s: 0.01}\n"
        "  - {id: zoo, gpus: 4, model: resnet50@h200-fp32}\n",
    )
    sc = cs.load_scenario(path)
    mine = sc.jobs[0].spec.profile
    assert (mine.name, mine.gpu, mine.precision, mine.batch_size) == ("r50", "NVIDIA H200", "bf16", 128)
    assert len(mine.layers) == 107 and sc.jobs[0].spec.model == "r50"
    assert sc.jobs[1].spec.profile.compute_s == 0.01  # overrides apply as to zoo models
    r = cs.simulate(sc, policy="fair")
    assert all(j.iterations > 0 for j in r.jobs)
    for cmd in (["plan", str(path), "--json"], ["compare", str(path), "--policies", "fair,static", "--json"]):
        res = CliRunner().invoke(app, cmd)
        assert res.exit_code == 0, res.output


def test_python_api_loads_profiles(profile_file: Path) -> None:
    from commsched.workload import job_from_model

    p = cs.load_profile(profile_file)
    assert p is not None and p.sync_bytes == 4 * 25_557_032
    assert job_from_model("j", p, gpus=8).profile is p
    assert cs.load_profile("resnet50@h200") is get_model("resnet50@h200-bf16")


def test_profile_problems_carry_their_line(profile_file: Path) -> None:
    et = profile_file.parent / "et.json"
    res = CliRunner().invoke(
        app, ["profile", "--et", str(SHARED_DATA / "chakra-traces" / "chakra.0.et"), "--out", str(et)]
    )
    assert res.exit_code == 0, res.output
    path = _scenario(
        profile_file.parent,
        "  - {id: a, gpus: 2, model: {profile: missing.json}}\n"
        "  - {id: b, gpus: 2, model: {profile: et.json}}\n"
        "  - {id: c, gpus: 2, model: {profile: r50.json, gpu: h200}}\n"
        "  - {id: d, gpus: 2, model: [r50.json]}\n"
        "  - {id: e, gpus: 2, model: {profile: ''}}\n",
    )
    with pytest.raises(ValidationError) as exc:
        cs.load_scenario(path)
    problems = exc.value.problems
    assert len(problems) == 5
    assert problems[0].startswith(f"{path}:4: jobs[0].model.profile:") and "no such file" in problems[0]
    assert (
        problems[1].startswith(f"{path}:5: jobs[1].model.profile:")
        and "execution-trace summary" in problems[1]
    )
    assert problems[2].startswith(f"{path}:6: jobs[2].model:") and "keys gpu, profile" in problems[2]
    assert problems[3].startswith(f"{path}:7: jobs[3].model:") and "{profile: FILE.json}" in problems[3]
    assert problems[4].startswith(f"{path}:8: jobs[4].model:") and "a file name" in problems[4]


@pytest.mark.skipif(not H200.exists(), reason="shared data folder not present")
def test_h200_zoo_entries_are_the_measured_medians() -> None:
    ref = json.loads((H200 / "profiles.json").read_text())["models"]
    h200 = [p for p in list_models() if "H200" in p.gpu]
    assert len(h200) == 18 and {p.precision for p in h200} == {"fp32", "bf16"}
    for p in h200:
        model, prec = p.name.split("@h200-")
        key = {"gpt3-crux": "gpt3-24l-1024"}.get(model, model)
        run = ref[key]["bf16-autocast" if prec == "bf16" else "fp32"]
        assert math.isclose(p.compute_s, run["forward_s"] + run["backward_s"], rel_tol=1e-12)
        assert abs(p.compute_s / run["compute_s"] - 1) < 0.01
        assert p.sync_bytes == 4 * ref[key]["params"] and p.batch_size == ref[key]["shape"]["batch"]
        owners = len(run["layers"]["layers_forward_order"]) + (
            1 if "bert" in model else 0
        )  # + cls.predictions
        assert len(p.layers) == owners
        assert "profiles.json" in p.source and get_model(p.name) is p
    assert get_model("bert-large@h200").name == "bert-large@h200-bf16"


def test_existing_zoo_names_keep_their_numbers() -> None:
    for name, compute_s, sync_bytes, gpu, precision in (
        ("resnet50", 0.443419, 102_228_128, "V100", "fp32"),
        ("bert-large", 0.3080361445312499, 1_344_896_232, "A100", "fp32-grads"),
        ("gpt3-crux", 0.7806645000000003, 1_423_679_488, "A100", "fp32-grads"),
        ("vgg16", 0.6725349999999999, 553_430_176, "V100", "fp32"),
    ):
        p = get_model(name)
        assert (p.gpu, p.sync_bytes, p.precision) == (gpu, sync_bytes, precision)
        assert math.isclose(p.compute_s, compute_s, rel_tol=1e-12)


def test_models_command_shows_gpu_precision_and_provenance() -> None:
    rows = json.loads(CliRunner().invoke(app, ["models", "--json"]).stdout)
    h200 = [r for r in rows if "H200" in r["gpu"]]
    assert all(r["precision"] in ("fp32", "bf16") and r["source"] for r in h200)
    assert len([r for r in h200 if r["provenance"]["kind"] == "measured"]) == 18
    # the named LLM profiles, scaled from the measured gpt3-crux one, listed after the zoo
    derived = [r["name"] for r in h200 if r["provenance"]["kind"] == "derived"]
    names = ("gpt-13b", "gpt-22b", "gpt-175b", "llama-7b", "llama-65b", "mixtral-8x7b")
    assert derived == [f"{n}@h200" for n in names] and len(h200) == 24
    only = json.loads(CliRunner().invoke(app, ["models", "--gpu", "h200", "--json"]).stdout)
    assert [r["name"] for r in only] == [r["name"] for r in h200]
    table = CliRunner().invoke(app, ["models"]).stdout
    assert "precision" in table and "resnet50@h200-bf16: h200-profiles/profiles.json" in table
    res = CliRunner().invoke(app, ["models", "--gpu", "tpu"])
    assert res.exit_code == 2 and "NVIDIA H200" in res.stderr


def test_testbed_run_lays_out_a_profiled_job(profile_file: Path) -> None:
    """The testbed run takes its jobs' compute and bytes from the scenario, profiles included (no root)."""
    from commsched.experiments.testbed_run.layout import job_layouts

    path = profile_file.parent / "tb.yaml"
    path.write_text(
        "topology: {kind: crux_testbed}\nhorizon_s: 10\n"
        "jobs:\n  - {id: mine, model: {profile: r50.json}, hosts: [h0, h4], collective: hierarchical_ring}\n"
    )
    sc = cs.load_scenario(path)
    nics = sorted({str(sc.topology.nic_of(g)) for g in sc.topology.gpus})
    (layout,) = job_layouts(sc, sc.topology, {n: f"10.0.{k}.1" for k, n in enumerate(nics)})
    p = cs.load_profile(profile_file)
    assert (layout.model, layout.compute_s, layout.sync_bytes) == ("r50", p.compute_s, p.sync_bytes)
    assert math.isclose(layout.overlap, p.overlap)
