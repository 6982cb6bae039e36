"""``compare --json``: GPU time, who pays and ties, against an independent reading of the results."""

from __future__ import annotations

import json
import math

from typer.testing import CliRunner

from commsched.cli.app import app

runner = CliRunner()
POLICIES = ("ecmp-fair", "crux-full", "crux-ps-pa")


def _compare() -> dict:  # type: ignore[type-arg]
    res = runner.invoke(
        app, ["compare", "crux-fig19", "--policies", ",".join(POLICIES), "--mode", "fast", "--json"]
    )
    assert res.exit_code == 0, res.stderr
    return json.loads(res.stdout)  # type: ignore[no-any-return]


def test_gpu_hours_recovered_ties_and_the_ideal() -> None:
    obj = _compare()
    pols = obj["policies"]
    assert obj["baseline"] == "ecmp-fair" and list(pols) == list(POLICIES)
    window_h = 1.0  # crux-fig19: 96 GPUs, measured over its whole horizon (no warm-up)
    for name, p in pols.items():
        # useful GPU-hours: utilisation x GPUs x window, independently of how the tool sums them
        assert math.isclose(
            p["gpu_hours"], p["gpu_utilization"] * 96 * window_h * obj_horizon_h(), rel_tol=1e-9
        )
        assert (
            abs(obj["recovered_gpu_hours"][name] - (p["gpu_hours"] - pols["ecmp-fair"]["gpu_hours"])) < 1e-6
        )
        assert {"id", "gpus", "priority_class", "mean_iteration_s", "ideal_iteration_s", "slowdown"} <= set(
            p["job_results"][0]
        )
        for j in p["job_results"]:
            assert math.isclose(j["slowdown"], j["mean_iteration_s"] / j["ideal_iteration_s"], rel_tol=1e-6)
    assert obj["recovered_gpu_hours"]["ecmp-fair"] == 0.0
    ideal = {j["id"]: j["ideal_iteration_s"] for j in pols["ecmp-fair"]["job_results"]}
    for p in pols.values():  # one reference for every policy
        assert {j["id"]: j["ideal_iteration_s"] for j in p["job_results"]} == ideal
    # ties: crux-full and crux-ps-pa give this scenario the same routes and classes' order
    u = {n: p["gpu_utilization"] for n, p in pols.items()}
    assert abs(u["crux-full"] - u["crux-ps-pa"]) < 1e-9 and u["crux-full"] - u["ecmp-fair"] > 0.01
    assert obj["ties"] == [["crux-full", "crux-ps-pa"]]
    # ECMP's collision on gpt is cost against the ideal: it loses GPU-hours, the spreading policies none
    assert pols["ecmp-fair"]["gpu_hours_lost"] > 0.1 and pols["crux-full"]["gpu_hours_lost"] < 1e-6
    # who pays: every job, sorted by iteration-time ratio, the ratio read from the per-job results
    rows = obj["who_pays"]["crux-full"]
    mean = {n: {j["id"]: j["mean_iteration_s"] for j in p["job_results"]} for n, p in pols.items()}
    assert sorted(r["id"] for r in rows) == sorted(ideal)
    for r in rows:
        assert math.isclose(
            r["iteration_ratio"], mean["crux-full"][r["id"]] / mean["ecmp-fair"][r["id"]], rel_tol=1e-6
        )
    assert [r["iteration_ratio"] for r in rows] == sorted((r["iteration_ratio"] for r in rows), reverse=True)


def obj_horizon_h() -> float:
    from commsched.io.shipped import resolve_scenario

    return resolve_scenario("crux-fig19").horizon_s / 3600.0


def test_the_headline_leads_with_gpu_hours_and_names_the_tie() -> None:
    res = runner.invoke(app, ["compare", "crux-fig19", "--policies", ",".join(POLICIES), "--mode", "fast"])
    assert res.exit_code == 0, res.stderr
    text = " ".join(res.stdout.split())
    assert "crux-full and crux-ps-pa (tied: GPU utilisation within 0.0005) recover" in text
    assert "GPU-hours" in text and "who pays: crux-full against ecmp-fair" in text
