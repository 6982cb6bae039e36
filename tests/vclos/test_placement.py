"""Placement invariants of vClos, OCS-vClos and the baselines, cross-checked by brute force."""

from __future__ import annotations

from collections import Counter
from itertools import chain

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from commsched.errors import InfeasibleError, InputError
from commsched.scheduling.vclos import (
    Allocator,
    Fabric,
    FabricState,
    JobRequest,
    Stage,
    allocate_best,
    allocate_ocs_vclos,
    allocate_packed,
    allocate_vclos,
    clos_shapes,
    empty_state,
    idle_servers_per_leaf,
    is_contention_free,
    merge_routings,
    pairwise_all_to_all,
    place_pattern,
    placement_registry,
    release,
    ring,
)
from commsched.scheduling.vclos.ilp import (
    ClosProblem,
    OcsProblem,
    brute_force_clos,
    solve_clos,
    solve_clos_ilp,
    solve_ocs_ilp,
)
from commsched.scheduling.vclos.placement import clos_problem

SMALL = Fabric(leaves=4, spines=4, servers_per_leaf=2, gpus_per_server=2)
SMALL_OCS = Fabric(leaves=4, spines=4, servers_per_leaf=2, gpus_per_server=2, ocs_groups=2)
RESERVING = {Stage.VCLOS, Stage.OCS_SPINE, Stage.OCS_VCLOS}


