"""Who writes each field of :class:`commsched.sim.jobs.runs.JobRun`: each field with one writer, and the
fields that still have several held to the writers they have (a ratchet: a new writer fails).

Every assignment ``x.field = ...`` (plain, augmented, annotated, or inside a tuple target) to a field of
``JobRun`` in ``src/commsched/sim`` is found by walking the syntax trees; the record's own constructor
(``jobs/runs.py``) is left out. A field in :data:`OWNER` must be assigned in its owner only (or nowhere);
a field in :data:`SHARED` in no module outside its listed writers. The issue that asked for one writer per
field (the simulator as rooms) got as far as :data:`OWNER`; :data:`SHARED` is what remains, each entry
with the reason it is shared.
"""

from __future__ import annotations

import ast
from pathlib import Path

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
    "pending_delay_s": "jobs/iteration.py",
    "traffic": "jobs/iteration.py",
    "index": None,
    "spec": None,
    "iteration_model": None,
    "ideal_s": None,
    "companion": None,
    "parent": None,
}
#: fields with several writers still: field -> the modules that may write it
SHARED: dict[str, frozenset[str]] = {
    # a grouped job's overlapped stream follows its job's (rates/pacing.py: Pacing._follow)
    "priority_class": frozenset({"decide/decisions.py", "rates/pacing.py"}),
    "intensity": frozenset({"decide/decisions.py", "rates/pacing.py"}),
    "component": frozenset({"decide/decisions.py", "rates/pacing.py"}),
    "finished": frozenset({"jobs/lifecycle.py", "rates/pacing.py"}),
}


def record_fields() -> list[str]:
    tree = ast.parse((SIM / RECORD).read_text())
    for node in ast.walk(tree):
        if isinstance(node, ast.ClassDef) and node.name == "JobRun":
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and getattr(stmt.targets[0], "id", "") == "__slots__":
                    assert isinstance(stmt.value, ast.Tuple)
                    return [str(ast.literal_eval(e)) for e in stmt.value.elts]
    raise AssertionError("JobRun.__slots__ not found")


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
    fields = set(record_fields())
    assert set(OWNER) | set(SHARED) == fields
    assert not set(OWNER) & set(SHARED)


def test_each_field_has_its_writers_only() -> None:
    found = writers(SIM, set(record_fields()))
    bad = []
    for field, mods in sorted(found.items()):
        if field in OWNER:
            owner = OWNER[field]
            if mods - ({owner} if owner else set()):
                bad.append(f"{field}: written in {sorted(mods)}, its one writer is {owner}")
        elif mods - SHARED[field]:
            bad.append(f"{field}: new writers {sorted(mods - SHARED[field])}")
    assert not bad, "\n".join(bad)


def test_the_walk_sees_every_kind_of_assignment(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("r.x = 1\nr.y += 2\nq.z: int = 3\nr.u, (s.v, t.w) = 1, (2, 3)\nx = r.x\n")
    (tmp_path / "b.py").write_text("r.x = 0\n")
    found = writers(tmp_path, {"x", "y", "z", "u", "v", "w"}, skip="b.py")
    assert found == {"x": {"a.py"}, "y": {"a.py"}, "z": {"a.py"}, "u": {"a.py"}, "v": {"a.py"}, "w": {"a.py"}}
