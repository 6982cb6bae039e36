"""Source routing, Definition 1 and the contention-freeness of collective patterns (vClos §5.2-5.3)."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import InputError
from commsched.scheduling.vclos import (
    Fabric,
    Flow,
    GpuAddr,
    SourceRouting,
    aligned_layout,
    contended_links,
    default_routing,
    halving_doubling,
    is_contention_free,
    is_leaf_wise_permutation,
    merge_routings,
    pairwise_all_to_all,
    pipeline,
    place_pattern,
    ring,
    route,
    routing_with_leaf_maps,
)
from commsched.scheduling.vclos.patterns import RankPattern

FABRIC = Fabric(leaves=8, spines=8, servers_per_leaf=4, gpus_per_server=2)


def aligned_routing(
    fabric: Fabric, leaves: Sequence[int], ports: Sequence[Sequence[int]], planes: Sequence[int]
) -> SourceRouting:
    """Leaf maps that send the a-th chosen port of every leaf up plane ``planes[a]``."""
    base = default_routing(fabric)
    uplink = {
        GpuAddr(leaf=n, port=p): planes[a]
        for n, ps in zip(leaves, ports, strict=True)
        for a, p in enumerate(ps)
    }
    return SourceRouting(uplink=uplink, plane=base.plane, downlink=base.downlink)


@st.composite
def layouts(draw: st.DrawFn, *, pow2: bool = False) -> tuple[list[int], list[list[int]], list[int]]:
    """A random paper layout: l leaves, the same number n of ports on each, n planes."""
    f = FABRIC
    nl = draw(st.integers(1, f.leaves))
    n = draw(st.sampled_from([1, 2, 4, 8])) if pow2 else draw(st.integers(1, f.down_ports))
    leaves = draw(st.permutations(range(f.leaves)))[:nl]
    ports = [draw(st.permutations(range(f.down_ports)))[:n] for _ in leaves]
    planes = draw(st.permutations(range(f.up_ports)))[:n]
    return list(leaves), [list(p) for p in ports], list(planes)


def steps_flows(steps: tuple[RankPattern, ...], gpus: Sequence[GpuAddr]) -> list[tuple[Flow, ...]]:
    return [place_pattern(s, gpus) for s in steps]


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_ring_and_pipeline_are_leaf_wise_permutations_and_contention_free(
    lay: tuple[list[int], list[list[int]], list[int]],
) -> None:
    leaves, ports, planes = lay
    gpus = aligned_layout(leaves, ports)
    r = aligned_routing(FABRIC, leaves, ports, planes)
    for steps in (ring(len(gpus)), pipeline(len(gpus))):
        for flows in steps_flows(steps, gpus):
            assert is_leaf_wise_permutation(flows)
            assert is_contention_free(FABRIC, r, flows)


@settings(max_examples=60, deadline=None)
@given(layouts(pow2=True))
def test_halving_doubling_contention_free_with_power_of_two_ports_per_leaf(
    lay: tuple[list[int], list[list[int]], list[int]],
) -> None:
    leaves, ports, planes = lay  # N = l * n need not be a power of two (fold/unfold steps)
    gpus = aligned_layout(leaves, ports)
    r = aligned_routing(FABRIC, leaves, ports, planes)
    for flows in steps_flows(halving_doubling(len(gpus)), gpus):
        assert is_contention_free(FABRIC, r, flows)


@settings(max_examples=60, deadline=None)
@given(layouts())
def test_pairwise_all_to_all_every_step_contention_free(
    lay: tuple[list[int], list[list[int]], list[int]],
) -> None:
    leaves, ports, planes = lay
    gpus = aligned_layout(leaves, ports)
    r = aligned_routing(FABRIC, leaves, ports, planes)
    for flows in steps_flows(pairwise_all_to_all(len(gpus)), gpus):
        assert is_contention_free(FABRIC, r, flows)


@settings(max_examples=40, deadline=None)
@given(layouts(), st.randoms(use_true_random=False))
def test_lemma_5_1_leaf_wise_permutations_free_under_any_source_routing(
    lay: tuple[list[int], list[list[int]], list[int]], rnd: object
) -> None:
    """Lemma 5.1: a leaf-wise permutation is contention-free under *every* one-to-one leaf map."""
    import random

    assert isinstance(rnd, random.Random)
    leaves, ports, _ = lay
    gpus = aligned_layout(leaves, ports)
    maps = [rnd.sample(range(FABRIC.up_ports), FABRIC.down_ports) for _ in range(FABRIC.leaves)]
    r = routing_with_leaf_maps(FABRIC, maps)
    for steps in (ring(len(gpus)), pipeline(len(gpus)), pairwise_all_to_all(len(gpus))):
        for flows in steps_flows(steps, gpus):
            if is_leaf_wise_permutation(flows):
                assert is_contention_free(FABRIC, r, flows)


def test_halving_doubling_can_collide_when_ports_per_leaf_not_power_of_two() -> None:
    f = Fabric(leaves=5, spines=4, servers_per_leaf=3, gpus_per_server=1)
    leaves, ports, planes = [0, 1, 2, 3, 4], [[0, 1, 2]] * 5, [0, 1, 2]
    gpus = aligned_layout(leaves, ports)
    r = aligned_routing(f, leaves, ports, planes)
    assert not all(is_contention_free(f, r, fl) for fl in steps_flows(halving_doubling(15), gpus))


def test_fig9_two_jobs_collide_under_source_routing() -> None:
    """Fig. 9: two jobs, each contention-free alone, share a spine->leaf link together."""
    f = Fabric(leaves=4, spines=2, servers_per_leaf=2, gpus_per_server=1)
    r = default_routing(f)
    g0, g1 = GpuAddr(leaf=0, port=0), GpuAddr(leaf=1, port=0)  # job A
    g2, g3 = GpuAddr(leaf=1, port=1), GpuAddr(leaf=2, port=0)  # job B
    job_a = place_pattern(ring(2)[0], [g0, g1])
    job_b = place_pattern(ring(2)[0], [g2, g3])
    assert is_contention_free(f, r, job_a) and is_contention_free(f, r, job_b)
    both = job_a + job_b
    assert not is_leaf_wise_permutation(both)
    shared = contended_links(f, r, both)
    assert len(shared) == 1
    (link,) = shared
    assert (link.dir.value, link.leaf, link.port) == ("spine->leaf", 1, 0)


def test_route_cases() -> None:
    f = Fabric(leaves=2, spines=2, servers_per_leaf=1, gpus_per_server=2)
    r = default_routing(f)
    same_server = Flow(src=GpuAddr(leaf=0, port=0), dst=GpuAddr(leaf=0, port=1))
    assert route(f, r, same_server) == ()
    f2 = Fabric(leaves=2, spines=2, servers_per_leaf=2, gpus_per_server=1)
    same_leaf = Flow(src=GpuAddr(leaf=0, port=0), dst=GpuAddr(leaf=0, port=1))
    assert len(route(f2, default_routing(f2), same_leaf)) == 2
    with pytest.raises(InputError, match="not routable"):
        route(
            f2,
            SourceRouting(uplink={}, plane={}),
            Flow(src=GpuAddr(leaf=0, port=0), dst=GpuAddr(leaf=1, port=0)),
        )


def test_definition_1_rejects_non_permutations() -> None:
    a, b, c = (GpuAddr(leaf=n, port=0) for n in range(3))
    assert not is_leaf_wise_permutation([Flow(src=a, dst=b), Flow(src=a, dst=c)])  # a sends twice
    assert not is_leaf_wise_permutation([Flow(src=a, dst=c), Flow(src=b, dst=c)])  # c receives twice
    assert is_leaf_wise_permutation([])


def test_leaf_maps_validated_and_merge_conflicts() -> None:
    f = Fabric(leaves=2, spines=2, servers_per_leaf=2, gpus_per_server=1)
    with pytest.raises(InputError):
        routing_with_leaf_maps(f, [[0, 0], [0, 1]])
    with pytest.raises(InputError):
        routing_with_leaf_maps(f, [[0, 1]])
    g = GpuAddr(leaf=0, port=0)
    with pytest.raises(InputError, match="conflicting"):
        merge_routings([SourceRouting(uplink={g: 0}, plane={}), SourceRouting(uplink={g: 1}, plane={})])


def test_pattern_shapes() -> None:
    assert len(halving_doubling(8)) == 6
    assert len(halving_doubling(6)) == 2 + 4
    assert all(len(s) == 7 for s in pairwise_all_to_all(7))
    for n in range(1, 20):
        for step in (*halving_doubling(n), *pairwise_all_to_all(n), *ring(n)):
            srcs = [a for a, _ in step]
            dsts = [b for _, b in step]
            assert len(set(srcs)) == len(srcs) and len(set(dsts)) == len(dsts)
            assert all(0 <= x < n for x in srcs + dsts)
    with pytest.raises(InputError):
        ring(0)
    with pytest.raises(InputError):
        place_pattern(ring(3)[0], [GpuAddr(leaf=0, port=0)])
