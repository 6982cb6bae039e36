"""The top-level API: simulate, compare, plan, scenarios, custom and registered policies."""

from __future__ import annotations

import json

import pytest
from typer.testing import CliRunner

import commsched as cs
from commsched.cli.app import app
from commsched.errors import InputError, UnknownNameError
from commsched.io.numbers import tidy
from commsched.scheduling.basic import fair_policy
from commsched.testing import toy_job
from commsched.topology import single_link


def shortest_first(state: cs.ClusterState, ctx: cs.PolicyContext) -> cs.Decisions:
    """Fewest bytes per iteration first (classes 0..K-1)."""
    order = sorted(state.jobs, key=lambda j: (j.spec.profile.sync_bytes, str(j.id)))
    last = state.priority_levels - 1
    return cs.Decisions(classes={j.id: min(k, last) for k, j in enumerate(order)})


def test_acceptance_api_equals_cli_json() -> None:
    r = cs.simulate(cs.load_scenario("crux-fig19"), policy="crux-full")
    out = CliRunner().invoke(app, ["simulate", "crux-fig19", "--policy", "crux-full", "--json"])
    assert out.exit_code == 0, out.output
    # the command line prints floats to 12 significant digits (no floating-point noise at the edge)
    assert json.loads(out.stdout)["gpu_utilization"] == float(f"{r.gpu_utilization:.12g}")


def test_every_top_level_name_resolves_and_is_documented_with_an_example() -> None:
    missing = []
    for name in cs.__all__:
        if name == "__version__":
            continue
        obj = getattr(cs, name)
        doc = getattr(obj, "__doc__", "") or ""
        if "Examples\n" not in doc or ">>>" not in doc:
            missing.append(name)
    assert missing == []
    assert set(cs.__all__) == {"__version__", *cs._EXPORTS}
    with pytest.raises(AttributeError):
        _ = cs.no_such_name


def test_layer_packages_export_what_they_list() -> None:
    import commsched.experiments
    import commsched.io
    import commsched.scheduling
    import commsched.sim
    import commsched.topology
    import commsched.workload

    for pkg in (
        commsched.topology,
        commsched.workload,
        commsched.scheduling,
        commsched.sim,
        commsched.io,
        commsched.experiments,
    ):
        assert pkg.__all__ == sorted(pkg.__all__), pkg.__name__
        for name in pkg.__all__:
            assert getattr(pkg, name) is not None, f"{pkg.__name__}.{name}"


def test_a_plain_function_runs_as_a_policy_and_is_deterministic() -> None:
    sc = cs.load_scenario("crux-fig19")
    a = cs.simulate(sc, policy=shortest_first, mode="fast", seed=3)
    b = cs.simulate(sc, policy=shortest_first, mode="fast", seed=3)
    assert a.policy == "shortest_first"
    assert a.gpu_utilization == b.gpu_utilization
    assert [j.mean_iteration_s for j in a.jobs] == [j.mean_iteration_s for j in b.jobs]
    # the policy is what ran: GPT (most bytes) below the BERT jobs slows GPT down more than fair sharing
    fair = cs.simulate(sc, policy="fair", mode="fast", seed=3)
    gpt = {r.policy: next(j for j in r.jobs if j.id == "gpt").mean_iteration_s for r in (a, fair)}
    assert gpt["shortest_first"] > gpt["fair"]


def test_the_same_function_gives_the_same_result_as_the_registered_name() -> None:
    sc = cs.load_scenario("crux-fig19")
    assert (
        cs.simulate(sc, policy=fair_policy, mode="fast").gpu_utilization
        == cs.simulate(sc, policy="fair", mode="fast").gpu_utilization
    )


def test_compare_mixes_names_and_callables_serial_and_in_processes() -> None:
    sc = cs.load_scenario("crux-fig19")
    serial = cs.compare(sc, ["ecmp-fair", shortest_first], mode="fast")
    assert [s.policy for s in serial.summaries] == ["ecmp-fair", "shortest_first"]
    pytest.importorskip("joblib")
    parallel = cs.compare(sc, ["ecmp-fair", shortest_first], mode="fast", workers=2)
    assert [s.gpu_utilization for s in parallel.summaries] == [s.gpu_utilization for s in serial.summaries]


def test_compare_of_names_matches_simulate() -> None:
    sc = cs.load_scenario("crux-fig19")
    cmp = cs.compare(sc, ["ecmp-fair", "crux-full"], mode="fast")
    for s in cmp.summaries:
        assert s.gpu_utilization == cs.simulate(sc, policy=s.policy, mode="fast").gpu_utilization


def test_register_policy_in_process_and_in_a_scenario_file(tmp_path: pytest.TempPathFactory) -> None:
    cs.register_policy("test:stf", shortest_first)
    try:
        with pytest.raises(ValueError, match="already registered"):
            cs.register_policy("test:stf", fair_policy)
        with pytest.raises(ValueError, match="built in"):
            cs.register_policy("crux-full", fair_policy)
        sc = cs.load_scenario("crux-fig19")
        by_name = cs.simulate(sc, policy="test:stf", mode="fast")
        assert by_name.policy == "test:stf"
        assert by_name.gpu_utilization == cs.simulate(sc, policy=shortest_first, mode="fast").gpu_utilization
        # a registered name is valid in scenario files, and compare runs it in worker processes too
        f = tmp_path / "s.yaml"  # type: ignore[operator]
        f.write_text(
            "topology: {kind: single_link, capacity_bps: 8.0e9}\npolicy: test:stf\nhorizon_s: 20\n"
            "jobs:\n  - {id: a, gpus: 10, compute_s: 2.0, comm_bytes: 2.0e9}\n"
            "  - {id: b, gpus: 10, compute_s: 1.0, comm_bytes: 1.0e9}\n"
        )
        r = cs.simulate(f)
        assert r.policy == "test:stf"
        assert {j.id: j.priority_class for j in r.jobs} == {"a": 1, "b": 0}
        pytest.importorskip("joblib")
        cmp = cs.compare(f, ["test:stf", "fair"], workers=2)
        assert cmp.summaries[0].gpu_utilization == r.gpu_utilization
    finally:
        cs.unregister_policy("test:stf")
    with pytest.raises(UnknownNameError):
        cs.simulate("crux-fig19", policy="test:stf")


