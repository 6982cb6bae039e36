"""Compressed classes that keep the order of every pair sharing a link give the rates of unique classes.

This is why ``crux-full`` and ``crux-ps-pa`` are the same network decision whenever the compression
separates every contending pair (docs/fig23-gaps.md): the engine's allocation (strict priority
between classes, max-min within a class) depends only on the order of groups that share a link.
"""

from __future__ import annotations

from types import MappingProxyType

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy import sparse

from commsched.scheduling.compression import componentwise_compression
from commsched.scheduling.interfaces import PolicyContext, PolicyFn
from commsched.scheduling.placement import pack
from commsched.scheduling.state import ClusterState, Decisions
from commsched.sim.engine import Simulation
from commsched.sim.reference.maxmin import max_min_rates
from commsched.sim.results.records import Mode, SimConfig, SimResult
from tests.sim.helpers import job
from tests.sim.scenarios import small_clos


def _sharing(inc: np.ndarray) -> np.ndarray:
    share = (inc @ inc.T) > 0
    np.fill_diagonal(share, False)
    return np.asarray(share, dtype=bool)


@settings(max_examples=60, deadline=None)
@given(
    groups=st.integers(min_value=2, max_value=14),
    links=st.integers(min_value=2, max_value=12),
    density=st.floats(min_value=0.05, max_value=0.35),
    levels=st.integers(min_value=2, max_value=8),
    seed=st.integers(min_value=0, max_value=2**32 - 1),
)
def test_compression_that_separates_sharing_pairs_keeps_every_rate(
    groups: int, links: int, density: float, levels: int, seed: int
) -> None:
    rng = np.random.default_rng(seed)
    inc = rng.random((groups, links)) < density
    inc[np.arange(groups), rng.integers(0, links, size=groups)] = True  # every group uses a link
    share_w = np.where(inc, rng.choice([1.0, 2.0], size=inc.shape), 0.0)
    capacity = rng.uniform(1.0, 10.0, size=links)
    share = _sharing(inc.astype(np.int64))  # groups 0..n-1 are in rank order
    comp = componentwise_compression(
        share, rng.uniform(0.1, 5.0, size=groups), levels, seed=seed + 1, ids=[f"j{i}" for i in range(groups)]
    )
    lv = np.array(comp.levels)
    a, b = np.nonzero(np.triu(share, 1))
    separated = bool(np.all(lv[a] < lv[b]))
    unique = max_min_rates(sparse.csr_matrix(share_w), capacity, np.arange(groups))
    compressed = max_min_rates(sparse.csr_matrix(share_w), capacity, lv.astype(np.int64))
    if separated:
        np.testing.assert_allclose(compressed, unique, rtol=1e-9, atol=0.0)
    else:  # a merged pair shares its link max-min fairly: the compression is a different decision
        assert np.all(lv[a] <= lv[b])


def test_merging_a_sharing_pair_changes_the_rates() -> None:
    # two groups on one link, a third alone: merging the sharing pair splits the link
    share_w = sparse.csr_matrix(np.array([[1.0, 0.0], [1.0, 0.0], [0.0, 1.0]]))
    cap = np.array([10.0, 4.0])
    unique = max_min_rates(share_w, cap, np.array([0, 1, 2]))
    relabelled = max_min_rates(share_w, cap, np.array([3, 5, 0]))  # same order on the shared link
    merged = max_min_rates(share_w, cap, np.array([0, 0, 1]))
    assert unique.tolist() == [10.0, 0.0, 4.0]
    assert relabelled.tolist() == unique.tolist()
    assert merged.tolist() == [5.0, 5.0, 4.0]


def _gpus(hosts: list[int]) -> list[str]:
    return [f"h{h}/gpu{g}" for h in hosts for g in range(8)]


def _ranked(shift: bool) -> PolicyFn:
    """``a`` above ``b`` (they share the ToR0/ToR1 uplinks); with ``shift`` the class numbers grow by one
    at every decision, as unique classes do under a newcomer ranked above, while the order stays."""

    def policy(state: ClusterState, ctx: PolicyContext) -> Decisions:
        base = 2 * ctx.epoch if shift else 0
        order = {"a": 0, "b": 1}
        return Decisions(
            classes=MappingProxyType({j.id: base + order.get(j.id, 2 + ctx.epoch) for j in state.jobs})
        )

    return policy


def _replay(shift: bool) -> tuple[SimResult, int]:
    jobs = [
        job(
            "a", compute_s=0.2, comm_bytes=1.0e9, gpus=16, overlap=0.5, iterations=3000, gpu_ids=_gpus([0, 4])
        ),
        job("b", compute_s=0.3, comm_bytes=1.5e9, gpus=16, iterations=2000, gpu_ids=_gpus([1, 5])),
    ]
    jobs += [  # jobs on links of their own (ToR2/ToR3): each arrival and departure is a decision
        job(
            f"far{k}",
            compute_s=0.25,
            comm_bytes=0.8e9,
            gpus=16,
            iterations=100,
            arrival_s=60.0 + 90.0 * k,
            gpu_ids=_gpus([8, 12]),
        )
        for k in range(4)
    ]
    sim = Simulation(
        topology=small_clos(),
        jobs=jobs,
        policy=_ranked(shift),
        placement=pack,
        config=SimConfig(horizon_s=1e5, mode=Mode.FAST, seed=0),
    )
    return sim.run(), sim.fast_catch_ups


def test_fast_mode_ignores_class_numbers_that_keep_the_order() -> None:
    """Renumbered classes that keep every sharing pair's order leave the rates, so the regime, as they are."""
    same, same_catch_ups = _replay(shift=False)
    shifted, shifted_catch_ups = _replay(shift=True)
    assert all(j.finished for j in same.jobs)
    assert shifted_catch_ups == same_catch_ups == 0
    for s, t in zip(same.jobs, shifted.jobs, strict=True):
        assert (s.id, s.jct_s, s.iterations, s.busy_gpu_s) == (t.id, t.jct_s, t.iterations, t.busy_gpu_s)
