"""The command line explains itself and prints user text literally: policies, topology params, shipped
scenario names everywhere, provenance in results, CSV booleans, no float noise, atomic writes."""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commsched import __version__
from commsched.cli.app import app
from commsched.io import results

runner = CliRunner()

TRICKY = """\
topology: {kind: two_layer_clos, tors: 2, aggs: 2, hosts_per_tor: 2}
policy: ecmp-fair
horizon_s: 5
jobs:
  - {id: "[bold]x[/]", model: resnet50, gpus: 3}
  - {id: ":smile:", model: resnet50, gpus: 5}
  - {id: "[/x]", model: bert-base, gpus: 7}
  - {id: "a:x:b [red]", model: bert-base, gpus: 1}
"""
IDS = ("[bold]x[/]", ":smile:", "[/x]", "a:x:b [red]")


@pytest.fixture
def tricky(tmp_path: Path) -> Path:
    path = tmp_path / "tricky.yaml"
    path.write_text(TRICKY, encoding="utf-8")
    return path


def test_markup_and_emoji_in_ids_are_printed_literally(tricky: Path) -> None:
    res = runner.invoke(app, ["simulate", str(tricky), "--mode", "fast"])
    assert res.exit_code == 0, res.stderr
    for job_id in IDS:
        assert job_id in res.stdout, (job_id, res.stdout)
    assert "😄" not in res.stdout  # :smile: was not turned into an emoji


def test_odd_gpu_counts_run(tricky: Path) -> None:
    res = runner.invoke(app, ["simulate", str(tricky), "--mode", "fast", "--json"])
    assert res.exit_code == 0, res.stderr
    obj = json.loads(res.stdout)
    assert sorted(j["gpus"] for j in obj["jobs"]) == [1, 3, 5, 7]
    assert [j["id"] for j in obj["jobs"]] == list(IDS)


def test_markup_in_errors_is_printed_literally(tricky: Path) -> None:
    res = runner.invoke(app, ["simulate", str(tricky), "--policy", "[/x]:smile:"])
    assert res.exit_code == 2
    assert "unknown policy '[/x]:smile:'" in res.stderr


def test_plan_prints_markup_ids_literally(tricky: Path) -> None:
    res = runner.invoke(app, ["plan", str(tricky)])
    assert res.exit_code == 0, res.stderr
    for job_id in IDS:
        assert job_id in res.stdout


def test_policies_lists_every_family() -> None:
    from commsched.catalog import placement_registry, policy_registry, queue_registry

    res = runner.invoke(app, ["policies", "--json"])
    assert res.exit_code == 0, res.stderr
    obj = json.loads(res.stdout)
    assert [p["name"] for p in obj["policies"]] == list(policy_registry().names())
    assert [p["name"] for p in obj["placements"]] == list(placement_registry().names())
    assert [p["name"] for p in obj["queue_orders"]] == list(queue_registry().names())
    for family in obj.values():
        for row in family:
            assert row["description"], row  # one line each, none left empty
            assert "\n" not in row["description"]
    table = runner.invoke(app, ["policies"])
    assert table.exit_code == 0 and "crux-full" in table.stdout and "first-fit" in table.stdout


def test_policies_lists_an_alias_once_under_its_policy() -> None:
    res = runner.invoke(app, ["policies", "--json"])
    rows = {p["name"]: p for p in json.loads(res.stdout)["policies"]}
    assert "ecmp-fair" not in rows and rows["fair"]["aliases"] == ["ecmp-fair"]
    assert rows["balanced-ecmp"]["description"]  # the old separate table had none for it


@pytest.mark.parametrize("kind", ["single_link", "two_layer_clos", "leaf_spine", "crux_testbed"])
def test_topology_params_lists_the_builders_parameters(kind: str) -> None:
    import inspect

    from commsched.topology.builders import topology_builders

    res = runner.invoke(app, ["topology", "params", kind, "--json"])
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)["parameters"]
    assert [r["name"] for r in rows] == list(inspect.signature(topology_builders().get(kind)).parameters)
    assert all(r["description"] for r in rows if r["name"] != "host_template" or kind != "leaf_spine")