def test_custom_placement_function() -> None:
    from commsched.topology import two_layer_clos

    def never(request: cs.PlacementRequest) -> cs.Allocation | None:
        return None  # nothing ever fits: every job placed by policy waits

    def last_gpus(request: cs.PlacementRequest) -> cs.Allocation | None:
        free = sorted(request.free_gpus)
        return cs.Allocation(gpus=tuple(free[-request.job.gpus :])) if len(free) >= request.job.gpus else None

    job = toy_job("a", compute_s=0.5, comm_bytes=1e9, gpus=16)
    small = cs.build_scenario(two_layer_clos(tors=2, aggs=2), [job], horizon_s=10.0, policy="fair")
    waiting = cs.simulate(small, placement=never, mode="fast")
    assert [j.start_s for j in waiting.jobs] == [None] and waiting.gpu_utilization == 0.0
    placed = cs.simulate(small, placement=last_gpus, mode="fast")
    assert placed.jobs[0].start_s == 0.0 and placed.gpu_utilization > 0
    assert placed.jobs[0].placement == tuple(sorted(str(g) for g in small.topology.gpus)[-16:])


def test_build_scenario_from_objects_matches_the_file() -> None:
    jobs = [
        toy_job("a", compute_s=2.0, comm_bytes=2e9, gpus=10),
        toy_job("b", compute_s=1.0, comm_bytes=1e9, gpus=10),
    ]
    built = cs.build_scenario(single_link(capacity_bps=8e9), jobs, horizon_s=60.0, policy="fair")
    r = cs.simulate(built)
    assert r.policy == "fair" and len(r.jobs) == 2
    # one link, fair share: both jobs progress, neither alone
    assert all(j.iterations > 0 for j in r.jobs)
    with pytest.raises(InputError, match="unknown scenario setting"):
        cs.build_scenario(single_link(), jobs, horizon_s=1.0, polcy="fair")


def test_plan_matches_the_cli_and_takes_a_function() -> None:
    rep = cs.plan("crux-fig19", "crux-full")
    out = CliRunner().invoke(
        app, ["plan", "src/commsched/scenarios/crux-fig19.yaml", "-p", "crux-full", "--json"]
    )
    assert out.exit_code == 0, out.output
    # the command line prints floats to 12 significant digits
    assert json.loads(out.stdout) == tidy(cs.plan_json(rep))
    mine = cs.plan("crux-fig19", shortest_first)
    assert mine.policy == "shortest_first" and mine.intensity == {}
    assert mine.decisions.class_of("gpt") == 3


def test_bad_policies_are_one_line_errors() -> None:
    with pytest.raises(UnknownNameError, match=r"unknown policy 'nope' \(expected one of .*crux-full"):
        cs.simulate("crux-fig19", policy="nope")
    with pytest.raises(InputError, match="is not a policy"):
        cs.simulate("crux-fig19", policy=42)  # type: ignore[arg-type]
    with pytest.raises(InputError, match="unknown mode"):
        cs.simulate("crux-fig19", mode="slow")
    with pytest.raises(InputError, match="listed twice"):
        cs.compare("crux-fig19", [shortest_first, shortest_first])
    out = CliRunner().invoke(app, ["simulate", "crux-fig19", "--policy", "nope"])
    assert out.exit_code == 2 and "--policy" in out.output


def test_a_scenario_built_from_a_trace_equals_the_same_scenario_file(
    tmp_path: pytest.TempPathFactory,
) -> None:
    from commsched.topology import two_layer_clos
    from commsched.workload.traces import SyntheticParams, synthetic_trace, to_job_specs

    f = tmp_path / "trace.yaml"  # type: ignore[operator]
    f.write_text(
        "topology: {kind: two_layer_clos, tors: 2, aggs: 2}\npolicy: crux-full\nmode: fast\nhorizon_s: 1800\n"
        "trace: {kind: synthetic, jobs: 12, days: 0.02, seed: 1}\n"
    )
    from_file = cs.load_scenario(f)
    topo = two_layer_clos(tors=2, aggs=2)
    trace = synthetic_trace(SyntheticParams(jobs=12, days=0.02, cluster_gpus=topo.n_gpus, seed=1))
    built = cs.build_scenario(topo, to_job_specs(trace), horizon_s=1800.0, policy="crux-full", mode="fast")
    assert [j.spec for j in built.jobs] == sorted((j.spec for j in from_file.jobs), key=lambda s: s.arrival_s)
    a, b = cs.simulate(from_file), cs.simulate(built)
    assert a.gpu_utilization == b.gpu_utilization and a.gpu_utilization > 0
