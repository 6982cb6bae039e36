"""A PyTorch execution trace read the same whatever the observer's timing did to it.

The observer nests whatever runs while a collective is open under the operator that holds it, more or
less depending on timing, and writes a backend's collective when its work ends on the backend's thread,
dropping it when that comes after the observer stopped (the last DDP bucket of the step, on a busy
machine). Both are applied here to a real two-rank gloo trace, and the reader must not change its answer.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from commsched.workload.profiling import read_execution_trace


def _load(gloo_job: dict[str, Any], rank: int) -> dict[str, Any]:
    return dict(json.loads((Path(gloo_job["dir"]) / f"et{rank}.json").read_text()))


def _write(doc: dict[str, Any], path: Path) -> Path:
    path.write_text(json.dumps(doc))
    return path


def _subtree(nodes: list[dict[str, Any]], root: Any) -> set[Any]:
    out, grew = {root}, True
    while grew:
        more = {n["id"] for n in nodes if n.get("ctrl_deps") in out} - out
        grew = bool(more)
        out |= more
    return out


def _renested(doc: dict[str, Any]) -> dict[str, Any]:
    """The trace with every top-level operator after the first collective's nested under the operator
    that holds it (as the observer writes it when the collective stays open)."""
    nodes = [dict(n) for n in doc["nodes"]]
    by_id = {n["id"]: n for n in nodes}
    thread = next(n["id"] for n in nodes if n["name"].startswith("[pytorch|profiler|execution_trace|thread]"))
    coll = min((n for n in nodes if n["name"] == "gloo:all_reduce"), key=lambda n: n["id"])
    top = coll
    while by_id[top["ctrl_deps"]]["id"] != thread:
        top = by_id[top["ctrl_deps"]]
    last = max(_subtree(nodes, top["id"]))
    for n in nodes:
        if n.get("ctrl_deps") == thread and n["id"] > last and not n["name"].startswith("##"):
            n["ctrl_deps"] = top["id"]
    return {**doc, "nodes": nodes}


def _misparented(doc: dict[str, Any]) -> dict[str, Any]:
    """The trace with the first backend collective written under the next top-level operator instead of
    its ``c10d::allreduce_`` (as the observer wrote it once, the backend's work ending late)."""
    nodes = [dict(n) for n in doc["nodes"]]
    coll = min((n for n in nodes if n["name"] == "gloo:all_reduce"), key=lambda n: n["id"])
    backward = [n["id"] for n in nodes if n["name"].startswith("autograd::engine::evaluate_function")]
    later = [i for i in backward if i > coll["id"]]
    # the next backward function, wherever the observer nested it; where the collective's work ended after
    # the whole backward pass (the race runs either way), the last one before it
    coll["ctrl_deps"] = min(later) if later else max(i for i in backward if i < coll["id"])
    return {**doc, "nodes": nodes}


def _misparented_earlier(doc: dict[str, Any]) -> dict[str, Any]:
    """The first backend collective written under the first backward function (an earlier operator)."""
    nodes = [dict(n) for n in doc["nodes"]]
    coll = min((n for n in nodes if n["name"] == "gloo:all_reduce"), key=lambda n: n["id"])
    coll["ctrl_deps"] = min(
        n["id"] for n in nodes if n["name"].startswith("autograd::engine::evaluate_function")
    )
    return {**doc, "nodes": nodes}


@pytest.mark.parametrize(
    "transform",
    [_renested, _misparented, _misparented_earlier],
    ids=["renested", "misparented", "misparented-earlier"],
)
def test_the_reading_does_not_depend_on_nesting(
    gloo_job: dict[str, Any], tmp_path: Path, transform: Callable[[dict[str, Any]], dict[str, Any]]
) -> None:
    counts = []
    for rank in (0, 1):
        doc = _load(gloo_job, rank)
        flat = read_execution_trace(_write(doc, tmp_path / f"flat{rank}.json"))
        nested = read_execution_trace(_write(transform(doc), tmp_path / f"nested{rank}.json"))
        assert nested.compute_nodes == flat.compute_nodes > 0
        assert nested.collectives == flat.collectives
        assert sorted(c.size_bytes for c in flat.collectives) == sorted(gloo_job["job"]["buckets"])
        counts.append(flat.compute_nodes)
    assert counts[0] == counts[1]  # identical ranks, identical steps


def test_a_lost_backend_collective_is_read_from_its_dispatcher(
    gloo_job: dict[str, Any], tmp_path: Path
) -> None:
    buckets = gloo_job["job"]["buckets"]
    doc = _load(gloo_job, 0)
    last = max((n for n in doc["nodes"] if n["name"] == "gloo:all_reduce"), key=lambda n: n["id"])
    doc["nodes"] = [n for n in doc["nodes"] if n["id"] != last["id"]]  # as the observer drops it
    et = read_execution_trace(_write(doc, tmp_path / "lost.json"))
    assert sorted(c.size_bytes for c in et.collectives) == sorted(buckets)
    assert {(c.name, c.group, c.kind) for c in et.collectives} == {("gloo:all_reduce", "0", "all_reduce")}


def test_a_lost_backend_event_in_a_kineto_trace_is_read_from_its_dispatcher(
    gloo_job: dict[str, Any], tmp_path: Path
) -> None:
    """The profiler loses a backend's collective the same way (recorded when the work ends, on the
    backend's thread): the ``c10d::allreduce_`` event left without one stands for it."""
    from commsched.workload.profiling import read_kineto

    buckets = gloo_job["job"]["buckets"]
    doc = json.loads((Path(gloo_job["dir"]) / "kineto0.json").read_text())
    ours = [e for e in doc["traceEvents"] if e.get("name") == "gloo:all_reduce"]
    last = max(ours, key=lambda e: e["ts"])
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e is not last]
    p = read_kineto(_write(doc, tmp_path / "lost-kineto.json"))
    assert sorted(c.size_bytes for c in p.collectives) == sorted(buckets)
    assert {c.name for c in p.collectives} == {"gloo:all_reduce"}


