"""The compiled loop (``loop: compiled``) against the interpreted one, the reference: the same results,
byte for byte, on every exact-mode golden case of the default suite and on crowded cases.

Each case runs twice, once per loop, and every deterministic field of the two results (``summary_of``:
figures, per-job results, the series and per-link counters through their digests, the event count) must
be identical; each compiled run must also have handled events on its arrays (a loop that gave every event
back to Python would pass the comparison without being tested).
"""

from __future__ import annotations

from dataclasses import replace

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.api.runner import simulate_scenario
from commsched.errors import InputError
from commsched.io.shipped import resolve_scenario
from commsched.scheduling.placement import pack
from commsched.scheduling.policies import communication_policies
from commsched.sim.engine import Simulation
from commsched.sim.results.records import Loop, Mode, SimConfig
from commsched.testing.crowded import crowded_case

from .helpers import job
from .scenarios import random_jobs, small_clos, spread_jobs
from .test_golden import CASES, Case, summary_of

EXACT = [c for c in CASES if not c.slow and (c.mode or resolve_scenario(c.scenario).mode) == "exact"]


@pytest.mark.parametrize("case", [pytest.param(c, id=c.name) for c in EXACT])
def test_compiled_loop_reproduces_the_interpreted_one_on_the_goldens(case: Case) -> None:
    scenario = resolve_scenario(case.scenario)
    if case.horizon_s is not None:
        scenario = replace(scenario, horizon_s=case.horizon_s)
    ref = simulate_scenario(scenario, policy=case.policy, mode="exact")
    got = simulate_scenario(scenario, policy=case.policy, mode="exact", loop="compiled")
    assert summary_of(got) == summary_of(ref)


@pytest.mark.parametrize("seed", [0, 1, 2])
@pytest.mark.parametrize("policy", ["crux-full", "ecmp-fair"])
def test_compiled_loop_on_crowded_cases(seed: int, policy: str) -> None:
    """Crowded, oversubscribed, several classes (10-30 jobs): the hardest configurations for the cache."""
    case = crowded_case(seed)
    results, handled = [], 0
    for loop in (Loop.INTERPRETED, Loop.COMPILED):
        sim = Simulation(
            topology=case.topology,
            jobs=list(case.jobs),
            policy=communication_policies()[policy],
            placement=pack,
            config=SimConfig(horizon_s=60.0, mode=Mode.EXACT, seed=case.seed, loop=loop),
            priority_levels=case.priority_levels,
        )
        results.append(summary_of(sim.run()))
        handled = sim.compiled_events
    assert results[1] == results[0]
    assert handled > results[0]["events"] // 2  # most events ran on the arrays


def test_compiled_loop_is_exact_mode_only() -> None:
    topo = small_clos()
    with pytest.raises(InputError, match="exact mode only"):
        Simulation(
            topology=topo,
            jobs=[job("a", compute_s=0.1, comm_bytes=1e6, gpus=4)],
            policy=communication_policies()["ecmp-fair"],
            placement=pack,
            config=SimConfig(horizon_s=1.0, mode=Mode.FAST, loop=Loop.COMPILED),
        )


@settings(max_examples=12, deadline=None)
@given(
    seed=st.integers(0, 10_000),
    n_jobs=st.integers(2, 16),
    policy=st.sampled_from(["crux-full", "ecmp-fair", "sincronia", "cassini"]),
    spread=st.booleans(),
)
def test_compiled_loop_on_random_scenarios(seed: int, n_jobs: int, policy: str, spread: bool) -> None:
    """Random arrivals, sizes, overlaps and priorities (time shifts under CASSINI; jobs that finish):
    the compiled loop's run is the interpreted one's."""
    jobs = spread_jobs(seed) if spread else random_jobs(seed, n_jobs, spread_s=20.0)
    out = []
    for loop in (Loop.INTERPRETED, Loop.COMPILED):
        sim = Simulation(
            topology=small_clos(),
            jobs=jobs,
            policy=communication_policies()[policy],
            placement=pack,
            config=SimConfig(horizon_s=40.0, mode=Mode.EXACT, seed=seed, loop=loop),
        )
        out.append(summary_of(sim.run()))
    assert out[1] == out[0]
