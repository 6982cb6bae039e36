"""Components cut at the links that can saturate: each part solved apart gives the paces of the whole.

Random jobs (one or two steps over random links, random shares, random classes) on random capacities:
the parts :class:`commsched.sim.decide.partition.Partition` finds are solved one by one with the reference
solver (:func:`commsched.sim.reference.maxmin.max_min_rates_coo`), every combination of one step per job in
flight, and each pace must equal the pace of the same step in the solve of all the jobs together (within 1e-9
relative: the water rises in other rounds). The summed standalone demands that decide a cut are
recomputed here from the definition (each step's pace alone times its share).
"""

from __future__ import annotations

import itertools

import numpy as np

from commsched.scheduling.traffic import JobTraffic, StepLoad
from commsched.sim.decide.partition import Partition
from commsched.sim.reference.maxmin import max_min_rates_coo


def _traffic(rng: np.random.Generator, n_links: int) -> JobTraffic:
    steps = []
    for _ in range(int(rng.integers(1, 3))):
        links = np.sort(rng.choice(n_links, size=int(rng.integers(1, 4)), replace=False)).astype(np.int64)
        share = rng.choice([0.5, 1.0, 2.0], size=links.size)
        steps.append(
            StepLoad(
                links=links, bytes_per_rep=share, max_flow_bytes=1.0, repeat=1, latency_s=0.0, share=share
            )
        )
    ids = np.unique(np.concatenate([s.links for s in steps]))
    return JobTraffic(steps=tuple(steps), link_ids=ids, link_bytes=np.ones(ids.size))


def _paces(traffics: list[JobTraffic], steps: tuple[int, ...], idx: list[int], cap, classes) -> np.ndarray:  # type: ignore[no-untyped-def]
    rows, cols, vals = [], [], []
    for g, i in enumerate(idx):
        s = traffics[i].steps[steps[i]]
        rows += [g] * s.links.size
        cols += s.links.tolist()
        vals += s.share.tolist()
    return max_min_rates_coo(
        rows=np.array(rows, dtype=np.int64),
        cols=np.array(cols, dtype=np.int64),
        vals=np.array(vals),
        n_groups=len(idx),
        capacity=cap,
        classes=classes[idx],
    )


def test_parts_solved_apart_give_the_paces_of_the_whole() -> None:
    rng = np.random.default_rng(7)
    cut = 0
    for _ in range(300):
        n_links, n = int(rng.integers(3, 10)), int(rng.integers(2, 7))
        cap = rng.choice([1.0, 2.0, 4.0, 8.0], size=n_links)
        traffics = [_traffic(rng, n_links) for _ in range(n)]
        classes = rng.integers(0, 3, size=n)
        parts = Partition().components([(i, t, 1) for i, t in enumerate(traffics)], cap)
        links_used = len({int(x) for t in traffics for x in t.link_ids})
        shared = sum(
            1
            for t in traffics
            for u in traffics
            if t is not u and np.intersect1d(t.link_ids, u.link_ids).size
        )
        cut += len(parts) > 1 and shared > 0 and links_used > 0
        for steps in itertools.product(*(range(len(t.steps)) for t in traffics)):
            whole = _paces(traffics, steps, list(range(n)), cap, classes)
            for part in parts:
                alone = _paces(traffics, steps, part, cap, classes)
                np.testing.assert_allclose(alone, whole[part], rtol=1e-9, atol=0.0)
    assert cut > 20  # the cut did separate jobs that share links (else nothing was tested)


def test_a_link_that_can_saturate_joins_its_jobs() -> None:
    """Two single-step jobs on one link: joined exactly when their demands alone reach its capacity."""

    def one(links: list[int]) -> JobTraffic:
        ids = np.array(links, dtype=np.int64)
        s = StepLoad(
            links=ids,
            bytes_per_rep=np.ones(ids.size),
            max_flow_bytes=1.0,
            repeat=1,
            latency_s=0.0,
            share=np.ones(ids.size),
        )
        return JobTraffic(steps=(s,), link_ids=ids, link_bytes=np.ones(ids.size))

    jobs = [(0, one([0, 1]), 1), (1, one([0, 2]), 1)]
    # each job alone runs at 3 (its own link); together 6 on link 0
    assert Partition().components(jobs, np.array([6.0 * (1 + 1e-9), 3.0, 3.0])) == [[0, 1]]
    assert Partition().components(jobs, np.array([6.0 * (1 + 1e-5), 3.0, 3.0])) == [[0], [1]]
    # a grouped job runs two streams at once: its demand counts twice
    assert Partition().components([(0, one([0, 1]), 2), (1, one([0, 2]), 1)], np.array([7.0, 3.0, 3.0])) == [
        [0, 1]
    ]
