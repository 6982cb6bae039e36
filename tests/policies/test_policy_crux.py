"""Crux's decisions at policy level: intensity, A3, A8, A10, A14, A16 (crux-spec §7)."""

from __future__ import annotations

import numpy as np
import pytest

from commsched.scheduling.intensity import job_intensity
from commsched.scheduling.policies import communication_plans, communication_policies, named_policies
from commsched.scheduling.priority import job_facts, network_link_mask
from commsched.scheduling.state import Decisions, PlacedJob
from commsched.testing import check_compression, check_decisions, check_determinism
from commsched.topology import LinkKind
from commsched.topology.builders import single_link, two_layer_clos

from .helpers import CTX, abstract, host_gpus, spec, state

NAMES = (
    "ecmp-fair",
    "crux-pa",
    "crux-ps-pa",
    "crux-full",
    "sincronia",
    "varys",
    "taccl-star",
    "cassini",
    "static",
    "fair",
)


def example1() -> list[PlacedJob]:
    return [
        abstract(spec("a", compute_s=2.0, comm_bytes=2e9, gpus=10)),
        abstract(spec("b", compute_s=1.0, comm_bytes=1e9, gpus=10)),
    ]


def clos_jobs() -> tuple[object, list[PlacedJob]]:
    topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=4, uplinks_per_tor=2)
    jobs = [
        PlacedJob(spec=spec("big", compute_s=0.4, comm_bytes=4e9, gpus=16), gpus=host_gpus(topo, [0, 4])),
        PlacedJob(spec=spec("mid", compute_s=0.3, comm_bytes=2e9, gpus=16), gpus=host_gpus(topo, [1, 5])),
        PlacedJob(spec=spec("low", compute_s=0.05, comm_bytes=3e9, gpus=16), gpus=host_gpus(topo, [2, 6])),
        PlacedJob(spec=spec("tiny", compute_s=0.05, comm_bytes=2e9, gpus=16), gpus=host_gpus(topo, [3, 7])),
    ]
    return topo, jobs


def test_every_named_policy_is_registered_and_decides() -> None:
    pols = communication_policies()
    assert set(NAMES) <= set(pols)
    topo, jobs = clos_jobs()
    st = state(topo, jobs, levels=3)
    for name in NAMES:
        d = pols[name](st, CTX)
        assert isinstance(d, Decisions), name
        assert set(d.classes) == {j.id for j in jobs}, name


def test_intensity_is_gpu_seconds_over_bottleneck_time() -> None:
    topo = single_link(capacity_bps=8e9)
    a = example1()[0]
    inten = job_intensity(topo, a)
    assert (inten.work_gpu_s, inten.bottleneck_s, inten.value) == (20.0, 2.0, 10.0)


def test_intensity_counts_intra_host_links() -> None:
    # a one-host job has no network traffic: t_j comes from its NVLink/PCIe links
    topo = two_layer_clos(tors=1, aggs=1, hosts_per_tor=1)
    j = PlacedJob(spec=spec("h", compute_s=1.0, comm_bytes=1e9, gpus=8), gpus=host_gpus(topo, [0]))
    inten = job_intensity(topo, j)
    assert inten.bottleneck_s > 0 and inten.value == pytest.approx(8.0 / inten.bottleneck_s)


@pytest.mark.parametrize("name", ["crux-pa", "crux-ps-pa", "crux-full"])
def test_a3_example1_correction_factor(name: str) -> None:
    plan = communication_plans()[name](state(single_link(capacity_bps=8e9), example1()), CTX)
    assert plan.factor["b"] == pytest.approx(1.5) and plan.factor["a"] == 1.0
    assert plan.intensity["a"] == plan.intensity["b"] == pytest.approx(10.0)
    assert plan.decisions.ranking == {"b": 0, "a": 1}
    assert plan.decisions.class_of("b") < plan.decisions.class_of("a")


def test_a8_example2_ranks_the_delay_sensitive_job_first() -> None:
    jobs = [
        abstract(spec("j1", compute_s=4.0, comm_bytes=1e9, gpus=2, overlap=0.5)),
        abstract(spec("j2", compute_s=2.0, comm_bytes=3e9, gpus=12, overlap=0.5)),
    ]
    plan = communication_plans()["crux-pa"](state(single_link(capacity_bps=8e9), jobs), CTX)
    # reference = most network traffic (j2: 3 GB per 4 s); k_1 = 0.5 against it (A8)
    assert plan.factor == {"j1": pytest.approx(0.5), "j2": 1.0}
    assert plan.decisions.ranking == {"j2": 0, "j1": 1}


