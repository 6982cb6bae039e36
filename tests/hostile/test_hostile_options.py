"""Hostile command-line options: each ends in ``error: OPTION: what (expected ...)``, exit 2, one line,
naming the option as typed (never a Python parameter name), within the time and memory limits."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.hostile._cli import assert_user_error

SCENARIO = """\
topology: {kind: single_link, capacity_bps: 8.0e9}
policy: static
horizon_s: 10
jobs:
  - {id: a, gpus: 10, compute_s: 2.0, comm_bytes: 2.0e9, priority: 0}
"""

# (case id, arguments (SCEN is replaced by a valid scenario file), fragment of the error line)
CASES: list[tuple[str, list[str], str]] = [
    # framework errors: unknown options and commands, values of the wrong type, missing arguments
    ("unknown-command", ["simulat"], "error: no such command 'simulat'"),
    ("unknown-option", ["simulate", "SCEN", "--sed", "1"], "error: --sed: no such option"),
    ("seed-not-int", ["simulate", "SCEN", "--seed", "abc"], "error: --seed: "),
    ("seed-short-not-int", ["simulate", "SCEN", "-s", "abc"], "error: -s: "),
    ("seed-equals-not-int", ["simulate", "SCEN", "--seed=1.5"], "error: --seed: "),
    ("missing-scenario", ["simulate"], "error: SCENARIO: missing"),
    ("missing-option-value", ["simulate", "SCEN", "--policy"], "error: --policy: "),
    ("extra-argument", ["simulate", "SCEN", "extra"], "unexpected extra argument"),
    ("flag-with-value", ["scenarios", "--json=3"], "error: --json: "),
    ("workers-not-int", ["compare", "SCEN", "--workers", "many"], "error: --workers: "),
    ("collective-missing-ranks", ["collective", "ring", "--bytes", "1e6"], "error: --ranks: missing"),
    # values of the right type but meaningless
    (
        "seed-negative",
        ["simulate", "SCEN", "--seed", "-3"],
        "error: --seed: seed -3 (expected an integer in 0",
    ),
    ("seed-huge", ["simulate", "SCEN", "--seed", "99999999999999999999999"], "error: --seed: "),
    ("plan-seed-negative", ["plan", "SCEN", "--seed", "-1"], "error: --seed: "),
    (
        "mode-unknown",
        ["simulate", "SCEN", "--mode", "turbo"],
        "error: --mode: unknown mode 'turbo' (expected exact or fast)",
    ),
    (
        "policy-unknown",
        ["simulate", "SCEN", "--policy", "nope"],
        "error: --policy: unknown policy 'nope' (expected one of",
    ),
    (
        "compare-policy-unknown",
        ["compare", "SCEN", "--policies", "ecmp-fair,nope"],
        "error: --policies: unknown policy 'nope'",
    ),
    ("compare-policies-empty", ["compare", "SCEN", "--policies", ","], "error: --policies: no policy named"),
    (
        "compare-scheduler",
        ["compare", "SCEN", "--job-scheduler", "nope"],
        "error: --job-scheduler: unknown placement 'nope'",
    ),
    ("compare-mode", ["compare", "SCEN", "--mode", "slow"], "error: --mode: "),
    (
        "compare-workers-zero",
        ["compare", "SCEN", "--workers", "0"],
        "error: --workers: 0 workers (expected 1 .. 256)",
    ),
    ("compare-workers-huge", ["compare", "SCEN", "--workers", "100000"], "error: --workers: "),
    (
        "collective-ranks-huge",
        ["collective", "ring", "--ranks", "1000000000", "--bytes", "1e9"],
        "error: --ranks: 1000000000",
    ),
    ("collective-ranks-zero", ["collective", "ring", "--ranks", "0", "--bytes", "1"], "error: --ranks: "),
    ("collective-bytes-inf", ["collective", "ring", "--ranks", "4", "--bytes", "inf"], "error: --bytes: "),
    (
        "collective-bytes-overflow",
        ["collective", "ring", "--ranks", "4", "--bytes", "1e999"],
        "error: --bytes: ",
    ),
    ("collective-bytes-nan", ["collective", "ring", "--ranks", "4", "--bytes", "nan"], "error: --bytes: "),
    (
        "collective-bytes-negative",
        ["collective", "ring", "--ranks", "4", "--bytes", "-1"],
        "error: --bytes: ",
    ),
    (
        "collective-unknown",
        ["collective", "gossip", "--ranks", "4", "--bytes", "1"],
        "error: ALGORITHM: unknown collective algorithm 'gossip'",
    ),
    (
        "collective-param-huge",
        ["collective", "ps", "--ranks", "8", "--bytes", "1e9", "-p", "servers=100000000"],
        "error: --param: servers=100000000",
    ),
    ("intrajob-credit-inf", ["intrajob", "bert-large", "--credit-mb", "inf"], "error: --credit-mb: "),
    ("intrajob-sweep-huge", ["intrajob", "bert-large", "--sweep", "1e-300:1e300"], "error: --sweep: "),
    ("vclos-queue", ["vclos-experiment", "vclos-table5-512", "--queue", "nope"], "error: --queue: "),
    ("vclos-policies", ["vclos-experiment", "vclos-table5-512", "--policies", "nope"], "error: --policies: "),
    ("byteps-model", ["byteps", "--gpu-machines", "4", "--model", "nope"], "error: --model: unknown model"),
    ("byteps-bytes-inf", ["byteps", "--gpu-machines", "4", "--bytes", "inf"], "error: --bytes: "),
    (
        "byteps-bandwidth-zero",
        ["byteps", "--gpu-machines", "4", "--bytes", "1e6", "--bandwidth-gbps", "0"],
        "error: --bandwidth-gbps: ",
    ),
    (
        "byteps-bandwidth-inf",
        ["byteps", "--gpu-machines", "4", "--bytes", "1e6", "--bandwidth-gbps", "inf"],
        "error: --bandwidth-gbps: ",
    ),
    (
        "byteps-cpus-negative",
        ["byteps", "--gpu-machines", "4", "--cpu-machines", "-1", "--bytes", "1e6"],
        "error: --cpu-machines: ",
    ),
    ("intrajob-points-huge", ["intrajob", "bert-large", "--points", "1000000000"], "error: --points: "),
    (
        "intrajob-bandwidth-inf",
        ["intrajob", "bert-large", "--bandwidth-gbps", "inf"],
        "error: --bandwidth-gbps: ",
    ),
    ("intrajob-sweep-reversed", ["intrajob", "bert-large", "--sweep", "5:1"], "error: --sweep: "),
    ("intrajob-target", ["intrajob", "bert-large", "--target", "2"], "error: --target: "),
    ("intrajob-partition-zero", ["intrajob", "bert-large", "--partition-mb", "0"], "error: --partition-mb: "),
    ("intrajob-packet-negative", ["intrajob", "bert-large", "--packet-kb", "-1"], "error: --packet-kb: "),
    ("intrajob-unknown-model", ["intrajob", "gpt-17"], "gpt-17"),
    ("hash-tasks-huge", ["hash-collisions", "--tasks", "1000000000"], "error: --tasks: "),
    ("hash-seed-negative", ["hash-collisions", "--seed", "-1"], "error: --seed: "),
    ("hash-sizes-text", ["hash-collisions", "--sizes", "x"], "error: --sizes: "),
    ("hash-sizes-huge", ["hash-collisions", "--sizes", "1000000000"], "error: --sizes: "),
    ("microbench-cases-huge", ["microbench", "--cases", "1000000000"], "error: --cases: "),
    ("microbench-seed-negative", ["microbench", "--seed", "-1"], "error: --seed: "),
    (
        "vclos-tasks-huge",
        ["vclos-experiment", "vclos-table5-512", "--tasks", "1000000000"],
        "error: --tasks: ",
    ),
    ("vclos-workers-zero", ["vclos-experiment", "vclos-table5-512", "--workers", "0"], "error: --workers: "),
    ("vclos-seed-negative", ["vclos-experiment", "vclos-table5-512", "--seed", "-5"], "error: --seed: "),
    ("vclos-lambda-inf", ["vclos-experiment", "vclos-table5-512", "--lambda", "inf"], "error: --lambda: "),
    (
        "topology-leaves-huge",
        ["topology", "show", "leaf_spine", "-p", "leaves=100000"],
        "topology.leaves: 100000 is larger than the limit",
    ),
    (
        "topology-fabric-huge",
        ["topology", "show", "two_layer_clos", "-p", "tors=10000"],
        "the fabric would have about",
    ),
    (
        "topology-inf",
        ["topology", "show", "single_link", "-p", "capacity_bps=1e999"],
        "topology.capacity_bps: not a finite number",
    ),
    ("topology-bool", ["topology", "show", "leaf_spine", "-p", "leaves=true"], "topology.leaves: "),
    (
        "topology-param-form",
        ["topology", "show", "leaf_spine", "-p", "leaves"],
        "error: --param: bad parameter 'leaves'",
    ),
    ("topology-kind", ["topology", "show", "tree"], "unknown topology kind 'tree'"),
    ("topology-params-kind", ["topology", "params", "tree"], "unknown topology kind 'tree'"),
    ("topology-dev-zero-csv", ["topology", "show", "/dev/zero.csv"], "file not found"),
    ("scenario-unknown-name", ["simulate", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
    ("plan-unknown-name", ["plan", "no-such-scenario"], "unknown scenario 'no-such-scenario'"),
]


@pytest.fixture
def scenario(tmp_path: Path) -> str:
    path = tmp_path / "s.yaml"
    path.write_text(SCENARIO, encoding="utf-8")
    return str(path)


@pytest.mark.parametrize(("case", "args", "fragment"), CASES, ids=[c[0] for c in CASES])
def test_option_errors(scenario: str, case: str, args: list[str], fragment: str) -> None:
    line = assert_user_error([scenario if a == "SCEN" else a for a in args], fragment)
    for python_name in ("size_bytes", "model_bytes", "bandwidth_bps", "partition_bytes", "job_scheduler"):
        assert python_name not in line, line


@pytest.mark.parametrize(
    ("case", "out", "fragment"),
    [
        ("out-is-a-file", "FILE", "exists and is not a folder"),
        ("out-parent-is-a-file", "FILE/sub", "is not a folder"),
        ("out-dev-null", "/dev/null", "exists and is not a folder"),
    ],
)
def test_out_is_checked_before_the_run(
    tmp_path: Path, scenario: str, case: str, out: str, fragment: str
) -> None:
    (tmp_path / "FILE").write_text("x", encoding="utf-8")
    target = out if out.startswith("/") else str(tmp_path / out)
    for cmd in (["simulate", scenario], ["compare", scenario, "--policies", "fair"]):
        line = assert_user_error([*cmd, "--out", target], fragment)
        assert line.startswith("error: --out: "), line


def test_ray_address_without_ray_is_refused_before_work(scenario: str) -> None:
    import importlib.util

    if importlib.util.find_spec("ray") is not None:
        pytest.skip("ray is installed here")
    assert_user_error(["compare", scenario, "--ray", "local"], "error: --ray: Ray is not installed")
