"""The fast mode against the exact mode on random 20-job scenarios (issue acceptance).

Bound: mean |delta utilisation| < 1 % and every job's JCT within 2 %.
"""

from __future__ import annotations

import math

import pytest

from commsched.scheduling.basic import static_policy
from commsched.sim.results.records import Mode

from .helpers import run
from .scenarios import random_jobs, small_clos

TOPO = small_clos()


def _compare(seed: int) -> tuple[float, float]:
    jobs = random_jobs(seed, 20, spread_s=300.0)
    exact = run(TOPO, jobs, horizon_s=1e6, mode=Mode.EXACT, policy=static_policy, seed=seed)
    fast = run(TOPO, jobs, horizon_s=1e6, mode=Mode.FAST, policy=static_policy, seed=seed)
    assert all(j.finished for j in exact.jobs) and all(j.finished for j in fast.jobs)
    d_util = abs(fast.gpu_utilization - exact.gpu_utilization)
    worst = max(abs(f.jct_s - e.jct_s) / e.jct_s for f, e in zip(fast.jobs, exact.jobs, strict=True))
    assert fast.events < exact.events
    return d_util, worst


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_fast_close_to_exact(seed: int) -> None:
    d_util, worst = _compare(seed)
    assert d_util < 0.01
    assert worst < 0.02


@pytest.mark.slow
def test_fast_close_to_exact_many() -> None:
    diffs = [_compare(seed) for seed in range(10, 30)]
    mean_d = sum(d for d, _ in diffs) / len(diffs)
    assert mean_d < 0.01
    assert max(w for _, w in diffs) < 0.02
    assert all(math.isfinite(d) for d, _ in diffs)