@pytest.mark.parametrize(
    "args",
    [
        ["validate", "crux-example1-missing"],
    ],
)
def test_unknown_shipped_name_lists_the_shipped_ones(args: list[str]) -> None:
    res = runner.invoke(app, args)
    assert res.exit_code == 2
    assert "crux-fig19" in res.stderr and res.stderr.count("\n") == 1


@pytest.mark.parametrize("command", [["validate"], ["plan"], ["simulate", "--mode", "fast"]])
def test_shipped_names_are_accepted(command: list[str]) -> None:
    res = runner.invoke(app, [command[0], "crux-fig19", *command[1:]])
    assert res.exit_code == 0, res.stderr


def test_summary_says_what_produced_it(tmp_path: Path) -> None:
    out = tmp_path / "o"
    res = runner.invoke(app, ["simulate", "crux-fig19", "--mode", "fast", "--seed", "4", "--out", str(out)])
    assert res.exit_code == 0, res.stderr
    s = json.loads((out / "summary.json").read_text())
    assert (s["scenario"], s["policy"], s["placement"], s["mode"], s["seed"]) == (
        "crux-fig19",
        "crux-full",
        "pack",
        "fast",
        4,
    )
    assert s["commsched_version"] == __version__
    rows = list(csv.DictReader((out / "jobs.csv").read_text().splitlines()))
    assert {r["finished"] for r in rows} <= {"true", "false"}
    assert {r["shared_links"] for r in rows} <= {"true", "false"}
    for r in csv.DictReader((out / "utilization.csv").read_text().splitlines()):
        if r["gpu_utilization"]:
            assert 0.0 <= float(r["gpu_utilization"]) <= 1.0


def test_compare_crux_fig19_shows_the_gain_in_utilisation() -> None:
    from dataclasses import replace

    from commsched.api.comparing import compare_named as compare
    from commsched.io.shipped import resolve_scenario

    sc = replace(resolve_scenario("crux-fig19"), horizon_s=30.0)
    base, crux = compare(sc, ("ecmp-fair", "crux-full")).results
    assert crux.gpu_utilization > base.gpu_utilization + 0.01
    assert all(j.end_s is None or j.end_s >= 30.0 - 1e-9 for j in crux.jobs)  # all train to the end


def test_json_output_has_no_float_noise(monkeypatch: pytest.MonkeyPatch, tricky: Path) -> None:
    real = results.result_summary

    def noisy(*args: object, **kwargs: object) -> dict[str, object]:
        out = real(*args, **kwargs)  # type: ignore[arg-type]
        out["gpu_utilization"] = 1.0000000000000069
        out["jobs"][0]["jct_s"] = 12.300000000000001  # type: ignore[index]
        return out

    monkeypatch.setattr(results, "result_summary", noisy)
    res = runner.invoke(app, ["simulate", str(tricky), "--mode", "fast", "--json"])
    assert res.exit_code == 0, res.stderr
    assert '"gpu_utilization": 1.0,' in res.stdout
    assert "1.0000000000000069" not in res.stdout and "12.300000000000001" not in res.stdout


def test_results_are_written_atomically(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    out = tmp_path / "o"
    out.mkdir()
    old = {"summary.json": "old summary\n", "jobs.csv": "old jobs\n"}
    for name, text in old.items():
        (out / name).write_text(text)
    calls = {"n": 0}
    real_replace = results.os.replace

    def failing_write(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    # a failure while the new files are being written leaves every old file as it was, and no debris
    monkeypatch.setattr(results, "_csv", failing_write)
    res = runner.invoke(app, ["simulate", "crux-fig19", "--mode", "fast", "--out", str(out)])
    assert res.exit_code != 0
    assert {p.name: p.read_text() for p in out.iterdir()} == old
    monkeypatch.undo()

    def counting_replace(src: str, dst: str) -> None:
        calls["n"] += 1
        real_replace(src, dst)

    monkeypatch.setattr(results.os, "replace", counting_replace)
    res = runner.invoke(app, ["simulate", "crux-fig19", "--mode", "fast", "--out", str(out)])
    assert res.exit_code == 0, res.stderr
    assert calls["n"] == 4
    assert sorted(p.name for p in out.iterdir()) == [
        "jobs.csv",
        "links.csv",
        "summary.json",
        "utilization.csv",
    ]
