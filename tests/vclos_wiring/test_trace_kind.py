"""The ``helios_like`` trace kind: scenario files, validation, and the vclos-experiment overrides."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commsched.cli.app import app
from commsched.errors import InputError
from commsched.experiments.vclos_experiment import ExperimentSpec, scenario_trace, trace_scenario
from commsched.io.scenario import scenario_from_text
from commsched.io.shipped import resolve_scenario
from commsched.io.traces import trace_jobs, trace_kinds
from commsched.topology.builders import leaf_spine
from commsched.workload.traces.helios import HeliosParams, helios_like_trace

runner = CliRunner()

SMALL = """
name: tiny
topology: {kind: leaf_spine, leaves: 2, spines: 4, gpus_per_host: 4, hosts_per_leaf: 1}
policy: vclos
horizon_s: 1.0e7
mode: fast
trace: {kind: helios_like, tasks: 6, mean_gap_s: 30, seed: 2, sizes: [1, 4, 8], probs: [0.5, 0.25, 0.25],
        collective: hierarchical_ring}
"""


def test_kind_is_registered_and_other_kinds_remain() -> None:
    kinds = trace_kinds()
    assert "helios_like" in kinds
    assert {"synthetic", "lingjun", "tiresias", "gavel", "pollux", "philly"} <= set(kinds)
    topo = leaf_spine(leaves=2, spines=4, gpus_per_host=4, hosts_per_leaf=1)
    synth = trace_jobs({"kind": "synthetic", "jobs": 5, "days": 0.1, "seed": 1}, topo, base_dir=Path("."))
    assert len(synth.jobs) == 5


def test_shipped_scenarios_are_real_trace_scenarios() -> None:
    for name, gpus, gap in (("vclos-table5-512", 512, 120.0), ("vclos-2048", 2048, 15.0)):
        sc = resolve_scenario(name)
        assert sc.policy == "vclos"
        assert sc.topology.n_gpus == gpus
        assert len(sc.jobs) == 5000
        assert all(j.spec.id.startswith("t") for j in sc.jobs)  # no placeholder job
        assert all(j.spec.collective == "hierarchical_ring" for j in sc.jobs)
        section, _ = scenario_trace(name)
        assert section["kind"] == "helios_like" and section["mean_gap_s"] == gap


def test_scenario_text_with_helios_trace() -> None:
    sc = scenario_from_text(SMALL)
    assert [j.spec.id for j in sc.jobs] == [f"t{i}" for i in range(6)]
    assert {j.spec.gpus for j in sc.jobs} <= {1, 4, 8}
    arrivals = [j.spec.arrival_s for j in sc.jobs]
    assert arrivals == sorted(arrivals)


def test_unknown_parameter_names_the_field() -> None:
    topo = leaf_spine(leaves=2, spines=4, gpus_per_host=4, hosts_per_leaf=1)
    with pytest.raises(InputError) as exc:
        trace_jobs({"kind": "helios_like", "lambda": 3}, topo, base_dir=Path("."))
    assert exc.value.where == "trace.lambda"
    assert "mean_gap_s" in (exc.value.expected or "")
    with pytest.raises(InputError):
        trace_jobs({"kind": "helios_like", "probs": [0.5]}, topo, base_dir=Path("."))


def test_duration_knobs_keep_sizes_and_arrivals() -> None:
    a = helios_like_trace(HeliosParams(tasks=50, seed=4))
    b = helios_like_trace(HeliosParams(tasks=50, seed=4, median_duration_s=9000.0, size_exponent=0.5))
    assert [(j.gpus, j.arrival_s, j.model) for j in a.jobs] == [
        (j.gpus, j.arrival_s, j.model) for j in b.jobs
    ]
    assert sum(j.duration_s for j in b.jobs) > sum(j.duration_s for j in a.jobs)
    assert helios_like_trace(HeliosParams(tasks=50, seed=4)) == a  # deterministic


def test_experiment_overrides_tasks_and_lambda() -> None:
    base = resolve_scenario("vclos-table5-512")
    section, _ = scenario_trace("vclos-table5-512")
    spec = ExperimentSpec(trace=section, overrides={"tasks": 30, "seed": 1})
    s60 = trace_scenario(base, spec.section(60.0))
    s240 = trace_scenario(base, spec.section(240.0))
    assert len(s60.jobs) == len(s240.jobs) == 30
    assert s240.jobs[-1].spec.arrival_s == pytest.approx(4 * s60.jobs[-1].spec.arrival_s)
    assert all(j.spec.iterations is not None and j.spec.iterations >= 1 for j in s60.jobs)


def test_cli_tasks_lambda_and_set_overrides() -> None:
    res = runner.invoke(
        app,
        ["vclos-experiment", "vclos-table5-512", "--tasks", "12", "--lambda", "50",
         "--policies", "best,vclos", "--set", "median_duration_s=600", "--json"],
    )  # fmt: skip
    assert res.exit_code == 0, res.output
    obj = json.loads(res.output)
    assert set(obj["table5_avg_jct_s"]) == {"50"}
    assert [r["jobs"] for r in obj["runs"]] == [12, 12]
    assert all(r["finished"] == 12 for r in obj["runs"])
    bad = runner.invoke(app, ["vclos-experiment", "vclos-table5-512", "--tasks", "5", "--set", "nope=1"])
    assert bad.exit_code != 0
    assert "nope" in bad.output
