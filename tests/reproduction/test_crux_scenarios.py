"""The shipped reproduction scenarios (crux-*): they validate, and short runs keep the paper's directions."""

from __future__ import annotations

from dataclasses import replace
from importlib import resources

import pytest
from typer.testing import CliRunner

from commsched.api.comparing import compare_named as compare
from commsched.cli.app import app
from commsched.io.shipped import resolve_scenario, shipped_names

CRUX = (
    "crux-fig19",
    "crux-fig19-bert2",
    "crux-fig19-bert4",
    "crux-fig20",
    "crux-fig23-clos",
    "crux-fig23-clos-4agg",
    "crux-fig23-clos-dense",
    "crux-fig23-double-sided",
    "crux-fig25-job-schedulers",
)
MAIN_POLICIES = (
    "ecmp-fair",
    "sincronia",
    "varys",
    "taccl-star",
    "cassini",
    "crux-pa",
    "crux-ps-pa",
    "crux-full",
)


def test_reproduction_scenarios_are_shipped() -> None:
    assert set(CRUX) <= set(shipped_names())


@pytest.mark.parametrize("name", shipped_names())
def test_every_shipped_scenario_validates(name: str) -> None:
    sc = resolve_scenario(name)
    assert sc.jobs
    assert sc.topology.n_gpus > 0


@pytest.mark.parametrize("name", CRUX)
def test_validate_command_accepts_the_shipped_file(name: str) -> None:
    path = resources.files("commsched") / "scenarios" / f"{name}.yaml"
    result = CliRunner().invoke(app, ["validate", str(path)])
    assert result.exit_code == 0, result.output


@pytest.mark.parametrize("name", [n for n in CRUX if "fig23" in n or "fig25" in n])
def test_trace_scenarios_are_at_paper_scale(name: str) -> None:
    sc = resolve_scenario(name)
    assert sc.topology.n_gpus >= 2000
    assert sc.horizon_s >= 86_400
    assert max(j.spec.arrival_s for j in sc.jobs) > 0.9 * 86_400


def test_fig19_crux_full_speeds_up_gpt_and_raises_utilisation() -> None:
    sc = replace(resolve_scenario("crux-fig19"), horizon_s=20.0)
    cmp = compare(sc, ("ecmp-fair", "crux-full"))
    base, crux = cmp.results
    it = {p.policy: {str(j.id): j.mean_iteration_s for j in p.jobs} for p in (base, crux)}
    assert it["crux-full"]["gpt"] < 0.95 * it["ecmp-fair"]["gpt"]
    for job in ("bert1", "bert2", "bert3"):
        assert it["crux-full"][job] <= 1.03 * it["ecmp-fair"][job]
    assert crux.allocated_gpu_utilization > base.allocated_gpu_utilization


def test_tiny_fig23_runs_every_main_policy() -> None:
    full = resolve_scenario("crux-fig23-clos")
    sc = replace(full, jobs=full.jobs[:6], horizon_s=1800.0, warmup_s=0.0, mode="fast")
    cmp = compare(sc, MAIN_POLICIES)
    assert [s.policy for s in cmp.summaries] == list(MAIN_POLICIES)
    for s in cmp.summaries:
        assert 0.0 < s.gpu_utilization <= 1.0
        assert s.jobs == 6


@pytest.mark.slow
def test_first_fit_reproduces_the_traces_contention_and_pack_removes_it() -> None:
    # Crux Fig. 6: 51 % of the trace's GPUs belong to jobs at risk of contention (sharing a link with
    # another job). On the fig23 trace's first 8 hours, first-fit (the production scheduler) puts about
    # half of the GPUs at risk; best-fit packing isolates the jobs almost completely.
    full = resolve_scenario("crux-fig23-clos")
    end = 8 * 3600.0
    sc = replace(full, jobs=tuple(j for j in full.jobs if j.spec.arrival_s < end), horizon_s=end)
    shares = {}
    for sched in ("first-fit", "pack"):
        (res,) = compare(sc, ("ecmp-fair",), job_scheduler=sched).results
        started = [j for j in res.jobs if j.start_s is not None]
        at_risk = sum(j.gpus for j in started if j.shared_links)
        shares[sched] = at_risk / sum(j.gpus for j in started)
    assert 0.35 <= shares["first-fit"] <= 0.65
    assert shares["pack"] <= 0.05