def test_a10_policy_level_compression_splits_each_contending_pair() -> None:
    # jobs p0/p1 contend on ToR0/ToR1 uplinks only, q0/q1 on ToR2/ToR3 uplinks only; 2 levels
    topo = two_layer_clos(tors=4, aggs=1, hosts_per_tor=2, uplinks_per_tor=1)
    jobs = [
        PlacedJob(spec=spec("p0", compute_s=0.4, comm_bytes=4e9, gpus=16), gpus=host_gpus(topo, [0, 2])),
        PlacedJob(spec=spec("p1", compute_s=0.2, comm_bytes=3e9, gpus=16), gpus=host_gpus(topo, [1, 3])),
        PlacedJob(spec=spec("q0", compute_s=0.3, comm_bytes=4e9, gpus=16), gpus=host_gpus(topo, [4, 6])),
        PlacedJob(spec=spec("q1", compute_s=0.1, comm_bytes=3e9, gpus=16), gpus=host_gpus(topo, [5, 7])),
    ]
    d = communication_policies()["crux-full"](state(topo, jobs, levels=2), CTX)
    assert {d.class_of("p0"), d.class_of("p1")} == {0, 1}
    assert {d.class_of("q0"), d.class_of("q1")} == {0, 1}
    sinc = communication_policies()["sincronia"](state(topo, jobs, levels=2), CTX)
    assert sorted(sinc.classes.values()) == [0, 1, 1, 1]  # Sincronia-style: one pair collides


#: the policies that give every job a class of its own (the policies' table), not K levels
UNIQUE_PRIORITIES = {"crux-pa", "crux-ps-pa"}


@pytest.mark.parametrize("name", sorted(named_policies()))
@pytest.mark.parametrize("seed", [0, 1, 2])
def test_a14_every_compression_is_valid_for_its_ranking(name: str, seed: int) -> None:
    """Every member of the policy family on a crowded random mix: valid decisions, classes within the
    levels, and a compression that keeps the order of every ranked pair that shares a link."""
    topo = two_layer_clos(tors=3, aggs=2, hosts_per_tor=4, uplinks_per_tor=2)
    rng = np.random.default_rng(seed)
    hosts = rng.permutation(12)
    jobs = [
        PlacedJob(
            spec=spec(
                f"j{k}",
                compute_s=float(rng.uniform(0.1, 0.5)),
                comm_bytes=float(rng.uniform(1e9, 5e9)),
                gpus=16,
            ),
            gpus=host_gpus(topo, sorted(int(h) for h in hosts[2 * k : 2 * k + 2])),
        )
        for k in range(6)
    ]
    unique = name in UNIQUE_PRIORITIES  # one class per rank, the ideal of crux-spec §6.6: as many levels
    levels = len(jobs) if unique else 3
    st = state(topo, jobs, levels=levels)
    d = communication_policies()[name](st, CTX)
    assert set(d.classes.values()) <= set(range(levels))
    assert check_decisions(st, d) == []
    assert check_compression(st, d) == []


def _fabric_links(topo: object, jobs: list[PlacedJob], d: Decisions) -> dict[str, set[int]]:
    network = network_link_mask(topo)  # type: ignore[arg-type]
    out = {}
    for j in jobs:
        f = job_facts(topo, j, d.routes, network)  # type: ignore[arg-type]
        out[j.id] = {lid for lid in f.traffic.link_ids.tolist() if topo.links[lid].kind is LinkKind.FABRIC}  # type: ignore[attr-defined]
    return out


@pytest.mark.parametrize("name", ["crux-ps-pa", "crux-full"])
def test_a16_two_most_intensive_jobs_get_disjoint_paths(name: str) -> None:
    topo, jobs = clos_jobs()
    plan = communication_plans()[name](state(topo, jobs, levels=3), CTX)
    top2 = sorted(plan.intensity, key=lambda j: -plan.intensity[j])[:2]
    links = _fabric_links(topo, jobs, plan.decisions)
    assert links[top2[0]] and links[top2[1]]
    assert not links[top2[0]] & links[top2[1]]


def test_policies_are_deterministic_per_seed_and_epoch() -> None:
    topo, jobs = clos_jobs()
    st = state(topo, jobs, levels=2)
    for name in ("crux-full", "cassini", "ecmp-fair"):
        assert check_determinism(communication_policies()[name], st, CTX) == []


@pytest.mark.parametrize("name", ["crux-ps-pa", "crux-full"])
def test_the_most_intensive_of_three_jobs_on_two_paths_gets_its_path_alone(name: str) -> None:
    """Crux picks paths job by job in decreasing intensity, each on the least-loaded candidate
    (crux-spec §2.2 item 4). Two ToRs joined by two Aggs give every cross-ToR flow two paths. The most
    intensive job (16 GPUs) moves the most bytes per second; it picks first, the next job takes the
    other path, and the third joins the lighter of the two, so the most intensive job runs alone.
    Taken in any order where it is not first, it would share a path with whichever job it follows."""
    topo = two_layer_clos(tors=2, aggs=2, hosts_per_tor=4, uplinks_per_tor=2)
    jobs = [
        PlacedJob(spec=spec("wide", compute_s=0.4, comm_bytes=4e9, gpus=16), gpus=host_gpus(topo, [0, 4])),
        PlacedJob(spec=spec("pair", compute_s=0.4, comm_bytes=2e9, gpus=2), gpus=host_gpus(topo, [1, 5], 1)),
        PlacedJob(spec=spec("thin", compute_s=0.4, comm_bytes=1e9, gpus=2), gpus=host_gpus(topo, [2, 6], 1)),
    ]
    plan = communication_plans()[name](state(topo, jobs, levels=3), CTX)
    assert max(plan.intensity, key=lambda j: plan.intensity[j]) == "wide", plan.intensity
    links = _fabric_links(topo, jobs, plan.decisions)
    assert links["wide"] and links["pair"] and links["thin"]
    assert not links["wide"] & (links["pair"] | links["thin"]), links