def check_invariants(state: FabricState) -> None:
    f = state.fabric
    owned = Counter(o for o in state.gpu_owner if o is not None)
    assert owned == Counter({j: len(p.gpus) for j, p in state.placements.items() if p.gpus})
    assert sum(1 for o in state.gpu_owner if o is None) + sum(owned.values()) == f.n_gpus
    cables = [c for p in state.placements.values() for c in p.cables]
    assert len({(c.leaf, c.port) for c in cables}) == len(cables)
    assert len({(c.spine, c.spine_port) for c in cables}) == len(cables)
    for p in state.placements.values():
        assert len(p.gpus) >= p.requested_gpus
        assert len(p.gpus) == p.requested_gpus or len(p.gpus) % f.gpus_per_server == 0
        if not f.has_ocs:
            assert all(c.spine == c.port % f.spines for c in cables)
        if f.has_ocs:
            assert all(c.port % f.ocs_groups == c.spine_port % f.ocs_groups for c in cables)
        if p.stage in (Stage.SERVER,):
            assert len({g.port // f.gpus_per_server for g in p.gpus}) == 1
    reserved = [
        p for p in state.placements.values() if p.stage in RESERVING or p.stage in (Stage.SERVER, Stage.LEAF)
    ]
    routing = merge_routings(p.routing for p in reserved if p.routing is not None)
    rings = list(chain.from_iterable(place_pattern(ring(len(p.gpus))[0], p.gpus) for p in reserved))
    assert is_contention_free(f, routing, rings)
    for t in range(3):
        flows = [
            fl
            for p in reserved
            if len(p.gpus) > t + 1
            for fl in place_pattern(pairwise_all_to_all(len(p.gpus))[t], p.gpus)
        ]
        assert is_contention_free(f, routing, flows)


def vclos_truly_infeasible(state: FabricState, job: JobRequest) -> bool:
    """Brute-force check that stages 0-2 of vClos have no solution."""
    f = state.fabric
    if job.gpus <= f.gpus_per_server:
        free = np.array([o is None for o in state.gpu_owner]).reshape(f.n_servers, -1).sum(axis=1)
        return bool((free < job.gpus).all())
    q = -(-job.gpus // f.gpus_per_server)
    if (idle_servers_per_leaf(state) >= q).any():
        return False
    return all(brute_force_clos(clos_problem(state, nl, s)) is None for nl, s in clos_shapes(f, job.gpus))


ops = st.lists(
    st.one_of(st.tuples(st.just("add"), st.integers(1, 12)), st.tuples(st.just("del"), st.integers(0, 30))),
    min_size=1,
    max_size=25,
)


def run_ops(fabric: Fabric, allocate: Allocator, seq: list[tuple[str, int]], *, brute: bool = False) -> None:
    """Random arrivals/departures; invariants after each; infeasibility checked by brute force."""
    state = empty_state(fabric)
    n = 0
    for op, x in seq:
        if op == "add":
            job = JobRequest(job_id=f"j{n}", gpus=x)
            n += 1
            try:
                before = state
                state, p = allocate(state, job)
                assert p.job_id == job.job_id and state.placements[job.job_id] == p
                assert release(state, job.job_id) == before
            except InfeasibleError:
                if brute:
                    assert vclos_truly_infeasible(state, job)
        elif state.placements:
            victim = sorted(state.placements)[x % len(state.placements)]
            state = release(state, victim)
        check_invariants(state)
    for j in sorted(state.placements):
        state = release(state, j)
    assert state == empty_state(fabric)


@settings(max_examples=40, deadline=None)
@given(ops)
def test_vclos_random_sequences_and_brute_force_infeasibility(seq: list[tuple[str, int]]) -> None:
    run_ops(SMALL, allocate_vclos, seq, brute=True)


@pytest.mark.parametrize(
    "fabric", [SMALL_OCS, Fabric(leaves=8, spines=2, servers_per_leaf=2, gpus_per_server=1, ocs_groups=1)]
)
@settings(max_examples=30, deadline=None)
@given(seq=ops)
def test_ocs_vclos_random_sequences(fabric: Fabric, seq: list[tuple[str, int]]) -> None:
    run_ops(fabric, allocate_ocs_vclos, seq)


@settings(max_examples=30, deadline=None)
@given(ops, st.sampled_from([allocate_best, allocate_packed]))
def test_baselines_random_sequences(seq: list[tuple[str, int]], allocate: Allocator) -> None:
    state = empty_state(SMALL)
    for i, (op, x) in enumerate(seq):
        if op == "add":
            try:
                state, p = allocate(state, JobRequest(job_id=f"j{i}", gpus=x))
                assert not p.cables
            except InfeasibleError:
                idle = sum(o is None for o in state.gpu_owner)
                assert x > SMALL.gpus_per_server or idle < SMALL.n_gpus  # a full idle fabric always fits
        elif state.placements:
            state = release(state, sorted(state.placements)[x % len(state.placements)])
        owned = Counter(o for o in state.gpu_owner if o is not None)
        assert owned == Counter({j: len(p.gpus) for j, p in state.placements.items()})


@st.composite
def clos_problems(draw: st.DrawFn) -> ClosProblem:
    nleaf = draw(st.integers(2, 6))
    nplane = draw(st.integers(1, 6))
    free = np.array(
        draw(st.lists(st.booleans(), min_size=nleaf * nplane, max_size=nleaf * nplane)), dtype=bool
    )
    ok = np.array(draw(st.lists(st.booleans(), min_size=nleaf, max_size=nleaf)), dtype=bool)
    cost = st.lists(st.integers(0, 9), min_size=nleaf + nplane, max_size=nleaf + nplane)
    c = np.array(draw(cost), dtype=float)
    return ClosProblem(
        free=free.reshape(nleaf, nplane),
        leaf_ok=ok,
        leaf_cost=c[:nleaf],
        plane_cost=c[nleaf:],
        nl=draw(st.integers(1, nleaf)),
        s=draw(st.integers(1, nplane)),
    )


@settings(max_examples=150, deadline=None)
@given(clos_problems(), st.booleans())
def test_clos_ilp_matches_brute_force(problem: ClosProblem, presolve: bool) -> None:
    assert (solve_clos(problem) is None) == (brute_force_clos(problem) is None)
    ilp = solve_clos_ilp(problem, presolve=presolve)
    ref = brute_force_clos(problem)
    assert (ilp is None) == (ref is None)
    if ilp is not None and ref is not None:
        assert ilp.cost == pytest.approx(ref.cost)
        assert len(ilp.leaves) == problem.nl and len(ilp.planes) == problem.s
        assert problem.leaf_ok[list(ilp.leaves)].all()
        assert problem.free[np.ix_(ilp.leaves, ilp.planes)].all()


@st.composite
def ocs_problems(draw: st.DrawFn, groups: int) -> OcsProblem:
    nleaf, nspine = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    ints = st.integers(0, 4)
    return OcsProblem(
        leaf_slots=np.array(
            draw(st.lists(st.integers(0, 2), min_size=nleaf, max_size=nleaf)), dtype=np.int64
        ),
        leaf_free=np.array(
            draw(st.lists(ints, min_size=nleaf * groups, max_size=nleaf * groups)), dtype=np.int64
        ).reshape(nleaf, groups),
        spine_free=np.array(
            draw(st.lists(ints, min_size=nspine * groups, max_size=nspine * groups)), dtype=np.int64
        ).reshape(nspine, groups),
        leaf_cost=np.zeros(nleaf),
        spine_cost=np.zeros(nspine),
        nl=draw(st.integers(1, 4)),
        s=draw(st.integers(1, 4)),
    )


@settings(max_examples=120, deadline=None)
@given(ocs_problems(groups=1))
def test_ocs_ilp_feasibility_matches_closed_form_for_one_ocs(p: OcsProblem) -> None:
    """With one OCS (a crossbar) leaves and spines decouple: count how many of each can be used."""
    leaves = np.minimum(p.leaf_slots, p.leaf_free[:, 0] // p.s).sum()
    spines = np.minimum(p.spine_free[:, 0] // p.nl, p.s).sum()
    sol = solve_ocs_ilp(p)
    assert (sol is not None) == (leaves >= p.nl and spines >= p.s)


@settings(max_examples=80, deadline=None)
@given(ocs_problems(groups=2))
def test_ocs_ilp_solutions_respect_budgets(p: OcsProblem) -> None:
    sol = solve_ocs_ilp(p)
    if sol is None:
        return
    assert sol.vleaves.sum() == p.nl and sol.vspines.sum() == p.s
    assert (sol.vleaves.sum(axis=1) <= p.leaf_slots).all()
    per_pair = sol.circuits.sum(axis=3)
    assert (per_pair == sol.vleaves[:, :, None] * sol.vspines[None, None, :]).all()
    assert (sol.circuits.sum(axis=(1, 2)) <= p.leaf_free).all()
    assert (sol.circuits.sum(axis=(0, 1)) <= p.spine_free).all()


def test_stages_in_order() -> None:
    s = empty_state(SMALL)
    s, p = allocate_vclos(s, JobRequest(job_id="a", gpus=1))
    assert p.stage is Stage.SERVER
    s, p = allocate_vclos(s, JobRequest(job_id="b", gpus=2))
    assert p.stage is Stage.SERVER and p.gpus[0].leaf == 0 and p.gpus[0].port // 2 == 1  # best fit is
    s, p = allocate_vclos(s, JobRequest(job_id="c", gpus=1))  # server 0 (one idle GPU left)
    assert p.gpus == (s.placements["a"].gpus[0].__class__(leaf=0, port=1),)
    s, p = allocate_vclos(s, JobRequest(job_id="d", gpus=3))
    assert p.stage is Stage.LEAF and len(p.gpus) == 4 and p.ranks == p.gpus[:3]
    s, p = allocate_vclos(s, JobRequest(job_id="e", gpus=8))
    assert p.stage is Stage.VCLOS and p.shape == (2, 4) and len(p.cables) == 8
    with pytest.raises(InfeasibleError):
        allocate_vclos(s, JobRequest(job_id="f", gpus=8))


def test_stage1_picks_leaf_with_fewest_idle_servers() -> None:
    f = Fabric(leaves=3, spines=4, servers_per_leaf=4, gpus_per_server=1)
    s = empty_state(f)
    s, _ = allocate_vclos(s, JobRequest(job_id="x", gpus=1))  # leaf 0 now has 3 idle servers
    s, _ = allocate_vclos(s, JobRequest(job_id="y", gpus=2))  # fits leaf 0 (3 idle) best
    assert {g.leaf for g in s.placements["y"].gpus} == {0}


def test_vclos_rounds_server_counts_up() -> None:
    f = Fabric(leaves=8, spines=4, servers_per_leaf=2, gpus_per_server=2)
    assert clos_shapes(f, 5) == ((3, 2),)  # 3 servers: 3 leaves x 1 server
    assert clos_shapes(f, 13) == ((7, 2),)
    big = Fabric(leaves=4, spines=4, servers_per_leaf=2, gpus_per_server=2)
    assert clos_shapes(big, 10) == ((3, 4),)  # 5 servers is prime and > 4 leaves: round to 6


def test_ocs_single_spine_stage_and_direct_errors() -> None:
    f = Fabric(leaves=8, spines=4, servers_per_leaf=2, gpus_per_server=2, ocs_groups=1)
    s, p = allocate_ocs_vclos(empty_state(f), JobRequest(job_id="a", gpus=6))
    assert p.stage is Stage.OCS_SPINE and {c.spine for c in p.cables} == {0}
    check_invariants(s)
    with pytest.raises(InputError):
        allocate_ocs_vclos(empty_state(SMALL), JobRequest(job_id="a", gpus=6))
    with pytest.raises(InputError):
        allocate_vclos(s, JobRequest(job_id="a", gpus=1))  # already placed
    with pytest.raises(InputError):
        allocate_vclos(s, JobRequest(job_id="z", gpus=1000))
    with pytest.raises(InputError):
        release(s, "nope")
    with pytest.raises(InputError):
        JobRequest(job_id="z", gpus=0)
    with pytest.raises(InputError):
        Fabric(leaves=2, spines=1, servers_per_leaf=2, gpus_per_server=2)


def test_registry_names() -> None:
    reg = placement_registry()
    assert set(reg.names()) == {"vclos", "ocs-vclos", "best", "sr", "ecmp", "balanced-ecmp", "ecmp-redundant"}
    with pytest.raises(InputError, match="expected one of"):
        reg.get("nope")


def test_best_ignores_leaf_boundaries_and_packed_prefers_big_leaves() -> None:
    s = empty_state(SMALL)
    s, _ = allocate_vclos(s, JobRequest(job_id="a", gpus=1))
    s2, p = allocate_best(s, JobRequest(job_id="b", gpus=12))
    assert p.stage is Stage.BEST and len(p.gpus) == 12
    s3, p = allocate_packed(s, JobRequest(job_id="b", gpus=12))
    assert p.stage is Stage.PACKED and {g.leaf for g in p.gpus} == {1, 2, 3}
    assert s2 != s3