def test_a_bucket_started_out_of_order_and_lost_is_read_from_its_own_dispatcher(
    gloo_job: dict[str, Any], tmp_path: Path
) -> None:
    """gloo runs a process group's work on two threads, so a later bucket's work may start (and be recorded)
    before an earlier one's: the first bucket's event, started last and lost, is the first dispatcher's,
    not the second's (as CI once read it, giving the second bucket's bytes twice)."""
    from commsched.workload.profiling import read_kineto

    buckets = gloo_job["job"]["buckets"]
    doc = json.loads((Path(gloo_job["dir"]) / "kineto0.json").read_text())
    ours = [e for e in doc["traceEvents"] if e.get("name") == "gloo:all_reduce"]
    ours.sort(key=lambda e: e["ts"])
    dispatchers = [e for e in doc["traceEvents"] if e.get("name") == "c10d::allreduce_"]
    assert len(ours) == len(dispatchers) == 2
    first = ours[0]
    first["ts"] = max(e["ts"] for e in ours + dispatchers) + 1.0  # the first bucket's work starts last
    doc["traceEvents"] = [e for e in doc["traceEvents"] if e is not first]  # and is lost
    p = read_kineto(_write(doc, tmp_path / "late-kineto.json"))
    assert sorted(c.size_bytes for c in p.collectives) == sorted(buckets)
    assert {c.name for c in p.collectives} == {"gloo:all_reduce"}


def test_every_backend_collective_lost_is_named_after_the_process_group(
    gloo_job: dict[str, Any], tmp_path: Path
) -> None:
    """With no backend node left at all (each one ended after the observer stopped), each dispatcher
    stands for its collective under the backend the process group's ``backend_config`` names."""
    doc = _load(gloo_job, 0)
    doc["nodes"] = [n for n in doc["nodes"] if not str(n["name"]).startswith("gloo:")]
    et = read_execution_trace(_write(doc, tmp_path / "none.json"))
    assert sorted(c.size_bytes for c in et.collectives) == sorted(gloo_job["job"]["buckets"])
    assert {(c.name, c.group, c.kind) for c in et.collectives} == {("gloo:all_reduce", "0", "all_reduce")}


def test_every_backend_event_lost_in_a_kineto_trace_is_named_after_the_backend(
    gloo_job: dict[str, Any], tmp_path: Path
) -> None:
    from commsched.workload.profiling import read_kineto

    doc = json.loads((Path(gloo_job["dir"]) / "kineto0.json").read_text())
    doc["traceEvents"] = [e for e in doc["traceEvents"] if not str(e.get("name", "")).startswith("gloo:")]
    p = read_kineto(_write(doc, tmp_path / "none-kineto.json"))
    assert sorted(c.size_bytes for c in p.collectives) == sorted(gloo_job["job"]["buckets"])
    assert {(c.name, c.kind) for c in p.collectives} == {("gloo:all_reduce", "all_reduce")}
