"""The fast mode against the exact mode on crowded, oversubscribed, multi-class components.

The property the fast mode is held to (``docs/simulator.md``, "Two modes"): per case, utilisation of the
allocated GPUs within 0.01 and per-job mean iteration time within 4 % at the 90th percentile and 10 % at
worst, over every job that completes an iteration in exact mode (slowed and starved jobs included; one
with none in fast mode counts as an error of 1.0), only jobs whose exact result is itself not
reproducible under a 1 ms jitter of the arrivals left out (:mod:`commsched.testing.crowded`).
Seeds 0-4 here, each under a policy with several classes (``static``: the jobs' own priorities, 2-4
levels; ``crux-full``: Crux's ranking compressed to the levels), on horizons sized to keep the module
within about a minute; ``benchmarks/fast_vs_exact_crowded.py`` runs seeds 0-199 under three policies.
The same cases with the analytic fluid on break the bounds: the test can fail.
"""

from __future__ import annotations

from functools import cache

import pytest

from commsched.scheduling.policies import communication_policies
from commsched.sim.results.records import Mode, SimResult
from commsched.testing.crowded import Agreement, CrowdedCase, compare, crowded_case, jittered, run_case

#: (seed, policy, horizon in seconds): the horizons keep each case to a few CPU-seconds per run
CASES = (
    (0, "static", 60.0),
    (1, "crux-full", 30.0),
    (2, "static", 60.0),
    (3, "crux-full", 60.0),
    (4, "static", 60.0),
)


@cache
def _exact(seed: int, policy: str, horizon_s: float) -> tuple[CrowdedCase, SimResult, tuple[SimResult, ...]]:
    case = crowded_case(seed, horizon_s=horizon_s)
    fn = communication_policies()[policy]
    exact, _ = run_case(case, fn, Mode.EXACT)
    twins = tuple(run_case(jittered(case, k), fn, Mode.EXACT)[0] for k in (1, 2))
    return case, exact, twins


@cache
def _fast(seed: int, policy: str, horizon_s: float, fluid_min_jobs: int | None = None) -> SimResult:
    case = crowded_case(seed, horizon_s=horizon_s)
    return run_case(case, communication_policies()[policy], Mode.FAST, fluid_min_jobs=fluid_min_jobs)[0]


def _agreement(seed: int, policy: str, horizon_s: float, fluid_min_jobs: int | None = None) -> Agreement:
    case, exact, twins = _exact(seed, policy, horizon_s)
    fast = _fast(seed, policy, horizon_s, fluid_min_jobs)
    return compare(case, fast=fast, exact=exact, twins=twins, policy_name=policy)


def _describe(a: Agreement) -> str:
    return (
        f"seed {a.seed} {a.policy}: utilisation {a.util_diff:+.4f}, per-job p90 {a.iter_p90:.2%}, "
        f"max {a.iter_max:.2%} ({len(a.steady_errors)} jobs, {a.chaotic} chaotic)"
    )


@pytest.mark.parametrize(("seed", "policy", "horizon_s"), CASES)
def test_fast_mode_within_its_bounds_on_crowded_components(seed: int, policy: str, horizon_s: float) -> None:
    a = _agreement(seed, policy, horizon_s)
    assert a.holds, _describe(a)
    assert len(a.steady_errors) >= 5  # the bounds are held over enough jobs to mean something


def test_fast_mode_extrapolates_crowded_components() -> None:
    """Not a vacuous property: on some of the cases the fast mode does extrapolate a good share of the
    jobs' time, with fewer events than the exact run.

    (Each stretch is bounded by the detail it was measured over and checked by the detail after it, so
    on these short horizons a good part of the run stays in detail; on the others no regime holds long
    enough to be measured: they run in detail, which is the fast mode saying it cannot be both fast and
    right there.)
    """
    runs = [(_fast(*c), _exact(*c)[1]) for c in CASES]
    skipped = [f.extrapolated_job_fraction for f, _ in runs]
    assert sum(x >= 0.25 for x in skipped) >= 2, skipped
    assert all(f.events < e.events for f, e in runs if f.extrapolated_job_fraction >= 0.25)


def test_the_analytic_fluid_breaks_the_bounds_on_crowded_components() -> None:
    """The fluid (opt-in, ``fluid_min_jobs``) is outside the bound here, which is why it is off."""
    ags = [_agreement(*c, fluid_min_jobs=10) for c in CASES]
    assert not all(a.holds for a in ags), [_describe(a) for a in ags]
