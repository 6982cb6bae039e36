"""Who writes each field of :class:`commsched.sim.jobs.runs.JobRun`: each field with one writer.

Every assignment ``x.field = ...`` (plain, augmented, annotated, or inside a tuple target) to a field of
``JobRun`` in ``src/commsched/sim`` is found by walking the syntax trees; the record's own module
(``jobs/runs.py``: its constructor) is left out. A field in :data:`OWNER` must be assigned in its owner only
(or nowhere): a second writer fails. A grouped job's stream (``StreamRun``) holds none of the fields decided
for its job; it reads them from its job, and writing them on the stream raises.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from commsched.sim.jobs.runs import JobRun, companion_of
from commsched.workload import JobId, JobSpec, ModelProfile
from tests.test_layers import SRC

SIM = SRC / "commsched" / "sim"
RECORD = "jobs/runs.py"

#: the iteration cycle's fields (the fast mode writes them through the cycle's functions)
_CYCLE_FIELDS = (
    "computing", "released", "comm_done", "step", "version", "iteration_start_s", "compute_end_s",
    "release_s", "last_end_s", "iterations_done", "busy_gpu_s",
)  # fmt: skip
#: fields with one writer (or none outside the record's constructor)
OWNER: dict[str, str | None] = {
    "placed": "jobs/lifecycle.py",
    "gpu_count": "jobs/lifecycle.py",
    "start_s": "jobs/lifecycle.py",
    "end_s": "jobs/lifecycle.py",
    "routed": "decide/decisions.py",
    "standalone_s": "decide/decisions.py",
    "target_iterations": "decide/decisions.py",
    "overlap": "decide/decisions.py",
    "time_shift_s": "decide/decisions.py",
    "shared_links": "decide/decisions.py",
    "stop_step": "jobs/iteration.py",
    **dict.fromkeys(_CYCLE_FIELDS, "jobs/iteration.py"),
    "step_version": "rates/pacing.py",
    "priority_class": "decide/decisions.py",
    "intensity": "decide/decisions.py",
    "component": "decide/decisions.py",
    "finished": "jobs/lifecycle.py",
    "pending_delay_s": "jobs/iteration.py",
    "traffic": "jobs/iteration.py",
    "index": None,
    "spec": None,
    "iteration_model": None,
    "ideal_s": None,
    "companion": None,
    "parent": None,
}


def declared_writers() -> dict[str, str | None]:
    """Field -> the writer its record (a class of ``JobRun``'s chain, by concern) declares."""
    out: dict[str, str | None] = {}
    for cls in JobRun.__mro__:
        for field in cls.__dict__.get("__slots__", ()):
            assert field not in out, f"{field} declared twice"
            out[field] = cls.__dict__["WRITER"]
    return out


def record_fields() -> list[str]:
    return sorted(declared_writers())


def writers(root: Path, fields: set[str], skip: str = RECORD) -> dict[str, set[str]]:
    """Field -> the modules under ``root`` (relative paths) that assign it (``skip`` left out)."""
    out: dict[str, set[str]] = {f: set() for f in fields}
    for path in sorted(root.rglob("*.py")):
        rel = path.relative_to(root).as_posix()
        if rel == skip:
            continue
        for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
            if isinstance(node, ast.Assign):
                targets = list(node.targets)
            elif isinstance(node, (ast.AugAssign, ast.AnnAssign)):
                targets = [node.target]
            else:
                continue
            while targets:
                t = targets.pop()
                if isinstance(t, (ast.Tuple, ast.List)):
                    targets.extend(t.elts)
                elif isinstance(t, ast.Attribute) and t.attr in fields:
                    out[t.attr].add(rel)
    return out


def test_every_field_is_listed_once() -> None:
    assert set(OWNER) == set(record_fields())


def test_each_record_of_the_run_state_is_one_writers() -> None:
    """``JobRun`` is split by concern: each of its records (lifecycle, decisions, iteration cycle, pace)
    holds the fields of one writer, the one it names."""
    assert declared_writers() == OWNER
    assert [c.__name__ for c in JobRun.__mro__[:-1]] == [
        "JobRun",
        "Cycle",
        "Decided",
        "Placement",
        "JobSetup",
    ]


def second_writers(root: Path, owners: dict[str, str | None]) -> list[str]:
    """The fields of ``owners`` assigned under ``root`` outside their one writer, as messages."""
    bad = []
    for field, mods in sorted(writers(root, set(owners)).items()):
        owner = owners[field]
        if mods - ({owner} if owner else set()):
            bad.append(f"{field}: written in {sorted(mods)}, its one writer is {owner}")
    return bad


def test_each_field_has_its_writers_only() -> None:
    bad = second_writers(SIM, OWNER)
    assert not bad, "\n".join(bad)


def test_a_second_writer_fails(tmp_path: Path) -> None:
    (tmp_path / "jobs").mkdir()
    (tmp_path / "rates").mkdir()
    (tmp_path / "jobs" / "lifecycle.py").write_text("r.finished = True\n")
    assert second_writers(tmp_path, {"finished": "jobs/lifecycle.py", "index": None}) == []
    (tmp_path / "rates" / "pacing.py").write_text("c.component, c.finished = p.component, p.finished\n")
    assert second_writers(tmp_path, {"finished": "jobs/lifecycle.py", "index": None}) == [
        "finished: written in ['jobs/lifecycle.py', 'rates/pacing.py'], its one writer is jobs/lifecycle.py"
    ]


def test_a_stream_reads_the_fields_decided_for_its_job() -> None:
    """A grouped job's stream holds no class, intensity, component or end of its own: it reads its job's."""
    p = ModelProfile(name="toy", gpu="A100", compute_s=0.2, sync_bytes=1e9, overlap=1.0, source="test")
    spec = JobSpec(id=JobId("a"), profile=p, gpus=16, iterations=100)
    job = JobRun(3, spec)
    stream = companion_of(job, 5)
    assert (stream.index, stream.parent, job.companion) == (5, job, stream)
    assert (stream.priority_class, stream.intensity, stream.component, stream.finished) == (0, 0.0, -1, False)
    job.priority_class, job.intensity, job.component, job.finished = 2, 0.25, 11, True
    assert (stream.priority_class, stream.intensity, stream.component, stream.finished) == (2, 0.25, 11, True)
    for field in ("priority_class", "intensity", "component", "finished"):
        with pytest.raises(AttributeError, match=f"stream's {field} is its job's"):
            setattr(stream, field, getattr(job, field))
    stream.step = 4  # its own slot's fields stay its own
    assert (stream.step, job.step) == (4, -1)


def test_the_walk_sees_every_kind_of_assignment(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("r.x = 1\nr.y += 2\nq.z: int = 3\nr.u, (s.v, t.w) = 1, (2, 3)\nx = r.x\n")
    (tmp_path / "b.py").write_text("r.x = 0\n")
    found = writers(tmp_path, {"x", "y", "z", "u", "v", "w"}, skip="b.py")
    assert found == {"x": {"a.py"}, "y": {"a.py"}, "z": {"a.py"}, "u": {"a.py"}, "v": {"a.py"}, "w": {"a.py"}}
