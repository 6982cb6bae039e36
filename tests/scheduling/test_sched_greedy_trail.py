"""The greedy path selection resumed from a trail gives the same routes as a pass from scratch."""

from __future__ import annotations

import numpy as np
import pytest

from commsched.scheduling.paths import (
    FlowWeight,
    GreedyTrail,
    PathSettings,
    PathTable,
    greedy_routes,
    job_flows,
)
from commsched.scheduling.state import PlacedJob
from commsched.topology.builders import two_layer_clos
from commsched.workload import JobId, JobSpec
from commsched.workload.zoo import get_model

TOPO = two_layer_clos(tors=6, aggs=4, hosts_per_tor=4, uplinks_per_tor=4, uplink_bps=50e9)
TABLE = PathTable(TOPO)


def _jobs(seed: int, n: int) -> list[PlacedJob]:
    rng = np.random.default_rng(seed)
    out = []
    for k in range(n):
        hosts = rng.choice(len(TOPO.hosts), size=int(rng.integers(2, 4)), replace=False).tolist()
        per = int(rng.choice([1, 2, 4]))
        gpus = tuple(g for h in hosts for g in TOPO.hosts[h].gpus[:per])
        spec = JobSpec(id=JobId(f"j{k}"), profile=get_model("bert-base"), gpus=len(gpus))
        out.append(PlacedJob(spec=spec, gpus=gpus))
    return out


@pytest.mark.parametrize("granularity", ["connection", "job"])
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_trail_gives_the_routes_of_a_fresh_pass(granularity: str, seed: int) -> None:
    rng = np.random.default_rng(seed + 100)
    jobs = _jobs(seed, 30)
    flows = {j.id: job_flows(TABLE, j) for j in jobs}
    weights = {j.id: FlowWeight(per_byte=float(rng.uniform(0.5, 2.0))) for j in jobs}
    settings = PathSettings(granularity=granularity)
    trail = GreedyTrail()
    order = [j for j in jobs[:12]]
    rest = jobs[12:]
    for _ in range(25):
        # an arrival at a random rank, or a departure of a random job, as between two Crux decisions
        if rest and (len(order) < 4 or rng.random() < 0.6):
            order.insert(int(rng.integers(0, len(order) + 1)), rest.pop())
        else:
            order.pop(int(rng.integers(0, len(order))))
        seq = [(j, flows[j.id]) for j in order]
        fresh = greedy_routes(TABLE, seq, weights, settings)
        resumed = greedy_routes(TABLE, seq, weights, settings, trail)
        assert dict(resumed) == dict(fresh)
        assert list(resumed) == list(fresh)  # the same order too
        assert len(trail.keys) == len(order)
        # the checkpoints and the replayed additions give the loads of a fresh pass, bit for bit
        assert len(trail.loads) == len(order) // GreedyTrail.EVERY
        fresh_trail = GreedyTrail()
        greedy_routes(TABLE, seq, weights, settings, fresh_trail)
        for n in range(len(order) + 1):
            size = TOPO.capacity_bps.size
            assert np.array_equal(trail.load_after(n, size), fresh_trail.load_after(n, size))


def test_trail_follows_a_changed_weight() -> None:
    jobs = _jobs(5, 10)
    flows = {j.id: job_flows(TABLE, j) for j in jobs}
    settings = PathSettings()
    trail = GreedyTrail()
    w = {j.id: FlowWeight(per_byte=1.0) for j in jobs}
    seq = [(j, flows[j.id]) for j in jobs]
    greedy_routes(TABLE, seq, w, settings, trail)
    w2 = {**w, jobs[0].id: FlowWeight(per_byte=50.0)}  # the first job weighs more: nothing is reused
    resumed = greedy_routes(TABLE, seq, w2, settings, trail)
    assert dict(resumed) == dict(greedy_routes(TABLE, seq, w2, settings))
