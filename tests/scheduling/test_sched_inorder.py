"""Placing the queued jobs in order: one function, used by the four places that serve a queue."""

from __future__ import annotations

import ast
import random
from types import MappingProxyType

import pytest

from commsched.scheduling.freegpus import FreeGpus
from commsched.scheduling.inorder import OrderRules, place_in_order
from commsched.scheduling.interfaces import Allocation, PlacementRequest
from commsched.scheduling.placement import pack
from commsched.scheduling.state import ConnectionKey, PlacedJob
from commsched.topology import LinkId, NodeId, Topology, single_link, two_layer_clos
from commsched.workload import ModelProfile, job_from_model
from tests.paths import REPO

SRC = REPO / "src" / "commsched"
#: the modules that serve a queue of jobs in order
CALLERS = (
    "sim/jobs/lifecycle.py",
    "api/planning.py",
    "experiments/testbed_run/placing.py",
    "runtime/daemon/replay.py",
)
PROF = ModelProfile(name="m", gpu="test", compute_s=1.0, sync_bytes=1e9, overlap=1.0, source="test")


def _calls(tree: ast.AST) -> set[str]:
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            f = node.func
            names.add(f.id if isinstance(f, ast.Name) else f.attr if isinstance(f, ast.Attribute) else "")
    return names


@pytest.mark.parametrize("rel", CALLERS)
def test_each_caller_places_through_the_one_function(rel: str) -> None:
    """Each site calls ``place_in_order`` and builds no placement request of its own (no loop of its own)."""
    calls = _calls(ast.parse((SRC / rel).read_text()))
    assert "place_in_order" in calls
    assert "PlacementRequest" not in calls


def test_no_module_places_jobs_in_a_loop_of_its_own() -> None:
    """Outside ``scheduling/inorder.py`` a placement request is built only for one job (the daemon's
    admission): never inside a loop or a comprehension."""
    loops = (ast.For, ast.AsyncFor, ast.While, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)
    found = []
    for path in SRC.rglob("*.py"):
        rel = str(path.relative_to(SRC))
        if rel == "scheduling/inorder.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, loops) and "PlacementRequest" in _calls(node):
                found.append(f"{rel}:{node.lineno}")
    assert found == []


def _topo() -> Topology:
    return two_layer_clos(tors=2, aggs=2, hosts_per_tor=2)  # 4 hosts x 8 GPUs


def _job(name: str, gpus: int, explicit: tuple[NodeId, ...] = ()) -> PlacedJob:
    return PlacedJob(spec=job_from_model(name, PROF, gpus=gpus), gpus=explicit)


def _reference(
    topo: Topology, queue: list[PlacedJob], backfill: bool
) -> list[tuple[int, tuple[NodeId, ...]]]:
    """The loop the callers wrote before: a plain set of free GPUs, requests over frozensets."""
    free = set(topo.gpus)
    running: list[PlacedJob] = []
    out = []
    for k, job in enumerate(queue):
        if job.gpus:
            gpus: tuple[NodeId, ...] | None = job.gpus if all(g in free for g in job.gpus) else None
        else:
            req = PlacementRequest(
                topology=topo, job=job.spec, free_gpus=frozenset(free), running=tuple(running)
            )
            alloc = pack(req)
            gpus = None if alloc is None else alloc.gpus
        if gpus is None:
            if backfill:
                continue
            break
        free.difference_update(gpus)
        running.append(PlacedJob(spec=job.spec, gpus=gpus))
        out.append((k, gpus))
    return out


