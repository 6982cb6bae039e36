"""Grouped jobs through scenario files, the CLI, every policy of the catalogue and the invariant checks."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from commsched.api.runner import simulate_scenario
from commsched.catalog import policy_registry
from commsched.cli.app import app
from commsched.io.shipped import resolve_scenario
from commsched.scheduling.state import ClusterState, PlacedJob
from commsched.testing import check_policy
from commsched.topology.builders import leaf_spine
from commsched.workload import job_from_model
from commsched.workload.grouped_jobs import grouped_job
from commsched.workload.parallel import ParallelSpec

runner = CliRunner()
BUILT_IN = [n for n in policy_registry().names() if ":" not in n]  # plug-ins are named pkg:name
KINDS = ["tp", "pp", "dp", "ep"]


@pytest.mark.parametrize("policy", BUILT_IN)
def test_every_policy_runs_the_shipped_llm_scenario(policy: str) -> None:
    sc = resolve_scenario("llm-h200")  # 30 s: under Sincronia, mixtral's iteration takes 29.6 s
    res = simulate_scenario(sc, policy=policy)
    by_id = {j.id: j for j in res.jobs}
    assert set(by_id) == {"gpt13b", "mixtral", "llama65b", "gpt350m", "bert"}
    # OCS-vClos finds no contention-free placement for gpt13b while the others run: it waits
    waiting = {"gpt13b"} if policy == "ocs-vclos" else set()
    assert all(j.iterations > 0 for j in res.jobs if j.id not in waiting), [
        (j.id, j.iterations) for j in res.jobs
    ]
    assert all(by_id[k].start_s is None for k in waiting)
    for j in res.jobs:
        fb = dict(j.fabric_bytes_per_iteration)
        assert list(fb) == KINDS
        assert j.id in waiting or fb["tp"] == 0.0  # every TP group fits in a host (unplaced: no bytes)
    assert dict(by_id["bert"].fabric_bytes_per_iteration)["pp"] == 0.0


def _write(tmp_path: Path, jobs: str) -> Path:
    p = tmp_path / "s.yaml"
    p.write_text(
        "topology: {kind: two_layer_clos, tors: 4, aggs: 2, hosts_per_tor: 4}\n"
        "policy: crux-full\nhorizon_s: 5\njobs:\n" + jobs,
        encoding="utf-8",
    )
    return p


def test_simulate_json_reports_fabric_bytes_per_group_kind(tmp_path: Path) -> None:
    path = _write(
        tmp_path,
        "  - {id: g, model: gpt3-crux, gpus: 64, parallel: {tp: 8, pp: 2, dp: 4}}\n"
        "  - {id: m, model: mixtral-8x7b@h200, gpus: 32, parallel: {tp: 2, dp: 16, ep: 8}}\n"
        "  - {id: d, model: bert-large, gpus: 16}\n",
    )
    res = runner.invoke(app, ["simulate", str(path), "--json"])
    assert res.exit_code == 0, res.stderr
    jobs = {j["id"]: j for j in json.loads(res.stdout)["jobs"]}
    g, m, d = (jobs[k]["fabric_bytes_per_iteration"] for k in "gmd")
    assert list(g) == KINDS and g["tp"] == 0 and g["pp"] > 0 and g["dp"] > 0 and g["ep"] == 0
    assert m["ep"] > 0 and m["pp"] == 0
    assert d["dp"] > 0 and d["tp"] == d["pp"] == d["ep"] == 0


@pytest.mark.parametrize(
    ("parallel", "model", "message"),
    [
        ("{tp: 8, pp: 2, dp: 5}", "gpt3-crux", "jobs[0].parallel.dp: tp x pp x dp = 8 x 2 x 5 = 80"),
        (
            "{tp: 2, dp: 32, ep: 3}",
            "mixtral-8x7b@h200",
            "jobs[0].parallel.ep: ep = 3 does not divide dp = 32",
        ),
        ("{tp: 2, dp: 32, ep: 2}", "gpt3-crux", "jobs[0].parallel.ep: ep = 2 for a model without MoE layers"),
        ("{tp: 8, dp: 8}", "resnet50", "jobs[0].parallel: model 'resnet50' has no transformer shape"),
        ("{tp: 8, dp: 8, sp: 2}", "gpt3-crux", "jobs[0].parallel.sp"),
        ("{tp: 0, dp: 8}", "gpt3-crux", "jobs[0].parallel.tp"),
    ],
)
def test_bad_parallelism_is_one_clear_line_and_exit_2(
    tmp_path: Path, parallel: str, model: str, message: str
) -> None:
    path = _write(tmp_path, f"  - {{id: g, model: {model}, gpus: 64, parallel: {parallel}}}\n")
    res = runner.invoke(app, ["simulate", str(path), "--json"])
    assert res.exit_code == 2
    lines = [ln for ln in res.stderr.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: ") and f"s.yaml:5: {message}" in lines[0], lines
    assert "Traceback" not in res.output


def test_aicb_job_takes_its_groups_from_the_log(tmp_path: Path) -> None:
    log = Path(
        "/work/shared/data/aicb-workloads/physical/model_workload/L7B-M1-C04_Llama7B_megatron_tp2_pp1_mbs1.csv"
    )
    if not log.exists():
        pytest.skip("the AICB workloads are not on this machine")
    path = _write(tmp_path, f"  - {{id: m, aicb: {log}, model: llama-7b@h200, iterations: 1}}\n")
    res = runner.invoke(app, ["simulate", str(path), "--json"])
    assert res.exit_code == 0, res.stderr
    (job,) = json.loads(res.stdout)["jobs"]
    assert job["gpus"] == 128 and job["iterations"] == 1 and job["finished"]
    # finished: its traffic is gone from the engine, its fabric bytes follow from the placement
    fb = job["fabric_bytes_per_iteration"]
    assert fb["tp"] == 0 and fb["dp"] > 0 and fb["pp"] == fb["ep"] == 0
    bad = _write(tmp_path, f"  - {{id: m, aicb: {log}, model: llama-7b@h200, gpus: 64}}\n")
    res = runner.invoke(app, ["simulate", str(bad)])
    assert res.exit_code == 2 and "jobs[0].gpus: gpus: 64 but the log's world has 128" in res.stderr


def _grouped_state() -> ClusterState:
    """A grouped GPT (TP 8 x PP 2 over two leaves), a grouped MoE (TP 2 x DP 4, EP 2) and a flat job on a
    leaf-spine with an OCS layer (every policy of the catalogue decides on it)."""
    topo = leaf_spine(leaves=2, spines=16, gpus_per_host=8, hosts_per_leaf=2, ocs=True)
    g = grouped_job("g", "gpt3-crux", gpus=16, parallel=ParallelSpec(tp=8, pp=2, micro_batches=4))
    m = grouped_job(
        "m", "mixtral-8x7b@h200", gpus=8, parallel=ParallelSpec(tp=2, dp=4, ep=2, micro_batches=2)
    )
    d = job_from_model("d", "bert-large", gpus=8)
    h = [topo.hosts[k].gpus for k in range(4)]
    jobs = (
        PlacedJob(spec=g, gpus=h[0] + h[2]),
        PlacedJob(spec=m, gpus=h[1][:4] + h[3][:4]),
        PlacedJob(spec=d, gpus=h[1][4:] + h[3][4:]),
    )
    return ClusterState(topology=topo, jobs=jobs, priority_levels=3)


@pytest.mark.parametrize("policy", BUILT_IN)
def test_invariant_checks_hold_for_grouped_jobs(policy: str) -> None:
    rep = check_policy(
        policy,
        [_grouped_state()],
        seeds=(0,),
        simulate=policy in ("crux-full", "vclos"),
        raise_on_failure=False,
        unique_priorities=policy in ("crux-pa", "crux-ps-pa"),
    )
    assert rep.ok, rep.problems


def test_a_simai_workload_file_gives_a_job_its_groups(tmp_path: Path) -> None:
    log = Path(
        "/work/shared/data/aicb-workloads/simAI/model_workload/G13B-M1-C01_GPT13B_megatron_tp8_pp1_mbs1_A100.txt"
    )
    if not log.exists():
        pytest.skip("the AICB workloads are not on this machine")
    path = _write(tmp_path, f"  - {{id: s, aicb: {log}, model: gpt-13b@h200, gpus: 128}}\n")
    res = runner.invoke(app, ["simulate", str(path), "--json"])
    assert res.exit_code == 0, res.stderr
    (job,) = json.loads(res.stdout)["jobs"]
    fb = job["fabric_bytes_per_iteration"]
    assert job["gpus"] == 128 and job["iterations"] >= 1
    assert fb["tp"] == 0 and fb["dp"] > 0 and fb["pp"] == fb["ep"] == 0  # TP 8 inside the 8-GPU hosts


def test_compare_runs_the_shipped_llm_scenario_under_every_policy_and_the_invariants_hold() -> None:
    """``commsched compare llm-h200`` with every policy of the catalogue; then every policy decides on
    the shipped cluster as placed (pack) and ``commsched.testing`` checks its decisions."""
    res = runner.invoke(app, ["compare", "llm-h200", "--policies", ",".join(BUILT_IN), "--json"])
    assert res.exit_code == 0, res.stderr
    rows = json.loads(res.stdout)["policies"]
    assert set(rows) == set(BUILT_IN)
    for name, row in rows.items():
        assert 0.0 < row["gpu_utilization"] <= 1.0, name
    sc = resolve_scenario("llm-h200")
    placed = {j.id: j.placement for j in simulate_scenario(sc, policy="ecmp-fair").jobs}
    state = ClusterState(
        topology=sc.topology,
        jobs=tuple(PlacedJob(spec=j.spec, gpus=tuple(placed[j.spec.id])) for j in sc.jobs),
        priority_levels=sc.priority_levels,
    )
    for policy in BUILT_IN:
        rep = check_policy(
            policy,
            [state],
            seeds=(0,),
            simulate=policy == "crux-full",
            raise_on_failure=False,
            unique_priorities=policy in ("crux-pa", "crux-ps-pa"),
        )
        assert rep.ok, (policy, rep.problems)
