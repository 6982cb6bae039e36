"""The contention figures reported beside vClos's Table 5: jobs spanning leaves, GPU time lost."""

from __future__ import annotations

import pytest

from commsched.api.runner import simulate_scenario
from commsched.experiments.vclos_experiment.metrics import contention_share
from commsched.io.shipped import resolve_scenario


def test_gpu_time_lost_follows_the_slowdowns() -> None:
    sc = resolve_scenario("crux-fig19")
    fair = simulate_scenario(sc, policy="ecmp-fair")
    crux = simulate_scenario(sc, policy="crux-full")
    for res in (fair, crux):
        share = contention_share(res, sc.topology)
        started = [j for j in res.jobs if j.start_s is not None]
        spanning = [j for j in started if len({sc.topology.host_of(g).tors for g in j.placement}) > 1]
        assert share.multi_leaf == pytest.approx(len(spanning) / len(started))
        lost = sum(j.gpus * j.iterations * (j.mean_iteration_s - j.standalone_iteration_s) for j in started)
        total = sum(j.gpus * j.iterations * j.mean_iteration_s for j in started)
        assert share.gpu_time_lost == pytest.approx(max(lost, 0.0) / total, abs=1e-9)
    # ECMP collisions slow a job down under fair sharing; Crux's paths and priorities avoid it
    assert contention_share(fair, sc.topology).gpu_time_lost > 0.005
    assert contention_share(crux, sc.topology).gpu_time_lost < 0.001