@pytest.mark.parametrize("backfill", [False, True])
@pytest.mark.parametrize("seed", range(12))
def test_random_queues_match_the_plain_loop(seed: int, backfill: bool) -> None:
    """Random queues of policy-placed and explicit jobs: the same jobs on the same GPUs as the plain loop."""
    rng = random.Random(seed)
    topo = _topo()
    queue = []
    for i in range(rng.randint(2, 9)):
        if rng.random() < 0.25:
            host = topo.hosts[rng.randrange(len(topo.hosts))]
            queue.append(_job(f"j{i}", 4, tuple(host.gpus[rng.choice((0, 2, 4)) :][:4])))
        else:
            queue.append(_job(f"j{i}", rng.choice((2, 4, 8, 12, 16, 24))))
    free = FreeGpus(topo)
    got = place_in_order(queue, free=free, rules=OrderRules(placement=pack, backfill=backfill))
    want = _reference(topo, queue, backfill)
    assert [(p.position, p.job.gpus) for p in got] == want
    assert len(free) == topo.n_gpus - sum(len(g) for _, g in want)


def test_strict_order_reads_no_job_behind_the_one_that_waits() -> None:
    topo = _topo()
    read: list[str] = []

    def queue():  # type: ignore[no-untyped-def]
        for j in (_job("a", 24), _job("b", 16), _job("c", 4)):
            read.append(str(j.id))
            yield j

    got = place_in_order(queue(), free=FreeGpus(topo), rules=OrderRules(placement=pack))
    assert [str(p.job.id) for p in got] == ["a"]
    assert read == ["a", "b"]


def test_explicit_gpus_when_free_as_given_and_replayed() -> None:
    topo = _topo()
    h0 = topo.hosts[0].gpus
    first, clash = _job("a", 4, h0[:4]), _job("b", 4, h0[2:6])
    when_free = place_in_order([first, clash], free=FreeGpus(topo), rules=OrderRules(placement=pack))
    assert [p.job.gpus for p in when_free] == [h0[:4]]
    rules = OrderRules(placement=pack, explicit="as-given", now_s=5.0)
    as_given = place_in_order([first, clash], free=FreeGpus(topo), rules=rules)
    assert [p.job.gpus for p in as_given] == [h0[:4], h0[2:6]]
    assert {p.job.start_s for p in as_given} == {5.0}


def test_replayed_jobs_keep_their_gpus_and_take_only_a_matching_grant() -> None:
    """A grant of the job's own GPUs brings its reservations; any other grant, or none, leaves the job."""
    topo = _topo()
    h0, h1 = topo.hosts[0].gpus, topo.hosts[1].gpus
    key = ConnectionKey(job=job_from_model("x", PROF, gpus=8).id, src=h0[0], dst=h0[1])
    link = LinkId(0)
    seen: list[int] = []

    def grant(req: PlacementRequest) -> Allocation | None:
        seen.append(len(req.running))
        if str(req.job.id) == "none":
            return None
        return Allocation(gpus=h0, reserved_links=frozenset({link}), pinned_routes=MappingProxyType({key: 1}))

    jobs = [_job("a", 8, h0), _job("other", 8, h1), _job("none", 8, h1)]
    jobs[1] = PlacedJob(spec=jobs[1].spec, gpus=h1, start_s=3.0)
    got = place_in_order(jobs, free=FreeGpus(topo), rules=OrderRules(placement=grant, explicit="replayed"))
    assert [p.job for p in got][1:] == jobs[1:]  # no grant of their GPUs: as they were, start time kept
    assert got[0].job.reserved_links == frozenset({link}) and dict(got[0].job.pinned_routes) == {key: 1}
    assert got[0].job.gpus == h0
    assert seen == [0, 1, 2]  # each request sees the jobs before it


def test_an_abstract_cluster_places_every_job_on_no_gpus() -> None:
    """On a single link (no hosts) every job fits: in order, on no GPUs, asking no placement."""

    def never(req: PlacementRequest) -> Allocation | None:
        raise AssertionError("no placement is asked on an abstract cluster")

    queue = [_job("a", 64), _job("b", 8)]
    got = place_in_order(queue, free=FreeGpus(single_link()), rules=OrderRules(placement=never, now_s=2.0))
    assert [(p.position, p.job.gpus, p.job.start_s) for p in got] == [(0, (), 2.0), (1, (), 2.0)]
