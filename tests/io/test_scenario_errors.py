"""Bad scenario input: every problem is reported with file, line, field path and what was expected."""

from __future__ import annotations

from pathlib import Path

import pytest

from commsched.errors import InputError, ValidationError
from commsched.io.scenario import load_scenario, scenario_from_text

GOOD = """\
topology: {kind: two_layer_clos, tors: 2, aggs: 2, hosts_per_tor: 2}
policy: static
horizon_s: 60
jobs:
  - {id: a, model: resnet50, gpus: 8}
  - {id: b, model: bert-base, hosts: [h1, h2]}
"""


def problems(text: str) -> list[str]:
    with pytest.raises(ValidationError) as info:
        scenario_from_text(text, source="s.yaml")
    return info.value.problems


def test_good_scenario_builds() -> None:
    sc = scenario_from_text(GOOD, source="s.yaml")
    assert [j.spec.id for j in sc.jobs] == ["a", "b"]
    assert sc.jobs[1].spec.gpus == 16 and len(sc.jobs[1].gpu_ids) == 16
    assert sc.topology.n_gpus == 32


CASES = [
    # (what is wrong, replacement applied to GOOD, expected fragment of one problem line)
    (
        "unknown topology kind",
        ("kind: two_layer_clos", "kind: tree"),
        "s.yaml:1: topology.kind: unknown topology kind",
    ),
    (
        "unknown topology parameter",
        ("hosts_per_tor: 2", "hosts_per_tor: 2, speed: 4"),
        "topology.speed: unknown parameter",
    ),
    (
        "negative horizon",
        ("horizon_s: 60", "horizon_s: -1"),
        "s.yaml:3: horizon_s: input should be greater than 0",
    ),
    (
        "horizon not a number",
        ("horizon_s: 60", "horizon_s: soon"),
        "s.yaml:3: horizon_s: input should be a valid number",
    ),
    (
        "unknown policy",
        ("policy: static", "policy: statik"),
        "s.yaml:2: policy: unknown policy 'statik' (expected one of",
    ),
    (
        "unknown model",
        ("model: resnet50", "model: resnet-5000"),
        "s.yaml:5: jobs[0].model: unknown model 'resnet-5000'",
    ),
    (
        "misspelt job field",
        ("gpus: 8}", "gpus: 8, colective: ring}"),
        "s.yaml:5: jobs[0].colective: unknown field",
    ),
    ("duplicate job id", ("id: b,", "id: a,"), "s.yaml:6: jobs[1].id: duplicate job id 'a'"),
    ("unknown host", ("[h1, h2]", "[h1, h99]"), "s.yaml:6: jobs[1].hosts[1]: unknown host 'h99'"),
    ("too many GPUs", ("gpus: 8}", "gpus: 4000}"), "jobs[0].gpus: 4000 GPUs asked, the cluster has 32"),
    (
        "zero GPUs",
        ("gpus: 8}", "gpus: 0}"),
        "s.yaml:5: jobs[0].gpus: input should be greater than or equal to 1",
    ),
    (
        "unknown collective",
        ("gpus: 8}", "gpus: 8, collective: spiral}"),
        "jobs[0].collective: unknown collective 'spiral'",
    ),
    (
        "overlap out of range",
        ("gpus: 8}", "gpus: 8, overlap: 1.5}"),
        "jobs[0].overlap: input should be less than or equal to 1",
    ),
    ("no model and no profile", ("model: resnet50, ", ""), "job 'a' has no model and no compute_s"),
    (
        "job is not a mapping",
        ("  - {id: a, model: resnet50, gpus: 8}", "  - just-a-string"),
        "jobs[0]: a job must be a mapping",
    ),
    (
        "no jobs",
        (
            "jobs:\n  - {id: a, model: resnet50, gpus: 8}\n  - {id: b, model: bert-base, hosts: [h1, h2]}\n",
            "jobs: []\n",
        ),
        "jobs: no jobs (expected a non-empty jobs list or a trace section)",
    ),
    (
        "missing topology",
        ("topology: {kind: two_layer_clos, tors: 2, aggs: 2, hosts_per_tor: 2}\n", ""),
        "topology: field required",
    ),
    (
        "warm-up past horizon",
        ("horizon_s: 60", "horizon_s: 60\nwarmup_s: 90"),
        "warmup_s: warm-up 90.0 s is not before the horizon",
    ),
    (
        "warm-up at the horizon",
        ("horizon_s: 60", "horizon_s: 60\nwarmup_s: 60"),
        "warmup_s: warm-up 60.0 s is not before the horizon",
    ),
    (
        "priority class equal to the number of levels",
        ("{id: a, model: resnet50, gpus: 8}", "{id: a, model: resnet50, gpus: 8, priority: 8}"),
        "s.yaml:5: jobs[0].priority: priority 8 with 8 priority levels (expected 0 .. 7",
    ),
    (
        "a GPU given to two jobs",
        ("{id: a, model: resnet50, gpus: 8}", "{id: a, model: resnet50, hosts: [h1]}"),
        "jobs[1].hosts: GPU h1/gpu0 is also given to job 'a'",
    ),
    (
        "both iterations and duration",
        ("gpus: 8}", "gpus: 8, iterations: 5, duration_s: 9}"),
        "both iterations and duration_s given",
    ),
    (
        "gpus disagree with hosts",
        ("hosts: [h1, h2]}", "hosts: [h1, h2], gpus: 3}"),
        "jobs[1].gpus: gpus: 3 but hosts give 16 GPUs",
    ),
]


@pytest.mark.parametrize(("what", "change", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_bad_input_is_reported(what: str, change: tuple[str, str], fragment: str) -> None:
    text = GOOD.replace(*change)
    assert text != GOOD, what
    found = problems(text)
    assert any(fragment in p for p in found), f"{what}: {found}"


def test_every_problem_is_listed_at_once() -> None:
    text = GOOD.replace("policy: static", "policy: nope").replace("horizon_s: 60", "horizon_s: -3")
    text = text.replace("model: resnet50", "model: nothing")
    found = problems(text)
    assert len(found) == 3
    assert [p.split(":")[1] for p in found] == ["2", "3", "5"]  # in file order


def test_missing_file(tmp_path: Path) -> None:
    with pytest.raises(InputError) as info:
        load_scenario(tmp_path / "nope.yaml")
    assert "nope.yaml: file not found" in str(info.value)


def test_malformed_yaml_names_the_line(tmp_path: Path) -> None:
    p = tmp_path / "bad.yaml"
    p.write_text("topology: {kind: single_link\nhorizon_s: 3\n", encoding="utf-8")
    with pytest.raises(InputError) as info:
        load_scenario(p)
    assert f"{p}:" in str(info.value) and "malformed YAML" in str(info.value)


def test_top_level_not_a_mapping() -> None:
    assert any("not a mapping" in p for p in problems("- 1\n- 2\n"))


def test_yaml_12_floats_are_numbers() -> None:
    sc = scenario_from_text(
        "topology: {kind: single_link, capacity_bps: 8.0e9}\nhorizon_s: 1e2\n"
        "jobs: [{id: a, gpus: 1, compute_s: 1, comm_bytes: 1e9}]\n"
    )
    assert sc.horizon_s == 100.0
    assert float(sc.topology.capacity_bps[0]) == 8e9
