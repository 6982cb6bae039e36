"""Hash-collision counts against brute force; vClos metrics on a hand-built result."""

from __future__ import annotations

from collections import Counter

import numpy as np

from commsched.experiments.hash_collisions import (
    cluster,
    collisions,
    contention_degrees,
    flow_links,
    ring_flows,
)
from commsched.experiments.vclos_experiment import metrics as vm
from commsched.scheduling.routing import SPORT_HI, SPORT_LO
from commsched.scheduling.vclos.policy import Refusal, RefusalCause
from commsched.topology.ecmp import FiveTuple, ecmp_path_index


def test_collisions_match_brute_force() -> None:
    topo = cluster(64)
    got = collisions(64, tasks=3, seed=7)
    rng = np.random.default_rng(7)
    gpus = list(topo.gpus)
    counts: Counter[int] = Counter()
    for _ in range(3):
        order = [gpus[i] for i in rng.permutation(len(gpus))]
        fl = ring_flows(topo, order)
        ports = rng.integers(SPORT_LO, SPORT_HI + 1, size=len(fl))
        links = []
        for (a, b), p in zip(fl, ports, strict=True):
            na, nb = topo.nic_of(a), topo.nic_of(b)
            paths = topo.equal_cost_paths(na, nb)
            ft = FiveTuple(src_ip=topo.node(na).ip or 0, dst_ip=topo.node(nb).ip or 0, src_port=int(p))
            path = paths[ecmp_path_index(ft, len(paths), "murmur3")]
            links.append(
                [lk for lk in path.links if "spine" in topo.links[lk].src or "spine" in topo.links[lk].dst]
            )
        use = Counter(lk for ls in links for lk in ls)
        counts.update(max(use[lk] for lk in ls) for ls in links)
        assert [list(flow_links(topo, a, b, int(p))) for (a, b), p in zip(fl, ports, strict=True)] == links
    assert got.counts == dict(sorted(counts.items()))
    assert contention_degrees([[1, 2], [2, 3], [4]]) == [2, 2, 1]


def test_metrics_on_hand_built_result() -> None:
    r = vm._demo()
    avg = vm.average_times(r)
    assert (avg.jrt_s, avg.jwt_s, avg.jct_s) == (14.0, 1.0, 15.0)
    q = vm.queue_depth(r.jobs)
    assert q.depth.tolist() == [1, 0] and q.time_average() == 1.0
    assert vm.stability(r, {"a": "g", "b": "g"}).mean_s == 5.0
    frag = vm.fragmentation(
        [Refusal(job="a", time_s=0.0, cause=c) for c in (RefusalCause.NETWORK, RefusalCause.GPU_SHAPE)]
    )
    assert (frag.gpu, frag.network) == (1, 1)
    w, f = vm.jwt_cdf(r)
    assert w.tolist() == [0.0, 2.0] and f.tolist() == [0.5, 1.0]
