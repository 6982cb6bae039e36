"""Replay one scenario under several named policies and compare them (the main job of commsched).

Each policy runs in its own simulation on the same cluster and jobs; runs are spread over local cores
(joblib) or a Ray cluster (:func:`commsched.experiments.spread.spread`). The records are
:mod:`commsched.sim.results.comparison`'s.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from commsched.api.runner import simulate_scenario
from commsched.errors import InputError
from commsched.experiments.spread import spread
from commsched.io.scenario import Scenario
from commsched.sim.results.comparison import Comparison, summarise_policy
from commsched.sim.results.records import SimResult


def _run_one(scenario: Scenario, policy: str, job_scheduler: str | None, mode: str | None) -> SimResult:
    return simulate_scenario(scenario, policy=policy, placement=job_scheduler, mode=mode)


def _by_name(progress: Callable[[str], None], policies: Sequence[str]) -> Callable[[int, SimResult], None]:
    def done(i: int, _result: SimResult) -> None:
        progress(policies[i])

    return done


def compare_named(
    scenario: Scenario,
    policies: Sequence[str],
    *,
    job_scheduler: str | None = None,
    mode: str | None = None,
    workers: int = 1,
    ray_address: str | None = None,
    progress: Callable[[str], None] | None = None,
) -> Comparison:
    """Simulate ``scenario`` once per policy; in parallel when ``workers > 1`` or ``ray_address`` is given.

    ``progress`` receives each policy's name as its run finishes. The results are in the order of
    ``policies`` and equal to a ``workers=1`` run, apart from wall times (see :func:`spread`).
    """
    from commsched.catalog import placement_registry, policy_registry

    if not policies:
        raise InputError("no policy given", where="--policies", expected="a comma-separated list of policies")
    if len(set(policies)) != len(policies):
        raise InputError("a policy is listed twice", where="--policies", expected="distinct names")
    reg = policy_registry()
    for p in policies:
        reg.get(p, where="--policies")
    if job_scheduler is not None:
        placement_registry().get(job_scheduler, where="--job-scheduler")
    calls = [(scenario, p, job_scheduler, mode) for p in policies]
    results = spread(
        _run_one,
        calls,
        workers=workers,
        ray_address=ray_address,
        progress=None if progress is None else _by_name(progress, policies),
    )
    return Comparison(
        scenario=scenario.name,
        summaries=tuple(summarise_policy(r) for r in results),
        results=tuple(results),
    )
