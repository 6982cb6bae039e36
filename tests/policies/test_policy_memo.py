"""The per-simulation memo never changes a decision: every policy, arrivals and departures, with and
without a shared memo, gives the same routes, classes, ranks, shifts, intensities and factors."""

from __future__ import annotations

import numpy as np
import pytest

from commsched.scheduling.interfaces import PolicyContext
from commsched.scheduling.memo import Memo, maybe
from commsched.scheduling.policies import communication_plans
from commsched.scheduling.state import PlacedJob
from commsched.topology import Topology
from commsched.topology.builders import two_layer_clos
from commsched.workload import JobId, JobSpec
from commsched.workload.zoo import get_model

from .helpers import state

MODELS = ("bert-base", "resnet50", "vgg16", "gpt3-crux", "gnmt")


def _jobs(topo: Topology, seed: int) -> list[PlacedJob]:
    rng = np.random.default_rng(seed)
    hosts = rng.permutation(len(topo.hosts)).tolist()
    out = []
    for k in range(6):
        mine = hosts[2 * k : 2 * k + 2]
        per = int(rng.choice([2, 4, 8]))
        gpus = tuple(g for h in mine for g in topo.hosts[h].gpus[:per])
        model = MODELS[int(rng.integers(len(MODELS)))]
        spec = JobSpec(id=JobId(f"j{k}"), profile=get_model(model), gpus=len(gpus))
        out.append(PlacedJob(spec=spec, gpus=gpus, start_s=float(k)))
    return out


@pytest.mark.parametrize("policy", sorted(communication_plans()))
@pytest.mark.parametrize("seed", [0, 1])
def test_a_shared_memo_changes_no_decision(policy: str, seed: int) -> None:
    plan = communication_plans()[policy]
    topo = two_layer_clos(tors=4, aggs=2, hosts_per_tor=3, uplinks_per_tor=2, uplink_bps=50e9)
    jobs = _jobs(topo, seed)
    memo = Memo()
    # arrivals one by one, then departures from the front: the job sets and the routes change
    sets = [jobs[: k + 1] for k in range(len(jobs))] + [jobs[k:] for k in range(1, len(jobs))]
    for epoch, running in enumerate(sets):
        st = state(topo, running)
        plain = plan(st, PolicyContext(seed=seed, now_s=float(epoch), epoch=epoch))
        cached = plan(st, PolicyContext(seed=seed, now_s=float(epoch), epoch=epoch, memo=memo))
        assert dict(cached.decisions.routes) == dict(plain.decisions.routes)
        assert dict(cached.decisions.classes) == dict(plain.decisions.classes)
        assert dict(cached.decisions.ranking) == dict(plain.decisions.ranking)
        assert dict(cached.decisions.src_ports) == dict(plain.decisions.src_ports)
        assert dict(cached.decisions.time_shift_s) == dict(plain.decisions.time_shift_s)
        assert dict(cached.intensity) == dict(plain.intensity)
        assert dict(cached.factor) == dict(plain.factor)
    if policy.startswith("crux"):
        assert memo.hits > 0  # the memo is used, not bypassed


def test_memo_bounds_and_passthrough() -> None:
    memo = Memo(max_entries=2)
    assert [memo.get(k, lambda k=k: k * 10) for k in (1, 2, 3)] == [10, 20, 30]
    assert len(memo) == 1  # cleared when full, then the new value stored
    assert maybe(None, "x", lambda: 5) == 5
    with pytest.raises(ValueError):
        Memo(max_entries=0)
