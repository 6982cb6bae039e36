"""The rough edges met on the way to the operator's answer, each held here (or by a doctest named below)."""

from __future__ import annotations

import csv
import io
import json
import re
import subprocess
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

from commsched.cli.app import app

runner = CliRunner()
ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "crux-example1.yaml"


def test_jobs_csv_cells_are_json_not_python_reprs(tmp_path: Path) -> None:
    res = runner.invoke(app, ["simulate", "crux-fig19", "--mode", "fast", "--out", str(tmp_path)])
    assert res.exit_code == 0, res.stderr
    rows = list(csv.DictReader(io.StringIO((tmp_path / "jobs.csv").read_text())))
    assert rows
    for row in rows:
        cell = row["fabric_bytes_per_iteration"]
        assert "'" not in cell
        assert set(json.loads(cell)) == {"tp", "pp", "dp", "ep"}
        assert re.fullmatch(r"\d+", row["iterations"]), row["iterations"]  # a count, not 30.0


def test_iteration_counts_are_integers_and_every_job_has_its_ideal() -> None:
    res = runner.invoke(app, ["simulate", "crux-fig19", "--mode", "fast", "--json"])
    assert res.exit_code == 0, res.stderr
    jobs = json.loads(res.stdout)["jobs"]
    for j in jobs:
        assert isinstance(j["iterations"], int), j["iterations"]
        assert j["ideal_iteration_s"] > 0 and j["ideal_iteration_s"] <= j["standalone_iteration_s"] * (
            1 + 1e-9
        )
    table = runner.invoke(app, ["simulate", "crux-fig19", "--mode", "fast"]).stdout
    counts = [ln.split("│")[3].strip() for ln in table.splitlines() if ln.startswith("│")]
    assert counts and all(re.fullmatch(r"\d+", c) for c in counts), counts


def test_no_floating_noise_in_the_comparison() -> None:
    """Under crux-full every crux-fig19 job runs at its ideal pace: its losses are 0, not 1e-12."""
    res = runner.invoke(
        app, ["compare", "crux-fig19", "--policies", "ecmp-fair,crux-full", "--mode", "fast", "--json"]
    )
    assert res.exit_code == 0, res.stderr
    pol = json.loads(res.stdout)["policies"]["crux-full"]
    assert pol["throughput_loss"]["p50"] == 0.0 and pol["throughput_loss"]["max"] == 0.0
    assert [j["slowdown"] for j in pol["job_results"]] == [1.0] * len(pol["job_results"])


def _scenario(tmp_path: Path, job: str) -> Path:
    path = tmp_path / "s.yaml"
    path.write_text(
        "name: s\ntopology: {kind: two_layer_clos, tors: 2, aggs: 2, hosts_per_tor: 2}\nhorizon_s: 10\n"
        f"jobs:\n  - {job}\n"
    )
    return path


def test_an_unknown_model_suggests_the_near_miss_and_lists_the_llm_profiles(tmp_path: Path) -> None:
    res = runner.invoke(app, ["validate", str(_scenario(tmp_path, "{id: a, model: llama-7b@h20, gpus: 8}"))])
    assert res.exit_code == 2
    assert "unknown model 'llama-7b@h20'; did you mean 'llama-7b@h200'?" in res.stderr
    for name in ("llama-7b@h200", "mixtral-8x7b@h200", "gpt-13b@h200", "resnet50", "commsched models"):
        assert name in res.stderr, name


def test_an_unknown_key_suggests_the_near_miss(tmp_path: Path) -> None:
    path = _scenario(tmp_path, "{id: a, model: resnet50, gpus: 8, iteration: 3}")
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 2
    assert "jobs[0].iteration: unknown field; did you mean 'iterations'?" in res.stderr


def test_out_makes_its_folders(tmp_path: Path) -> None:
    out = tmp_path / "a" / "b" / "c"
    res = runner.invoke(app, ["simulate", str(EXAMPLE), "--mode", "fast", "--out", str(out)])
    assert res.exit_code == 0, res.stderr
    assert (out / "summary.json").is_file()


def test_the_daemon_walkthrough_makes_its_token_before_the_daemon_reads_it(tmp_path: Path) -> None:
    from commsched.runtime.http.serving import load_token

    doc = (ROOT / "docs" / "runtime-daemon.md").read_text()
    at = doc.index("commsched daemon --db demo.db")
    start = doc.rindex("```sh\n", 0, at) + len("```sh\n")  # the step just before the walk-through
    before = doc[start : doc.index("```", start)]
    assert "demo.token" in before and "commsched" not in before  # the token is made first
    subprocess.run(["bash", "-c", before], cwd=tmp_path, check=True)
    token, _ = load_token(tmp_path / "demo.token", fallback=tmp_path / "unused")
    assert len(token) >= 8
    assert (tmp_path / "demo.token").stat().st_mode & 0o077 == 0  # readable by its owner only


def test_validate_says_one_job_on_one_line_from_a_deep_folder(tmp_path: Path) -> None:
    deep = tmp_path.joinpath(*(["a-rather-long-folder-name"] * 6))
    deep.mkdir(parents=True)
    path = deep / "one.yaml"
    path.write_text(EXAMPLE.read_text().split("  - {id: b")[0])
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 0, res.stderr
    (line,) = [ln for ln in res.stdout.splitlines() if ln.strip()][:1]
    assert "1 job on 10 GPUs" in line and "jobs" not in line.split("1 job")[1].split(",")[0]
    assert line.endswith("horizon 120 s"), line  # the whole sentence on one line


def test_validate_says_that_static_without_priorities_is_one_class(tmp_path: Path) -> None:
    path = _scenario(tmp_path, "{id: a, model: resnet50, gpus: 8, iterations: 3}")
    path.write_text(path.read_text() + "policy: static\n")
    res = runner.invoke(app, ["validate", str(path)])
    assert res.exit_code == 0, res.stderr
    assert "every job shares class 0" in " ".join(res.stdout.split())
    obj = json.loads(runner.invoke(app, ["validate", str(path), "--json"]).stdout)
    assert any("class 0" in n for n in obj["notes"])
    # with a priority written, or another policy, there is nothing to say
    assert json.loads(runner.invoke(app, ["validate", str(EXAMPLE), "--json"]).stdout)["notes"] == []


def test_topology_params_give_each_parameter_its_own_plain_text() -> None:
    res = runner.invoke(app, ["topology", "params", "two_layer_clos", "--json"])
    assert res.exit_code == 0, res.stderr
    rows = {r["name"]: r["description"] for r in json.loads(res.stdout)["parameters"]}
    assert len({rows["tors"], rows["aggs"], rows["hosts_per_tor"]}) == 3
    assert rows["host_link_bps"] != rows["uplink_bps"]
    for text in rows.values():
        assert "``" not in text and ":func:" not in text and ":class:" not in text, text


def test_models_never_wraps_a_name(monkeypatch: pytest.MonkeyPatch) -> None:
    from commsched.cli import cmd_models
    from commsched.workload.grouped_jobs import llm_models
    from commsched.workload.zoo import list_models

    buf = io.StringIO()
    monkeypatch.setattr(cmd_models, "stdout_console", lambda: Console(file=buf, width=90, markup=False))
    cmd_models.models_command(gpu=None, json_out=False, verbose=False)
    text = buf.getvalue()
    cells = {ln.split("│")[1].strip() for ln in text.splitlines() if ln.startswith("│")}
    for p in (*list_models(), *llm_models()):
        assert p.name in cells, p.name
