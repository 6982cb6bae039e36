"""The work a scenario asks of the simulator, estimated before any work starts.

A scenario within the limits of :mod:`commsched.io.limits` can still ask an exact simulation for an hour of
work (a long horizon of short iterations); :func:`check_run_budget` refuses it up front with the estimate
and a hint.
"""

from __future__ import annotations

from commsched.errors import InputError
from commsched.io.scenario import Scenario

#: the most iterations an exact simulation may step through (about an hour of work at the engine's speed)
MAX_EXACT_ITERATIONS = 20_000_000


def estimated_iterations(scenario: Scenario) -> float:
    """Iterations an exact simulation would step through: per job, the horizon left after its arrival
    divided by its standalone compute time (a lower bound of its iteration time), capped by its own
    iteration count."""
    total = 0.0
    for j in scenario.jobs:
        spec = j.spec
        span = max(0.0, scenario.horizon_s - spec.arrival_s)
        per = spec.profile.compute_s if spec.profile.compute_s > 0 else 1e-9
        n = span / per
        if spec.iterations is not None:
            n = min(n, float(spec.iterations))
        elif spec.duration_s is not None:
            n = min(n, spec.duration_s / per)
        total += n
    return total


def check_run_budget(scenario: Scenario, mode: str, *, where: str = "") -> None:
    """Refuse, with an estimate and a hint, a run that would need an absurd amount of work.

    Raises
    ------
    InputError
        The exact simulation would step through more than :data:`MAX_EXACT_ITERATIONS` iterations.
    """
    if mode != "exact":
        return
    n = estimated_iterations(scenario)
    if n > MAX_EXACT_ITERATIONS:
        raise InputError(
            f"an exact simulation would step through about {n:.3g} iterations",
            where=where or scenario.source,
            expected=(
                f"at most {MAX_EXACT_ITERATIONS:.0e}: use --mode fast, a shorter horizon_s, "
                "or fewer iterations"
            ),
        )
